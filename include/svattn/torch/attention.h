// Attention modules with one interface: x [B, T, D] -> [B, T, D], with q/k/v/o projections.
// Every module is strictly causal. The hybrid SV attention (docs/layers.md §3) and the baselines
// (docs/layers.md §4) share the config below so that experiments swap only the attention.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "svattn/torch/batched.h"
#include "svattn/torch/exact.h"

namespace svattn::layers {

// ------------------------------------------------------------------ functional kernels
// All take q, k, v as [B, H, T, dh] (dv may differ from dh) and return [B, H, T, dv].

/// Full causal softmax attention, scores q.k / sqrt(dh).
torch::Tensor causal_softmax_attention(const torch::Tensor& q, const torch::Tensor& k,
                                       const torch::Tensor& v);
/// Sliding-window causal softmax: token t attends to (t - window, t]. Blocked: O(T * window).
torch::Tensor sliding_window_attention(const torch::Tensor& q, const torch::Tensor& k,
                                       const torch::Tensor& v, std::int64_t window);
/// Causal softmax inside chunks of length `chunk` (block-diagonal causal mask): the hybrid's local
/// path.
torch::Tensor chunk_local_attention(const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v, std::int64_t chunk);
/// Causal linear attention with phi(x) = elu(x) + 1:
///   o_t = sum_{s<=t} (phi(q_t).phi(k_s)) v_s / (sum_{s<=t} phi(q_t).phi(k_s) + 1e-6),
/// computed chunkwise (intra-chunk masked products + exclusive prefix sums of the chunk states).
torch::Tensor linear_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, std::int64_t chunk);
/// Delta rule S_t = S_{t-1} + beta_t (v_t - S_{t-1} k_t) k_t', o_t = S_t q_t, S_0 = 0, with k (and
/// q) used as given (the module L2-normalises them); beta [B, H, T] in (0, 1). Chunkwise WY form
/// (unit-lower-triangular solve per chunk, sequential only across chunks).
torch::Tensor delta_rule(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                         const torch::Tensor& beta, std::int64_t chunk);
/// The hybrid's local path with memory boundary b(t) = chunk * floor(max(t - window + 1, 0) /
/// chunk): query t attends to the keys s with b(t) <= s <= t (at least the last `window` tokens,
/// at most window + chunk - 1). window = 1 is chunk_local_attention (b(t) is t's chunk start);
/// chunk = 1 is sliding_window_attention. Blocked: O(T * (window + chunk)). `log_normalizer`, if
/// given, receives logsumexp_s q_t.k_s / sqrt(dh) over those keys, [B, H, T].
torch::Tensor memory_local_attention(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, std::int64_t chunk,
                                     std::int64_t window, torch::Tensor* log_normalizer = nullptr);
/// Rotary position embedding of x [B, H, T, dh] (dh even) at positions 0..T-1.
torch::Tensor apply_rope(const torch::Tensor& x, double base);

// ------------------------------------------------------------------ configuration
enum class AttentionType { kSoftmax, kSlidingWindow, kLinear, kDeltaNet, kHybrid };
std::string to_string(AttentionType t);
/// "softmax" | "swa" | "linear" | "deltanet" | "hybrid"; throws InvalidArgument otherwise.
AttentionType attention_type_from_string(const std::string& s);

enum class GlobalPath { kExact, kBatched };
std::string to_string(GlobalPath p);
GlobalPath global_path_from_string(const std::string& s);  ///< "exact" | "batched"

/// Which gate mixes the two paths (docs/layers.md §3). m(t) = b(t) / chunk is the memory that
/// query t reads, p(t) = max(t - W + 1, 0) mod chunk its position since that memory's last update
/// (W = local_window in window mode, 1 in chunk mode: p(t) = t mod chunk).
enum class GateType {
  kChunkFrozen,  ///< the paper's gate: g_{h,t} = sigmoid(a_h + w_h . mean(x over chunk m(t)-1))
  kPerToken,     ///< g_{t,h} = sigmoid(w_h . x_t + a_h)
  kPosition,     ///< g_{t,h} = sigmoid(w_h . x_t + a_h + p_{h,p(t)}), p a learned [H, chunk] table
  /// One softmax over the memory logits log a_j - |q - x_j|^2 / sigma^2 (+ a_h) and the local
  /// logits q.k / sqrt(dh): g_{t,h} = sigmoid(log Z_mem + a_h - log Z_loc), the memory's share.
  kJoint,
};
std::string to_string(GateType g);
/// "chunk" | "token" | "position" | "joint"
GateType gate_type_from_string(const std::string& s);

/// The hybrid's local path (docs/layers.md §3).
enum class LocalPath {
  kChunk,   ///< the paper's: causal softmax inside the chunk, reset at every chunk boundary
  kWindow,  ///< sliding: every token newer than the memory, at least the last local_window
};
std::string to_string(LocalPath p);
LocalPath local_path_from_string(const std::string& s);  ///< "chunk" | "window"

