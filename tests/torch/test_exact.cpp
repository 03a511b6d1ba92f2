// Exact-path SV attention: finite differences, backward vs autograd through a second solve,
// consistency with the core's readout and between the full and chunked memories.
#include <gtest/gtest.h>

#include <cstdio>

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
