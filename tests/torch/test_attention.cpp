// Attention modules: naive references, causality, hybrid gate 0 == local, LM wrapper, eviction utils.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <cstdio>

#include "svattn/errors.h"
#include "svattn/torch/layers.h"
#include "torch_test_util.h"

namespace svattn::layers {
namespace {

using torch::Tensor;
namespace F = torch::nn::functional;

auto f64() { return torch::TensorOptions().dtype(torch::kFloat64); }

// Naive per-token softmax over the keys [lo(t), t].
Tensor naive_softmax(const Tensor& q, const Tensor& k, const Tensor& v, const std::function<int64_t(int64_t)>& lo) {
  const auto T = q.size(2);
  std::vector<Tensor> rows;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t a = lo(t);
    Tensor s = torch::matmul(q.narrow(2, t, 1), k.narrow(2, a, t - a + 1).transpose(-1, -2)) / std::sqrt(double(q.size(3)));
    rows.push_back(torch::matmul(torch::softmax(s, -1), v.narrow(2, a, t - a + 1)));
  }
  return torch::cat(rows, 2);
}

double maxdiff(const Tensor& a, const Tensor& b) { return (a - b).abs().max().item<double>(); }

TEST(Baselines, MatchNaiveReferences) {
  torch::manual_seed(31);
  const int64_t B = 2, H = 3, T = 37, dh = 6, dv = 5;
  Tensor q = torch::randn({B, H, T, dh}, f64()), k = torch::randn({B, H, T, dh}, f64());
  Tensor v = torch::randn({B, H, T, dv}, f64());
  EXPECT_LE(maxdiff(causal_softmax_attention(q, k, v), naive_softmax(q, k, v, [](int64_t) { return 0; })), 1e-12);
  for (int64_t W : {1, 5, 8, 18, 20, 36, 50}) {  // blocked (2W < T), banded (2W >= T), full (W >= T)
    Tensor ref = naive_softmax(q, k, v, [W](int64_t t) { return std::max<int64_t>(0, t - W + 1); });
    EXPECT_LE(maxdiff(sliding_window_attention(q, k, v, W), ref), 1e-12) << "W=" << W;
  }
  for (int64_t L : {1, 5, 8, 37}) {
    Tensor ref = naive_softmax(q, k, v, [L](int64_t t) { return t / L * L; });
    EXPECT_LE(maxdiff(chunk_local_attention(q, k, v, L), ref), 1e-12) << "L=" << L;
  }
  // Linear attention: o_t = sum_s (phi q_t . phi k_s) v_s / (sum_s phi q_t . phi k_s + 1e-6).
  {
    Tensor fq = F::elu(q) + 1, fk = F::elu(k) + 1;
    std::vector<Tensor> rows;
    for (int64_t t = 0; t < T; ++t) {
      Tensor a = torch::matmul(fq.narrow(2, t, 1), fk.narrow(2, 0, t + 1).transpose(-1, -2));
      rows.push_back(torch::matmul(a, v.narrow(2, 0, t + 1)) / (a.sum(-1, true) + 1e-6));
    }
    Tensor ref = torch::cat(rows, 2);
    for (int64_t c : {1, 4, 16, 64}) EXPECT_LE(maxdiff(linear_attention(q, k, v, c), ref), 1e-12) << "chunk " << c;
  }
  // DeltaNet: recurrent delta rule.
  {
    Tensor kn = F::normalize(k, F::NormalizeFuncOptions().dim(-1));
    Tensor qn = F::normalize(q, F::NormalizeFuncOptions().dim(-1));
    Tensor beta = torch::sigmoid(torch::randn({B, H, T}, f64()));
    Tensor S = torch::zeros({B, H, dv, dh}, f64());
    std::vector<Tensor> rows;
    for (int64_t t = 0; t < T; ++t) {
      Tensor kt = kn.select(2, t).unsqueeze(-1), vt = v.select(2, t).unsqueeze(-1);
      Tensor bt = beta.select(2, t).unsqueeze(-1).unsqueeze(-1);
      S = S + bt * torch::matmul(vt - torch::matmul(S, kt), kt.transpose(-1, -2));
      rows.push_back(torch::matmul(S, qn.select(2, t).unsqueeze(-1)).squeeze(-1).unsqueeze(2));
    }
    Tensor ref = torch::cat(rows, 2);
    for (int64_t c : {1, 5, 16, 64}) EXPECT_LE(maxdiff(delta_rule(qn, kn, v, beta, c), ref), 1e-11) << "chunk " << c;
  }
}

TEST(Baselines, RopeIsRelative) {
  torch::manual_seed(32);
  Tensor a = torch::randn({1, 1, 1, 8}, f64()), b = torch::randn({1, 1, 1, 8}, f64());
  Tensor xa = apply_rope(a.expand({1, 1, 20, 8}).contiguous(), 100.0);
  Tensor xb = apply_rope(b.expand({1, 1, 20, 8}).contiguous(), 100.0);
  auto dot = [&](int64_t m, int64_t n) { return (xa[0][0][m] * xb[0][0][n]).sum().item<double>(); };
  EXPECT_NEAR(dot(7, 3), dot(14, 10), 1e-12);
  EXPECT_NEAR(dot(0, 0), (a * b).sum().item<double>(), 1e-12);
  EXPECT_GT(std::abs(dot(7, 3) - dot(7, 4)), 1e-6);
}

AttentionConfig small_config(AttentionType type) {
  AttentionConfig c;
  c.type = type;
  c.d_model = 32;
  c.n_heads = 4;
  c.window = 8;
  c.scan_chunk = 8;
  c.hybrid.chunk = 8;
  c.hybrid.problem.C = 0.1;
  c.hybrid.batched.iterations = 100;
  return c;
}

std::vector<std::pair<std::string, AttentionConfig>> all_configs() {
  std::vector<std::pair<std::string, AttentionConfig>> out;
  for (auto t : {AttentionType::kSoftmax, AttentionType::kSlidingWindow, AttentionType::kLinear,
                 AttentionType::kDeltaNet})
    out.emplace_back(to_string(t), small_config(t));
  for (auto path : {GlobalPath::kBatched, GlobalPath::kExact})
    for (auto gate : {GateType::kChunkFrozen, GateType::kPerToken})
      for (bool bounded : {false, true}) {
        AttentionConfig c = small_config(AttentionType::kHybrid);
        c.hybrid.path = path;
        c.hybrid.gate = gate;
        c.hybrid.bounded = bounded;
        out.emplace_back("hybrid/" + to_string(path) + "/" + to_string(gate) + (bounded ? "/bounded" : ""), c);
      }
  for (auto path : {GlobalPath::kBatched, GlobalPath::kExact})
    for (auto gate : {GateType::kChunkFrozen, GateType::kPosition, GateType::kJoint}) {
      AttentionConfig c = small_config(AttentionType::kHybrid);
      c.hybrid.path = path;
      c.hybrid.gate = gate;
      c.hybrid.local = LocalPath::kWindow;
      c.hybrid.local_window = 5;
      out.emplace_back("hybrid/window/" + to_string(path) + "/" + to_string(gate), c);
    }
  return out;
}

TEST(AttentionModules, EveryModuleIsStrictlyCausal) {
  testing::set_threads();
  for (const auto& [name, cfg] : all_configs()) {
    torch::manual_seed(33);
    auto m = make_attention(cfg);
    m->to(torch::kFloat64);
    {  // Non-zero gate projection so that the gate depends on the data.
      torch::NoGradGuard ng;
      for (auto& p : m->named_parameters())
        if (p.key().find("gate_proj") != std::string::npos) p.value().normal_(0, 0.3);
    }
    torch::NoGradGuard ng;
    const int64_t T = 29;
    Tensor x = torch::randn({2, T, 32}, f64());
    Tensor y = m->forward(x);
    ASSERT_EQ(y.sizes(), x.sizes()) << name;
    ASSERT_TRUE(torch::isfinite(y).all().item<bool>()) << name;
    for (int64_t t : {0, 6, 7, 8, 15, 21, 27}) {
      Tensor x2 = x.clone();
      x2.narrow(1, t + 1, 1).add_(torch::randn({2, 1, 32}, f64()));
      Tensor y2 = m->forward(x2);
      EXPECT_LE(maxdiff(y2.narrow(1, 0, t + 1), y.narrow(1, 0, t + 1)), 1e-12) << name << " t=" << t;
      EXPECT_GT(maxdiff(y2.narrow(1, t + 1, 1), y.narrow(1, t + 1, 1)), 1e-6) << name << " t=" << t;
    }
  }
}

// T = 0 is an empty sequence: every module returns the empty output [B, 0, d_model] (the hybrid
// and DeltaNet used to fail inside their paths).
TEST(AttentionModules, EmptySequenceGivesEmptyOutput) {
  testing::set_threads();
  for (const auto& [name, cfg] : all_configs()) {
    auto m = make_attention(cfg);
    m->to(torch::kFloat64);
    Tensor x = torch::randn({2, 0, 32}, f64()).requires_grad_(true);
    Tensor y = m->forward(x);
    EXPECT_EQ(y.sizes(), x.sizes()) << name;
    y.sum().backward();
  }
}

// The ops' entry refuses what would give NaN silently: no keys, non-finite keys, values or
// queries, and (exact path, key gradient wanted) equal keys with ridge 0.
TEST(AttentionOps, EntryRefusesEmptyAndNonFiniteInputs) {
  testing::set_threads();
  Tensor q = torch::randn({1, 2, 3, 4}, f64()), k = torch::randn({1, 2, 6, 4}, f64());
  Tensor v = torch::randn({1, 2, 6, 2}, f64());
  ExactSettings es;
  BatchedSettings bs;
  const auto refuses = [](const std::function<void()>& f, const std::string& what) {
    try {
      f();
      ADD_FAILURE() << "accepted: " << what;
    } catch (const svattn::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  Tensor k0 = k.narrow(2, 0, 0), v0 = v.narrow(2, 0, 0);
  refuses([&] { sv_exact_attention(k0, v0, q, Tensor(), es); }, "at least one key");
  refuses([&] { sv_batched_attention(k0, v0, q, Tensor(), bs); }, "at least one key");
  Tensor kn = k.clone();
  kn[0][1][2][0] = std::nan("");
  refuses([&] { sv_exact_attention(kn, v, q, Tensor(), es); }, "keys must be finite");
  refuses([&] { sv_batched_attention(kn, v, q, Tensor(), bs); }, "keys must be finite");
  refuses([&] { sv_batched_chunked_attention(kn, v, kn, Tensor(), 2, bs); }, "keys must be finite");
  Tensor qn = q.clone();
  qn[0][0][1][3] = INFINITY;
  refuses([&] { sv_batched_attention(k, v, qn, Tensor(), bs); }, "queries must be finite");
  Tensor kd = k.clone();
  kd[0][0][4] = kd[0][0][2];
  kd.requires_grad_(true);
  es.problem.ridge = 0;
  refuses([&] { sv_exact_attention(kd, v, q, Tensor(), es); }, "keys 2 and 4 of (b 0, h 0)");
  es.problem.ridge = 1e-6;
  Tensor o = sv_exact_attention(kd, v, q, Tensor(), es);
  o.sum().backward();
  EXPECT_TRUE(torch::isfinite(kd.grad()).all().item<bool>());
}

TEST(AttentionModules, HybridWithGateZeroIsLocalAttention) {
  testing::set_threads();
  torch::manual_seed(34);
  for (auto path : {GlobalPath::kBatched, GlobalPath::kExact}) {
    AttentionConfig c = small_config(AttentionType::kHybrid);
    c.hybrid.path = path;
    c.hybrid.gate_override = 0.0;
    auto m = make_attention(c);
    m->to(torch::kFloat64);
    m->set_record_diagnostics(true);
    Tensor x = torch::randn({2, 27, 32}, f64());
    Tensor y = m->forward(x);
    auto params = m->named_parameters();
    auto heads = [](const Tensor& z) { return z.view({2, 27, 4, 8}).transpose(1, 2); };
    Tensor q = heads(F::linear(x, params["q_proj.weight"])), k = heads(F::linear(x, params["k_proj.weight"]));
    Tensor v = heads(F::linear(x, params["v_proj.weight"]));
    Tensor o = chunk_local_attention(apply_rope(q, c.rope_base), apply_rope(k, c.rope_base), v, 8);
    Tensor ref = F::linear(o.transpose(1, 2).reshape({2, 27, 32}), params["o_proj.weight"]);
    EXPECT_TRUE(torch::equal(y, ref)) << to_string(path) << " max diff " << maxdiff(y, ref);
    // The global path did run: its support is reported.
    EXPECT_GE(m->diagnostics().support_mean, 1.0 / c.hybrid.problem.C - 1e-9);
  }
}

TEST(AttentionModules, HybridDiagnosticsAndGradients) {
  testing::set_threads();
  torch::manual_seed(35);
  AttentionConfig c = small_config(AttentionType::kHybrid);
  c.hybrid.check_agreement = true;
  c.hybrid.batched.iterations = 600;
  c.hybrid.batched.mask_tol = 1e-4;
  auto m = make_attention(c);
  m->to(torch::kFloat64);
  m->set_record_diagnostics(true);
  Tensor x = torch::randn({2, 40, 32}, f64());
  Tensor y = m->forward(x);
  const auto& d = m->diagnostics();
  ASSERT_EQ(d.support_per_head.size(), 4u);
  EXPECT_NEAR(d.gate_mean, 0.5, 1e-12);  // gate projection starts at 0, bias 0
  EXPECT_GE(d.partition_agreement, 0.0);
  EXPECT_LE(d.partition_agreement, 1.0);
  EXPECT_EQ(d.agreement_units, 2 * 4 * 4);
  EXPECT_LE(d.fista_residual, 1e-6);
  std::printf("[hybrid] support/head %.1f %.1f %.1f %.1f, gate %.3f, agreement %.3f (%ld), coef err %.2e, "
              "residual %.1e\n", d.support_per_head[0], d.support_per_head[1], d.support_per_head[2],
              d.support_per_head[3], d.gate_mean, d.partition_agreement, d.agreement_units, d.coefficient_error,
              d.fista_residual);
  y.pow(2).sum().backward();
  for (const auto& p : m->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_TRUE(torch::isfinite(p.value().grad()).all().item<bool>()) << p.key();
    if (p.key() != "gate_proj.weight") EXPECT_GT(p.value().grad().abs().max().item<double>(), 0) << p.key();
  }
  // Exact path: gradients reach the bandwidth and the projections too.
  c.hybrid.path = GlobalPath::kExact;
  c.hybrid.gate = GateType::kPerToken;
  auto e = make_attention(c);
  e->to(torch::kFloat64);
  e->forward(x).pow(2).sum().backward();
  EXPECT_GT(e->named_parameters()["log_sigma"].grad().abs().max().item<double>(), 0);
  EXPECT_GT(e->named_parameters()["gate_proj.weight"].grad().abs().max().item<double>(), 0);
  // On the exact path check_agreement runs the batched path beside it, and certify verifies every
  // memory (2 sequences x 4 heads x 4 chunks with a memory).
  const auto& de = e->diagnostics();
  EXPECT_EQ(de.agreement_units, 2 * 4 * 4);
  EXPECT_GE(de.partition_agreement, 0.0);
  EXPECT_LE(de.partition_agreement, 1.0);
  EXPECT_EQ(de.certified_units, 0);
  c.hybrid.certify = true;
  auto ce = make_attention(c);
  ce->to(torch::kFloat64);
  ce->forward(x);
  EXPECT_EQ(ce->diagnostics().certified_units, 2 * 4 * 4);
  EXPECT_EQ(ce->diagnostics().verified_units, 2 * 4 * 4);
  std::printf("[hybrid exact] agreement with batched %.3f (%ld), coef err %.2e, verified %ld of %ld\n",
              de.partition_agreement, de.agreement_units, de.coefficient_error,
              ce->diagnostics().verified_units, ce->diagnostics().certified_units);
}

// Diagnostics are opt-in (docs/layers.md "GPU"): a forward with recording off leaves the support
// and gate summaries unset on both paths, one with it on fills them, and a later forward with it
// off clears them again; the output does not depend on the setting.
TEST(AttentionModules, HybridDiagnosticsAreOptIn) {
  testing::set_threads();
  torch::manual_seed(36);
  for (auto path : {GlobalPath::kExact, GlobalPath::kBatched}) {
    AttentionConfig c = small_config(AttentionType::kHybrid);
    c.hybrid.path = path;
    auto m = make_attention(c);
    m->to(torch::kFloat64);
    EXPECT_FALSE(m->record_diagnostics());
    torch::NoGradGuard ng;
    Tensor x = torch::randn({2, 27, 32}, f64());
    Tensor off = m->forward(x);
    EXPECT_TRUE(m->diagnostics().support_per_head.empty()) << to_string(path);
    EXPECT_TRUE(std::isnan(m->diagnostics().support_mean)) << to_string(path);
    EXPECT_TRUE(std::isnan(m->diagnostics().gate_mean)) << to_string(path);
    EXPECT_TRUE(std::isnan(m->diagnostics().fista_residual)) << to_string(path);
    m->set_record_diagnostics(true);
    Tensor on = m->forward(x);
    EXPECT_TRUE(torch::equal(off, on)) << to_string(path);
    const auto& d = m->diagnostics();
    ASSERT_EQ(d.support_per_head.size(), 4u) << to_string(path);
    EXPECT_GE(d.support_mean, 1.0 / c.hybrid.problem.C - 1e-9) << to_string(path);
    EXPECT_NEAR(d.gate_mean, 0.5, 1e-12) << to_string(path);  // gate starts at sigmoid(0)
    EXPECT_EQ(std::isnan(d.fista_residual), path == GlobalPath::kExact) << to_string(path);
    // A second read returns the same values (read once from the forward's tensors).
    EXPECT_EQ(m->diagnostics().support_mean, d.support_mean);
    m->set_record_diagnostics(false);
    m->forward(x);
    EXPECT_TRUE(m->diagnostics().support_per_head.empty()) << to_string(path);
    EXPECT_TRUE(std::isnan(m->diagnostics().gate_mean)) << to_string(path);
  }
}

// The problem lives once in HybridSettings; a nested batched.problem that
// differs is rejected (never silently replaced), and every message has the core's format.
TEST(AttentionSettings, ProblemOnceAndOneMessageFormat) {
  auto message = [](const auto& settings) {
    try {
      settings.validate();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  HybridSettings h;
  EXPECT_EQ(message(h), "");
  EXPECT_EQ(h.problem.C, 1.0 / 16);
  EXPECT_EQ(h.batched_settings().problem.C, 1.0 / 16);
  EXPECT_EQ(h.exact_settings().problem.ridge, 1e-6);
  h.batched.problem.C = 0.5;
  EXPECT_EQ(message(h).rfind("hybrid.batched.problem must be left at its defaults", 0), 0u) << message(h);
  h.batched.problem = h.problem;
  EXPECT_EQ(message(h), "");
  h.certify = true;  // the batched path carries no certificate
  EXPECT_EQ(message(h).rfind("hybrid.certify must be false on the batched path", 0), 0u) << message(h);
  h.path = GlobalPath::kExact;
  EXPECT_EQ(message(h), "");
  EXPECT_TRUE(h.exact_settings().certify);
  h.certify = false;
  h.path = GlobalPath::kBatched;
  h.problem.C = -1;
  EXPECT_EQ(message(h), "hybrid.problem.C must be finite and > 0, got -1");
  BatchedSettings b;
  b.solve_ridge = -2;
  EXPECT_EQ(message(b), "solve_ridge must be finite and >= 0, got -2");
  b = BatchedSettings{};
  b.problem.kernel.type = KernelType::kLinear;
  EXPECT_EQ(message(b), "problem.kernel.type must be rbf on the torch paths, got linear");
  ExactSettings e;
  e.problem.kernel.bandwidth = 0;
  EXPECT_EQ(message(e),
            "problem.kernel.bandwidth must be finite and in [1.5e-154, 1.3e+154] (bandwidth^2 must "
            "be a normal fp64 number), got 0");
}

TEST(LanguageModel, ShapesParametersAndCausality) {
  testing::set_threads();
  torch::manual_seed(36);
  for (auto type : {AttentionType::kSoftmax, AttentionType::kHybrid, AttentionType::kDeltaNet}) {
    LmConfig cfg;
    cfg.n_layers = 2;
    cfg.attention = small_config(type);
    CharLm lm(cfg);
    LmConfig untied = cfg;
    untied.tied_head = false;
    CharLm lm2(untied);
    EXPECT_EQ(count_parameters(*lm2) - count_parameters(*lm), 256 * 32);
    Tensor tok = torch::randint(0, 256, {2, 20}, torch::kInt64);
    Tensor logits = lm->forward(tok);
    ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{2, 20, 256}));
    Tensor loss = F::cross_entropy(logits.reshape({-1, 256}), tok.reshape({-1}));
    loss.backward();
    EXPECT_TRUE(std::isfinite(loss.item<double>()));
    Tensor tok2 = tok.clone();
    tok2[0][12] = (tok2[0][12].item<int64_t>() + 1) % 256;
    torch::NoGradGuard ng;
    Tensor l1 = lm->forward(tok), l2 = lm->forward(tok2);
    EXPECT_LE(maxdiff(l1.narrow(1, 0, 12), l2.narrow(1, 0, 12)), 1e-5) << to_string(type);
    EXPECT_GT(maxdiff(l1.narrow(1, 12, 1), l2.narrow(1, 12, 1)), 1e-6) << to_string(type);
    EXPECT_EQ(lm->diagnostics().size(), 2u);
  }
  EXPECT_EQ(state_matched_window(64, 13.6), 78);
  EXPECT_THROW(state_matched_window(0, 1), InvalidArgument);
  LmConfig bad;
  bad.attention.n_heads = 5;
  EXPECT_THROW(bad.validate(), InvalidArgument);
  EXPECT_THROW(attention_type_from_string("mamba"), InvalidArgument);
  EXPECT_EQ(attention_type_from_string("swa"), AttentionType::kSlidingWindow);
}

TEST(Eviction, H2oAndCoefficientDecay) {
  torch::manual_seed(37);
  Tensor q = torch::randn({2, 10, 4}, f64()), k = torch::randn({2, 10, 4}, f64());
  Tensor s = h2o_scores(q, k, /*causal=*/true);
  EXPECT_NEAR(s.sum().item<double>(), 20.0, 1e-12);  // every query's probabilities sum to 1
  EXPECT_NEAR(s[0][9].item<double>(), torch::softmax(torch::matmul(q[0][9], k[0].t()) / 2.0, -1)[9].item<double>(), 1e-12);
  Tensor oracle = h2o_scores(q, k, /*causal=*/false);
  EXPECT_GT(maxdiff(oracle, s), 1e-3);
  Tensor scores = torch::tensor({{0.5, 3.0, 0.1, 2.0, 0.2, 9.0, 0.0}}, f64());
  Tensor keep = h2o_keep_mask(scores, 2, 2);
  EXPECT_TRUE(torch::equal(keep, torch::tensor({{false, true, false, true, false, true, true}})));
  EXPECT_EQ(h2o_keep_mask(scores, 10, 3).sum().item<int64_t>(), 7);
  Tensor alpha = torch::tensor({0.1, 0.2, 0.3, 0.4}, f64());
  Tensor del = torch::tensor({false, true, false, false});
  Tensor z = coefficient_decay(alpha, del, 0.0);
  EXPECT_NEAR(z.sum().item<double>(), 1.0, 1e-15);
  EXPECT_EQ(z[1].item<double>(), 0.0);
  EXPECT_NEAR(z[3].item<double>(), 0.5, 1e-15);
  Tensor h = coefficient_decay(alpha, del, 0.5);
  EXPECT_NEAR(h[1].item<double>(), 0.1 / 0.9, 1e-15);
  EXPECT_THROW(coefficient_decay(alpha, del, 1.0), InvalidArgument);
}

}  // namespace
}  // namespace svattn::layers