/// The hybrid layer's default problem: C = 1/16 (support >= 16 tokens), sigma = 1, mu = 1e-6.
ProblemSettings hybrid_default_problem();

/// Hybrid SV attention (docs/layers.md §3): o_t = g o_global(q_t) + (1 - g) o_local(q_t).
struct HybridSettings {
  /// The problem of both paths, once: problem.C the box bound (fixed per layer), problem.kernel
  /// the RBF kernel with the initial per-head sigma as bandwidth, problem.ridge the problem's mu.
  ProblemSettings problem = hybrid_default_problem();
  std::int64_t chunk = 64;  ///< local chunk length L (>= 1)
  GlobalPath path = GlobalPath::kBatched;
  GateType gate = GateType::kChunkFrozen;
  LocalPath local = LocalPath::kChunk;
  /// Window mode: W_loc >= 1, the fewest recent tokens the local path sees (see local_width()).
  std::int64_t local_window = 64;
  /// false: the SV memory is not built and the layer is its local path alone (ablation).
  bool memory = true;
  bool learn_bandwidth = true;  ///< per-head log sigma is a parameter
  bool normalize_keys = true;   ///< SV keys/queries are L2-normalised (|x - y|^2 in [0, 4])
  bool bounded = false;         ///< evict reserve tokens at chunk boundaries (see ExactSettings)
  double gate_bias_init = 0.0;  ///< initial a_h (sigmoid(0) = 0.5 split)
  /// Batched path: the solver's own fields (iterations, solve_ridge, mask_tol, lipschitz, ...).
  /// batched.problem and batched.bounded must be left at their defaults or equal problem and
  /// bounded: validate() rejects any other value instead of ignoring it. batched_settings() is
  /// what the layer runs.
  BatchedSettings batched;
  /// Fixes the gate of every chunk >= 1 to this value in [0, 1] (ablation, tests).
  std::optional<double> gate_override;
  /// Also solve every memory with the other path (no gradient) on the same keys and report the
  /// partition agreement and coefficient error between the batched and the exact path in the
  /// diagnostics, whichever path the layer runs (slow; for evaluation).
  bool check_agreement = false;
  /// Exact path: check every memory's state with the independent verifier
  /// (ExactSettings::certify) and report the verified share in the diagnostics (for evaluation).
  /// validate() rejects it on the batched path, whose memories carry no certificate.
  bool certify = false;
  /// Exact path: the solver of its memories (ExactSettings::solver; the lean training solver by
  /// default, svattn::Memory for comparisons).
  ExactSolver exact_solver = ExactSolver::kLean;
  /// Also count the distinct key vectors of every memory's support and the coefficient spread
  /// among exact duplicates (diagnostics; layers::distinct_support, for evaluation).
  bool count_distinct_support = false;

  /// Throws InvalidArgument naming the bad field ("hybrid.problem.C must be ..., got ...").
  void validate() const;
  /// W in b(t) = chunk * floor(max(t - W + 1, 0) / chunk): local_window in window mode, 1 in chunk
  /// mode.
  std::int64_t min_local() const { return local == LocalPath::kWindow ? local_window : 1; }
  /// The most tokens the local path holds, min_local() + chunk - 1 (chunk in chunk mode): the
  /// local part of the layer's state; the state-matched window adds the measured |S ∪ E|.
  std::int64_t local_width() const { return min_local() + chunk - 1; }
  /// b(t): the memory read by query t holds exactly the tokens s < b(t) (0: no memory); the local
  /// path sees b(t) <= s <= t.
  std::int64_t memory_boundary(std::int64_t t) const;
  /// The exact path's settings (problem, bounded).
  ExactSettings exact_settings() const;
  /// `batched` with problem and bounded set from this struct.
  BatchedSettings batched_settings() const;
};

struct AttentionConfig {
  AttentionType type = AttentionType::kSoftmax;
  std::int64_t d_model = 256;
  std::int64_t n_heads = 4;
  std::int64_t window = 128;     ///< sliding-window size W
  std::int64_t scan_chunk = 64;  ///< chunk of the linear-attention / DeltaNet chunkwise forms
  bool rope = true;              ///< rotary positions on softmax scores (full, window, local)
  double rope_base = 10000.0;
  HybridSettings hybrid;

  void validate() const;
};

