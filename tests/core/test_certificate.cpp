#include <gtest/gtest.h>

#include "streams.h"
#include "svattn/batch_solver.h"
#include "svattn/certificate.h"
#include "svattn/memory.h"

using namespace svattn;
using svattn::testing::make_keys;
using svattn::testing::Stream;

namespace {
BatchSettings settings() {
  BatchSettings s;
  s.problem.C = 0.03;
  s.problem.kernel.bandwidth = 1.5;
  return s;
}

// A memory of n Gaussian keys in R^d under settings(), in the given mode.
Memory filled(int n, int d, std::uint64_t seed, MemoryMode mode = MemoryMode::kAudit) {
  MemorySettings ms;
  ms.problem = settings().problem;
  ms.mode = mode;
  Memory m(ms, d, d);
  m.add_batch(TokenSet::from_rows(make_keys(Stream::kGaussian, n, d, seed)));
  return m;
}
}  // namespace

TEST(Verifier, AcceptsTheOptimumAndRejectsTampering) {
  const TokenSet t = TokenSet::from_rows(make_keys(Stream::kGaussian, 200, 4, 1));
  const State s = solve_batch(t, settings()).state;
  VerifyReport r = verify_state(t, s, Tolerances{}, true);
  EXPECT_TRUE(r.feasible);
  EXPECT_TRUE(r.kkt_ok);
  EXPECT_TRUE(r.hash_ok);
  EXPECT_TRUE(r.unique);
  EXPECT_TRUE(r.resolve_hash_equal);
  EXPECT_TRUE(r.ok());

  State moved = s;  // shift mass between two margin tokens: still feasible, no longer optimal
  ASSERT_GE(moved.partition.margin.size(), 2u);
  int a = -1, b = -1;
  for (size_t k = 0; k < moved.ids.size(); ++k) {
    if (moved.alpha[k] > 0 && moved.alpha[k] < s.settings.C) {
      if (a < 0)
        a = static_cast<int>(k);
      else if (b < 0)
        b = static_cast<int>(k);
    }
  }
  const double eps = 1e-4 * std::min(moved.alpha[a], moved.alpha[b]);
  moved.alpha[a] += eps;
  moved.alpha[b] -= eps;
  r = verify_state(t, moved, Tolerances{}, false);
  EXPECT_TRUE(r.feasible);
  EXPECT_FALSE(r.kkt_ok);
  EXPECT_FALSE(r.hash_ok);

  State badb = s;
  badb.b += 1e-6;
  EXPECT_FALSE(verify_state(t, badb, Tolerances{}, false).kkt_ok);

  State badsum = s;
  badsum.alpha[a] += 1e-6;
  EXPECT_FALSE(verify_state(t, badsum, Tolerances{}, false).feasible);

  State badhash = s;
  badhash.state_sha256[0] = badhash.state_sha256[0] == 'a' ? 'b' : 'a';
  r = verify_state(t, badhash, Tolerances{}, false);
  EXPECT_FALSE(r.hash_ok);
  EXPECT_FALSE(r.ok());
}

TEST(Verifier, UniquenessArgument) {
  RowMatrix x = make_keys(Stream::kGaussian, 50, 2, 2);
  x.row(10) = x.row(3);
  const TokenSet t = TokenSet::from_rows(x);
  BatchSettings s = settings();
  s.problem.ridge = 0.0;
  const State st = solve_batch(t, s).state;
  const VerifyReport r = verify_state(t, st, Tolerances{}, false);
  EXPECT_FALSE(r.unique);
  EXPECT_NE(r.uniqueness_reason.find("duplicate"), std::string::npos);
}

TEST(Certificate, RemovalCertificateFields) {
  Memory m = filled(300, 4, 3);
  const State before = m.state();
  const std::vector<TokenId> rm = {before.partition.margin[0], before.partition.reserve[0], 7};
  const OpDiagnostics dg = m.remove_batch(rm);
  const RowMatrix probes = make_keys(Stream::kGaussian, 16, 4, 4);
  const nlohmann::json c = removal_certificate(before, m, rm, "patient-1", dg, true, probes);
  EXPECT_EQ(c["certificate"], "svattn-removal-v1");
  EXPECT_EQ(c["mode"], "audit");
  EXPECT_EQ(c["record_id"], "patient-1");
  EXPECT_EQ(c["before"]["state_sha256"], before.state_sha256);
  EXPECT_EQ(c["after"]["state_sha256"], m.state_sha256());
  EXPECT_TRUE(c["verify"]["kkt_ok"].get<bool>());
  EXPECT_TRUE(c["verify"]["hash_ok"].get<bool>());
  EXPECT_TRUE(c["check"]["hash_equal"].get<bool>());
  EXPECT_TRUE(c["check"]["partition_equal"].get<bool>());
  EXPECT_EQ(c["check"]["max_abs_dalpha"].get<double>(), 0.0);
  EXPECT_EQ(c["check"]["max_abs_dreadout"].get<double>(), 0.0);
  EXPECT_EQ(c["check"]["max_abs_ddecision"].get<double>(), 0.0);
  EXPECT_EQ(c["removed_ids"].size(), 3u);
  EXPECT_EQ(c["evictions"], 0);
  EXPECT_EQ(c["solver"]["tracked"], dg.tracked);
  EXPECT_EQ(c["solver"]["kernel_evaluations"], dg.kernel_evaluations);
  EXPECT_EQ(c["solver"]["canonical_seconds"], dg.canonical_seconds);
  EXPECT_NE(c["scope"].get<std::string>().find("every token ever ingested"), std::string::npos);
}

TEST(Certificate, AuditModeAfterExplicitEvictionIsScopedToRetainedTokens) {
  Memory m = filled(200, 4, 6);
  const std::vector<TokenId> evicted = m.evict_reserve();
  ASSERT_FALSE(evicted.empty());
  EXPECT_EQ(m.evictions(), evicted.size());
  const State before = m.state();
  const std::vector<TokenId> rm = {before.partition.margin[0]};
  const OpDiagnostics dg = m.remove_batch(rm);
  const nlohmann::json c = removal_certificate(before, m, rm, "", dg, false, RowMatrix(0, 4));
  EXPECT_EQ(c["mode"], "audit");
  EXPECT_EQ(c["evictions"], evicted.size());
  const std::string scope = c["scope"].get<std::string>();
  EXPECT_NE(scope.find("evicted"), std::string::npos);
  EXPECT_NE(scope.find("retained"), std::string::npos);
  EXPECT_EQ(scope.find("every token ever ingested"), std::string::npos);
}

TEST(Verifier, MismatchedTokensAreAnErrorNotAUniquenessReason) {
  const TokenSet t = TokenSet::from_rows(make_keys(Stream::kGaussian, 50, 3, 8));
  const State s = solve_batch(t, settings()).state;
  const TokenSet fewer = t.without({3});
  const VerifyReport r = verify_state(fewer, s, Tolerances{}, false);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("sizes"), std::string::npos);
  EXPECT_TRUE(r.uniqueness_reason.empty());
}

TEST(Certificate, BoundedModeSaysSo) {
  Memory m = filled(120, 3, 5, MemoryMode::kBounded);
  const State before = m.state();
  const std::vector<TokenId> rm = {before.partition.margin[0]};
  const OpDiagnostics dg = m.remove_batch(rm);
  const nlohmann::json c = removal_certificate(before, m, rm, "", dg, true, RowMatrix(0, 3));
  EXPECT_EQ(c["mode"], "bounded");
  EXPECT_NE(c["scope"].get<std::string>().find("retained"), std::string::npos);
}
