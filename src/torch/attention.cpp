// Attention kernels and modules: hybrid SV attention (docs/layers.md §3) and the baselines
// (docs/layers.md §4).
#include "svattn/torch/attention.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>

#include "check_settings.h"
#include "svattn/torch/settings_fields.h"
#include "svattn/errors.h"
#include "svattn/torch/support_stats.h"
#include "support/clock.h"

namespace svattn::layers {

using torch::Tensor;
namespace F = torch::nn::functional;

namespace {

constexpr double kLinearEps = 1e-6;

Tensor causal_mask(std::int64_t t, const torch::Device& device) {
  return torch::ones({t, t}, torch::TensorOptions().dtype(torch::kBool).device(device)).tril();
}

// lse (may be null) receives the log-normaliser logsumexp of the allowed scores per query.
Tensor masked_softmax_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                const Tensor& allowed, Tensor* lse = nullptr) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  Tensor s = torch::matmul(q, k.transpose(-1, -2)) * scale;
  s = s.masked_fill(~allowed, -std::numeric_limits<double>::infinity());
  if (lse != nullptr) *lse = torch::logsumexp(s, -1);
  return torch::matmul(torch::softmax(s, -1), v);
}

// Pads dim 2 (time) of x [B, H, T, *] at the end to a multiple of `m`.
Tensor pad_time(const Tensor& x, std::int64_t m) {
  const auto T = x.size(2);
  const auto Tp = (T + m - 1) / m * m;
  if (Tp == T) return x;
  return F::pad(x, F::PadFuncOptions({0, 0, 0, Tp - T}));
}

void check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, const char* who) {
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4 || q.sizes() != k.sizes() ||
      v.size(0) != q.size(0) || v.size(1) != q.size(1) || v.size(2) != q.size(2))
    throw InvalidArgument(std::string(who) + ": q, k must be [B, H, T, dh] and v [B, H, T, dv]");
}

}  // namespace

Tensor causal_softmax_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  check_qkv(q, k, v, "causal_softmax_attention");
  return masked_softmax_attention(q, k, v, causal_mask(q.size(2), q.device()));
}

Tensor sliding_window_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                std::int64_t window) {
  check_qkv(q, k, v, "sliding_window_attention");
  if (window < 1) throw InvalidArgument("sliding_window_attention: window must be >= 1");
  const auto T = q.size(2);
  if (window >= T) return causal_softmax_attention(q, k, v);
  if (2 * window >= T) {
    // The blocked form would read 2W >= T keys per query: one banded T x T mask is cheaper.
    auto opts = torch::TensorOptions().dtype(torch::kInt64).device(q.device());
    Tensor t = torch::arange(T, opts);
    Tensor diff = t.unsqueeze(1) - t.unsqueeze(0);  // query - key
    return masked_softmax_attention(q, k, v, (diff >= 0) & (diff < window));
  }
  // Query blocks of length W read the key span [iW - W, iW + W) (front-padded by W).
  const std::int64_t W = window;
  Tensor qp = pad_time(q, W), kp = pad_time(k, W), vp = pad_time(v, W);
  const auto Tp = qp.size(2), nb = Tp / W;
  kp = F::pad(kp, F::PadFuncOptions({0, 0, W, 0}));
  vp = F::pad(vp, F::PadFuncOptions({0, 0, W, 0}));
  Tensor kb = kp.unfold(2, 2 * W, W).transpose(-1, -2);  // [B, H, nb, 2W, dh]
  Tensor vb = vp.unfold(2, 2 * W, W).transpose(-1, -2);
  Tensor qb = qp.reshape({q.size(0), q.size(1), nb, W, q.size(3)});
  auto opts = torch::TensorOptions().dtype(torch::kInt64).device(q.device());
  Tensor tq = torch::arange(nb, opts).view({nb, 1, 1}) * W + torch::arange(W, opts).view({1, W, 1});
  Tensor tk = torch::arange(nb, opts).view({nb, 1, 1}) * W - W +
              torch::arange(2 * W, opts).view({1, 1, 2 * W});
  Tensor allowed = (tk <= tq) & (tk > tq - W) & (tk >= 0);  // [nb, W, 2W]
  Tensor o = masked_softmax_attention(qb, kb, vb, allowed);
  return o.reshape({q.size(0), q.size(1), Tp, v.size(3)}).narrow(2, 0, T);
}