/// Per-forward diagnostics (NaN where not applicable). The hybrid layer fills the support, gate
/// and FISTA fields only while AttentionImpl::record_diagnostics() is on (docs/layers.md "GPU");
/// check_agreement, certify and count_distinct_support are diagnostics switches of their own.
struct AttentionDiagnostics {
  std::vector<double>
      support_per_head;  ///< hybrid: mean |S ∪ E| per head over batch and chunks >= 1
  double support_mean = std::nan("");    ///< hybrid: mean over heads
  /// hybrid with count_distinct_support: mean number of distinct support keys per head, the
  /// largest coefficient spread among bitwise-equal support keys and the duplicate support tokens.
  std::vector<double> distinct_support_per_head;
  double duplicate_alpha_spread = std::nan("");
  long duplicate_support_tokens = 0;
  double gate_mean = std::nan("");       ///< hybrid: mean memory share g over tokens of chunks >= 1
  double fista_residual = std::nan("");  ///< batched path: max FISTA fixed-point residual
  double partition_agreement = std::nan("");  ///< check_agreement: batched vs exact rate
  long agreement_units = 0;
  double coefficient_error = std::nan("");  ///< check_agreement: max |alpha_batched - alpha_exact|
  /// certify: memories (chunks >= 1) whose state the verifier checked, and of those it accepted.
  long certified_units = 0;
  long verified_units = 0;
  long negative_coefficients = 0;           ///< batched path: margin coefficients <= 0
  double solver_seconds = 0;                ///< time in the SV memory (forward)
};

/// Base class of every attention module.
class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const AttentionConfig& config);
  /// x [B, T, D] -> [B, T, D].
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
  const AttentionConfig& config() const { return config_; }
  /// Diagnostics of the last forward. The values a forward left on the device are read here, on
  /// the first call after that forward (a host sync), not in the forward.
  const AttentionDiagnostics& diagnostics() const;
  /// Opt-in per-forward diagnostics (default off): while off, a forward computes no support or
  /// gate summaries and leaves those fields of diagnostics() unset (empty, NaN); while on, it
  /// keeps them as tensors and diagnostics() reads them. Neither setting syncs in the forward.
  void set_record_diagnostics(bool on) { record_diagnostics_ = on; }
  bool record_diagnostics() const { return record_diagnostics_; }

 protected:
  /// Moves the device values of the last forward into diag_ (the hybrid layer's; no-op here).
  virtual void resolve_diagnostics() const {}
  /// [B, T, D] -> [B, H, T, dh] for each of q, k, v.
  std::vector<torch::Tensor> project_qkv(const torch::Tensor& x);
  /// [B, H, T, dh] -> out projection of the merged heads, [B, T, D].
  torch::Tensor merge(const torch::Tensor& o);

  AttentionConfig config_;
  mutable AttentionDiagnostics diag_;
  bool record_diagnostics_ = false;
  torch::nn::Linear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr}, o_proj_{nullptr};
};

/// Full causal or sliding-window softmax (type kSoftmax / kSlidingWindow).
class SoftmaxAttentionImpl : public AttentionImpl {
 public:
  explicit SoftmaxAttentionImpl(const AttentionConfig& config);
  torch::Tensor forward(const torch::Tensor& x) override;
};

/// Linear attention, phi = elu + 1.
class LinearAttentionImpl : public AttentionImpl {
 public:
  explicit LinearAttentionImpl(const AttentionConfig& config);
  torch::Tensor forward(const torch::Tensor& x) override;
};

/// DeltaNet: L2-normalised q and k, beta_t = sigmoid(linear(x_t)) per head.
class DeltaNetAttentionImpl : public AttentionImpl {
 public:
  explicit DeltaNetAttentionImpl(const AttentionConfig& config);
  torch::Tensor forward(const torch::Tensor& x) override;

 private:
  torch::nn::Linear beta_proj_{nullptr};
};

/// Hybrid SV attention (docs/layers.md §3). Tokens with no memory (b(t) = 0) use the
/// local path alone.
class HybridSvAttentionImpl : public AttentionImpl {
 public:
  explicit HybridSvAttentionImpl(const AttentionConfig& config);
  torch::Tensor forward(const torch::Tensor& x) override;
  /// Gate per head and token [B, H, T] of the last forward (0 where b(t) = 0), detached.
  const torch::Tensor& last_gate() const { return last_gate_; }

 private:
  torch::Tensor log_sigma_;               // [H], parameter when learn_bandwidth
  torch::Tensor gate_bias_;               // [H]
  torch::nn::Linear gate_proj_{nullptr};  // D -> H
  torch::Tensor gate_position_;           // [H, chunk], GateType::kPosition
  torch::Tensor last_gate_;
  // record_diagnostics(): the last forward's unread summaries, kept where they were computed
  // (support per head [H] fp64, gate mean 0-dim); undefined once read into diag_.
  mutable torch::Tensor pending_support_, pending_gate_;
  void resolve_diagnostics() const override;
  // lz (may be null): the path's log-normaliser [B, H, T] for the joint gate.
  torch::Tensor local_path(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           torch::Tensor* lz) const;
  torch::Tensor global_path(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            torch::Tensor* lz);
  // mass: log Z_mem - log Z_loc (joint gate only; 0 where no memory).
  torch::Tensor gate(const torch::Tensor& x, const torch::Tensor& mass);
  void record_agreement(const torch::Tensor& batched_role, const torch::Tensor& batched_alpha,
                        const torch::Tensor& exact_role, const torch::Tensor& exact_alpha);
};

/// Builds the module named by config.type.
std::shared_ptr<AttentionImpl> make_attention(const AttentionConfig& config);

}  // namespace svattn::layers
