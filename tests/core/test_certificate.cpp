#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "streams.h"
#include "svattn/batch_solver.h"
#include "svattn/certificate.h"
#include "svattn/errors.h"
#include "svattn/memory.h"
#include "svattn/readout.h"

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
  const nlohmann::json c =
      removal_certificate(before, m, rm, "patient-1", dg, true, probes).to_json();
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
  const nlohmann::json c =
      removal_certificate(before, m, rm, "", dg, false, RowMatrix(0, 4)).to_json();
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
  const nlohmann::json c =
      removal_certificate(before, m, rm, "", dg, true, RowMatrix(0, 3)).to_json();
  EXPECT_EQ(c["mode"], "bounded");
  EXPECT_NE(c["scope"].get<std::string>().find("retained"), std::string::npos);
}

// ---------------------------------------------------------------- n = 0 and n = 1, typed form

namespace {
MemorySettings memory_settings() {
  MemorySettings ms;
  ms.problem = settings().problem;
  return ms;
}
}  // namespace

TEST(Verifier, EmptyStateVerifies) {
  const Memory m(memory_settings(), 3, 3);
  const State s = m.state();
  const VerifyReport r = verify_state(m.tokens(), s, Tolerances{}, true);
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_TRUE(r.feasible);
  EXPECT_TRUE(r.kkt_ok);
  EXPECT_TRUE(r.hash_ok);
  EXPECT_TRUE(r.unique);
  EXPECT_TRUE(r.resolve_hash_equal);
  EXPECT_TRUE(r.ok());
  State bad = s;  // the empty state has b = 0
  bad.b = 0.5;
  const VerifyReport rb = verify_state(m.tokens(), bad, Tolerances{}, false);
  EXPECT_FALSE(rb.feasible);
  EXPECT_FALSE(rb.hash_ok);
  EXPECT_FALSE(rb.ok());
}

TEST(Verifier, SingleTokenVerifies) {
  Memory m(memory_settings(), 3, 3);
  m.add_batch(TokenSet::from_rows(make_keys(Stream::kGaussian, 1, 3, 9)));
  const VerifyReport r = verify_state(m.tokens(), m.state(), Tolerances{}, true);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.unique);
  EXPECT_TRUE(r.resolve_hash_equal);
}

TEST(Certificate, RemovingEveryTokenGivesTheEmptyState) {
  Memory m = filled(40, 3, 10);
  const State before = m.state();
  const std::vector<TokenId> all = before.ids;
  const OpDiagnostics dg = m.remove_batch(all);
  EXPECT_EQ(m.size(), 0);
  EXPECT_EQ(m.state_sha256(), Memory(memory_settings(), 3, 3).state_sha256());
  CertificateOptions o;
  o.resolve = true;
  const RemovalCertificate c = removal_certificate(before, m, all, "all", dg, o, RowMatrix(0, 3));
  EXPECT_EQ(c.after.n, 0u);
  EXPECT_EQ(c.verify.argument, CertificateArgument::kFull);
  EXPECT_TRUE(c.verify.ok());
  EXPECT_TRUE(c.check.hash_equal);
  EXPECT_EQ(RemovalCertificate::from_json(c.to_json()), c);
}

TEST(Certificate, RemovingTheLastTokenOfASingleTokenMemory) {
  Memory m(memory_settings(), 2, 2);
  m.add_batch(TokenSet::from_rows(make_keys(Stream::kGaussian, 1, 2, 11)));
  const State before = m.state();
  const OpDiagnostics dg = m.remove_batch({0});
  const RemovalCertificate c = removal_certificate(before, m, {0}, "", dg, true, RowMatrix(0, 2));
  EXPECT_TRUE(c.verify.ok());
  EXPECT_TRUE(c.check.hash_equal);
}

