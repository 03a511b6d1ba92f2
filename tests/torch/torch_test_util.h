// Shared helpers of the torch tests: fp64 central finite differences and key generators.
#pragma once
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <vector>

namespace svattn::layers::testing {

/// One intra-op thread: the suites run in parallel under ctest, and tiny ops with two OpenMP
/// threads stall on an oversubscribed machine. ExactAttention.ThreadCountDoesNotChangeResults
/// runs the (batch, head) loop with two threads.
inline void set_threads() { at::set_num_threads(1); }

/// Result of a finite-difference check of d f / d x for a scalar f.
struct FdResult {
  double rel_error = 0;  ///< ||g_fd - g|| / ||g|| over the checked entries
  long checked = 0;
  long skipped = 0;      ///< entries where the perturbation changed the partition
  double grad_norm = 0;
};

/// Central differences of f at x (fp64, modified in place and restored) against `grad`, on every
/// `stride`-th entry.
/// `stable(x)` says whether the partition at the perturbed point equals the base one; entries
/// whose +h or -h point changes it are skipped (the function is only piecewise smooth).
inline FdResult finite_difference(torch::Tensor x, const torch::Tensor& grad,
                                  const std::function<double()>& f,
                                  const std::function<bool()>& stable, double h = 1e-6,
                                  int64_t stride = 1) {
  FdResult r;
  torch::NoGradGuard ng;
  auto flat = x.view({-1});
  auto g = grad.reshape({-1}).to(torch::kFloat64);
  double num = 0, den = 0;
  for (int64_t i = 0; i < flat.numel(); i += stride) {
    const double x0 = flat[i].item<double>();
    flat[i] = x0 + h;
    const double fp = f();
    const bool sp = stable();
    flat[i] = x0 - h;
    const double fm = f();
    const bool sm = stable();
    flat[i] = x0;
    if (!sp || !sm) {
      ++r.skipped;
      continue;
    }
    const double fd = (fp - fm) / (2 * h);
    const double an = g[i].item<double>();
    num += (fd - an) * (fd - an);
    den += an * an;
    ++r.checked;
  }
  r.grad_norm = std::sqrt(den);
  r.rel_error = std::sqrt(num) / std::max(std::sqrt(den), 1e-300);
  return r;
}

/// Gaussian clusters with a few outliers: B*H sets of n keys in d dims.
inline torch::Tensor clustered_keys(int64_t B, int64_t H, int64_t n, int64_t d, int64_t clusters,
                                    double spread) {
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  auto centers = torch::randn({B, H, clusters, d}, opts) * 1.5;
  auto assign = torch::randint(0, clusters, {B, H, n}, opts.dtype(torch::kInt64));
  auto x = centers.gather(2, assign.unsqueeze(-1).expand({B, H, n, d})) + spread * torch::randn({B, H, n, d}, opts);
  // Every seventh key is an outlier.
  auto idx = torch::arange(0, n, 7, opts.dtype(torch::kInt64));
  x.index_copy_(2, idx, torch::randn({B, H, idx.size(0), d}, opts) * 3.0);
  return x;
}

}  // namespace svattn::layers::testing