Tensor chunk_local_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                             std::int64_t chunk_arg) {
  check_qkv(q, k, v, "chunk_local_attention");
  if (chunk_arg < 1) throw InvalidArgument("chunk_local_attention: chunk must be >= 1");
  const auto B = q.size(0), H = q.size(1), T = q.size(2);
  // A chunk longer than the sequence is one chunk of the whole sequence: cost follows min(chunk,
  // T).
  const std::int64_t chunk = std::min(chunk_arg, std::max<std::int64_t>(T, 1));
  Tensor qp = pad_time(q, chunk), kp = pad_time(k, chunk), vp = pad_time(v, chunk);
  const auto nc = qp.size(2) / chunk;
  auto blocks = [&](const Tensor& x) { return x.reshape({B, H, nc, chunk, x.size(3)}); };
  Tensor o =
      masked_softmax_attention(blocks(qp), blocks(kp), blocks(vp), causal_mask(chunk, q.device()));
  return o.reshape({B, H, nc * chunk, v.size(3)}).narrow(2, 0, T);
}

Tensor memory_local_attention(const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t chunk,
                              std::int64_t window, Tensor* log_normalizer) {
  check_qkv(q, k, v, "memory_local_attention");
  if (chunk < 1) throw InvalidArgument("memory_local_attention: chunk must be >= 1");
  if (window < 1) throw InvalidArgument("memory_local_attention: window must be >= 1");
  if (window == 1 && log_normalizer == nullptr) return chunk_local_attention(q, k, v, chunk);
  const auto B = q.size(0), H = q.size(1), T = q.size(2);
  // Query block i = [iL, iL + L) reads keys [iL - P, iL + L): P = L ceil((W - 1) / L) reaches
  // b(iL), the earliest boundary in the block.
  const std::int64_t L = chunk, P = (window - 1 + L - 1) / L * L;
  Tensor qp = pad_time(q, L), kp = pad_time(k, L), vp = pad_time(v, L);
  const auto nb = qp.size(2) / L;
  kp = F::pad(kp, F::PadFuncOptions({0, 0, P, 0}));
  vp = F::pad(vp, F::PadFuncOptions({0, 0, P, 0}));
  Tensor kb = kp.unfold(2, P + L, L).transpose(-1, -2);  // [B, H, nb, P + L, dh]
  Tensor vb = vp.unfold(2, P + L, L).transpose(-1, -2);
  Tensor qb = qp.reshape({B, H, nb, L, q.size(3)});
  auto opts = torch::TensorOptions().dtype(torch::kInt64).device(q.device());
  Tensor tq = torch::arange(nb, opts).view({nb, 1, 1}) * L + torch::arange(L, opts).view({1, L, 1});
  Tensor tk = torch::arange(nb, opts).view({nb, 1, 1}) * L - P +
              torch::arange(P + L, opts).view({1, 1, P + L});
  Tensor bound = torch::div(torch::clamp_min(tq - window + 1, 0), L, "floor") * L;
  Tensor allowed = (tk <= tq) & (tk >= bound);  // [nb, L, P + L]; bound >= 0 masks the padding
  Tensor lse;
  Tensor o = masked_softmax_attention(qb, kb, vb, allowed, log_normalizer ? &lse : nullptr);
  if (log_normalizer != nullptr) *log_normalizer = lse.reshape({B, H, nb * L}).narrow(2, 0, T);
  return o.reshape({B, H, nb * L, v.size(3)}).narrow(2, 0, T);
}

