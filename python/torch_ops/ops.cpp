// TORCH_LIBRARY(svattn, ...): the SV attention ops and the baselines' kernels of src/torch as
// dispatcher ops for Python (svattn.torch, docs/python.md "Torch"). Every op is a composite kernel:
// autograd records the C++ graph inside (the exact path's custom backward reuses the bordered
// inverse, docs/layers.md §1; the batched path differentiates through its tensor ops).
// svattn::InvalidArgument surfaces in Python as ValueError.
#include <torch/library.h>
#include <torch/torch.h>

#include <string>
#include <tuple>

#include "svattn/errors.h"
#include "svattn/torch/attention.h"
#include "svattn/torch/batched.h"
#include "svattn/torch/exact.h"
#include "svattn/torch/settings_fields.h"

namespace svattn::python {

namespace {

using layers::BatchedSettings;
using layers::ExactSettings;
using torch::Tensor;

template <typename F>
auto translate(F&& f) {
  try {
    return f();
  } catch (const InvalidArgument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
}

Tensor opt(const c10::optional<Tensor>& t) { return t.has_value() ? *t : Tensor(); }

ExactSettings exact_settings(double bandwidth, double C, double ridge, bool bounded) {
  ExactSettings s;
  s.problem.kernel.bandwidth = bandwidth;
  s.problem.C = C;
  s.problem.ridge = ridge;
  s.bounded = bounded;
  return s;
}

// The batched path's settings from the op's flat arguments: the problem (bandwidth, C, ridge = mu)
// and the solver fields of BatchedSettings.
BatchedSettings batched_settings(double bandwidth, double C, double ridge, int64_t iterations,
                                 double solve_ridge, double mask_tol, const std::string& lipschitz,
                                 int64_t power_iterations, int64_t bisections,
                                 int64_t active_set_rounds, int64_t ipm_iterations, bool bounded,
                                 bool fp64) {
  BatchedSettings s;
  s.problem.kernel.bandwidth = bandwidth;
  s.problem.C = C;
  s.problem.ridge = ridge;
  s.iterations = static_cast<int>(iterations);
  s.solve_ridge = solve_ridge;
  s.mask_tol = mask_tol;
  s.lipschitz = layers::lipschitz_bound_from_string(lipschitz);
  s.power_iterations = static_cast<int>(power_iterations);
  s.bisections = static_cast<int>(bisections);
  s.active_set_rounds = static_cast<int>(active_set_rounds);
  s.ipm_iterations = static_cast<int>(ipm_iterations);
  s.bounded = bounded;
  s.fp64 = fp64;
  return s;
}

std::tuple<Tensor, Tensor> exact_attention(const Tensor& k, const Tensor& v, const Tensor& q,
                                           const c10::optional<Tensor>& log_sigma, double bandwidth,
                                           double C, double ridge) {
  return translate([&] {
    layers::ExactInfo info;
    Tensor o = layers::sv_exact_attention(k, v, q, opt(log_sigma),
                                          exact_settings(bandwidth, C, ridge, false), &info);
    return std::make_tuple(o, info.support);
  });
}

std::tuple<Tensor, Tensor> exact_chunked_attention(const Tensor& k, const Tensor& v,
                                                   const Tensor& q,
                                                   const c10::optional<Tensor>& log_sigma,
                                                   int64_t chunk, double bandwidth, double C,
                                                   double ridge, bool bounded) {
  return translate([&] {
    layers::ExactInfo info;
    Tensor o = layers::sv_exact_chunked_attention(
        k, v, q, opt(log_sigma), chunk, exact_settings(bandwidth, C, ridge, bounded), &info);
    return std::make_tuple(o, info.support);
  });
}

// exact_chunked_attention plus the memory's differentiable log total weight
// log sum_{j in S ∪ E} a_j k(q_t, x_j) [B, H, T] (-inf where the memory is empty): the hybrid's
// joint gate (docs/layers.md §3).
std::tuple<Tensor, Tensor, Tensor> exact_chunked_attention_mass(
    const Tensor& k, const Tensor& v, const Tensor& q, const c10::optional<Tensor>& log_sigma,
    int64_t chunk, double bandwidth, double C, double ridge, bool bounded) {
  return translate([&] {
    layers::ExactInfo info;
    Tensor lz;
    Tensor o = layers::sv_exact_chunked_attention(
        k, v, q, opt(log_sigma), chunk, exact_settings(bandwidth, C, ridge, bounded), &info, &lz);
    return std::make_tuple(o, info.support, lz);
  });
}

#define SVATTN_BATCHED_PARAMS                                                               \
  double bandwidth, double C, double ridge, int64_t iterations, double solve_ridge,         \
      double mask_tol, std::string lipschitz, int64_t power_iterations, int64_t bisections, \
      int64_t active_set_rounds, int64_t ipm_iterations, bool fp64
#define SVATTN_BATCHED_ARGS(bounded)                                                  \
  batched_settings(bandwidth, C, ridge, iterations, solve_ridge, mask_tol, lipschitz, \
                   power_iterations, bisections, active_set_rounds, ipm_iterations, bounded, fp64)

std::tuple<Tensor, Tensor, double, int64_t> batched_attention(
    const Tensor& k, const Tensor& v, const Tensor& q, const c10::optional<Tensor>& log_sigma,
    SVATTN_BATCHED_PARAMS) {
  return translate([&] {
    layers::BatchedInfo info;
    Tensor o =
        layers::sv_batched_attention(k, v, q, opt(log_sigma), SVATTN_BATCHED_ARGS(false), &info);
    return std::make_tuple(o, info.support, info.residual,
                           static_cast<int64_t>(info.negative_coefficients));
  });
}

std::tuple<Tensor, Tensor, double, int64_t> batched_chunked_attention(
    const Tensor& k, const Tensor& v, const Tensor& q, const c10::optional<Tensor>& log_sigma,
    int64_t chunk, bool bounded, SVATTN_BATCHED_PARAMS) {
  return translate([&] {
    layers::BatchedInfo info;
    Tensor o = layers::sv_batched_chunked_attention(k, v, q, opt(log_sigma), chunk,
                                                    SVATTN_BATCHED_ARGS(bounded), &info);
    return std::make_tuple(o, info.support, info.residual,
                           static_cast<int64_t>(info.negative_coefficients));
  });
}

// batched_chunked_attention plus the memory's log total weight, as exact_chunked_attention_mass.
std::tuple<Tensor, Tensor, Tensor, double, int64_t> batched_chunked_attention_mass(
    const Tensor& k, const Tensor& v, const Tensor& q, const c10::optional<Tensor>& log_sigma,
    int64_t chunk, bool bounded, SVATTN_BATCHED_PARAMS) {
  return translate([&] {
    layers::BatchedInfo info;
    Tensor lz;
    Tensor o = layers::sv_batched_chunked_attention(k, v, q, opt(log_sigma), chunk,
                                                    SVATTN_BATCHED_ARGS(bounded), &info, &lz);
    return std::make_tuple(o, info.support, lz, info.residual,
                           static_cast<int64_t>(info.negative_coefficients));
  });
}

// The hybrid's local path over b(t) <= s <= t and its log-normaliser [B, H, T] (docs/layers.md
// §3); the normaliser is an empty tensor unless asked for (window = 1 then runs the chunk-local
// kernel, as the C++ layer does).
std::tuple<Tensor, Tensor> memory_local_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                                  int64_t chunk, int64_t window,
                                                  bool log_normalizer) {
  return translate([&] {
    Tensor lz;
    Tensor o =
        layers::memory_local_attention(q, k, v, chunk, window, log_normalizer ? &lz : nullptr);
    if (!lz.defined()) lz = q.new_empty({0});
    return std::make_tuple(o, lz);
  });
}

}  // namespace

}  // namespace svattn::python

