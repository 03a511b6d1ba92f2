// The validation helpers of the torch layers: settings, in the core's message format "<field>
// must be <requirement>, got <value>" (src/core/settings.cpp) with the field's path inside the
// struct (e.g. "hybrid.problem.C"), and the data checks at the entry of the SV attention ops.
#pragma once
#include <sstream>
#include <string>
#include <utility>

#include <torch/torch.h>

#include "svattn/errors.h"
#include "svattn/field_table.h"
#include "svattn/types.h"

namespace svattn::layers {

template <typename T>
[[noreturn]] void bad_setting(const std::string& field, const std::string& requirement,
                              const T& value) {
  std::ostringstream os;
  os << field << " must be " << requirement << ", got " << value;
  throw InvalidArgument(os.str());
}

/// Checks one row of a field table (include/svattn/torch/settings_fields.h) as validate_fields does:
/// throws "<prefix><name> must be <requirement>, got <value>".
template <typename S>
void check_field(const Field<S>& f, const S& s, const std::string& prefix) {
  if (f.applies && !f.applies(s)) return;
  const FieldValue v = f.get(s);
  if (f.ok ? !f.ok(s) : !in_range(f, v)) bad_field(prefix + f.name, requirement(f), value_text(v));
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

/// The data checks at the entry of the SV attention ops (docs/layers.md "Inputs"), after their
/// shape checks: at least one key (N = 0 is an empty memory, which has no readout), and keys,
/// values and queries finite (a NaN or infinite entry would turn into NaN outputs or gradients
/// silently). Throws InvalidArgument naming the op and the argument. One pass over each tensor.
inline void check_sv_data(const torch::Tensor& keys, const torch::Tensor& values,
                          const torch::Tensor& queries, const std::string& who) {
  if (keys.size(2) == 0)
    throw InvalidArgument(who + ": keys must hold at least one key per memory (N = 0: an empty "
                                "memory has no readout)");
  const std::pair<const char*, const torch::Tensor*> args[] = {
      {"keys", &keys}, {"values", &values}, {"queries", &queries}};
  for (const auto& [name, t] : args) {
    if (t->numel() > 0 && !torch::isfinite(t->detach()).all().item<bool>())
      throw InvalidArgument(who + ": " + name + " must be finite, got a NaN or infinite entry");
  }
}

/// With ridge 0 the optimum over equal keys is not unique and the exact path's key gradient is
/// undefined (NaN): when a gradient to the keys will be taken (`key_gradient`), refuses equal keys
/// among the first `n_mem` of a memory (those any memory holds) by name. O(n_mem^2 d) per (b, h),
/// on the CPU (pass the host copy of the keys).
inline void check_distinct_keys_for_gradient(const torch::Tensor& keys, std::int64_t n_mem,
                                             double ridge, bool key_gradient,
                                             const std::string& who) {
  if (ridge != 0 || n_mem < 2 || !key_gradient) return;
  torch::NoGradGuard ng;
  const torch::Tensor k = keys.detach().narrow(2, 0, n_mem).to(torch::kCPU, torch::kFloat64);
  for (std::int64_t b = 0; b < k.size(0); ++b) {
    for (std::int64_t h = 0; h < k.size(1); ++h) {
      torch::Tensor d = torch::cdist(k[b][h], k[b][h], 2.0, /*donot_use_mm*/ 2);
      d.fill_diagonal_(1.0);
      const torch::Tensor zero = (d == 0).nonzero();
      if (zero.size(0) == 0) continue;
      throw InvalidArgument(
          who + ": keys " + std::to_string(zero[0][0].item<std::int64_t>()) + " and " +
          std::to_string(zero[0][1].item<std::int64_t>()) + " of (b " + std::to_string(b) +
          ", h " + std::to_string(h) +
          ") are equal and problem.ridge = 0: the optimum is not unique and the key gradient "
          "is undefined; use ridge > 0");
    }
  }
}

}  // namespace svattn::layers
