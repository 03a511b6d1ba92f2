// Exact-path SV attention as a torch::autograd::Function (docs/math.md §5, §7).
//
// Forward: for every (batch, head) the keys are fitted by the lean solver (svattn/torch/
// lean_solver.h: the Cauwenberghs–Poggio path of docs/math.md §4 without the audit machinery; the
// chunked memory of chunk c + 1 continues from chunk c's solution) or, with ExactSolver::kMemory,
// by an fp64 svattn::Memory (the core); each query reads out o(q) = sum_i a_i k(q,x_i) v_i / sum_i a_i
// k(q,x_i) over S ∪ E (support-weighted log-sum-exp, RBF kernel). The forward saves the partition,
// the coefficients and the maintained bordered inverse R of [[0, 1'], [1, K_SS + mu I]].
// Backward: implicit differentiation of the bordered system with the saved R (no second solve);
// see docs/layers.md for the derivation in the core's scaling; blocked matrix products over each
// memory's support. Gradients flow to keys, values,
// queries and (optionally) the per-head log bandwidth. Inputs of any floating dtype and device;
// computation is fp64 on the CPU, results are returned in the input dtype/device: a call moves its
// inputs to the host in one transfer (pinned memory on CUDA) and its results back without
// blocking (docs/gpu.md). The (batch, head)
// units run in parallel with at::parallel_for (at::get_num_threads() threads); each is solved by
// one thread in a fixed order, so results do not depend on the thread count.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "svattn/memory.h"

namespace svattn::layers {

/// Which solver fits the exact path's memories.
enum class ExactSolver {
  kLean,    ///< LeanSolver: the training solver (default)
  kMemory,  ///< one svattn::Memory per (batch, head): the audited core (comparisons, tests)
};

/// Settings of the exact path. Kernel is RBF exp(-||a-b||^2 / sigma^2).
struct ExactSettings {
  /// The problem (docs/math.md §1), once: kernel must be RBF; problem.kernel.bandwidth is sigma
  /// when no per-head log_sigma tensor is passed; problem.C the box bound (fixed per layer);
  /// problem.ridge the problem's mu (the same mu as every other path).
  ProblemSettings problem;
  /// Chunked variant only: evict the reserve set at every chunk boundary (memory of chunk c is the
  /// SVDD of the support of chunk c-1's memory plus chunk c-1's tokens). Default false: the memory
  /// of chunk c holds every token of chunks 0..c-1 (docs/layers.md §3).
  bool bounded = false;
  /// Check every memory's captured state with the independent verifier (svattn::verify_state:
  /// feasibility, KKT signs on every token held, canonical hash; O(n |S ∪ E| d) per memory) and
  /// report the outcome in ExactInfo::verified. For evaluation: the gradient does not change.
  bool certify = false;
  ExactSolver solver = ExactSolver::kLean;

  /// Throws svattn::InvalidArgument naming the bad field ("problem.C must be ..., got ...").
  void validate() const;
  /// The core settings of one memory with bandwidth `sigma` (audit mode).
  MemorySettings memory_settings(double sigma) const;
};

/// Per-unit result of an exact forward (one unit = one (batch, head) or (batch, head, chunk)).
/// role over the positions of the key sequence: 0 = reserve or not in the memory, 1 = margin,
/// 2 = error. Units are ordered (b, h) or (b, h, c) row-major.
struct ExactInfo {
  torch::Tensor role;         ///< int8 [B, H, N] or [B, H, nC, T] (chunk 0 all zero)
  torch::Tensor alpha;        ///< fp64, same shape, 0 outside S ∪ E
  torch::Tensor b;            ///< fp64 [B, H] or [B, H, nC] (chunk 0: 0)
  torch::Tensor support;      ///< int64 [B, H] or [B, H, nC]: |S ∪ E|
  torch::Tensor memory_size;  ///< int64 [B, H] or [B, H, nC]: tokens held by the memory
  /// int8, same shape as b: 1 the verifier accepts the memory's state against the tokens it holds,
  /// 0 it does not, -1 not checked (ExactSettings::certify off; chunk 0, which has no memory).
  torch::Tensor verified;
  std::vector<Status> status;  ///< one per unit
  long events = 0;             ///< solver events summed over units
  long batch_fallbacks = 0;    ///< adds finished by a batch re-solve (the path gave up)
  double seconds = 0;          ///< wall time of the forward solves
};

/// Wall time of the exact path's forward calls (solves and readouts) and backward calls, summed
/// over the process (every thread's calls); for benchmarks that take the SV memory's forward and
/// backward apart (bench/lm/bench_hybrid_paths).
struct ExactTimes {
  double forward_seconds = 0;
  double backward_seconds = 0;
};
ExactTimes exact_times();

/// keys [B,H,N,d], values [B,H,N,dv], queries [B,H,M,d] -> [B,H,M,dv].
/// log_sigma: undefined (use settings.bandwidth, no gradient) or [H] (per-head log bandwidth,
/// differentiable). `info`, if given, receives the partitions (not differentiable).
torch::Tensor sv_exact_attention(const torch::Tensor& keys, const torch::Tensor& values,
                                 const torch::Tensor& queries, const torch::Tensor& log_sigma,
                                 const ExactSettings& settings, ExactInfo* info = nullptr);

/// Causal chunked memory for the hybrid layer: keys/values/queries [B,H,T,*], chunk length L
/// (T need not be a multiple of L). Queries of chunk c read the memory of chunks 0..c-1 (built
/// incrementally: chunk c-1's tokens are added before chunk c is read). Chunk 0 has no memory: its
/// rows of the output are 0. Returns [B,H,T,dv]. `log_normalizer`, if given, receives the
/// differentiable log sum_{j in S ∪ E} a_j k(q_t, x_j) [B,H,T] (-inf where the memory is empty):
/// the memory's mass for the hybrid's joint gate (docs/layers.md §3).
torch::Tensor sv_exact_chunked_attention(const torch::Tensor& keys, const torch::Tensor& values,
                                         const torch::Tensor& queries,
                                         const torch::Tensor& log_sigma, std::int64_t chunk,
                                         const ExactSettings& settings, ExactInfo* info = nullptr,
                                         torch::Tensor* log_normalizer = nullptr);

}  // namespace svattn::layers