Tensor linear_attention(const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t chunk_arg) {
  check_qkv(q, k, v, "linear_attention");
  if (chunk_arg < 1) throw InvalidArgument("linear_attention: chunk must be >= 1");
  const auto B = q.size(0), H = q.size(1), T = q.size(2), dk = q.size(3), dv = v.size(3);
  // A chunk longer than the sequence is one chunk of the whole sequence: cost follows min(chunk,
  // T).
  const std::int64_t chunk = std::min(chunk_arg, std::max<std::int64_t>(T, 1));
  // Zero padding at the end: phi(0) = 1 but padded keys come after every real query, and padded
  // values are 0 -- they only affect padded rows, which are cut.
  Tensor fq = F::elu(pad_time(q, chunk)) + 1, fk = F::elu(pad_time(k, chunk)) + 1;
  const auto nc = fq.size(2) / chunk;
  Tensor vp = pad_time(v, chunk);
  fq = fq.reshape({B, H, nc, chunk, dk});
  fk = fk.reshape({B, H, nc, chunk, dk});
  Tensor vc = vp.reshape({B, H, nc, chunk, dv});
  Tensor a = torch::matmul(fq, fk.transpose(-1, -2)) * causal_mask(chunk, q.device());
  Tensor kv = torch::matmul(fk.transpose(-1, -2), vc);  // [B, H, nc, dk, dv]
  Tensor state = kv.cumsum(2) - kv;                     // exclusive prefix over chunks
  Tensor ksum = fk.sum(3);                              // [B, H, nc, dk]
  Tensor z = ksum.cumsum(2) - ksum;
  Tensor num = torch::matmul(a, vc) + torch::matmul(fq, state);
  Tensor den = a.sum(-1) + (fq * z.unsqueeze(3)).sum(-1);
  Tensor o = num / (den.unsqueeze(-1) + kLinearEps);
  return o.reshape({B, H, nc * chunk, dv}).narrow(2, 0, T);
}

Tensor delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta,
                  std::int64_t chunk_arg) {
  check_qkv(q, k, v, "delta_rule");
  if (chunk_arg < 1) throw InvalidArgument("delta_rule: chunk must be >= 1");
  const auto B = q.size(0), H = q.size(1), T = q.size(2), dk = q.size(3), dv = v.size(3);
  // A chunk longer than the sequence is one chunk of the whole sequence: cost follows min(chunk,
  // T).
  const std::int64_t chunk = std::min(chunk_arg, std::max<std::int64_t>(T, 1));
  if (beta.dim() != 3 || beta.size(0) != B || beta.size(1) != H || beta.size(2) != T)
    throw InvalidArgument("delta_rule: beta must be [B, H, T]");
  // Zero-padded tail tokens have k = 0 and beta = 0: they leave the state unchanged.
  Tensor qp = pad_time(q, chunk), kp = pad_time(k, chunk), vp = pad_time(v, chunk);
  Tensor bp = pad_time(beta.unsqueeze(-1), chunk);
  const auto nc = qp.size(2) / chunk;
  Tensor qc = qp.reshape({B, H, nc, chunk, dk});
  Tensor kc = kp.reshape({B, H, nc, chunk, dk});
  Tensor vc = vp.reshape({B, H, nc, chunk, dv});
  Tensor bc = bp.reshape({B, H, nc, chunk, 1});
  // WY form: A = I + strictly_lower(diag(beta) K K'), W = A^{-1} diag(beta) K, U = A^{-1}
  // diag(beta) V.
  Tensor eye = torch::eye(chunk, q.options());
  Tensor kk = torch::matmul(kc, kc.transpose(-1, -2));
  Tensor A = eye + (bc * kk).tril(-1);
  Tensor rhs = torch::cat({bc * kc, bc * vc}, -1);
  Tensor wu = torch::linalg_solve_triangular(A, rhs, /*upper=*/false, /*left=*/true,
                                             /*unitriangular=*/true);
  Tensor Wm = wu.narrow(-1, 0, dk), Um = wu.narrow(-1, dk, dv);
  Tensor qk = torch::matmul(qc, kc.transpose(-1, -2)).tril();  // inclusive causal mask
  Tensor S = torch::zeros({B, H, dv, dk}, q.options());
  std::vector<Tensor> outs;
  outs.reserve(static_cast<std::size_t>(nc));
  for (std::int64_t c = 0; c < nc; ++c) {
    Tensor St = S.transpose(-1, -2);                                   // [B, H, dk, dv]
    Tensor Uc = Um.select(2, c) - torch::matmul(Wm.select(2, c), St);  // U' = U - W S'
    outs.push_back(torch::matmul(qc.select(2, c), St) + torch::matmul(qk.select(2, c), Uc));
    S = S + torch::matmul(Uc.transpose(-1, -2), kc.select(2, c));
  }
  return torch::stack(outs, 2).reshape({B, H, nc * chunk, dv}).narrow(2, 0, T);
}

