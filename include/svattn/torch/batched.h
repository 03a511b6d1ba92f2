// Batch-stabilised SV attention (docs/layers.md §2): batched FISTA over the capped simplex to find
// the active set, then a ridge-regularised bordered solve on the margin set with the error set
// fixed at C, differentiable by autograd. Tensor ops only (no per-element C++ loops): runs on any
// device. It carries no certificate; the exact path (exact.h) does.
#pragma once
#include <torch/torch.h>

#include <cstdint>

#include "svattn/types.h"

namespace svattn::layers {

/// How FISTA bounds the Lipschitz constant of grad F = 2(K + mu I) a - diag(K) on the problem's
/// affine hull {sum a = 1}. Every iterate and every extrapolation lies in that hull, so the descent
/// lemma only needs lambda_max(P A P), P = I - 11'/n the centring on the valid tokens. For keys
/// that sit in a cone (learned keys), lambda_max(A) ~ n is set by the all-ones direction, which the
/// constraint removes: the tangent bound is 2-4x smaller on trained hybrid-3m keys
/// (docs/layers.md).
enum class LipschitzBound {
  /// min(Gershgorin of A, ||P A P||_F): both rigorous, no iterations (default).
  kTangent,
  /// kTangent, further capped by the Collatz–Wielandt bound max_i (A v)_i / v_i of a
  /// power-iteration vector v > 0 (A = K + mu I is entrywise nonnegative for RBF, so this is a
  /// rigorous upper bound of lambda_max(A) >= lambda_max(P A P)). Costs power_iterations mat-vecs.
  kPowerIteration,
  /// Gershgorin bound max_i sum_j |A_ij| alone (rigorous, loosest; the pre-tangent behaviour).
  kGershgorin,
};

struct BatchedSettings {
  /// The problem (docs/math.md §1), once: kernel must be RBF; problem.kernel.bandwidth is sigma
  /// when no per-head log_sigma tensor is passed; problem.C the box bound; problem.ridge the
  /// problem's mu (FISTA minimises a'(K + mu I)a - diag(K)'a, the same problem as the exact path).
  ProblemSettings problem;
  /// Upper bound of iterations, power_iterations, active_set_rounds and ipm_iterations: the cost
  /// of a forward grows linearly with each, and a budget beyond this is a typo, not a setting
  /// (50 x the default FISTA budget; docs/layers.md "Settings").
  static constexpr int kMaxIterations = 10000;
  /// FISTA iterations (fixed budget, no early exit: the cost is data independent). In
  /// [1, kMaxIterations].
  int iterations = 200;
  /// Ridge lambda added to K_SS + mu I in the coefficient solve (the paper's 1e-3). Finite, >= 0.
  double solve_ridge = 1e-3;
  /// Mask tolerance, relative to the bound u (u = C, or 1/n in warm-up): a FISTA coefficient
  /// a <= mask_tol * u is reserve, a >= (1 - mask_tol) * u is error, otherwise margin. In (0, 0.5).
  double mask_tol = 1e-3;
  LipschitzBound lipschitz = LipschitzBound::kTangent;
  /// Power iterations for kPowerIteration. >= 1.
  int power_iterations = 20;
  /// Bisection halvings of the projection's threshold before its closed-form finish (see
  /// project_capped_simplex); 0 picks the dtype's default: 8 in fp32 and 16 in fp64 inside FISTA,
  /// whose bracket is warm-started from the previous iteration's threshold (20 / 40 cold). 0..100.
  int bisections = 0;
  /// Check and repair of partitions FISTA has not settled. FISTA's partition of every problem is
  /// checked on the exact problem (face solve with ridge mu in fp64, on a Gram matrix computed from
  /// the keys in fp64; margin coefficients inside the box, KKT signs g >= 0 on R and g <= 0 on E).
  /// A rejected problem is re-solved on the exact problem (fp64, no gradient): ipm_iterations
  /// interior-point iterations on the tokens FISTA left above 0, then up to active_set_rounds
  /// monotone active-set rounds (projected-gradient step, face solve, check, feasible step), and a
  /// second interior-point pass with the entering reserve tokens if still open. 0 disables check
  /// and repair (FISTA's masks as they are: the pre-repair behaviour). >= 0.
  int active_set_rounds = 3;
  /// Interior-point iterations of the repair (0: straight to the active-set rounds). >= 0.
  int ipm_iterations = 12;
  /// Chunked variant only: evict the reserve set at every chunk boundary (see
  /// ExactSettings::bounded).
  bool bounded = false;
  /// Solve and read out in fp64 (else in the inputs' dtype).
  bool fp64 = false;