TEST(Certificate, ReserveOnlyRemovalCertifiesByReference) {
  Memory m = filled(300, 4, 12);
  const State before = m.state();
  ASSERT_GE(before.partition.reserve.size(), 3u);
  const std::vector<TokenId> rm(before.partition.reserve.begin(),
                                before.partition.reserve.begin() + 3);
  const OpDiagnostics dg = m.remove_batch(rm);
  const RemovalCertificate c =
      removal_certificate(before, m, rm, "r", dg, CertificateOptions{}, RowMatrix(0, 4));
  EXPECT_EQ(c.verify.argument, CertificateArgument::kReference);
  EXPECT_EQ(c.verify.reference_sha256, before.state_sha256);
  EXPECT_TRUE(c.verify.ok());
  EXPECT_FALSE(c.check.performed);
  // The full argument agrees.
  CertificateOptions full;
  full.allow_reference = false;
  const RemovalCertificate f = removal_certificate(before, m, rm, "r", dg, full, RowMatrix(0, 4));
  EXPECT_EQ(f.verify.argument, CertificateArgument::kFull);
  EXPECT_TRUE(f.verify.ok());
}

TEST(Certificate, SupportRemovalUsesTheFullCheck) {
  Memory m = filled(300, 4, 13);
  const State before = m.state();
  const std::vector<TokenId> rm = {before.partition.margin[0]};
  const OpDiagnostics dg = m.remove_batch(rm);
  const RemovalCertificate c =
      removal_certificate(before, m, rm, "", dg, CertificateOptions{}, RowMatrix(0, 4));
  EXPECT_EQ(c.verify.argument, CertificateArgument::kFull);
  EXPECT_TRUE(c.verify.ok());
  // A reference to a state whose coefficients differ is refused: tamper `before` so that the
  // removed token looks like a reserve token; the certificate must not take the reference path.
  State fake = before;
  const auto it = std::lower_bound(fake.ids.begin(), fake.ids.end(), rm[0]);
  fake.alpha[static_cast<std::size_t>(it - fake.ids.begin())] = 0.0;
  const RemovalCertificate c2 =
      removal_certificate(fake, m, rm, "", dg, CertificateOptions{}, RowMatrix(0, 4));
  EXPECT_EQ(c2.verify.argument, CertificateArgument::kFull);
}

// The full argument of a removal reads the memory block by block (no copy of every token): over
// several blocks it reports what the verifier computes on a copy of the remaining tokens.
TEST(Certificate, StreamedFullCheckAgreesWithTheVerifierOnACopy) {
  Memory m = filled(9000, 3, 21);  // > 2 check blocks of 4096 rows
  const State before = m.state();
  const std::vector<TokenId> rm = {before.partition.margin[0], before.partition.margin[1]};
  const OpDiagnostics dg = m.remove_batch(rm);
  const RemovalCertificate c =
      removal_certificate(before, m, rm, "", dg, CertificateOptions{}, RowMatrix(0, 3));
  ASSERT_EQ(c.verify.argument, CertificateArgument::kFull);
  EXPECT_TRUE(c.verify.ok());
  const VerifyReport v = verify_state(m.tokens(), m.state(), Tolerances{}, false);
  EXPECT_TRUE(v.ok());
  EXPECT_NEAR(c.verify.max_kkt_violation, v.kkt.max_violation, 1e-15);
  EXPECT_EQ(c.verify.feasible, v.feasible);
  EXPECT_EQ(c.verify.uniqueness_reason, v.uniqueness_reason);
}

TEST(Certificate, RoundTripsThroughJson) {
  Memory m = filled(200, 3, 14);
  const State before = m.state();
  const std::vector<TokenId> rm = {before.partition.margin[0], before.partition.reserve[0]};
  const OpDiagnostics dg = m.remove_batch(rm);
  CertificateOptions o;
  o.resolve = true;
  RemovalCertificate c =
      removal_certificate(before, m, rm, "p-7", dg, o, make_keys(Stream::kGaussian, 4, 3, 15));
  c.store = StoreErasure{"s.db", "m", 7, false, 2, 2, true};
  const nlohmann::json j = c.to_json();
  const RemovalCertificate back = RemovalCertificate::from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(back.to_json().dump(), j.dump());
  EXPECT_EQ(back.solver.kernel_evaluations, dg.kernel_evaluations);
  EXPECT_EQ(back.solver.seconds, dg.seconds);
  EXPECT_EQ(back.check.max_abs_dreadout, c.check.max_abs_dreadout);
  EXPECT_EQ(back.store->record, 7);
  EXPECT_EQ(back.verify.checks, c.verify.checks);
  // An infinite max |d alpha| (ids differ) survives the null JSON writes for it.
  c.check.max_abs_dalpha = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(std::isinf(RemovalCertificate::from_json(c.to_json()).check.max_abs_dalpha));
  // A missing field is named.
  nlohmann::json broken = j;
  broken["verify"].erase("kkt_ok");
  try {
    RemovalCertificate::from_json(broken);
    FAIL() << "from_json accepted a certificate without verify.kkt_ok";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("verify.kkt_ok"), std::string::npos) << e.what();
  }
}