Tensor apply_rope(const Tensor& x, double base) {
  const auto T = x.size(2), dh = x.size(3);
  if (dh % 2 != 0) throw InvalidArgument("apply_rope: head dimension must be even");
  auto opts = torch::TensorOptions().dtype(torch::kFloat64).device(x.device());
  Tensor inv =
      torch::pow(base, -torch::arange(0, dh, 2, opts) / static_cast<double>(dh));  // [dh/2]
  Tensor ang = torch::arange(T, opts).unsqueeze(-1) * inv.unsqueeze(0);            // [T, dh/2]
  Tensor cs = torch::cos(ang).to(x.scalar_type()), sn = torch::sin(ang).to(x.scalar_type());
  Tensor x1 = x.narrow(-1, 0, dh / 2), x2 = x.narrow(-1, dh / 2, dh / 2);
  return torch::cat({x1 * cs - x2 * sn, x1 * sn + x2 * cs}, -1);
}

// ------------------------------------------------------------------ enums and settings

std::string to_string(AttentionType t) {
  switch (t) {
    case AttentionType::kSoftmax:
      return "softmax";
    case AttentionType::kSlidingWindow:
      return "swa";
    case AttentionType::kLinear:
      return "linear";
    case AttentionType::kDeltaNet:
      return "deltanet";
    case AttentionType::kHybrid:
      return "hybrid";
  }
  return "?";
}

AttentionType attention_type_from_string(const std::string& s) {
  for (auto t : {AttentionType::kSoftmax, AttentionType::kSlidingWindow, AttentionType::kLinear,
                 AttentionType::kDeltaNet, AttentionType::kHybrid})
    if (to_string(t) == s) return t;
  throw InvalidArgument("unknown attention type '" + s + "' (softmax|swa|linear|deltanet|hybrid)");
}

std::string to_string(GlobalPath p) { return p == GlobalPath::kExact ? "exact" : "batched"; }

GlobalPath global_path_from_string(const std::string& s) {
  if (s == "exact") return GlobalPath::kExact;
  if (s == "batched") return GlobalPath::kBatched;
  throw InvalidArgument("unknown global path '" + s + "' (exact|batched)");
}

std::string to_string(GateType g) {
  switch (g) {
    case GateType::kChunkFrozen:
      return "chunk";
    case GateType::kPerToken:
      return "token";
    case GateType::kPosition:
      return "position";
    case GateType::kJoint:
      return "joint";
  }
  return "?";
}

GateType gate_type_from_string(const std::string& s) {
  for (auto g :
       {GateType::kChunkFrozen, GateType::kPerToken, GateType::kPosition, GateType::kJoint})
    if (to_string(g) == s) return g;
  throw InvalidArgument("unknown gate type '" + s + "' (chunk|token|position|joint)");
}

std::string to_string(LocalPath p) { return p == LocalPath::kChunk ? "chunk" : "window"; }

LocalPath local_path_from_string(const std::string& s) {
  if (s == "chunk") return LocalPath::kChunk;
  if (s == "window") return LocalPath::kWindow;
  throw InvalidArgument("unknown local path '" + s + "' (chunk|window)");
}

ProblemSettings hybrid_default_problem() {
  ProblemSettings p;
  p.C = 1.0 / 16;
  p.kernel.bandwidth = 1.0;
  p.ridge = 1e-6;
  return p;
}

namespace {
bool same_problem(const ProblemSettings& a, const ProblemSettings& b) {
  return a.kernel.type == b.kernel.type && a.kernel.bandwidth == b.kernel.bandwidth &&
         a.kernel.degree == b.kernel.degree && a.kernel.coef0 == b.kernel.coef0 && a.C == b.C &&
         a.ridge == b.ridge;
}
}  // namespace

// The table's rows (include/svattn/torch/settings_fields.h), then the rules across fields, in the
// order the messages were first written: the problem, the hybrid's own fields, gate_override, the
// nested batched settings.
void HybridSettings::validate() const {
  check_problem(problem, "hybrid.problem.");
  const auto& table = hybrid_settings_fields();
  const auto batched_row = [](const Field<HybridSettings>& f) { return f.name.rfind("batched.", 0) == 0; };
  for (const auto& f : table)
    if (!batched_row(f)) check_field(f, *this, "hybrid.");
  if (gate_override && !(*gate_override >= 0 && *gate_override <= 1))
    bad_setting("hybrid.gate_override", "in [0, 1]", *gate_override);
  // The problem lives here once: a nested batched.problem/bounded that differs is an error, not
  // silently replaced.
  if (!same_problem(batched.problem, ProblemSettings{}) && !same_problem(batched.problem, problem))
    bad_setting("hybrid.batched.problem", "left at its defaults or equal to hybrid.problem",
                "C " + std::to_string(batched.problem.C));
  if (batched.bounded && !bounded)
    bad_setting("hybrid.batched.bounded", "false or equal to hybrid.bounded", batched.bounded);
  if (certify && path != GlobalPath::kExact)
    bad_setting("hybrid.certify", "false on the batched path (no certificate)", to_string(path));
  for (const auto& f : table)
    if (batched_row(f)) check_field(f, *this, "hybrid.");
}

