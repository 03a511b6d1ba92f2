// The field tables of KernelSettings, ProblemSettings, Tolerances, MemorySettings and
// BatchSettings: name, type, range and doc of every field, written once (defaults are the
// structs' member initialisers).
#include "svattn/settings_fields.h"

#include <cmath>
#include <sstream>

#include "svattn/kernel.h"

namespace svattn {
namespace {

std::vector<Field<KernelSettings>> make_kernel_fields() {
  using K = KernelSettings;
  std::vector<Field<K>> t;
  t.push_back(enum_field<K, KernelType>("type", &K::type, &to_string, &kernel_type_from_string,
                                      {"rbf", "linear", "poly"},
                                      "'rbf' exp(-|a-b|^2/bandwidth^2) | 'linear' a.b | 'poly' (a.b + coef0)^degree."));
  std::ostringstream bw;
  bw << "finite and in [" << kMinBandwidth << ", " << kMaxBandwidth
     << "] (bandwidth^2 must be a normal fp64 number)";
  FieldRange bandwidth;
  bandwidth.text = bw.str();
  t.push_back(member_field<K>("bandwidth", &K::bandwidth, bandwidth, "RBF bandwidth sigma."));
  t.back().applies = [](const K& k) { return k.type == KernelType::kRbf; };
  // bandwidth^2 must be a normal fp64 number: below ~1.5e-154 it underflows to 0 (kappa(x, x)
  // would be 0/0), above ~1.3e154 it overflows to inf.
  t.back().ok = [](const K& k) {
    const double s2 = k.bandwidth * k.bandwidth;
    return std::isfinite(k.bandwidth) && k.bandwidth > 0 && std::isnormal(s2) && std::isfinite(s2);
  };
  t.push_back(member_field<K>("degree", &K::degree, closed_range(1, kMaxDegree), "Polynomial degree."));
  t.back().applies = [](const K& k) { return k.type == KernelType::kPoly; };
  t.push_back(member_field<K>("coef0", &K::coef0, at_least(0), "Polynomial offset (keeps K positive semidefinite)."));
  t.back().applies = [](const K& k) { return k.type == KernelType::kPoly; };
  return t;
}

std::vector<Field<ProblemSettings>> make_problem_fields() {
  using P = ProblemSettings;
  auto t = nest_fields(kernel_settings_fields(), &P::kernel, "kernel.");
  t.push_back(member_field<P>("C", &P::C, above(0), "Box bound; fixed for the life of a memory (n*C <= 1: warm-up)."));
  t.push_back(member_field<P>("ridge", &P::ridge, at_least(0), "Ridge mu added to the kernel diagonal."));
  return t;
}

std::vector<Field<Tolerances>> make_tolerances_fields() {
  using T = Tolerances;
  return {member_field<T>("alpha_tol", &T::alpha_tol, open_range(0, 1e-3), "Reserve/error threshold of a coefficient."),
          member_field<T>("kkt_tol", &T::kkt_tol, open_range(0, 1e-2), "Rounding floor of the gradient checks."),
          member_field<T>("max_refine_iterations", &T::max_refine_iterations, at_least(1),
                 "Partition repairs allowed in one canonical refinement.")};
}

std::vector<Field<MemorySettings>> make_memory_own_fields() {
  using M = MemorySettings;
  return {enum_field<M, MemoryMode>("mode", &M::mode, &to_string, &memory_mode_from_string, {"audit", "bounded"},
                                  "'audit' (every token kept) | 'bounded' (reserve tokens evicted)."),
          member_field<M>("token_budget", &M::token_budget, {},
                 "Bounded mode: reserve tokens are evicted only above this size (0: always)."),
          member_field<M>("refactor_period", &M::refactor_period, at_least(1),
                 "Operations between full refactorisations of the bordered inverse."),
          member_field<M>("max_steps_per_op", &M::max_steps_per_op, at_least(1),
                 "Path steps in one operation before it repairs by a batch solve."),
          member_field<M>("schur_tol", &M::schur_tol, open_range(0, 1e-2),
                 "Schur-complement guard of entrants to the margin set.")};
}

std::vector<Field<BatchSettings>> make_batch_own_fields() {
  using B = BatchSettings;
  return {member_field<B>("smo_tol", &B::smo_tol, open_range(0, 1e-2), "SMO stopping gap relative to max(1, max K_ii)."),
          member_field<B>("max_smo_iterations", &B::max_smo_iterations, at_least(0),
                 "SMO iteration cap (0: max(1e7, 100 n))."),
          member_field<B>("cache_mib", &B::cache_mib, at_least(1), "Kernel row cache in MiB (LRU).")};
}

// problem.*, tolerances.*, then `own`.
template <typename S>
std::vector<Field<S>> all_fields(const std::vector<Field<S>>& own) {
  auto t = nest_fields(problem_settings_fields(), &S::problem, "problem.");
  for (auto& f : nest_fields(tolerances_fields(), &S::tolerances, "tolerances.")) t.push_back(std::move(f));
  t.insert(t.end(), own.begin(), own.end());
  return t;
}

}  // namespace

const std::vector<Field<KernelSettings>>& kernel_settings_fields() {
  static const auto t = make_kernel_fields();
  return t;
}
const std::vector<Field<ProblemSettings>>& problem_settings_fields() {
  static const auto t = make_problem_fields();
  return t;
}
const std::vector<Field<Tolerances>>& tolerances_fields() {
  static const auto t = make_tolerances_fields();
  return t;
}
const std::vector<Field<MemorySettings>>& memory_settings_own_fields() {
  static const auto t = make_memory_own_fields();
  return t;
}
const std::vector<Field<MemorySettings>>& memory_settings_fields() {
  static const auto t = all_fields(memory_settings_own_fields());
  return t;
}
const std::vector<Field<BatchSettings>>& batch_settings_own_fields() {
  static const auto t = make_batch_own_fields();
  return t;
}
const std::vector<Field<BatchSettings>>& batch_settings_fields() {
  static const auto t = all_fields(batch_settings_own_fields());
  return t;
}

}  // namespace svattn
