// Exact-path SV attention: finite differences, backward vs autograd through a second solve,
// consistency with the core's readout and between the full and chunked memories.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <tuple>

#include "svattn/errors.h"
#include "svattn/memory.h"
#include "svattn/torch/batched.h"
#include "svattn/torch/exact.h"
#include "torch_test_util.h"

namespace svattn::layers {
namespace {

using torch::Tensor;
using testing::finite_difference;

auto f64() { return torch::TensorOptions().dtype(torch::kFloat64); }

struct Problem {
  Tensor keys, values, queries, log_sigma, weight;
  ExactSettings settings;
};

Problem make_problem(int64_t B, int64_t H, int64_t N, int64_t M, int64_t d, int64_t dv, double C,
                     bool clustered = false) {
  Problem p;
  p.keys = clustered ? testing::clustered_keys(B, H, N, d, 2, 0.4) : torch::randn({B, H, N, d}, f64());
  p.values = torch::randn({B, H, N, dv}, f64());
  p.queries = torch::randn({B, H, M, d}, f64()) * 0.7;
  p.log_sigma = torch::log(torch::linspace(1.2, 0.9, H, f64()));
  p.weight = torch::randn({B, H, M, dv}, f64());
  p.settings.problem.C = C;
  p.settings.problem.ridge = 1e-6;
  return p;
}

TEST(ExactAttention, FiniteDifferencesAwayFromPartitionChanges) {
  testing::set_threads();
  torch::manual_seed(11);
  // Clustered keys with outliers and a small C: both margin and error tokens occur.
  Problem p = make_problem(1, 2, 20, 4, 3, 2, 0.07, true);
  Tensor keys = p.keys.clone().requires_grad_(true);
  Tensor values = p.values.clone().requires_grad_(true);
  Tensor queries = p.queries.clone().requires_grad_(true);
  Tensor ls = p.log_sigma.clone().requires_grad_(true);
  ExactInfo base;
  Tensor out = sv_exact_attention(keys, values, queries, ls, p.settings, &base);
  (out * p.weight).sum().backward();
  // The test is only meaningful with a non-trivial margin set.
  const auto margins = (base.role == 1).sum().item<int64_t>();
  const auto errors = (base.role == 2).sum().item<int64_t>();
  std::printf("[exact FD] margin %ld error %ld of %ld tokens\n", static_cast<long>(margins),
              static_cast<long>(errors), static_cast<long>(base.role.numel()));
  ASSERT_GE(margins, 4);
  ASSERT_GE(errors, 1);

  Tensor xk = p.keys.clone(), xv = p.values.clone(), xq = p.queries.clone(), xs = p.log_sigma.clone();
  Tensor role;
  auto f = [&] {
    ExactInfo info;
    Tensor o = sv_exact_attention(xk, xv, xq, xs, p.settings, &info);
    role = info.role;
    return (o * p.weight).sum().item<double>();
  };
  auto stable = [&] { return torch::equal(role, base.role); };
  struct Case {
    const char* name;
    Tensor x;
    Tensor g;
  };
  for (const Case& c : {Case{"keys", xk, keys.grad()}, Case{"values", xv, values.grad()},
                        Case{"queries", xq, queries.grad()}, Case{"log_sigma", xs, ls.grad()}}) {
    auto r = finite_difference(c.x, c.g, f, stable);
    std::printf("[exact FD] %-9s rel err %.3e  (checked %ld, skipped %ld, |g| %.3e)\n", c.name,
                r.rel_error, r.checked, r.skipped, r.grad_norm);
    EXPECT_LE(r.rel_error, 1e-6) << c.name;
    EXPECT_GT(r.grad_norm, 0) << c.name;
    EXPECT_GE(r.checked, c.x.numel() * 3 / 4) << c.name;
  }
}

TEST(ExactAttention, BackwardEqualsAutogradThroughSecondSolve) {
  testing::set_threads();
  torch::manual_seed(12);
  Problem p = make_problem(2, 2, 40, 6, 4, 3, 0.035, true);
  Tensor k1 = p.keys.clone().requires_grad_(true), v1 = p.values.clone().requires_grad_(true);
  Tensor q1 = p.queries.clone().requires_grad_(true), s1 = p.log_sigma.clone().requires_grad_(true);
  ExactInfo info;
  Tensor out = sv_exact_attention(k1, v1, q1, s1, p.settings, &info);
  (out * p.weight).sum().backward();
  ASSERT_GE((info.role == 1).sum().item<int64_t>(), 8);
  ASSERT_GE((info.role == 2).sum().item<int64_t>(), 2);

  // Reference: autograd through K, the bordered solve on the same partition, and the readout.
  const int64_t B = 2, H = 2, N = 40, M = 6;
  Tensor k2 = p.keys.clone().requires_grad_(true), v2 = p.values.clone().requires_grad_(true);
  Tensor q2 = p.queries.clone().requires_grad_(true), s2 = p.log_sigma.clone().requires_grad_(true);
  Tensor sigma = torch::exp(s2).unsqueeze(0).expand({B, H}).reshape({B * H});
  Tensor x = k2.reshape({B * H, N, 4});
  Tensor K = rbf_kernel(x, x, sigma);
  Tensor role = info.role.reshape({B * H, N});
  Tensor upper = torch::full({B * H, N}, p.settings.problem.C, f64());
  auto ab = bordered_coefficients(K, role, upper, p.settings.problem.ridge);
  Tensor ref = sv_readout(q2.reshape({B * H, M, 4}), x, v2.reshape({B * H, N, 3}), ab.first, role, sigma)
                   .reshape({B, H, M, 3});
  (ref * p.weight).sum().backward();

  const double dout = (out - ref).abs().max().item<double>();
  const double dalpha = (ab.first.detach().reshape({B, H, N}) - info.alpha).abs().max().item<double>();
  const double db = (ab.second.detach().reshape({B, H}) - info.b).abs().max().item<double>();
  std::printf("[exact vs solve] max |d out| %.2e  |d alpha| %.2e  |d b| %.2e\n", dout, dalpha, db);
  EXPECT_LE(dout, 1e-10);
  EXPECT_LE(dalpha, 1e-10);
  EXPECT_LE(db, 1e-10);
  auto rel = [](const Tensor& a, const Tensor& b) {
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item<double>();
  };
  const double ek = rel(k1.grad(), k2.grad()), ev = rel(v1.grad(), v2.grad());
  const double eq = rel(q1.grad(), q2.grad()), es = rel(s1.grad(), s2.grad());
  std::printf("[exact vs solve] grad rel err keys %.2e values %.2e queries %.2e log_sigma %.2e\n",
              ek, ev, eq, es);
  EXPECT_LE(ek, 1e-8);
  EXPECT_LE(ev, 1e-8);
  EXPECT_LE(eq, 1e-8);
  EXPECT_LE(es, 1e-8);
}

TEST(ExactAttention, MatchesCoreReadoutAndAcceptsFloat) {
  testing::set_threads();
  torch::manual_seed(13);
  Problem p = make_problem(1, 1, 30, 5, 3, 2, 0.1);
  ExactInfo info;
  Tensor out = sv_exact_attention(p.keys, p.values, p.queries, Tensor(), p.settings, &info);
  EXPECT_EQ(info.status[0], Status::kOptimal);
  Memory mem(p.settings.memory_settings(p.settings.problem.kernel.bandwidth), 3, 2);
  RowMatrix keys = Eigen::Map<RowMatrix>(p.keys.data_ptr<double>(), 30, 3);
  RowMatrix values = Eigen::Map<RowMatrix>(p.values.data_ptr<double>(), 30, 2);
  mem.add_batch(TokenSet::from_rows(keys, &values));
  for (int64_t m = 0; m < 5; ++m) {
    Eigen::VectorXd q = Eigen::Map<Eigen::VectorXd>(p.queries[0][0][m].contiguous().data_ptr<double>(), 3);
    Eigen::VectorXd o = mem.readout(q);
    for (int k = 0; k < 2; ++k) EXPECT_NEAR(out[0][0][m][k].item<double>(), o[k], 1e-12);
  }
  // float32 inputs: fp64 inside, float32 out, gradients in float32.
  Tensor kf = p.keys.to(torch::kFloat32).requires_grad_(true);
  Tensor of = sv_exact_attention(kf, p.values.to(torch::kFloat32), p.queries.to(torch::kFloat32),
                                 Tensor(), p.settings);
  EXPECT_EQ(of.scalar_type(), torch::kFloat32);
  of.sum().backward();
  EXPECT_EQ(kf.grad().scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::isfinite(kf.grad()).all().item<bool>());
  EXPECT_LE((of.to(torch::kFloat64) - out).abs().max().item<double>(), 1e-5);
}

TEST(ExactAttention, ChunkedMemoryIsIncrementalFullMemory) {
  testing::set_threads();
  torch::manual_seed(14);
  const int64_t T = 26, L = 8, d = 3, dv = 2;
  Tensor keys = torch::randn({1, 2, T, d}, f64()), values = torch::randn({1, 2, T, dv}, f64());
  Tensor queries = torch::randn({1, 2, T, d}, f64());
  ExactSettings s;
  s.problem.C = 0.1;
  ExactInfo info;
  Tensor out = sv_exact_chunked_attention(keys, values, queries, Tensor(), L, s, &info);
  EXPECT_EQ(info.role.sizes(), (std::vector<int64_t>{1, 2, 4, T}));
  EXPECT_EQ(out.narrow(2, 0, L).abs().max().item<double>(), 0.0);  // chunk 0: no memory
  for (int64_t c = 1; c < 4; ++c) {
    const int64_t qb = c * L, qe = std::min(T, qb + L);
    Tensor ref = sv_exact_attention(keys.narrow(2, 0, qb), values.narrow(2, 0, qb),
                                    queries.narrow(2, qb, qe - qb), Tensor(), s);
    EXPECT_LE((out.narrow(2, qb, qe - qb) - ref).abs().max().item<double>(), 1e-12) << "chunk " << c;
    EXPECT_EQ(info.memory_size[0][0][c].item<int64_t>(), qb);
  }
  // Bounded mode: the memory of chunk c keeps only the support of chunk c-1's memory.
  s.bounded = true;
  ExactInfo binfo;
  Tensor bout = sv_exact_chunked_attention(keys, values, queries, Tensor(), L, s, &binfo);
  EXPECT_LE((bout.narrow(2, 0, 2 * L) - out.narrow(2, 0, 2 * L)).abs().max().item<double>(), 1e-12);
  EXPECT_TRUE((binfo.memory_size <= info.memory_size).all().item<bool>());
  EXPECT_LT(binfo.memory_size[0][0][3].item<int64_t>(), info.memory_size[0][0][3].item<int64_t>());
}

TEST(ExactAttention, ChunkedFiniteDifferencesIncludingWarmup) {
  testing::set_threads();
  torch::manual_seed(15);
  // C = 0.1, L = 6: chunk 1's memory (6 tokens) is in warm-up, chunks 2-3 are not.
  const int64_t T = 24, L = 6, d = 3, dv = 2;
  ExactSettings s;
  s.problem.C = 0.1;
  Tensor keys = torch::randn({1, 1, T, d}, f64()), values = torch::randn({1, 1, T, dv}, f64());
  Tensor queries = torch::randn({1, 1, T, d}, f64()), ls = torch::log(torch::tensor({1.1}, f64()));
  Tensor w = torch::randn({1, 1, T, dv}, f64());
  Tensor k1 = keys.clone().requires_grad_(true), v1 = values.clone().requires_grad_(true);
  Tensor q1 = queries.clone().requires_grad_(true), s1 = ls.clone().requires_grad_(true);
  ExactInfo base;
  (sv_exact_chunked_attention(k1, v1, q1, s1, L, s, &base) * w).sum().backward();
  ASSERT_EQ(base.status[1], Status::kWarmup);
  ASSERT_GE((base.role.select(2, 3) == 1).sum().item<int64_t>(), 3);
  Tensor role;
  auto f = [&] {
    ExactInfo info;
    Tensor o = sv_exact_chunked_attention(keys, values, queries, ls, L, s, &info);
    role = info.role;
    return (o * w).sum().item<double>();
  };
  auto stable = [&] { return torch::equal(role, base.role); };
  for (auto [name, x, g] : {std::make_tuple("keys", keys, k1.grad()), std::make_tuple("values", values, v1.grad()),
                            std::make_tuple("queries", queries, q1.grad()), std::make_tuple("log_sigma", ls, s1.grad())}) {
    auto r = finite_difference(x, g, f, stable);
    std::printf("[exact chunked FD] %-9s rel err %.3e (checked %ld, skipped %ld)\n", name, r.rel_error,
                r.checked, r.skipped);
    EXPECT_LE(r.rel_error, 1e-6) << name;
    EXPECT_GE(r.checked, x.numel() * 3 / 4) << name;
  }
}

// ---------------------------------------------------------------- degenerate partitions
// Keys that trained hybrids produce (C = 1/16): the support is exactly 1/C tokens, all at C, so the
// margin set is empty (docs/math.md §3, step 5) and the memory keeps no bordered inverse.

// 16 keys on a jittered ring of radius 1 around `extra` keys near its centre (d = 2). With
// sigma^2 = 1 / ln 2 a centre key has kernel sum 8 C against the ring while a ring key has about
// 6.2 C: the ring is the support, every key at C = 1/16, and the centre keys are reserve.
Tensor ring_keys(int64_t extra) {
  Tensor keys = torch::empty({1, 1, 16 + extra, 2}, f64());
  auto a = keys.accessor<double, 4>();
  for (int64_t i = 0; i < 16; ++i) {
    const double t = 2 * M_PI * static_cast<double>(i) / 16 + 0.05 * std::sin(3.0 * i);
    a[0][0][i][0] = std::cos(t) * (1 + 0.03 * std::cos(5.0 * i));
    a[0][0][i][1] = std::sin(t) * (1 + 0.03 * std::cos(5.0 * i));
  }
  for (int64_t i = 0; i < extra; ++i) {
    a[0][0][16 + i][0] = 0.08 * std::cos(1.7 * i + 0.3);
    a[0][0][16 + i][1] = 0.08 * std::sin(2.3 * i + 0.1);
  }
  return keys;
}

Tensor ring_log_sigma() { return torch::full({1}, -0.5 * std::log(std::log(2.0)), f64()); }

// Central differences of L = sum(w * f(keys, values, queries, log_sigma)) against the backward on
// every entry; fails if the partition moves under any perturbation or an error exceeds `tol`.
void expect_gradients_match(const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&,
                                                       const Tensor&, ExactInfo*)>& fn,
                            const Tensor& keys, const Tensor& values, const Tensor& queries,
                            const Tensor& ls, double tol, const char* label) {
  Tensor w = torch::randn({keys.size(0), keys.size(1), queries.size(2), values.size(3)}, f64());
  Tensor k1 = keys.clone().requires_grad_(true), v1 = values.clone().requires_grad_(true);
  Tensor q1 = queries.clone().requires_grad_(true), s1 = ls.clone().requires_grad_(true);
  ExactInfo base;
  (fn(k1, v1, q1, s1, &base) * w).sum().backward();
  Tensor xk = keys.clone(), xv = values.clone(), xq = queries.clone(), xs = ls.clone();
  Tensor role;
  auto f = [&] {
    ExactInfo info;
    Tensor o = fn(xk, xv, xq, xs, &info);
    role = info.role;
    return (o * w).sum().item<double>();
  };
  auto stable = [&] { return torch::equal(role, base.role); };
  for (auto [name, x, g] : {std::make_tuple("keys", xk, k1.grad()), std::make_tuple("values", xv, v1.grad()),
                            std::make_tuple("queries", xq, q1.grad()), std::make_tuple("log_sigma", xs, s1.grad())}) {
    auto r = finite_difference(x, g, f, stable);
    std::printf("[%s FD] %-9s rel err %.3e (checked %ld, skipped %ld, |g| %.3e)\n", label, name,
                r.rel_error, r.checked, r.skipped, r.grad_norm);
    EXPECT_LE(r.rel_error, tol) << label << " " << name;
    EXPECT_EQ(r.skipped, 0) << label << " " << name;
    EXPECT_TRUE(torch::isfinite(g).all().item<bool>()) << label << " " << name;
  }
}

TEST(ExactDegenerate, EmptyMarginSetSupportAllAtC) {
  testing::set_threads();
  torch::manual_seed(21);
  ExactSettings s;
  s.problem.C = 1.0 / 16;
  s.problem.ridge = 1e-6;
  Tensor keys = ring_keys(4), values = torch::randn({1, 1, 20, 3}, f64());
  Tensor queries = torch::randn({1, 1, 5, 2}, f64()) * 0.8, ls = ring_log_sigma();
  ExactInfo info;
  Tensor out = sv_exact_attention(keys, values, queries, ls, s, &info);
  ASSERT_EQ(info.status[0], Status::kOptimal);
  EXPECT_EQ((info.role == 1).sum().item<int64_t>(), 0);   // S = ∅
  EXPECT_EQ((info.role == 2).sum().item<int64_t>(), 16);  // |E| C = 1
  EXPECT_EQ(info.alpha.narrow(2, 16, 4).abs().max().item<double>(), 0.0);
  // The readout equals the core memory's.
  Memory mem(s.memory_settings(std::exp(ls[0].item<double>())), 2, 3);
  RowMatrix kr = Eigen::Map<RowMatrix>(keys.data_ptr<double>(), 20, 2);
  RowMatrix vr = Eigen::Map<RowMatrix>(values.data_ptr<double>(), 20, 3);
  mem.add_batch(TokenSet::from_rows(kr, &vr));
  EXPECT_TRUE(mem.margin_order().empty());
  for (int64_t m = 0; m < 5; ++m) {
    Eigen::VectorXd q = Eigen::Map<Eigen::VectorXd>(queries[0][0][m].contiguous().data_ptr<double>(), 2);
    Eigen::VectorXd o = mem.readout(q);
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(out[0][0][m][k].item<double>(), o[k], 1e-12);
  }
  auto full = [&](const Tensor& k, const Tensor& v, const Tensor& q, const Tensor& l, ExactInfo* i) {
    return sv_exact_attention(k, v, q, l, s, i);
  };
  expect_gradients_match(full, keys, values, queries, ls, 1e-6, "S empty");
}

TEST(ExactDegenerate, EmptyMarginSetInChunkedAndBoundedMemories) {
  testing::set_threads();
  torch::manual_seed(22);
  ExactSettings s;
  s.problem.C = 1.0 / 16;
  // Chunk 20: chunk 1 reads the ring memory (S = ∅), chunk 2 the ring plus 20 spread keys.
  Tensor keys = torch::cat({ring_keys(4), torch::randn({1, 1, 20, 2}, f64()) * 1.2}, 2);
  Tensor values = torch::randn({1, 1, 40, 2}, f64()), queries = torch::randn({1, 1, 40, 2}, f64());
  for (bool bounded : {false, true}) {
    s.bounded = bounded;
    ExactInfo info;
    sv_exact_chunked_attention(keys, values, queries, ring_log_sigma(), 20, s, &info);
    EXPECT_EQ((info.role.select(2, 1) == 1).sum().item<int64_t>(), 0) << bounded;
    EXPECT_EQ((info.role.select(2, 1) == 2).sum().item<int64_t>(), 16) << bounded;
    auto chunked = [&](const Tensor& k, const Tensor& v, const Tensor& q, const Tensor& l, ExactInfo* i) {
      return sv_exact_chunked_attention(k, v, q, l, 20, s, i);
    };
    expect_gradients_match(chunked, keys, values, queries, ring_log_sigma(), 1e-6,
                           bounded ? "S empty, chunked bounded" : "S empty, chunked");
  }
}

TEST(ExactAttention, CertifyChecksEveryMemoryWithTheVerifier) {
  testing::set_threads();
  torch::manual_seed(26);
  ExactSettings s;
  s.problem.C = 1.0 / 16;
  // Chunk 20 over 60 tokens: the ring memory (S = ∅), then two larger ones; full and bounded.
  Tensor keys = torch::cat({ring_keys(4), torch::randn({1, 1, 40, 2}, f64())}, 2).expand({2, 1, 60, 2}).contiguous();
  Tensor values = torch::randn({2, 1, 60, 2}, f64()), queries = torch::randn({2, 1, 60, 2}, f64());
  for (bool bounded : {false, true}) {
    s.bounded = bounded;
    s.certify = false;
    ExactInfo plain;
    Tensor o1 = sv_exact_chunked_attention(keys, values, queries, ring_log_sigma(), 20, s, &plain);
    EXPECT_TRUE((plain.verified == -1).all().item<bool>());
    s.certify = true;
    ExactInfo info;
    Tensor o2 = sv_exact_chunked_attention(keys, values, queries, ring_log_sigma(), 20, s, &info);
    EXPECT_TRUE(torch::equal(o1, o2));  // certifying changes nothing computed
    EXPECT_EQ(info.verified.sizes(), (std::vector<int64_t>{2, 1, 3}));
    EXPECT_TRUE((info.verified.select(2, 0) == -1).all().item<bool>());  // chunk 0: no memory
    EXPECT_TRUE((info.verified.narrow(2, 1, 2) == 1).all().item<bool>()) << info.verified;
    EXPECT_EQ((info.role.select(2, 1) == 1).sum().item<int64_t>(), 0);   // S = ∅ verified too
  }
}

TEST(ExactDegenerate, EmptyErrorSet) {
  testing::set_threads();
  torch::manual_seed(23);
  // C = 1 >= every coefficient: no token can sit at the bound, the support is S alone.
  Problem p = make_problem(1, 2, 24, 4, 3, 2, 1.0, true);
  ExactInfo info;
  sv_exact_attention(p.keys, p.values, p.queries, p.log_sigma, p.settings, &info);
  EXPECT_EQ((info.role == 2).sum().item<int64_t>(), 0);
  EXPECT_GE((info.role == 1).sum().item<int64_t>(), 4);
  auto full = [&](const Tensor& k, const Tensor& v, const Tensor& q, const Tensor& l, ExactInfo* i) {
    return sv_exact_attention(k, v, q, l, p.settings, i);
  };
  expect_gradients_match(full, p.keys, p.values, p.queries, p.log_sigma, 1e-6, "E empty");
}

TEST(ExactDegenerate, OneTokenMemory) {
  testing::set_threads();
  torch::manual_seed(24);
  Tensor keys = torch::randn({1, 1, 1, 3}, f64()), values = torch::randn({1, 1, 1, 2}, f64());
  Tensor queries = torch::randn({1, 1, 3, 3}, f64()), ls = torch::zeros({1}, f64());
  // C = 1/16: n C <= 1, the warm-up point. C = 2: out of warm-up, S = {the token}, a 2 x 2 R.
  for (double C : {1.0 / 16, 2.0}) {
    ExactSettings s;
    s.problem.C = C;
    ExactInfo info;
    Tensor out = sv_exact_attention(keys, values, queries, ls, s, &info);
    EXPECT_EQ(info.status[0], C < 1 ? Status::kWarmup : Status::kOptimal) << C;
    EXPECT_NEAR(info.alpha[0][0][0].item<double>(), 1.0, 1e-15) << C;
    // One support token: every query reads its value.
    EXPECT_LE((out - values.expand({1, 1, 3, 2})).abs().max().item<double>(), 1e-15) << C;
    auto full = [&](const Tensor& k, const Tensor& v, const Tensor& q, const Tensor& l, ExactInfo* i) {
      return sv_exact_attention(k, v, q, l, s, i);
    };
    expect_gradients_match(full, keys, values, queries, ls, 1e-6, C < 1 ? "one token, warm-up" : "one token, S");
  }
}

TEST(ExactDegenerate, WarmupBoundary) {
  testing::set_threads();
  torch::manual_seed(25);
  // C = 1/16 and chunk 16 on unit-norm keys (as the hybrid normalises them): chunk 1's memory holds
  // n = 16 = 1/C tokens (the last warm-up point), chunk 2's 32; full memories of 16 and 17 tokens
  // sit on both sides of the boundary.
  ExactSettings s;
  s.problem.C = 1.0 / 16;
  Tensor keys = torch::nn::functional::normalize(torch::randn({1, 2, 48, 4}, f64()),
                                                 torch::nn::functional::NormalizeFuncOptions().dim(-1));
  Tensor values = torch::randn({1, 2, 48, 2}, f64()), queries = torch::randn({1, 2, 48, 4}, f64());
  Tensor ls = torch::log(torch::tensor({0.8, 1.1}, f64()));
  ExactInfo info;
  sv_exact_chunked_attention(keys, values, queries, ls, 16, s, &info);
  EXPECT_EQ(info.status[1], Status::kWarmup);
  EXPECT_EQ(info.status[2], Status::kOptimal);
  auto chunked = [&](const Tensor& k, const Tensor& v, const Tensor& q, const Tensor& l, ExactInfo* i) {
    return sv_exact_chunked_attention(k, v, q, l, 16, s, i);
  };
  expect_gradients_match(chunked, keys, values, queries, ls, 1e-6, "warm-up boundary, chunked");
  for (int64_t n : {16, 17}) {
    ExactInfo fi;
    Tensor k = keys.narrow(2, 0, n), v = values.narrow(2, 0, n), q = queries.narrow(2, 0, 5);
    sv_exact_attention(k, v, q, ls, s, &fi);
    EXPECT_EQ(fi.status[0], n == 16 ? Status::kWarmup : Status::kOptimal);
    if (n == 17) {
      // One token leaves for the reserve and the other 16 stay at C: S = ∅ in head 0, the common
      // way a memory just past warm-up reaches it.
      EXPECT_EQ((fi.role[0][0] == 1).sum().item<int64_t>(), 0);
      EXPECT_EQ((fi.role[0][0] == 2).sum().item<int64_t>(), 16);
      EXPECT_GT((fi.role[0][1] == 1).sum().item<int64_t>(), 0);
    }
    auto full = [&](const Tensor& kk, const Tensor& vv, const Tensor& qq, const Tensor& l, ExactInfo* i) {
      return sv_exact_attention(kk, vv, qq, l, s, i);
    };
    expect_gradients_match(full, k.contiguous(), v.contiguous(), q.contiguous(), ls, 1e-6,
                           n == 16 ? "n = 1/C" : "n = 1/C + 1");
  }
}

TEST(ExactAttention, ThreadCountDoesNotChangeResults) {
  torch::manual_seed(16);
  Problem p = make_problem(2, 3, 30, 5, 3, 2, 0.07, true);
  auto run = [&](int threads) {
    at::set_num_threads(threads);
    Tensor k = p.keys.clone().requires_grad_(true);
    Tensor o = sv_exact_chunked_attention(k, p.values, p.keys, p.log_sigma, 7, p.settings);
    (o * o).sum().backward();
    return std::make_pair(o.detach(), k.grad());
  };
  auto one = run(1), two = run(2);
  testing::set_threads();
  EXPECT_TRUE(torch::equal(one.first, two.first));
  EXPECT_TRUE(torch::equal(one.second, two.second));
}

TEST(ExactAttention, RejectsBadInput) {
  ExactSettings s;
  s.problem.C = -1;
  EXPECT_THROW(s.validate(), InvalidArgument);
  ExactSettings ok;
  Tensor k = torch::randn({1, 1, 5, 3}, f64());
  EXPECT_THROW(sv_exact_attention(k, torch::randn({1, 1, 4, 2}, f64()), k, Tensor(), ok), InvalidArgument);
  EXPECT_THROW(sv_exact_chunked_attention(k, k, k, Tensor(), 0, ok), InvalidArgument);
  EXPECT_THROW(sv_exact_attention(k, k, k, torch::zeros({2}, f64()), ok), InvalidArgument);
}

}  // namespace
}  // namespace svattn::layers