std::int64_t HybridSettings::memory_boundary(std::int64_t t) const {
  return std::max<std::int64_t>(t - min_local() + 1, 0) / chunk * chunk;
}

ExactSettings HybridSettings::exact_settings() const {
  ExactSettings es;
  es.problem = problem;
  es.bounded = bounded;
  es.certify = certify;
  es.solver = exact_solver;
  return es;
}

BatchedSettings HybridSettings::batched_settings() const {
  BatchedSettings bs = batched;
  bs.problem = problem;
  bs.bounded = bounded;
  return bs;
}

void AttentionConfig::validate() const {
  for (const auto& f : attention_config_own_fields()) {
    check_field(f, *this, "attention.");
    if (f.name == "n_heads" && rope && (d_model / n_heads) % 2 != 0)
      bad_setting("attention.n_heads", "such that the head dimension is even (rope)", n_heads);
  }
  if (type == AttentionType::kHybrid) hybrid.validate();
}

// ------------------------------------------------------------------ modules

AttentionImpl::AttentionImpl(const AttentionConfig& config) : config_(config) {
  config_.validate();
  const auto D = config_.d_model;
  auto lin = [&](const char* name) {
    return register_module(name, torch::nn::Linear(torch::nn::LinearOptions(D, D).bias(false)));
  };
  q_proj_ = lin("q_proj");
  k_proj_ = lin("k_proj");
  v_proj_ = lin("v_proj");
  o_proj_ = lin("o_proj");
}

const AttentionDiagnostics& AttentionImpl::diagnostics() const {
  resolve_diagnostics();
  return diag_;
}

std::vector<Tensor> AttentionImpl::project_qkv(const Tensor& x) {
  if (x.dim() != 3 || x.size(2) != config_.d_model)
    throw InvalidArgument("attention: input must be [B, T, d_model]");
  const auto B = x.size(0), T = x.size(1), H = config_.n_heads, dh = config_.d_model / H;
  auto heads = [&](const Tensor& y) { return y.view({B, T, H, dh}).transpose(1, 2); };
  return {heads(q_proj_->forward(x)), heads(k_proj_->forward(x)), heads(v_proj_->forward(x))};
}

Tensor AttentionImpl::merge(const Tensor& o) {
  const auto B = o.size(0), T = o.size(2);
  return o_proj_->forward(o.transpose(1, 2).reshape({B, T, config_.d_model}));
}

SoftmaxAttentionImpl::SoftmaxAttentionImpl(const AttentionConfig& config) : AttentionImpl(config) {}

Tensor SoftmaxAttentionImpl::forward(const Tensor& x) {
  auto qkv = project_qkv(x);
  if (x.size(1) == 0) return merge(qkv[2]);  // T = 0: the empty output [B, 0, d_model]
  Tensor q = qkv[0], k = qkv[1];
  if (config_.rope) {
    q = apply_rope(q, config_.rope_base);
    k = apply_rope(k, config_.rope_base);
  }
  Tensor o = config_.type == AttentionType::kSlidingWindow
                 ? sliding_window_attention(q, k, qkv[2], config_.window)
                 : causal_softmax_attention(q, k, qkv[2]);
  return merge(o);
}

LinearAttentionImpl::LinearAttentionImpl(const AttentionConfig& config) : AttentionImpl(config) {}

Tensor LinearAttentionImpl::forward(const Tensor& x) {
  auto qkv = project_qkv(x);
  if (x.size(1) == 0) return merge(qkv[2]);  // T = 0: the empty output [B, 0, d_model]
  return merge(linear_attention(qkv[0], qkv[1], qkv[2], config_.scan_chunk));
}