  /// Throws svattn::InvalidArgument naming the bad field ("solve_ridge must be ..., got ...").
  void validate() const;
};

/// Solution of G independent problems of size N (padded tokens excluded by `valid`).
struct BatchedSolution {
  torch::Tensor alpha;  ///< [G, N], differentiable w.r.t. K (0 on reserve and padding), in [0, u]
  torch::Tensor b;      ///< [G], multiplier of the bordered solve (0 when S is empty)
  torch::Tensor
      role;  ///< int8 [G, N]: 0 reserve/padding, 1 margin, 2 error (after the active-set rounds)
  torch::Tensor iterate;        ///< [G, N], final FISTA iterate (no gradient)
  torch::Tensor residual;       ///< [G], fixed-point residual max_i |a - P(a - grad F(a) / L)|_i
  long active_set_changes = 0;  ///< role changes made by the active-set rounds (all problems)
  long unconverged = 0;         ///< problems whose partition still changed in the last round
  long out_of_box = 0;          ///< margin coefficients of the ridge solve outside [0, u] (clamped)
};

/// RBF kernel exp(-||a_i - b_j||^2 / sigma^2): a [G, N, d], b [G, M, d], sigma [G] -> [G, N, M].
torch::Tensor rbf_kernel(const torch::Tensor& a, const torch::Tensor& b,
                         const torch::Tensor& sigma);

/// Euclidean projection of each row of y [..., N] onto {sum a = 1, 0 <= a <= upper} (upper of the
/// same shape, >= 0, with sum(upper) >= 1 per row; tokens with upper = 0 are padding), sort-free:
/// `bisections` halvings of the threshold tau of clip(y - tau, 0, u) (0: 20 in fp32, 40 in fp64
/// for this cold-started function; FISTA's warm-started projections use 8 / 16),
/// then a closed-form finish: on the free set F = {0 < y - tau < u} the sum is linear in tau, so
/// tau = (sum_F y + sum_{y - u >= tau} u - 1) / |F| (twice, kept inside the bisection bracket). The
/// result is exact whenever no breakpoint y_i or y_i - u_i lies between the bisection's tau and the
/// root (the bracket is 2^-bisections of the initial one), and within that bracket otherwise.
torch::Tensor project_capped_simplex(const torch::Tensor& y, const torch::Tensor& upper,
                                     int bisections = 0);

/// The step-size bound FISTA uses for every problem: L [G] with L >= 2 lambda_max(P (K + mu I) P)
/// on the valid tokens (LipschitzBound; K [G, N, N], valid bool [G, N] or undefined).
torch::Tensor lipschitz_bound(const torch::Tensor& K, const torch::Tensor& valid,
                              const BatchedSettings& settings);

/// The bound u of every token: max(C, 1/n_valid) on valid tokens (warm-up when n_valid * C <= 1),
/// 0 on padding. valid: bool [G, N].
torch::Tensor box_upper(const torch::Tensor& valid, double C, torch::ScalarType dtype);

/// Fits G problems: K [G, N, N] (RBF Gram, any dtype), valid bool [G, N] (undefined = all valid),
/// warm_start [G, N] (undefined = uniform). FISTA and the active-set rounds run without gradient;
/// alpha (the ridge solve on the final partition, clamped to [0, u]) is differentiable.
BatchedSolution batched_svdd(const torch::Tensor& K, const torch::Tensor& valid,
                             const BatchedSettings& settings,
                             const torch::Tensor& warm_start = torch::Tensor());

/// The bordered solve on the margin set with E fixed at `upper`:
///   [[0, 1'], [1, K_SS + ridge I]] [b; a_S] = [1 - sum_E u; diag(K)_S / 2 - K_SE u_E].
/// role int8 [G, N] (1 margin, 2 error), upper [G, N]. Returns {alpha [G, N], b [G]}, both
/// differentiable w.r.t. K. Used by the batched path (ridge = mu + solve_ridge) and, with ridge =
/// mu, as the "autograd through a second solve" reference of the exact backward.
std::pair<torch::Tensor, torch::Tensor> bordered_coefficients(const torch::Tensor& K,
                                                              const torch::Tensor& role,
                                                              const torch::Tensor& upper,
                                                              double ridge);

/// Support-weighted softmax readout (docs/math.md §5) over the tokens with role > 0:
/// queries [G, M, d], keys [G, N, d], values [G, N, dv], alpha [G, N], sigma [G] -> [G, M, dv].
/// Rows with an empty support read 0. Negative alpha (a wrong mask) is clamped to 0.
torch::Tensor sv_readout(const torch::Tensor& queries, const torch::Tensor& keys,
                         const torch::Tensor& values, const torch::Tensor& alpha,
                         const torch::Tensor& role, const torch::Tensor& sigma);

/// Diagnostics of a batched forward (not differentiable). Shapes as ExactInfo.
struct BatchedInfo {
  torch::Tensor role;     ///< int8 [B, H, N] or [B, H, nC, T]
  torch::Tensor alpha;    ///< same shape, detached, in the compute dtype
  torch::Tensor support;  ///< int64 [B, H] or [B, H, nC]
  double residual = 0;    ///< max FISTA fixed-point residual over all problems
  long negative_coefficients =
      0;                ///< margin coefficients <= 0 after the ridge solve (before clamping)
  long out_of_box = 0;  ///< margin coefficients outside [0, u] after the ridge solve (clamped)
  long active_set_changes = 0;  ///< role changes made by the active-set rounds
  long unconverged = 0;         ///< problems still changing in the last active-set round
  double seconds = 0;
};

/// keys [B,H,N,d], values [B,H,N,dv], queries [B,H,M,d], log_sigma undefined or [H] -> [B,H,M,dv].
torch::Tensor sv_batched_attention(const torch::Tensor& keys, const torch::Tensor& values,
                                   const torch::Tensor& queries, const torch::Tensor& log_sigma,
                                   const BatchedSettings& settings, BatchedInfo* info = nullptr);

/// Causal chunked memory (same contract as sv_exact_chunked_attention): queries of chunk c read
/// the memory of chunks 0..c-1; chunk 0 reads 0. Full mode solves the memories of all chunks as one
/// batch of problems on the leading blocks of one Gram matrix (one batched product per FISTA
/// iteration for all chunks). Bounded mode is sequential (chunk c's memory depends on chunk c-1's
/// support); FISTA of chunk c is warm-started from chunk c-1 there. `log_normalizer` as in
/// sv_exact_chunked_attention.
torch::Tensor sv_batched_chunked_attention(const torch::Tensor& keys, const torch::Tensor& values,
                                           const torch::Tensor& queries,
                                           const torch::Tensor& log_sigma, std::int64_t chunk,
                                           const BatchedSettings& settings,
                                           BatchedInfo* info = nullptr,
                                           torch::Tensor* log_normalizer = nullptr);

/// Fraction of units (all leading dims; the last dim is the token axis) whose roles are equal,
/// skipping units where both have an empty support. Returns {rate, units compared}.
std::pair<double, long> partition_agreement(const torch::Tensor& role_a,
                                            const torch::Tensor& role_b);

}  // namespace svattn::layers