TORCH_LIBRARY(svattn, m) {
  using namespace svattn::python;
  using torch::Tensor;
  const std::string batched =
      "float bandwidth, float C, float ridge, int iterations, float solve_ridge, float mask_tol, "
      "str lipschitz, int power_iterations, int bisections, int active_set_rounds, "
      "int ipm_iterations, bool fp64) -> (Tensor, Tensor, float, int)";
  m.def(
      "exact_attention(Tensor keys, Tensor values, Tensor queries, Tensor? log_sigma, "
      "float bandwidth, float C, float ridge) -> (Tensor, Tensor)",
      &exact_attention);
  m.def(
      "exact_chunked_attention(Tensor keys, Tensor values, Tensor queries, Tensor? log_sigma, "
      "int chunk, float bandwidth, float C, float ridge, bool bounded) -> (Tensor, Tensor)",
      &exact_chunked_attention);
  m.def(("batched_attention(Tensor keys, Tensor values, Tensor queries, Tensor? log_sigma, " +
         batched)
            .c_str(),
        &batched_attention);
  m.def(("batched_chunked_attention(Tensor keys, Tensor values, Tensor queries, Tensor? log_sigma, "
         "int chunk, bool bounded, " +
         batched)
            .c_str(),
        &batched_chunked_attention);
  m.def(
      "exact_chunked_attention_mass(Tensor keys, Tensor values, Tensor queries, Tensor? log_sigma, "
      "int chunk, float bandwidth, float C, float ridge, bool bounded) -> (Tensor, Tensor, Tensor)",
      &exact_chunked_attention_mass);
  m.def(("batched_chunked_attention_mass(Tensor keys, Tensor values, Tensor queries, "
         "Tensor? log_sigma, int chunk, bool bounded, " +
         batched.substr(0, batched.find("->")) + "-> (Tensor, Tensor, Tensor, float, int)")
            .c_str(),
        &batched_chunked_attention_mass);
  m.def(
      "memory_local_attention(Tensor q, Tensor k, Tensor v, int chunk, int window, "
      "bool log_normalizer=False) -> (Tensor, Tensor)",
      &memory_local_attention);
  m.def("causal_softmax_attention(Tensor q, Tensor k, Tensor v) -> Tensor",
        [](const Tensor& q, const Tensor& k, const Tensor& v) {
          return translate([&] { return svattn::layers::causal_softmax_attention(q, k, v); });
        });
  m.def("sliding_window_attention(Tensor q, Tensor k, Tensor v, int window) -> Tensor",
        [](const Tensor& q, const Tensor& k, const Tensor& v, int64_t w) {
          return translate([&] { return svattn::layers::sliding_window_attention(q, k, v, w); });
        });
  m.def("chunk_local_attention(Tensor q, Tensor k, Tensor v, int chunk) -> Tensor",
        [](const Tensor& q, const Tensor& k, const Tensor& v, int64_t c) {
          return translate([&] { return svattn::layers::chunk_local_attention(q, k, v, c); });
        });
  m.def("linear_attention(Tensor q, Tensor k, Tensor v, int chunk) -> Tensor",
        [](const Tensor& q, const Tensor& k, const Tensor& v, int64_t c) {
          return translate([&] { return svattn::layers::linear_attention(q, k, v, c); });
        });
  m.def("delta_rule(Tensor q, Tensor k, Tensor v, Tensor beta, int chunk) -> Tensor",
        [](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta, int64_t c) {
          return translate([&] { return svattn::layers::delta_rule(q, k, v, beta, c); });
        });
  m.def("apply_rope(Tensor x, float base) -> Tensor", [](const Tensor& x, double base) {
    return translate([&] { return svattn::layers::apply_rope(x, base); });
  });
}