DeltaNetAttentionImpl::DeltaNetAttentionImpl(const AttentionConfig& config)
    : AttentionImpl(config) {
  beta_proj_ = register_module("beta_proj", torch::nn::Linear(config_.d_model, config_.n_heads));
}

Tensor DeltaNetAttentionImpl::forward(const Tensor& x) {
  auto qkv = project_qkv(x);
  if (x.size(1) == 0) return merge(qkv[2]);  // T = 0: the empty output [B, 0, d_model]
  Tensor q = F::normalize(qkv[0], F::NormalizeFuncOptions().dim(-1).eps(1e-6));
  Tensor k = F::normalize(qkv[1], F::NormalizeFuncOptions().dim(-1).eps(1e-6));
  Tensor beta = torch::sigmoid(beta_proj_->forward(x)).transpose(1, 2);  // [B, H, T]
  return merge(delta_rule(q, k, qkv[2], beta, config_.scan_chunk));
}

HybridSvAttentionImpl::HybridSvAttentionImpl(const AttentionConfig& config)
    : AttentionImpl(config) {
  const auto H = config_.n_heads;
  const auto& hs = config_.hybrid;
  Tensor ls = torch::full({H}, std::log(hs.problem.kernel.bandwidth));
  log_sigma_ =
      hs.learn_bandwidth ? register_parameter("log_sigma", ls) : register_buffer("log_sigma", ls);
  gate_bias_ = register_parameter("gate_bias", torch::full({H}, hs.gate_bias_init));
  gate_proj_ = register_module(
      "gate_proj", torch::nn::Linear(torch::nn::LinearOptions(config_.d_model, H).bias(false)));
  if (hs.gate == GateType::kPosition)
    gate_position_ = register_parameter("gate_position", torch::zeros({H, hs.chunk}));
  // Start the gate from its bias alone: the data-dependent part is learned.
  torch::NoGradGuard ng;
  gate_proj_->weight.zero_();
}

// Partition agreement and max |Δα| of the batched against the exact path (check_agreement).
void HybridSvAttentionImpl::record_agreement(const Tensor& batched_role,
                                             const Tensor& batched_alpha, const Tensor& exact_role,
                                             const Tensor& exact_alpha) {
  auto agree = partition_agreement(batched_role, exact_role);
  diag_.partition_agreement = agree.first;
  diag_.agreement_units = agree.second;
  diag_.coefficient_error =
      (batched_alpha.to(torch::kFloat64).cpu() - exact_alpha.to(torch::kFloat64).cpu())
          .abs()
          .max()
          .item<double>();
}

// Local path: causal softmax over b(t) <= s <= t (the chunk in chunk mode).
Tensor HybridSvAttentionImpl::local_path(const Tensor& q, const Tensor& k, const Tensor& v,
                                         Tensor* lz) const {
  const auto& hs = config_.hybrid;
  Tensor ql = q, kl = k;
  if (config_.rope) {
    ql = apply_rope(q, config_.rope_base);
    kl = apply_rope(k, config_.rope_base);
  }
  return memory_local_attention(ql, kl, v, hs.chunk, hs.min_local(), lz);
}