TEST(Serialization, EmptyAndSingleTokenMemoriesRoundTrip) {
  Memory empty(memory_settings(), 3, 2);
  const Memory e2 = Memory::deserialize(empty.serialize());
  EXPECT_EQ(e2.size(), 0);
  EXPECT_EQ(e2.state_sha256(), empty.state_sha256());
  Memory one(memory_settings(), 3, 3);
  one.add_batch(TokenSet::from_rows(make_keys(Stream::kGaussian, 1, 3, 16)));
  const Memory o2 = Memory::deserialize(one.serialize());
  EXPECT_EQ(o2.state_sha256(), one.state_sha256());
  const Eigen::VectorXd q = Eigen::VectorXd::Zero(3);
  EXPECT_EQ(o2.readout(q), one.readout(q));
}

TEST(Readout, EmptySupportReadsNaN) {
  Support s;
  s.keys.resize(0, 3);
  s.values.resize(0, 2);
  s.alpha.resize(0);
  KernelSettings k;
  const Eigen::VectorXd o = readout(k, s, Eigen::VectorXd::Zero(3));
  ASSERT_EQ(o.size(), 2);
  EXPECT_TRUE(std::isnan(o[0]) && std::isnan(o[1]));
  EXPECT_EQ(decision_function(k, s, 0.0, Eigen::VectorXd::Zero(3)), -0.5);
}

