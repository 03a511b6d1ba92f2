// One validation helper for the settings of the torch layers: every message has
// the core's format "<field> must be <requirement>, got <value>" (src/core/settings.cpp), with the
// field's path inside the struct (e.g. "hybrid.problem.C").
#pragma once
#include <sstream>
#include <string>

#include "svattn/errors.h"
#include "svattn/types.h"

namespace svattn::layers {

template <typename T>
[[noreturn]] void bad_setting(const std::string& field, const std::string& requirement,
                              const T& value) {
  std::ostringstream os;
  os << field << " must be " << requirement << ", got " << value;
  throw InvalidArgument(os.str());
}

/// ProblemSettings::validate() with the field names prefixed by `prefix` (e.g. "problem."), and
/// the torch paths' requirement of an RBF kernel.
inline void check_problem(const ProblemSettings& p, const std::string& prefix) {
  if (p.kernel.type != KernelType::kRbf)
    bad_setting(prefix + "kernel.type", "rbf on the torch paths", to_string(p.kernel.type));
  try {
    p.validate();
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(prefix + e.what());
  }
}

}  // namespace svattn::layers
