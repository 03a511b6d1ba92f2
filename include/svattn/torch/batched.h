// Batch-stabilised SV attention (SPEC §8): batched FISTA over the capped simplex to find the
// active set, then a ridge-regularised bordered solve on the margin set with the error set fixed at
// C, differentiable by autograd. Tensor ops only (no per-element C++ loops): runs on any device.
// It carries no certificate; the exact path (exact.h) does.
#pragma once
#include <torch/torch.h>

#include <cstdint>

namespace svattn::layers {

/// How FISTA bounds the Lipschitz constant of grad F = 2(K + mu I) a - diag(K).
enum class LipschitzBound {
  /// Collatz–Wielandt bound max_i (A v)_i / v_i of a power-iteration vector v > 0 (A = K + mu I is
  /// entrywise nonnegative for RBF, so this is a rigorous upper bound of lambda_max), capped by
  /// the Gershgorin bound.
  kPowerIteration,
  /// Gershgorin bound max_i sum_j |A_ij| (rigorous, looser).
  kGershgorin,
};

struct BatchedSettings {
  /// FISTA iterations (fixed budget, no early exit: the cost is data independent). >= 1.
  int iterations = 200;
  /// Ridge lambda added to K_SS + mu I in the coefficient solve (the paper's 1e-3). Finite, >= 0.
  double ridge = 1e-3;
  /// Mask tolerance, relative to the bound u (u = C, or 1/n in warm-up): a FISTA coefficient
  /// a <= mask_tol * u is reserve, a >= (1 - mask_tol) * u is error, otherwise margin. In (0, 0.5).
  double mask_tol = 1e-3;
  /// Box bound C. Finite, > 0.
  double C = 0.1;
  /// RBF bandwidth sigma when no per-head log_sigma tensor is passed. Finite, > 0.
  double bandwidth = 1.0;
  /// Problem ridge mu (the same problem as the exact path: FISTA minimises a'(K + mu I)a - diag(K)'a).
  double mu = 1e-6;
  LipschitzBound lipschitz = LipschitzBound::kPowerIteration;
  /// Power iterations for kPowerIteration. >= 1.
  int power_iterations = 20;
  /// Chunked variant only: evict the reserve set at every chunk boundary (see ExactSettings::bounded).
  bool bounded = false;
  /// Solve and read out in fp64 (else in the inputs' dtype).
  bool fp64 = false;

  /// Throws svattn::InvalidArgument naming the bad field.
  void validate() const;
};

/// Solution of G independent problems of size N (padded tokens excluded by `valid`).
struct BatchedSolution {
  torch::Tensor alpha;     ///< [G, N], differentiable w.r.t. K (0 on reserve and padding)
  torch::Tensor b;         ///< [G], multiplier of the bordered solve (0 when S is empty)
  torch::Tensor role;      ///< int8 [G, N]: 0 reserve/padding, 1 margin, 2 error
  torch::Tensor iterate;   ///< [G, N], final FISTA iterate (no gradient)
  torch::Tensor residual;  ///< [G], fixed-point residual max_i |a - P(a - grad F(a) / L)|_i
};

/// RBF kernel exp(-||a_i - b_j||^2 / sigma^2): a [G, N, d], b [G, M, d], sigma [G] -> [G, N, M].
torch::Tensor rbf_kernel(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& sigma);

/// Euclidean projection of each row of y [G, N] onto {sum a = 1, 0 <= a <= upper} (upper [G, N],
/// >= 0, with sum(upper) >= 1 per row), exact, by sorting the 2N breakpoints of the threshold.
torch::Tensor project_capped_simplex(const torch::Tensor& y, const torch::Tensor& upper);

/// The bound u of every token: max(C, 1/n_valid) on valid tokens (warm-up when n_valid * C <= 1),
/// 0 on padding. valid: bool [G, N].
torch::Tensor box_upper(const torch::Tensor& valid, double C, torch::ScalarType dtype);

/// Fits G problems: K [G, N, N] (RBF Gram, any dtype), valid bool [G, N] (undefined = all valid),
/// warm_start [G, N] (undefined = uniform). FISTA runs without gradient; alpha is differentiable.
BatchedSolution batched_svdd(const torch::Tensor& K, const torch::Tensor& valid,
                             const BatchedSettings& settings,
                             const torch::Tensor& warm_start = torch::Tensor());

/// The bordered solve on the margin set with E fixed at `upper`:
///   [[0, 1'], [1, K_SS + ridge I]] [b; a_S] = [1 - sum_E u; diag(K)_S / 2 - K_SE u_E].
/// role int8 [G, N] (1 margin, 2 error), upper [G, N]. Returns {alpha [G, N], b [G]}, both
/// differentiable w.r.t. K. Used by the batched path (ridge = mu + lambda) and, with ridge = mu, as
/// the "autograd through a second solve" reference of the exact backward.
std::pair<torch::Tensor, torch::Tensor> bordered_coefficients(const torch::Tensor& K,
                                                              const torch::Tensor& role,
                                                              const torch::Tensor& upper,
                                                              double ridge);

/// Support-weighted softmax readout (SPEC §2) over the tokens with role > 0:
/// queries [G, M, d], keys [G, N, d], values [G, N, dv], alpha [G, N], sigma [G] -> [G, M, dv].
/// Rows with an empty support read 0. Negative alpha (a wrong mask) is clamped to 0.
torch::Tensor sv_readout(const torch::Tensor& queries, const torch::Tensor& keys,
                         const torch::Tensor& values, const torch::Tensor& alpha,
                         const torch::Tensor& role, const torch::Tensor& sigma);

/// Diagnostics of a batched forward (not differentiable). Shapes as ExactInfo.
struct BatchedInfo {
  torch::Tensor role;      ///< int8 [B, H, N] or [B, H, nC, T]
  torch::Tensor alpha;     ///< same shape, detached, in the compute dtype
  torch::Tensor support;   ///< int64 [B, H] or [B, H, nC]
  double residual = 0;     ///< max FISTA fixed-point residual over all problems
  long negative_coefficients = 0;  ///< margin coefficients <= 0 after the ridge solve
  double seconds = 0;
};

/// keys [B,H,N,d], values [B,H,N,dv], queries [B,H,M,d], log_sigma undefined or [H] -> [B,H,M,dv].
torch::Tensor sv_batched_attention(const torch::Tensor& keys, const torch::Tensor& values,
                                   const torch::Tensor& queries, const torch::Tensor& log_sigma,
                                   const BatchedSettings& settings, BatchedInfo* info = nullptr);

/// Causal chunked memory (same contract as sv_exact_chunked_attention): queries of chunk c read
/// the memory of chunks 0..c-1; chunk 0 reads 0. FISTA of chunk c is warm-started from chunk c-1.
torch::Tensor sv_batched_chunked_attention(const torch::Tensor& keys, const torch::Tensor& values,
                                           const torch::Tensor& queries,
                                           const torch::Tensor& log_sigma, std::int64_t chunk,
                                           const BatchedSettings& settings,
                                           BatchedInfo* info = nullptr);

/// Fraction of units (all leading dims; the last dim is the token axis) whose roles are equal,
/// skipping units where both have an empty support. Returns {rate, units compared}.
std::pair<double, long> partition_agreement(const torch::Tensor& role_a, const torch::Tensor& role_b);

}  // namespace svattn::layers