// A certificate states what was removed: ids that were not removed, ids of another memory's state
// and ids given twice are refused (InvalidArgument naming the id), not certified.
TEST(Certificate, RefusesARemovalThatDidNotHappen) {
  Memory m = filled(60, 3, 31);
  const State before = m.state();
  const OpDiagnostics dg = m.remove_batch({3, 4});
  const auto refuses = [&](const State& b, const std::vector<TokenId>& rm, const std::string& what) {
    try {
      removal_certificate(b, m, rm, "", dg, CertificateOptions{}, RowMatrix(0, 3));
      ADD_FAILURE() << "certified " << what;
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // Id 10 is still in the memory; 3 and 4 are gone without being named.
  EXPECT_NE(refuses(before, {10}, "an id still held").find("10 is still in the memory"),
            std::string::npos);
  // Only part of what was removed.
  EXPECT_NE(refuses(before, {3}, "half of the removal").find("id 4 of `before` is gone"),
            std::string::npos);
  // An id `before` never held.
  EXPECT_NE(refuses(before, {3, 4, 999}, "an unknown id").find("999 was not in `before`"),
            std::string::npos);
  // Duplicates are refused, not kept as given.
  EXPECT_NE(refuses(before, {3, 4, 4}, "a duplicate id").find("4 is given twice"),
            std::string::npos);
  // A state of an unrelated memory: other ids, or other settings.
  Memory other = filled(80, 3, 32);
  EXPECT_FALSE(refuses(other.state(), {3, 4}, "another memory's ids").empty());
  MemorySettings ms;
  ms.problem = settings().problem;
  ms.problem.C = 0.05;
  Memory third(ms, 3, 3);
  third.add_batch(TokenSet::from_rows(make_keys(Stream::kGaussian, 60, 3, 31)));
  EXPECT_NE(refuses(third.state(), {3, 4}, "another memory's settings").find("another memory"),
            std::string::npos);
  // The true removal, in any order, certifies.
  const RemovalCertificate c =
      removal_certificate(before, m, {4, 3}, "", dg, CertificateOptions{}, RowMatrix(0, 3));
  EXPECT_TRUE(c.verify.ok());
  EXPECT_EQ(c.removed_ids, (std::vector<TokenId>{3, 4}));
}

// Counts in a certificate's JSON are non-negative integers: a negative one is refused by name
// instead of wrapping to a huge size_t.
TEST(Certificate, FromJsonRefusesNegativeCounts) {
  Memory m = filled(40, 3, 33);
  const State before = m.state();
  const OpDiagnostics dg = m.remove_batch({1});
  const nlohmann::json j =
      removal_certificate(before, m, {1}, "", dg, CertificateOptions{}, RowMatrix(0, 3)).to_json();
  for (const auto& path : {"/after/n", "/before/reserve", "/evictions", "/solver/events"}) {
    nlohmann::json broken = j;
    broken[nlohmann::json::json_pointer(path)] = -3;
    try {
      RemovalCertificate::from_json(broken);
      ADD_FAILURE() << "from_json accepted " << path << " = -3";
    } catch (const FormatError& e) {
      std::string field = std::string(path).substr(1);
      std::replace(field.begin(), field.end(), '/', '.');
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  }
  nlohmann::json huge = j;
  huge["after"]["n"] = std::numeric_limits<std::uint64_t>::max();
  EXPECT_THROW(RemovalCertificate::from_json(huge), FormatError);
}

// A finite query far from every key (||q - x||^2 overflows fp64) reads the keys nearest to it, as
// the limit of the RBF weights, never NaN; a non-finite query is refused by name.
TEST(Readout, FarQueryReadsTheNearestKeysNotNaN) {
  Support s;
  s.keys = RowMatrix(3, 2);
  s.keys << 0, 0, 1, 0, 0, 1;
  s.values = RowMatrix::Identity(3, 3);
  s.alpha = Eigen::Vector3d(0.25, 0.5, 0.25);
  KernelSettings k;
  k.bandwidth = 1.0;
  const auto read = [&](double a, double b) { return readout(k, s, Eigen::Vector2d(a, b)); };
  EXPECT_EQ(read(1e308, 0), Eigen::Vector3d(0, 1, 0));     // key (1, 0) is nearest
  // (0, 0) and (0, 1) differ by exactly 1 in squared distance from (-1e308, 0): weights 1 : e^-1.
  const Eigen::VectorXd west = read(-1e308, 0);
  EXPECT_DOUBLE_EQ(west[0], 1 / (1 + std::exp(-1.0)));
  EXPECT_EQ(west[1], 0.0);
  EXPECT_DOUBLE_EQ(west[2], std::exp(-1.0) / (1 + std::exp(-1.0)));
  EXPECT_EQ(read(0, 1e200), Eigen::Vector3d(0, 0, 1));     // key (0, 1)
  EXPECT_EQ(read(-1e308, -1e308), Eigen::Vector3d(1, 0, 0));
  // Keys (1, 0) and (0, 1) are equally far from (1e308, 1e308): their coefficients split it.
  const Eigen::VectorXd tie = read(1e308, 1e308);
  EXPECT_EQ(tie[0], 0.0);
  EXPECT_DOUBLE_EQ(tie[1], 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(tie[2], 1.0 / 3.0);
  // The ordinary path is unchanged.
  EXPECT_TRUE(read(0.5, 0.5).allFinite());
  EXPECT_THROW(read(std::numeric_limits<double>::infinity(), 0), InvalidArgument);
  EXPECT_THROW(read(std::nan(""), 0), InvalidArgument);
}

// A bounded-mode memory evicts the tokens a removal leaves in reserve: those ids may leave with the
// removed ones, but an id still held or one `before` lacked is refused there too.
TEST(Certificate, BoundedModeRemovalMayEvict) {
  Memory m = filled(120, 3, 34, MemoryMode::kBounded);
  const State before = m.state();
  const std::vector<TokenId> rm = {before.partition.margin[0]};
  const OpDiagnostics dg = m.remove_batch(rm);
  const RemovalCertificate c =
      removal_certificate(before, m, rm, "", dg, CertificateOptions{}, RowMatrix(0, 3));
  EXPECT_TRUE(c.verify.ok());
  const std::vector<TokenId> still = {m.state().ids.front()};
  EXPECT_THROW(removal_certificate(before, m, still, "", dg, CertificateOptions{}, RowMatrix(0, 3)),
               InvalidArgument);
}
