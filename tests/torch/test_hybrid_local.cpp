// The hybrid layer's local-path and gate options (docs/layers.md §3): the sliding local path against
// dense references, the memory boundary in window mode, the joint gate against one dense softmax,
// the memory-off ablation, and finite differences of the new paths on both global paths.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "svattn/errors.h"
#include "svattn/torch/layers.h"
#include "torch_test_util.h"

namespace svattn::layers {
namespace {

using torch::Tensor;
namespace F = torch::nn::functional;

auto f64() { return torch::TensorOptions().dtype(torch::kFloat64); }
double maxdiff(const Tensor& a, const Tensor& b) { return (a - b).abs().max().item<double>(); }

// Dense reference: per query t a softmax over the keys [lo(t), t]; also its logsumexp.
std::pair<Tensor, Tensor> dense_local(const Tensor& q, const Tensor& k, const Tensor& v,
                                      const std::function<int64_t(int64_t)>& lo) {
  const auto T = q.size(2);
  std::vector<Tensor> rows, lses;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t a = lo(t);
    Tensor s = torch::matmul(q.narrow(2, t, 1), k.narrow(2, a, t - a + 1).transpose(-1, -2)) /
               std::sqrt(double(q.size(3)));
    rows.push_back(torch::matmul(torch::softmax(s, -1), v.narrow(2, a, t - a + 1)));
    lses.push_back(torch::logsumexp(s, -1));
  }
  return {torch::cat(rows, 2), torch::cat(lses, 2)};
}

AttentionConfig window_config(GlobalPath path, GateType gate, int64_t chunk, int64_t w_loc) {
  AttentionConfig c;
  c.type = AttentionType::kHybrid;
  c.d_model = 16;
  c.n_heads = 2;
  c.hybrid.chunk = chunk;
  c.hybrid.local = LocalPath::kWindow;
  c.hybrid.local_window = w_loc;
  c.hybrid.path = path;
  c.hybrid.gate = gate;
  c.hybrid.problem.C = 0.2;
  c.hybrid.batched.iterations = 150;
  c.hybrid.batched.fp64 = true;
  return c;
}

// q, k, v [B, H, T, dh] of a module's projections.
std::vector<Tensor> project(torch::nn::Module& m, const Tensor& x, int64_t H) {
  auto p = m.named_parameters();
  const auto B = x.size(0), T = x.size(1), D = x.size(2);
  auto heads = [&](const Tensor& z) { return z.view({B, T, H, D / H}).transpose(1, 2); };
  return {heads(F::linear(x, p["q_proj.weight"])), heads(F::linear(x, p["k_proj.weight"])),
          heads(F::linear(x, p["v_proj.weight"]))};
}

Tensor out_proj(torch::nn::Module& m, const Tensor& o) {
  const auto B = o.size(0), T = o.size(2);
  return F::linear(o.transpose(1, 2).reshape({B, T, -1}), m.named_parameters()["o_proj.weight"]);
}

TEST(HybridLocalPath, SlidingLocalPathMatchesDenseReferences) {
  testing::set_threads();
  torch::manual_seed(81);
  const int64_t T = 23;
  Tensor q = torch::randn({2, 2, T, 4}, f64()), k = torch::randn({2, 2, T, 4}, f64());
  Tensor v = torch::randn({2, 2, T, 3}, f64());
  for (auto [L, W] : std::vector<std::pair<int64_t, int64_t>>{
           {4, 1}, {4, 2}, {4, 3}, {4, 5}, {4, 8}, {5, 2}, {3, 10}, {1, 5}, {7, 40}}) {
    HybridSettings hs;
    hs.chunk = L;
    hs.local = LocalPath::kWindow;
    hs.local_window = W;
    Tensor lse;
    Tensor o = memory_local_attention(q, k, v, L, W, &lse);
    auto ref = dense_local(q, k, v, [&](int64_t t) { return hs.memory_boundary(t); });
    EXPECT_LE(maxdiff(o, ref.first), 1e-12) << "L " << L << " W " << W;
    EXPECT_LE(maxdiff(lse, ref.second), 1e-12) << "L " << L << " W " << W;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t b = hs.memory_boundary(t);
      EXPECT_EQ(b % L, 0);
      EXPECT_LE(b, std::max<int64_t>(t - W + 1, 0)) << "the last W tokens are local";
      EXPECT_LE(t - b + 1, hs.local_width()) << "the local span is at most W + L - 1";
    }
  }
  // chunk 1: exactly the last W tokens (the memory is updated every token), the dense masked
  // softmax over (t - W, t] and the sliding-window baseline.
  for (int64_t W : {1, 3, 6, 30}) {
    auto ref = dense_local(q, k, v, [&](int64_t t) { return std::max<int64_t>(t - W + 1, 0); });
    EXPECT_LE(maxdiff(memory_local_attention(q, k, v, 1, W), ref.first), 1e-12) << W;
    EXPECT_LE(maxdiff(sliding_window_attention(q, k, v, W), ref.first), 1e-12) << W;
  }
  // W = 1 is the paper's chunk-local path, bit for bit.
  EXPECT_TRUE(torch::equal(memory_local_attention(q, k, v, 4, 1), chunk_local_attention(q, k, v, 4)));
}