// Global path: query t reads the SV memory of the tokens s < b(t). The chunked solvers give query
// position u the memory of chunks 0..floor(u/L)-1, so query t is read at u = t - (W - 1) (W = 1
// in chunk mode: no shift); tokens from T - (W - 1) on are in no memory that is read, so the
// solvers see the first T - (W - 1) keys. Keeps the support summary when recording diagnostics.
Tensor HybridSvAttentionImpl::global_path(const Tensor& q, const Tensor& k, const Tensor& v,
                                          Tensor* lz) {
  const auto& h = config_.hybrid;
  const auto shift = h.min_local() - 1, Tm = q.size(2) - shift, L = h.chunk;
  const auto nc = (Tm + L - 1) / L;
  Tensor qs = q.narrow(2, shift, Tm), ks = k.narrow(2, 0, Tm), vm = v.narrow(2, 0, Tm);
  if (h.normalize_keys) {
    qs = F::normalize(qs, F::NormalizeFuncOptions().dim(-1).eps(1e-6));
    ks = F::normalize(ks, F::NormalizeFuncOptions().dim(-1).eps(1e-6));
  }
  Tensor lsig = h.learn_bandwidth ? log_sigma_ : Tensor();
  // The solvers' per-unit results are gathered only for a diagnostic that reads them.
  const bool want_info = record_diagnostics_ || h.certify || h.check_agreement ||
                         h.count_distinct_support;
  const support::Stopwatch watch;
  Tensor o_glob, support, role, alpha;
  if (h.path == GlobalPath::kExact) {
    ExactInfo info;
    o_glob = sv_exact_chunked_attention(ks, vm, qs, lsig, L, h.exact_settings(),
                                        want_info ? &info : nullptr, lz);
    support = info.support;
    role = info.role;
    alpha = info.alpha;
    if (h.certify) {
      Tensor checked = info.verified.narrow(2, 1, nc - 1);
      diag_.certified_units = (checked >= 0).sum().item<std::int64_t>();
      diag_.verified_units = (checked == 1).sum().item<std::int64_t>();
    }
    if (h.check_agreement) {
      torch::NoGradGuard ng;
      BatchedInfo bi;
      sv_batched_chunked_attention(ks.detach(), vm.detach(), qs.detach(),
                                   lsig.defined() ? lsig.detach() : lsig, L, h.batched_settings(),
                                   &bi);
      record_agreement(bi.role, bi.alpha, info.role, info.alpha);
    }
  } else {
    BatchedInfo info;
    o_glob = sv_batched_chunked_attention(ks, vm, qs, lsig, L, h.batched_settings(),
                                          want_info ? &info : nullptr, lz);
    support = info.support;
    role = info.role;
    alpha = info.alpha;
    if (record_diagnostics_) {
      diag_.fista_residual = info.residual;
      diag_.negative_coefficients = info.negative_coefficients;
    }
    if (h.check_agreement) {
      torch::NoGradGuard ng;
      ExactInfo ex;
      sv_exact_chunked_attention(ks.detach(), vm.detach(), qs.detach(),
                                 lsig.defined() ? lsig.detach() : lsig, L, h.exact_settings(), &ex);
      record_agreement(info.role, info.alpha, ex.role, ex.alpha);
    }
  }
  diag_.solver_seconds = watch.seconds();
  if (record_diagnostics_)  // [H], where the solver left it (host: exact; device: batched)
    pending_support_ = support.narrow(2, 1, nc - 1)
                           .to(torch::kFloat64)
                           .mean(std::vector<std::int64_t>{0, 2});
  if (h.count_distinct_support) {
    const DistinctSupport ds = distinct_support(ks, role, alpha, L);
    diag_.distinct_support_per_head = ds.distinct_per_head;
    diag_.duplicate_alpha_spread = ds.duplicate_alpha_spread;
    diag_.duplicate_support_tokens = ds.duplicate_support_tokens;
  }
  if (shift == 0) return o_glob;
  if (lz != nullptr)
    *lz =
        F::pad(*lz, F::PadFuncOptions({shift, 0}).value(-std::numeric_limits<double>::infinity()));
  return F::pad(o_glob, F::PadFuncOptions({0, 0, shift, 0}));
}

// Gate per head and token [B, H, T] before the b(t) > 0 mask (docs/layers.md §3).
Tensor HybridSvAttentionImpl::gate(const Tensor& x, const Tensor& mass) {
  const auto& hs = config_.hybrid;
  const auto B = x.size(0), T = x.size(1), H = config_.n_heads, L = hs.chunk;
  const auto nc = (T + L - 1) / L;
  auto opts = torch::TensorOptions().dtype(torch::kInt64).device(x.device());
  // u = t - (W - 1) clamped at 0: m(t) = floor(u / L) the memory read, p(t) = u mod L.
  Tensor u = torch::clamp_min(torch::arange(T, opts) - (hs.min_local() - 1), 0);
  if (hs.gate_override) return torch::full({B, H, T}, *hs.gate_override, x.options());
  if (hs.gate == GateType::kPerToken)
    return torch::sigmoid(gate_proj_->forward(x) + gate_bias_).transpose(1, 2);
  if (hs.gate == GateType::kJoint) return torch::sigmoid(mass + gate_bias_.view({1, H, 1}));
  if (hs.gate == GateType::kPosition) {
    Tensor pos = gate_position_.index_select(1, torch::remainder(u, L));  // [H, T]
    return torch::sigmoid(gate_proj_->forward(x).transpose(1, 2) + gate_bias_.view({1, H, 1}) +
                          pos.unsqueeze(0));
  }
  // Summary of chunk m-1 (mean of x), the last chunk the memory took in: causal.
  Tensor xp = F::pad(x.unsqueeze(1), F::PadFuncOptions({0, 0, 0, nc * L - T})).squeeze(1);
  Tensor counts = torch::full({nc}, static_cast<double>(L), x.options());
  counts[nc - 1] = static_cast<double>(T - (nc - 1) * L);
  Tensor summary = xp.view({B, nc, L, config_.d_model}).sum(2) / counts.view({1, nc, 1});
  Tensor prev =
      torch::cat({torch::zeros_like(summary.narrow(1, 0, 1)), summary.narrow(1, 0, nc - 1)}, 1);
  Tensor gc = torch::sigmoid(gate_proj_->forward(prev) + gate_bias_).transpose(1, 2);  // [B, H, nc]
  return gc.index_select(2, torch::div(u, L, "floor"));
}

