// The exact path's lean solver against the core memory (partitions, coefficients, b, the
// verifier) on random and trained-like keys, and the exact path on it: backward against fp64
// finite differences and against the core memory's path, a short training run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "svattn/certificate.h"
#include "svattn/errors.h"
#include "svattn/hash.h"
#include "svattn/io.h"
#include "svattn/memory.h"
#include "svattn/torch/exact.h"
#include "svattn/torch/lean_solver.h"
#include "torch_test_util.h"

namespace svattn::layers {
namespace {

using torch::Tensor;
auto f64() { return torch::TensorOptions().dtype(torch::kFloat64); }

struct Fixture {
  std::string name;
  Tensor keys;  // [n, d] fp64
  double C = 1.0 / 16, sigma = 1.0;
  int chunk = 16;
  bool bounded = false;
  bool duplicates = false;  // the keys hold exact repeats
};

struct Tally {
  long states = 0, empty_margin = 0, warmup = 0, fallbacks = 0;
  double max_dalpha = 0, max_db = 0;
};

// S = ∅: the largest distance of either b outside the feasible interval [lo, hi] of the tokens
// (h_i = g_i - b from the core state's coefficients) and, with `midpoint`, of the lean b from the
// interval's midpoint (an eviction keeps b where it was).
double b_interval_check(const ProblemSettings& p, const TokenSet& held, const State& lean,
                        const State& core, bool midpoint) {
  double lo = -INFINITY, hi = INFINITY;
  for (std::size_t i = 0; i < core.ids.size(); ++i) {
    double h = p.ridge * core.alpha[i] - 0.5;
    for (std::size_t j = 0; j < core.ids.size(); ++j)
      if (core.alpha[j] != 0) h += kernel(p.kernel, held.keys.row(i), held.keys.row(j)) * core.alpha[j];
    if (core.alpha[i] == 0) lo = std::max(lo, -h);
    else hi = std::min(hi, -h);
  }
  const double mid = std::isfinite(lo) ? (lo + hi) / 2 : hi;
  double out = midpoint ? std::abs(lean.b - mid) : 0.0;
  for (double b : {lean.b, core.b}) out = std::max({out, lo - b, b - hi});
  return out;
}

TokenSet rows(const Tensor& keys, int begin, int end) {
  TokenSet ts;
  const int n = end - begin, d = static_cast<int>(keys.size(1));
  for (int i = begin; i < end; ++i) ts.ids.push_back(i);
  ts.keys = Eigen::Map<const RowMatrix>(keys.data_ptr<double>() + begin * d, n, d);
  ts.values = RowMatrix::Zero(n, 1);
  return ts;
}

// Adds the fixture chunk by chunk to a LeanSolver and to a core Memory (audit mode); after every
// chunk the two states must have the same partition, status and warm-up flag, coefficients
// within 1e-12 (keys with exact repeats: see below) and b within 1e-12 (S = ∅: see below), and the
// core's verifier must accept the lean state (with its hash) on the tokens held.
void expect_lean_equals_memory(const Fixture& f, Tally* tally) {
  ProblemSettings p;
  p.C = f.C;
  p.ridge = 1e-6;
  p.kernel.bandwidth = f.sigma;
  const int n = static_cast<int>(f.keys.size(0)), d = static_cast<int>(f.keys.size(1));
  LeanSolver lean;
  lean.reset(p, d, 8);  // grows past its first capacity
  MemorySettings ms;
  ms.problem = p;
  Memory mem(ms, d, 1);
  for (int begin = 0; begin < n; begin += f.chunk) {
    const int end = std::min(n, begin + f.chunk);
    lean.add(f.keys.data_ptr<double>() + begin * d, begin, end - begin);
    mem.add_batch(rows(f.keys, begin, end));
    if (f.bounded) {
      lean.evict_reserve();
      mem.evict_reserve();
    }
    State a = lean.state(1);
    const State e = mem.state();
    const std::string at = f.name + " after " + std::to_string(end) + " tokens";
    ASSERT_EQ(a.ids, e.ids) << at;
    EXPECT_EQ(a.status, e.status) << at;
    EXPECT_EQ(a.warmup, e.warmup) << at;
    EXPECT_TRUE(a.partition == e.partition)
        << at << ": margin " << a.partition.margin.size() << " vs " << e.partition.margin.size()
        << ", error " << a.partition.error.size() << " vs " << e.partition.error.size();
    double da = 0;
    for (std::size_t i = 0; i < a.alpha.size(); ++i) da = std::max(da, std::abs(a.alpha[i] - e.alpha[i]));
    const TokenSet held = mem.tokens();
    std::vector<int> order(held.ids.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    a.state_sha256 = canonical_sha256(p, held, order, a.alpha, a.b);
    const VerifyReport va = verify_state(held, a, Tolerances{}, false);
    const VerifyReport ve = verify_state(held, e, Tolerances{}, false);
    EXPECT_TRUE(va.ok()) << at;  // the core's verifier accepts the lean state
    // Exact repeats put eigenvalues mu into the margin system: two points whose KKT residuals are
    // r_lean and r_core may then differ by about (r_lean + r_core) / mu (the residuals print).
    const double tol =
        f.duplicates ? 1e-12 + 2 * (va.kkt.max_violation + ve.kkt.max_violation) / p.ridge : 1e-12;
    EXPECT_LE(da, tol) << at << ": KKT residual lean " << va.kkt.max_violation << ", core "
                       << ve.kkt.max_violation;
    if (a.warmup || !a.partition.margin.empty()) {
      EXPECT_LE(std::abs(a.b - e.b), 1e-12) << at;
    } else if (!a.ids.empty()) {
      // S = ∅: b is any point of [max_R(-h_i), min_E(-h_i)]; the lean solver takes the midpoint
      // (docs/math.md §3 step 5), the core keeps its b while an add only joins the reserve.
      const double h = b_interval_check(p, held, a, e, !f.bounded);
      EXPECT_LE(h, 1e-12) << at;
    }
    ++tally->states;
    tally->empty_margin += !a.warmup && a.partition.margin.empty() && !a.ids.empty();
    tally->warmup += a.warmup;
    tally->max_dalpha = std::max(tally->max_dalpha, da);
    if (!a.partition.margin.empty()) tally->max_db = std::max(tally->max_db, std::abs(a.b - e.b));
  }
  tally->fallbacks += lean.fallbacks();
}

Tensor unit_rows(const Tensor& x) {
  return torch::nn::functional::normalize(x, torch::nn::functional::NormalizeFuncOptions().dim(-1));
}

// Trained-like keys (what a trained hybrid's normalised keys look like): unit-norm keys in a few
// tight clusters, a share of exact repeats (repeated bytes give repeated keys) and a few outliers.
Tensor trained_like_keys(int n, int d, int clusters, double spread, int repeats_every) {
  Tensor centres = unit_rows(torch::randn({clusters, d}, f64()));
  Tensor pick = torch::randint(0, clusters, {n}, torch::TensorOptions().dtype(torch::kInt64));
  Tensor x = unit_rows(centres.index_select(0, pick) + spread * torch::randn({n, d}, f64()));
  for (int i = repeats_every; i < n; i += repeats_every) x[i] = x[i / 2].clone();
  for (int i = 5; i < n; i += 37) x[i] = unit_rows(torch::randn({d}, f64()));
  return x.contiguous();
}

// 16 keys on a jittered ring around `extra` keys near its centre: at sigma^2 = 1 / ln 2 and
// C = 1/16 the ring is the support, all at C (S = ∅; see test_exact.cpp).
Tensor ring(int extra) {
  Tensor k = torch::empty({16 + extra, 2}, f64());
  auto a = k.accessor<double, 2>();
  for (int i = 0; i < 16; ++i) {
    const double t = 2 * M_PI * i / 16 + 0.05 * std::sin(3.0 * i);
    a[i][0] = std::cos(t) * (1 + 0.03 * std::cos(5.0 * i));
    a[i][1] = std::sin(t) * (1 + 0.03 * std::cos(5.0 * i));
  }
  for (int i = 0; i < extra; ++i) {
    a[16 + i][0] = 0.08 * std::cos(1.7 * i + 0.3);
    a[16 + i][1] = 0.08 * std::sin(2.3 * i + 0.1);
  }
  return k;
}

TEST(LeanSolver, EqualsCoreMemoryOnRandomKeys) {
  torch::manual_seed(41);
  Tally t;
  for (bool bounded : {false, true}) {
    const std::string tag = bounded ? " bounded" : "";
    expect_lean_equals_memory({"gaussian d4" + tag, torch::randn({64, 4}, f64()), 0.1, 1.3, 8, bounded}, &t);
    expect_lean_equals_memory({"unit d16" + tag, unit_rows(torch::randn({128, 16}, f64())), 1.0 / 16, 0.6, 16, bounded}, &t);
    expect_lean_equals_memory({"clustered d3" + tag, testing::clustered_keys(1, 1, 90, 3, 3, 0.3)[0][0].contiguous(), 0.05, 0.9, 10, bounded}, &t);
  }
  // Warm-up left off n C = 1 (6 C = 0.9, 7 C = 1.05: the batch solve at the boundary), E = ∅
  // (C = 1) and a single token out of warm-up (C = 2).
  expect_lean_equals_memory({"C 0.15", torch::randn({40, 3}, f64()), 0.15, 1.0, 3}, &t);
  expect_lean_equals_memory({"C 1", torch::randn({30, 3}, f64()), 1.0, 0.8, 5}, &t);
  expect_lean_equals_memory({"C 2", torch::randn({12, 3}, f64()), 2.0, 1.0, 1}, &t);
  std::printf("[lean vs memory, random] %ld states (%ld warm-up, %ld with S empty), max |da| %.2e, "
              "max |db| (S not empty) %.2e, %ld fallbacks\n", t.states, t.warmup, t.empty_margin, t.max_dalpha,
              t.max_db, t.fallbacks);
  EXPECT_GT(t.warmup, 0);
}

TEST(LeanSolver, EqualsCoreMemoryOnTrainedLikeKeys) {
  torch::manual_seed(42);
  Tally t;
  for (bool bounded : {false, true}) {
    const std::string tag = bounded ? " bounded" : "";
    for (int rep = 0; rep < 3; ++rep) {
      const std::string name = "trained-like " + std::to_string(rep) + tag;
      expect_lean_equals_memory({name, trained_like_keys(128, 32, 3 + rep, 0.25, 5), 1.0 / 16, 0.45 + 0.1 * rep, 16, bounded, true}, &t);
    }
    expect_lean_equals_memory({"trained-like chunk 64" + tag, trained_like_keys(256, 32, 4, 0.3, 6), 1.0 / 16, 0.5, 64, bounded, true}, &t);
    // S = ∅: the ring memory, then spread keys join it.
    Tensor rk = torch::cat({ring(4), torch::randn({40, 2}, f64()) * 1.2}).contiguous();
    expect_lean_equals_memory({"ring" + tag, rk, 1.0 / 16, 1.0 / std::sqrt(std::log(2.0)), 20, bounded}, &t);
  }
  std::printf("[lean vs memory, trained-like] %ld states (%ld warm-up, %ld with S empty), max |da| "
              "%.2e, max |db| %.2e, %ld fallbacks\n", t.states, t.warmup, t.empty_margin,
              t.max_dalpha, t.max_db, t.fallbacks);
  EXPECT_GT(t.empty_margin, 0);
}

// Keys of a trained hybrid-800k (76 steps on enwik8, chunk 16), written by `svattn dump-keys`
// (the command and checkpoint are in each file's .json): layer 0 (repeated bytes give exact
// repeats) and layer 3.
TEST(LeanSolver, EqualsCoreMemoryOnTrainedKeys) {
  Tally t;
  for (const char* name : {"hybrid800k_l0h0_keys.npy", "hybrid800k_l3h1_keys.npy"}) {
    const std::string path = std::string(SVATTN_SOURCE_DIR) + "/tests/torch/data/" + name;
    const RowMatrix k = read_matrix(path);
    std::ifstream js(path + ".json");
    const nlohmann::json j = nlohmann::json::parse(js);
    Tensor keys = torch::from_blob(const_cast<double*>(k.data()), {k.rows(), k.cols()}, f64()).clone();
    for (bool bounded : {false, true})
      expect_lean_equals_memory({std::string(name) + (bounded ? " bounded" : ""), keys,
                                 j.at("C").get<double>(), j.at("bandwidth").get<double>(), 16,
                                 bounded, true},
                                &t);
  }
  std::printf("[lean vs memory, trained keys] %ld states (%ld warm-up, %ld with S empty), max |da| "
              "%.2e, max |db| %.2e, %ld fallbacks\n", t.states, t.warmup, t.empty_margin,
              t.max_dalpha, t.max_db, t.fallbacks);
}

TEST(LeanSolver, EqualsCoreMemoryOnDuplicateKeys) {
  torch::manual_seed(43);
  Tally t;
  // Padding-like streams: 20 distinct keys repeated, and one key 40 times among others.
  Tensor base = unit_rows(torch::randn({20, 8}, f64()));
  Tensor idx = torch::randint(0, 20, {160}, torch::TensorOptions().dtype(torch::kInt64));
  expect_lean_equals_memory({"20 distinct of 160", base.index_select(0, idx).contiguous(), 1.0 / 16, 0.7, 16, false, true}, &t);
  Tensor pad = unit_rows(torch::randn({1, 8}, f64())).expand({40, 8});
  Tensor mixed = torch::cat({unit_rows(torch::randn({24, 8}, f64())), pad, unit_rows(torch::randn({32, 8}, f64()))}).contiguous();
  expect_lean_equals_memory({"one key 40 times", mixed, 1.0 / 16, 0.6, 16, false, true}, &t);
  expect_lean_equals_memory({"one key 40 times bounded", mixed, 1.0 / 16, 0.6, 16, true, true}, &t);
  std::printf("[lean vs memory, duplicates] %ld states, max |da| %.2e, max |db| %.2e, %ld fallbacks\n",
              t.states, t.max_dalpha, t.max_db, t.fallbacks);
}

TEST(LeanSolver, RejectsMisuse) {
  LeanSolver s;
  ProblemSettings p;
  p.kernel.type = KernelType::kLinear;
  EXPECT_THROW(s.reset(p, 3, 4), InvalidArgument);
  p.kernel.type = KernelType::kRbf;
  EXPECT_THROW(s.reset(p, 0, 4), InvalidArgument);
  s.reset(p, 2, 4);
  const double k[4] = {0, 1, 1, 0};
  s.add(k, 5, 2);
  EXPECT_THROW(s.add(k, 6, 1), InvalidArgument);  // ids must rise
}

// ---------------------------------------------------------------- the exact path on the lean solver

struct Inputs {
  Tensor keys, values, queries, log_sigma;
};

Inputs hybrid_like_inputs(int64_t B, int64_t H, int64_t T, int64_t d, int64_t dv) {
  Inputs in;
  in.keys = unit_rows(torch::randn({B, H, T, d}, f64()));
  in.values = torch::randn({B, H, T, dv}, f64());
  in.queries = unit_rows(torch::randn({B, H, T, d}, f64()));
  in.log_sigma = torch::log(torch::linspace(0.7, 1.0, H, f64()));
  return in;
}

TEST(LeanExactPath, BackwardMatchesFiniteDifferencesTo1e7) {
  testing::set_threads();
  torch::manual_seed(44);
  // The hybrid's regime: unit-norm keys, C = 1/16, chunk 16 (warm-up, its boundary, then the
  // path), full and bounded memories.
  const Inputs in = hybrid_like_inputs(1, 2, 64, 4, 3);
  Tensor w = torch::randn({1, 2, 64, 3}, f64());
  for (bool bounded : {false, true}) {
    ExactSettings s;
    s.problem.C = 1.0 / 16;
    s.bounded = bounded;
    Tensor k1 = in.keys.clone().requires_grad_(true), v1 = in.values.clone().requires_grad_(true);
    Tensor q1 = in.queries.clone().requires_grad_(true), s1 = in.log_sigma.clone().requires_grad_(true);
    Tensor lz1;
    ExactInfo base;
    Tensor o1 = sv_exact_chunked_attention(k1, v1, q1, s1, 16, s, &base, &lz1);
    // The log-normaliser's gradient too (the joint gate reads it): its rows of chunk 0 are -inf.
    Tensor wz = torch::randn({1, 2, 64}, f64()) * torch::isfinite(lz1.detach());
    ((o1 * w).sum() + (lz1.masked_fill(~torch::isfinite(lz1), 0) * wz).sum()).backward();
    ASSERT_GE((base.role == 1).sum().item<int64_t>(), 8);
    Tensor xk = in.keys.clone(), xv = in.values.clone(), xq = in.queries.clone(), xs = in.log_sigma.clone();
    Tensor role;
    auto f = [&] {
      ExactInfo info;
      Tensor lz;
      Tensor o = sv_exact_chunked_attention(xk, xv, xq, xs, 16, s, &info, &lz);
      role = info.role;
      return (o * w).sum().item<double>() + (lz.masked_fill(~torch::isfinite(lz), 0) * wz).sum().item<double>();
    };
    auto stable = [&] { return torch::equal(role, base.role); };
    for (auto [name, x, g] : {std::make_tuple("keys", xk, k1.grad()), std::make_tuple("values", xv, v1.grad()),
                              std::make_tuple("queries", xq, q1.grad()), std::make_tuple("log_sigma", xs, s1.grad())}) {
      auto r = testing::finite_difference(x, g, f, stable);
      std::printf("[lean FD%s] %-9s rel err %.3e (checked %ld, skipped %ld)\n", bounded ? " bounded" : "",
                  name, r.rel_error, r.checked, r.skipped);
      EXPECT_LE(r.rel_error, 1e-7) << name;
      EXPECT_GE(r.checked, x.numel() * 3 / 4) << name;
    }
  }
}

TEST(LeanExactPath, EqualsTheCoreMemoryPathForwardAndBackward) {
  testing::set_threads();
  torch::manual_seed(45);
  const Inputs in = hybrid_like_inputs(2, 2, 96, 8, 4);
  Tensor w = torch::randn({2, 2, 96, 4}, f64());
  auto run = [&](ExactSolver solver, bool bounded) {
    ExactSettings s;
    s.problem.C = 1.0 / 16;
    s.solver = solver;
    s.bounded = bounded;
    Tensor k = in.keys.clone().requires_grad_(true), v = in.values.clone().requires_grad_(true);
    Tensor q = in.queries.clone().requires_grad_(true), l = in.log_sigma.clone().requires_grad_(true);
    ExactInfo info;
    Tensor o = sv_exact_chunked_attention(k, v, q, l, 16, s, &info);
    (o * w).sum().backward();
    return std::make_tuple(o.detach(), info, std::vector<Tensor>{k.grad(), v.grad(), q.grad(), l.grad()});
  };
  for (bool bounded : {false, true}) {
    auto [ol, il, gl] = run(ExactSolver::kLean, bounded);
    auto [om, im, gm] = run(ExactSolver::kMemory, bounded);
    EXPECT_TRUE(torch::equal(il.role, im.role)) << bounded;
    const double dalpha = (il.alpha - im.alpha).abs().max().item<double>();
    const double dout = (ol - om).abs().max().item<double>();
    double dgrad = 0;
    for (std::size_t t = 0; t < gl.size(); ++t)
      dgrad = std::max(dgrad, ((gl[t] - gm[t]).norm() / gm[t].norm()).item<double>());
    std::printf("[lean vs memory path%s] max |d alpha| %.2e, max |d out| %.2e, grad rel err %.2e\n",
                bounded ? " bounded" : "", dalpha, dout, dgrad);
    EXPECT_LE(dalpha, 1e-12);
    EXPECT_LE(dout, 1e-12);
    EXPECT_LE(dgrad, 1e-10);
  }
}

// A small trainable model around the exact path: embeddings, key/value/query projections, the
// chunked SV memory, a readout head. Each step also runs the memory on the same inputs with two
// threads: its outputs must be bit-equal to the one-thread step's.
TEST(LeanExactPath, TwentyTrainingStepsFiniteAndThreadCountFree) {
  torch::manual_seed(46);
  const int64_t V = 32, D = 16, H = 2, dh = 8, B = 4, T = 64, L = 16;
  auto opts = torch::TensorOptions().dtype(torch::kFloat32);
  Tensor emb = (torch::randn({V, D}, opts) * 0.5).requires_grad_(true);
  Tensor wq = (torch::randn({D, H * dh}, opts) * 0.3).requires_grad_(true);
  Tensor wk = (torch::randn({D, H * dh}, opts) * 0.3).requires_grad_(true);
  Tensor wv = (torch::randn({D, H * dh}, opts) * 0.3).requires_grad_(true);
  Tensor head = (torch::randn({H * dh, V}, opts) * 0.3).requires_grad_(true);
  Tensor log_sigma = torch::zeros({H}, opts).requires_grad_(true);
  torch::optim::AdamW opt({emb, wq, wk, wv, head, log_sigma}, torch::optim::AdamWOptions(3e-3));
  ExactSettings s;
  s.problem.C = 1.0 / 16;
  // A repetitive stream (a period-7 pattern with noise): repeated tokens give repeated keys.
  Tensor base = torch::arange(T + 1, torch::TensorOptions().dtype(torch::kInt64)).remainder(7);
  std::vector<double> losses;
  for (int stepi = 0; stepi < 20; ++stepi) {
    Tensor tok = (base.unsqueeze(0).expand({B, T + 1}) +
                  torch::randint(0, 3, {B, T + 1}, torch::TensorOptions().dtype(torch::kInt64)))
                     .remainder(V);
    Tensor x = emb.index_select(0, tok.narrow(1, 0, T).reshape({-1})).view({B, T, D});
    auto heads = [&](const Tensor& w) { return x.matmul(w).view({B, T, H, dh}).transpose(1, 2); };
    Tensor q = unit_rows(heads(wq)), k = unit_rows(heads(wk)), v = heads(wv);
    at::set_num_threads(1);
    Tensor o = sv_exact_chunked_attention(k, v, q, log_sigma, L, s);
    {
      torch::NoGradGuard ng;
      at::set_num_threads(2);
      Tensor o2 = sv_exact_chunked_attention(k.detach(), v.detach(), q.detach(), log_sigma.detach(), L, s);
      at::set_num_threads(1);
      ASSERT_TRUE(torch::equal(o.detach(), o2)) << "step " << stepi;
    }
    Tensor logits = o.transpose(1, 2).reshape({B, T, H * dh}).matmul(head);
    Tensor loss = torch::nn::functional::cross_entropy(logits.reshape({-1, V}),
                                                       tok.narrow(1, 1, T).reshape({-1}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    losses.push_back(loss.item<double>());
    ASSERT_TRUE(std::isfinite(losses.back())) << "step " << stepi;
    for (const Tensor& p : {emb, wq, wk, wv, head, log_sigma})
      ASSERT_TRUE(torch::isfinite(p.grad()).all().item<bool>()) << "step " << stepi;
  }
  testing::set_threads();
  std::printf("[lean training] loss %.4f -> %.4f over 20 steps\n", losses.front(), losses.back());
  EXPECT_LT(losses.back(), losses.front());
}

}  // namespace
}  // namespace svattn::layers