// With the gate fixed at 1 a token's output is its memory read-out: perturbing token s changes the
// output at t > s exactly when s < b(t) (s is in the memory), never when s is in t's local span.
TEST(HybridLocalPath, WindowTokensAreNeverInTheMemoryOlderOnesAre) {
  testing::set_threads();
  for (auto path : {GlobalPath::kExact, GlobalPath::kBatched}) {
    torch::manual_seed(82);
    AttentionConfig c = window_config(path, GateType::kChunkFrozen, 4, 3);
    c.hybrid.problem.C = 1.0 / 16;  // memories of <= 16 tokens: every token held has alpha > 0
    c.hybrid.gate_override = 1.0;
    auto m = make_attention(c);
    m->to(torch::kFloat64);
    torch::NoGradGuard ng;
    const int64_t T = 22, first = c.hybrid.chunk + c.hybrid.local_window - 1;
    Tensor x = torch::randn({1, T, 16}, f64());
    Tensor y = m->forward(x);
    long in_memory = 0, local = 0;
    for (int64_t s = 0; s < T - 1; ++s) {
      Tensor x2 = x.clone();
      x2.narrow(1, s, 1).add_(torch::randn({1, 1, 16}, f64()));
      Tensor y2 = m->forward(x2);
      for (int64_t t = std::max(s + 1, first); t < T; ++t) {
        const double dy = maxdiff(y2.narrow(1, t, 1), y.narrow(1, t, 1));
        if (s < c.hybrid.memory_boundary(t)) {
          EXPECT_GT(dy, 1e-9) << to_string(path) << " s " << s << " t " << t;
          ++in_memory;
        } else {
          EXPECT_LE(dy, 1e-13) << to_string(path) << " s " << s << " t " << t;
          ++local;
        }
      }
    }
    EXPECT_GT(in_memory, 50);
    EXPECT_GT(local, 30);
  }
}