Tensor HybridSvAttentionImpl::forward(const Tensor& x) {
  const auto& hs = config_.hybrid;
  auto qkv = project_qkv(x);
  const Tensor &q = qkv[0], &k = qkv[1], &v = qkv[2];
  const auto B = x.size(0), T = x.size(1), H = config_.n_heads;
  diag_ = AttentionDiagnostics{};
  pending_support_ = pending_gate_ = Tensor();
  if (T == 0) {  // the empty output [B, 0, d_model]; no memory, no gate
    last_gate_ = torch::zeros({B, H, 0}, x.options());
    if (record_diagnostics_) diag_.support_per_head.assign(static_cast<std::size_t>(H), 0.0);
    return merge(v);
  }
  const bool joint = hs.gate == GateType::kJoint && !hs.gate_override;
  Tensor lz_loc, lz_mem, mass;
  Tensor o_loc = local_path(q, k, v, joint ? &lz_loc : nullptr);
  const std::int64_t first_mem = hs.chunk + hs.min_local() - 1;  // first t with b(t) > 0
  if (!hs.memory || first_mem >= T) {
    last_gate_ = torch::zeros({B, H, T}, x.options());
    if (hs.memory && record_diagnostics_)
      diag_.support_per_head.assign(static_cast<std::size_t>(H), 0.0);
    return merge(o_loc);
  }
  Tensor o_glob = global_path(q, k, v, joint ? &lz_mem : nullptr);
  auto opts = torch::TensorOptions().dtype(torch::kInt64).device(x.device());
  Tensor mem_at = (torch::arange(T, opts) >= first_mem).view({1, 1, T});
  if (joint) mass = (lz_mem - lz_loc).masked_fill(~mem_at, 0.0);  // -inf before the first memory
  Tensor g = gate(x, mass) * mem_at.to(x.scalar_type());          // [B, H, T]
  last_gate_ = g.detach();
  if (record_diagnostics_)  // 0-dim on the input's device: read by diagnostics()
    pending_gate_ = g.detach().narrow(2, first_mem, T - first_mem).mean();
  Tensor gu = g.unsqueeze(-1);
  return merge(gu * o_glob + (1 - gu) * o_loc);
}

// The summaries a recorded forward left as tensors (possibly on the device): one host read each.
void HybridSvAttentionImpl::resolve_diagnostics() const {
  if (pending_support_.defined()) {
    const Tensor sup = pending_support_.to(torch::kCPU).contiguous();
    diag_.support_per_head.assign(sup.data_ptr<double>(), sup.data_ptr<double>() + sup.size(0));
    diag_.support_mean = sup.mean().item<double>();
    pending_support_ = Tensor();
  }
  if (pending_gate_.defined()) {
    diag_.gate_mean = pending_gate_.item<double>();
    pending_gate_ = Tensor();
  }
}

std::shared_ptr<AttentionImpl> make_attention(const AttentionConfig& config) {
  switch (config.type) {
    case AttentionType::kSoftmax:
    case AttentionType::kSlidingWindow:
      return std::make_shared<SoftmaxAttentionImpl>(config);
    case AttentionType::kLinear:
      return std::make_shared<LinearAttentionImpl>(config);
    case AttentionType::kDeltaNet:
      return std::make_shared<DeltaNetAttentionImpl>(config);
    case AttentionType::kHybrid:
      return std::make_shared<HybridSvAttentionImpl>(config);
  }
  throw InvalidArgument("make_attention: unknown attention type");
}

}  // namespace svattn::layers
