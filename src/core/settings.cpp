// validate() of every settings struct (through the field tables), enum names, TokenSet helpers.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <unordered_set>

#include "svattn/batch_solver.h"
#include "svattn/errors.h"
#include "svattn/kernel.h"
#include "svattn/memory.h"
#include "svattn/settings_fields.h"
#include "svattn/types.h"

namespace svattn {

// Every range check goes through the field tables (src/core/settings_fields.cpp), so the message
// is always "<field> must be <requirement>, got <value>".
void ProblemSettings::validate() const { validate_fields(problem_settings_fields(), *this); }

void ProblemSettings::check_key(const double* key, int dim, TokenId id) const {
  const double diag = svattn::kernel(kernel, key, key, dim) + ridge;
  if (std::isfinite(diag)) return;
  std::ostringstream os;
  os << "kernel value kappa(x, x) + ridge of token " << id << " is " << diag
     << ", not a finite fp64 number: ";
  switch (kernel.type) {
    case KernelType::kPoly:
      os << "kernel.degree = " << kernel.degree << " with kernel.coef0 = " << kernel.coef0
         << " overflows; lower the degree or coef0, or scale the keys";
      break;
    case KernelType::kLinear:
      os << "the linear kernel's |x|^2 overflows; scale the keys";
      break;
    case KernelType::kRbf:
      os << "ridge = " << ridge << " overflows";
      break;
  }
  throw InvalidArgument(os.str());
}

void Tolerances::validate() const { validate_fields(tolerances_fields(), *this, "tolerances."); }

void BatchSettings::validate() const {
  problem.validate();
  tolerances.validate();
  validate_fields(batch_settings_own_fields(), *this);
}

void MemorySettings::validate() const {
  problem.validate();
  tolerances.validate();
  validate_fields(memory_settings_own_fields(), *this);
}

std::string to_string(Status s) {
  switch (s) {
    case Status::kOptimal: return "optimal";
    case Status::kWarmup: return "warmup";
    case Status::kEmpty: return "empty";
    case Status::kIterationLimit: return "iteration_limit";
    case Status::kKktViolated: return "kkt_violated";
    case Status::kSingular: return "singular";
  }
  return "unknown";
}

std::string to_string(MemoryMode m) { return m == MemoryMode::kAudit ? "audit" : "bounded"; }

MemoryMode memory_mode_from_string(const std::string& s) {
  if (s == "audit") return MemoryMode::kAudit;
  if (s == "bounded") return MemoryMode::kBounded;
  throw InvalidArgument("mode: unknown mode '" + s + "' (expected audit or bounded)");
}

OpDiagnostics& OpDiagnostics::operator+=(const OpDiagnostics& o) {
  ops += o.ops;
  events += o.events;
  zero_steps += o.zero_steps;
  refused_entrants += o.refused_entrants;
  refactorizations += o.refactorizations;
  canonical_solves += o.canonical_solves;
  repairs += o.repairs;
  batch_fallbacks += o.batch_fallbacks;
  boundary_solves += o.boundary_solves;
  tracked += o.tracked;
  kernel_evaluations += o.kernel_evaluations;
  if (o.status != Status::kOptimal && o.status != Status::kWarmup && o.status != Status::kEmpty)
    status = o.status;
  else if (status == Status::kOptimal || status == Status::kWarmup || status == Status::kEmpty)
    status = o.status;
  seconds += o.seconds;
  canonical_seconds += o.canonical_seconds;
  return *this;
}

void TokenSet::validate() const {
  const Eigen::Index n = static_cast<Eigen::Index>(ids.size());
  if (keys.rows() != n)
    throw InvalidArgument("tokens: " + std::to_string(keys.rows()) + " key rows for " +
                          std::to_string(n) + " ids");
  if (values.rows() != n)
    throw InvalidArgument("tokens: " + std::to_string(values.rows()) + " value rows for " +
                          std::to_string(n) + " ids");
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < keys.cols(); ++j)
      if (!std::isfinite(keys(i, j)))
        throw FormatError("tokens: key of token " + std::to_string(ids[i]) + " has a non-finite "
                          "entry at column " + std::to_string(j));
    for (Eigen::Index j = 0; j < values.cols(); ++j)
      if (!std::isfinite(values(i, j)))
        throw FormatError("tokens: value of token " + std::to_string(ids[i]) +
                          " has a non-finite entry at column " + std::to_string(j));
  }
  std::unordered_set<TokenId> seen;
  for (TokenId id : ids)
    if (!seen.insert(id).second) throw InvalidArgument("tokens: duplicate id " + std::to_string(id));
}

void TokenSet::validate(const ProblemSettings& problem) const {
  validate();
  const int d = static_cast<int>(keys.cols());
  for (Eigen::Index i = 0; i < keys.rows(); ++i) problem.check_key(keys.row(i).data(), d, ids[i]);
}

TokenSet TokenSet::from_rows(const RowMatrix& keys, const RowMatrix* values) {
  TokenSet t;
  t.ids.resize(keys.rows());
  for (Eigen::Index i = 0; i < keys.rows(); ++i) t.ids[i] = i;
  t.keys = keys;
  t.values = values ? *values : keys;
  return t;
}

TokenSet TokenSet::without(const std::vector<TokenId>& excluded) const {
  std::unordered_set<TokenId> ex(excluded.begin(), excluded.end());
  std::vector<Eigen::Index> keep;
  for (Eigen::Index i = 0; i < static_cast<Eigen::Index>(ids.size()); ++i)
    if (!ex.count(ids[i])) keep.push_back(i);
  TokenSet t;
  t.keys.resize(static_cast<Eigen::Index>(keep.size()), keys.cols());
  t.values.resize(static_cast<Eigen::Index>(keep.size()), values.cols());
  for (size_t r = 0; r < keep.size(); ++r) {
    t.ids.push_back(ids[keep[r]]);
    t.keys.row(r) = keys.row(keep[r]);
    t.values.row(r) = values.row(keep[r]);
  }
  return t;
}

}  // namespace svattn