// The joint gate: one softmax over the memory logits log a_j - |q - x_j|^2 / sigma^2 + a_h and the
// local logits; the layer equals that dense softmax and its gate is the memory weights' sum.
TEST(HybridLocalPath, JointGateIsOneSoftmaxOverMemoryAndLocal) {
  testing::set_threads();
  for (auto path : {GlobalPath::kExact, GlobalPath::kBatched}) {
    torch::manual_seed(83);
    const int64_t T = 22, L = 4, W = 3, H = 2, shift = W - 1, Tm = T - shift;
    AttentionConfig c = window_config(path, GateType::kJoint, L, W);
    auto m = make_attention(c);
    m->to(torch::kFloat64);
    torch::NoGradGuard ng;
    m->named_parameters()["gate_bias"].copy_(torch::tensor({0.4, -0.7}, f64()));
    m->named_parameters()["log_sigma"].copy_(torch::tensor({0.1, -0.2}, f64()));
    Tensor x = torch::randn({2, T, 16}, f64());
    Tensor y = m->forward(x);
    auto hybrid = std::dynamic_pointer_cast<HybridSvAttentionImpl>(m);
    Tensor gate = hybrid->last_gate();
    auto qkv = project(*m, x, H);
    Tensor ql = apply_rope(qkv[0], c.rope_base), kl = apply_rope(qkv[1], c.rope_base);
    Tensor qs = F::normalize(qkv[0], F::NormalizeFuncOptions().dim(-1).eps(1e-6));
    Tensor ks = F::normalize(qkv[1], F::NormalizeFuncOptions().dim(-1).eps(1e-6));
    Tensor lsig = m->named_parameters()["log_sigma"];
    Tensor alpha, role;  // [B, H, nC, Tm]
    if (path == GlobalPath::kExact) {
      ExactInfo info;
      sv_exact_chunked_attention(ks.narrow(2, 0, Tm), qkv[2].narrow(2, 0, Tm), qs.narrow(2, shift, Tm),
                                 lsig, L, c.hybrid.exact_settings(), &info);
      alpha = info.alpha, role = info.role;
    } else {
      BatchedInfo info;
      sv_batched_chunked_attention(ks.narrow(2, 0, Tm), qkv[2].narrow(2, 0, Tm), qs.narrow(2, shift, Tm),
                                   lsig, L, c.hybrid.batched_settings(), &info);
      alpha = info.alpha.clamp_min(0), role = info.role;
    }
    Tensor o = torch::zeros({2, H, T, 8}, f64());
    const double inv_sqrt = 1.0 / std::sqrt(8.0);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < H; ++h) {
        const double sigma = std::exp(lsig[h].item<double>()), bias = h == 0 ? 0.4 : -0.7;
        for (int64_t t = 0; t < T; ++t) {
          const int64_t bt = c.hybrid.memory_boundary(t), mem = bt / L;
          std::vector<double> logit;
          std::vector<Tensor> vals;
          for (int64_t j = 0; j < bt; ++j) {
            if (role[b][h][mem][j].item<int>() == 0) continue;
            const double d2 = (qs[b][h][t] - ks[b][h][j]).pow(2).sum().item<double>();
            logit.push_back(std::log(alpha[b][h][mem][j].item<double>()) - d2 / (sigma * sigma) + bias);
            vals.push_back(qkv[2][b][h][j]);
          }
          const auto n_mem = logit.size();
          for (int64_t s = bt; s <= t; ++s) {
            logit.push_back((ql[b][h][t] * kl[b][h][s]).sum().item<double>() * inv_sqrt);
            vals.push_back(qkv[2][b][h][s]);
          }
          Tensor w = torch::softmax(torch::tensor(logit, f64()), 0);
          EXPECT_NEAR(w.sum().item<double>(), 1.0, 1e-12);
          EXPECT_NEAR(w.narrow(0, 0, n_mem).sum().item<double>(), gate[b][h][t].item<double>(), 1e-10)
              << to_string(path) << " t " << t;
          o[b][h][t] = torch::matmul(w, torch::stack(vals));
        }
      }
    EXPECT_LE(maxdiff(y, out_proj(*m, o)), 1e-10) << to_string(path);
    EXPECT_GT(gate.max().item<double>(), 0.0);
  }
}

// memory = off: the layer is its local path alone, bit for bit, in both modes; with chunk 1 the
// window mode is the sliding-window softmax model with the same weights.
TEST(HybridLocalPath, MemoryOffEqualsLocalSoftmaxModel) {
  testing::set_threads();
  torch::manual_seed(84);
  const int64_t T = 21;
  Tensor x = torch::randn({2, T, 16}, f64());
  for (auto local : {LocalPath::kChunk, LocalPath::kWindow}) {
    AttentionConfig c = window_config(GlobalPath::kExact, GateType::kPerToken, 4, 6);
    c.hybrid.local = local;
    c.hybrid.memory = false;
    auto m = make_attention(c);
    m->to(torch::kFloat64);
    torch::NoGradGuard ng;
    Tensor y = m->forward(x);
    auto qkv = project(*m, x, 2);
    Tensor ql = apply_rope(qkv[0], c.rope_base), kl = apply_rope(qkv[1], c.rope_base);
    Tensor o = local == LocalPath::kChunk ? chunk_local_attention(ql, kl, qkv[2], 4)
                                          : memory_local_attention(ql, kl, qkv[2], 4, 6);
    EXPECT_TRUE(torch::equal(y, out_proj(*m, o))) << to_string(local);
    EXPECT_TRUE(std::isnan(m->diagnostics().support_mean));
    EXPECT_EQ(std::dynamic_pointer_cast<HybridSvAttentionImpl>(m)->last_gate().abs().max().item<double>(), 0);
  }
  AttentionConfig c = window_config(GlobalPath::kExact, GateType::kChunkFrozen, 1, 5);
  c.hybrid.memory = false;
  AttentionConfig sw = c;
  sw.type = AttentionType::kSlidingWindow;
  sw.window = 5;
  auto m = make_attention(c), s = make_attention(sw);
  m->to(torch::kFloat64);
  s->to(torch::kFloat64);
  torch::NoGradGuard ng;
  auto sp = s->named_parameters();
  for (const char* name : {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"})
    sp[name].copy_(m->named_parameters()[name]);
  EXPECT_LE(maxdiff(m->forward(x), s->forward(x)), 1e-12);
  // Window mode with W_loc = 1 is chunk mode, memory on, bit for bit.
  AttentionConfig w1 = window_config(GlobalPath::kExact, GateType::kPosition, 4, 1);
  AttentionConfig ch = w1;
  ch.hybrid.local = LocalPath::kChunk;
  torch::manual_seed(85);
  auto a = make_attention(w1);
  torch::manual_seed(85);
  auto b = make_attention(ch);
  a->to(torch::kFloat64);
  b->to(torch::kFloat64);
  a->named_parameters()["gate_position"].normal_(0, 0.5);
  b->named_parameters()["gate_position"].copy_(a->named_parameters()["gate_position"]);
  EXPECT_TRUE(torch::equal(a->forward(x), b->forward(x)));
}

// fp64 central differences of the layer in window mode (position and joint gates) and of the
// chunk-mode joint gate, on both global paths, away from partition changes.
TEST(HybridLocalPath, FiniteDifferencesOfTheNewPaths) {
  testing::set_threads();
  struct Case {
    GlobalPath path;
    GateType gate;
    LocalPath local;
  };
  for (const Case& k : {Case{GlobalPath::kExact, GateType::kPosition, LocalPath::kWindow},
                        Case{GlobalPath::kExact, GateType::kJoint, LocalPath::kWindow},
                        Case{GlobalPath::kExact, GateType::kJoint, LocalPath::kChunk},
                        Case{GlobalPath::kBatched, GateType::kPosition, LocalPath::kWindow},
                        Case{GlobalPath::kBatched, GateType::kJoint, LocalPath::kWindow}}) {
    torch::manual_seed(86);
    const int64_t T = 14, L = 4, W = 3, H = 2;
    AttentionConfig c = window_config(k.path, k.gate, L, W);
    c.hybrid.local = k.local;
    const int64_t shift = c.hybrid.min_local() - 1, Tm = T - shift;
    auto m = make_attention(c);
    m->to(torch::kFloat64);
    {
      torch::NoGradGuard ng;
      for (auto& p : m->named_parameters())
        if (p.key().rfind("gate_", 0) == 0) p.value().normal_(0, 0.3);
    }
    Tensor x = torch::randn({1, T, 16}, f64()), wgt = torch::randn({1, T, 16}, f64());
    Tensor x1 = x.clone().requires_grad_(true);
    (m->forward(x1) * wgt).sum().backward();
    auto roles = [&] {
      auto qkv = project(*m, x, H);
      Tensor qs = F::normalize(qkv[0].narrow(2, shift, Tm), F::NormalizeFuncOptions().dim(-1).eps(1e-6));
      Tensor ks = F::normalize(qkv[1].narrow(2, 0, Tm), F::NormalizeFuncOptions().dim(-1).eps(1e-6));
      Tensor ls = m->named_parameters()["log_sigma"];
      if (k.path == GlobalPath::kExact) {
        ExactInfo info;
        sv_exact_chunked_attention(ks, qkv[2].narrow(2, 0, Tm), qs, ls, L, c.hybrid.exact_settings(), &info);
        return info.role;
      }
      BatchedInfo info;
      sv_batched_chunked_attention(ks, qkv[2].narrow(2, 0, Tm), qs, ls, L, c.hybrid.batched_settings(), &info);
      return info.role;
    };
    Tensor base;
    {
      torch::NoGradGuard ng;
      base = roles();
    }
    ASSERT_GE((base == 1).sum().item<int64_t>(), 2) << "the bordered system is exercised";
    auto f = [&] { return (m->forward(x) * wgt).sum().item<double>(); };
    auto stable = [&] { return torch::equal(roles(), base); };
    const std::string name = to_string(k.path) + "/" + to_string(k.local) + "/" + to_string(k.gate);
    std::vector<std::pair<std::string, std::pair<Tensor, Tensor>>> checks = {{"x", {x, x1.grad()}}};
    for (auto& p : m->named_parameters())
      if (p.key() == "log_sigma" || p.key().rfind("gate_", 0) == 0)
        if (p.value().grad().defined()) checks.push_back({p.key(), {p.value(), p.value().grad().clone()}});
    for (auto& [pname, xg] : checks) {
      const int64_t stride = xg.first.numel() > 100 ? 11 : xg.first.numel() > 16 ? 4 : 1;
      auto r = testing::finite_difference(xg.first, xg.second, f, stable, 1e-6, stride);
      std::printf("[hybrid FD] %-26s %-20s rel err %.3e (checked %ld, skipped %ld)\n", name.c_str(),
                  pname.c_str(), r.rel_error, r.checked, r.skipped);
      EXPECT_LE(r.rel_error, 1e-6) << name << " " << pname;
      EXPECT_GE(r.checked, (xg.first.numel() + stride - 1) / stride * 3 / 4) << name << " " << pname;
    }
  }
}

TEST(HybridLocalPath, SettingsNamesAndValidation) {
  for (auto g : {GateType::kChunkFrozen, GateType::kPerToken, GateType::kPosition, GateType::kJoint})
    EXPECT_EQ(gate_type_from_string(to_string(g)), g);
  for (auto l : {LocalPath::kChunk, LocalPath::kWindow}) EXPECT_EQ(local_path_from_string(to_string(l)), l);
  EXPECT_THROW(local_path_from_string("sliding"), InvalidArgument);
  EXPECT_THROW(gate_type_from_string("mixed"), InvalidArgument);
  HybridSettings hs;
  hs.local_window = 0;
  try {
    hs.validate();
    ADD_FAILURE() << "local_window 0 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("hybrid.local_window"), std::string::npos) << e.what();
  }
  hs.local_window = 64;
  hs.chunk = 64;
  EXPECT_EQ(hs.local_width(), 64);  // chunk mode: the chunk
  hs.local = LocalPath::kWindow;
  EXPECT_EQ(hs.local_width(), 127);
  EXPECT_EQ(hs.memory_boundary(126), 0);
  EXPECT_EQ(hs.memory_boundary(127), 64);
  EXPECT_EQ(state_matched_window(hs.local_width(), 30.4), 157);
}

}  // namespace
}  // namespace svattn::layers
