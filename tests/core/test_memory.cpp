#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <set>

#include "core/memory_impl.h"  // detail:: screening switches and counters
#include "streams.h"
#include "svattn/batch_solver.h"
#include "svattn/certificate.h"
#include "svattn/errors.h"
#include "svattn/hash.h"
#include "svattn/memory.h"

using namespace svattn;
using svattn::testing::make_keys;
using svattn::testing::Stream;

namespace {

MemorySettings msettings(double C, double sigma, double ridge = 1e-6) {
  MemorySettings s;
  s.problem.C = C;
  s.problem.kernel.bandwidth = sigma;
  s.problem.ridge = ridge;
  return s;
}

std::string batch_hash(const RowMatrix& x, const std::set<TokenId>& present,
                       const ProblemSettings& p) {
  TokenSet t;
  t.keys.resize(static_cast<int>(present.size()), x.cols());
  int r = 0;
  for (TokenId id : present) {
    t.ids.push_back(id);
    t.keys.row(r++) = x.row(id);
  }
  t.values = t.keys;
  BatchSettings bs;
  bs.problem = p;
  const BatchResult br = solve_batch(t, bs);
  EXPECT_TRUE(br.state.status == Status::kOptimal || br.state.status == Status::kWarmup);
  return br.state.state_sha256;
}

void expect_kkt(const Memory& m, const std::string& where) {
  const State s = m.state();
  ASSERT_TRUE(s.status == Status::kOptimal || s.status == Status::kWarmup ||
              s.status == Status::kEmpty)
      << where << ": status " << to_string(s.status);
  EXPECT_LE(s.kkt.max_violation, 1e-9) << where;
  if (s.status != Status::kEmpty) EXPECT_LE(s.kkt.sum_error, 1e-11) << where;
  EXPECT_EQ(s.kkt.box_violation, 0.0) << where;
}

struct Case {
  Stream stream;
  int n;
  int d;
  double Cn;  // C = Cn / n
  double sigma;
};

// Interleaved adds and removes; KKT after every op; hash equal to the batch solve at checkpoints.
void run_interleaved(const Case& c, int ops, std::uint64_t seed, int checkpoint_every) {
  const RowMatrix x = make_keys(c.stream, c.n, c.d, seed);
  const double C = c.Cn / (c.n / 2.0);
  Memory m(msettings(C, c.sigma), c.d, c.d);
  std::set<TokenId> present;
  std::vector<TokenId> absent;
  for (int i = c.n - 1; i >= 0; --i) absent.push_back(i);
  std::mt19937_64 rng(seed + 1);
  int checks = 0;
  for (int op = 0; op < ops; ++op) {
    const bool add = present.empty() || (!absent.empty() && (rng() % 100) < 60);
    if (add) {
      const size_t k = rng() % absent.size();
      const TokenId id = absent[k];
      absent.erase(absent.begin() + k);
      m.add(id, x.row(id).transpose(), x.row(id).transpose());
      present.insert(id);
    } else {
      auto it = present.begin();
      std::advance(it, rng() % present.size());
      const TokenId id = *it;
      m.remove(id);
      present.erase(it);
      absent.push_back(id);
    }
    expect_kkt(m, std::string(stream_name(c.stream)) + " op " + std::to_string(op));
    if ((op + 1) % checkpoint_every == 0 || op + 1 == ops) {
      ASSERT_EQ(m.state_sha256(), batch_hash(x, present, m.settings().problem))
          << stream_name(c.stream) << " n=" << present.size() << " op " << op;
      ++checks;
    }
  }
  m.check_invariants();
  EXPECT_GT(checks, 0);
}

}  // namespace

TEST(Memory, IngestThenDecrementEqualsRetrainOnEveryStream) {
  const std::vector<Case> cases = {
      {Stream::kGaussian, 300, 2, 3.0, 1.0},      {Stream::kGaussian, 300, 16, 3.0, 4.0},
      {Stream::kGaussian, 200, 64, 10.0, 8.0},    {Stream::kClustered, 300, 4, 3.0, 1.5},
      {Stream::kNearDuplicate, 300, 4, 3.0, 1.0}, {Stream::kDuplicate, 300, 3, 3.0, 1.0},
      {Stream::kHeavyTailed, 300, 3, 3.0, 2.0}};
  std::uint64_t seed = 1;
  for (const Case& c : cases) {
    const RowMatrix x = make_keys(c.stream, c.n, c.d, seed++);
    const double C = c.Cn / c.n;
    Memory m(msettings(C, c.sigma), c.d, c.d);
    for (int i = 0; i < c.n; ++i) m.add(i, x.row(i).transpose(), x.row(i).transpose());
    m.check_invariants();
    std::set<TokenId> present;
    for (int i = 0; i < c.n; ++i) present.insert(i);
    ASSERT_EQ(m.state_sha256(), batch_hash(x, present, m.settings().problem))
        << stream_name(c.stream);
    // Remove margin, error and reserve tokens alike.
    const State s = m.state();
    std::vector<TokenId> victims;
    for (size_t k = 0; k < std::min<size_t>(4, s.partition.margin.size()); ++k)
      victims.push_back(s.partition.margin[k * s.partition.margin.size() / 4]);
    for (size_t k = 0; k < std::min<size_t>(3, s.partition.error.size()); ++k)
      victims.push_back(s.partition.error[k]);
    for (size_t k = 0; k < std::min<size_t>(3, s.partition.reserve.size()); ++k)
      victims.push_back(s.partition.reserve[k * 7 % s.partition.reserve.size()]);
    std::sort(victims.begin(), victims.end());
    victims.erase(std::unique(victims.begin(), victims.end()), victims.end());
    for (TokenId v : victims) {
      m.remove(v);
      present.erase(v);
      expect_kkt(m, stream_name(c.stream));
      ASSERT_EQ(m.state_sha256(), batch_hash(x, present, m.settings().problem))
          << stream_name(c.stream) << " after removing " << v;
    }
    m.check_invariants();
  }
}

TEST(Memory, InterleavedAddRemoveGaussian) {
  run_interleaved({Stream::kGaussian, 200, 5, 3, 2.0}, 600, 7, 50);
}
TEST(Memory, InterleavedAddRemoveNearDuplicates) {
  run_interleaved({Stream::kNearDuplicate, 200, 3, 3, 1.0}, 600, 8, 50);
}
TEST(Memory, InterleavedAddRemoveDuplicates) {
  run_interleaved({Stream::kDuplicate, 200, 3, 3, 1.0}, 600, 9, 50);
}
TEST(Memory, InterleavedAddRemoveHeavyTailed) {
  run_interleaved({Stream::kHeavyTailed, 200, 2, 3, 2.0}, 600, 10, 50);
}

TEST(MemorySlow, TenThousandInterleavedOpsAcrossStreams) {
  std::uint64_t seed = 100;
  for (Stream s : {Stream::kGaussian, Stream::kClustered, Stream::kNearDuplicate,
                   Stream::kDuplicate, Stream::kHeavyTailed})
    run_interleaved({s, 600, 8, 4, 3.0}, 2500, seed++, 250);
}

TEST(MemorySlow, LargeStream3000) {
  const RowMatrix x = make_keys(Stream::kGaussian, 3000, 32, 77);
  Memory m(msettings(0.005, 6.0), 32, 32);
  std::set<TokenId> present;
  for (int i = 0; i < 3000; ++i) {
    m.add(i, x.row(i).transpose(), x.row(i).transpose());
    present.insert(i);
  }
  EXPECT_EQ(m.state_sha256(), batch_hash(x, present, m.settings().problem));
  const State s = m.state();
  for (size_t k = 0; k < 10; ++k) {
    const TokenId v = s.partition.margin[k];
    m.remove(v);
    present.erase(v);
  }
  EXPECT_EQ(m.state_sha256(), batch_hash(x, present, m.settings().problem));
}

TEST(Memory, CAcrossItsRange) {
  const RowMatrix x = make_keys(Stream::kGaussian, 120, 4, 3);
  for (double C : {1.0 / 119, 1.0 / 100, 0.05, 0.3, 1.0, 5.0}) {
    Memory m(msettings(C, 1.5), 4, 4);
    std::set<TokenId> present;
    for (int i = 0; i < 120; ++i) {
      m.add(i, x.row(i).transpose(), x.row(i).transpose());
      present.insert(i);
    }
    expect_kkt(m, "C=" + std::to_string(C));
    EXPECT_EQ(m.state_sha256(), batch_hash(x, present, m.settings().problem)) << "C=" << C;
    for (TokenId v : {3, 50, 77}) {
      m.remove(v);
      present.erase(v);
      EXPECT_EQ(m.state_sha256(), batch_hash(x, present, m.settings().problem)) << "C=" << C;
    }
    if (C >= 1) EXPECT_TRUE(m.state().partition.error.empty());
  }
}

TEST(Memory, WarmupTransitionsBothWays) {
  const RowMatrix x = make_keys(Stream::kGaussian, 30, 3, 4);
  Memory m(msettings(0.1, 1.0), 3, 3);  // 1/C = 10
  std::set<TokenId> present;
  for (int i = 0; i < 30; ++i) {
    m.add(i, x.row(i).transpose(), x.row(i).transpose());
    present.insert(i);
    EXPECT_EQ(m.state().warmup, i + 1 <= 10) << i;
    EXPECT_EQ(m.state_sha256(), batch_hash(x, present, m.settings().problem)) << "n=" << i + 1;
  }
  for (int i = 29; i >= 0; --i) {
    m.remove(i);
    present.erase(i);
    if (present.empty()) {
      EXPECT_EQ(m.status(), Status::kEmpty);
    } else {
      EXPECT_EQ(m.state().warmup, static_cast<int>(present.size()) <= 10);
      EXPECT_EQ(m.state_sha256(), batch_hash(x, present, m.settings().problem))
          << "n=" << present.size();
    }
  }
  // n = 1 and back.
  m.add(5, x.row(5).transpose(), x.row(5).transpose());
  EXPECT_EQ(m.alpha(5), 1.0);
}

TEST(Memory, SlidingWindow) {
  const RowMatrix x = make_keys(Stream::kClustered, 400, 4, 12);
  const int w = 100;
  Memory m(msettings(0.05, 1.5), 4, 4);
  std::set<TokenId> present;
  for (int i = 0; i < 400; ++i) {
    m.add(i, x.row(i).transpose(), x.row(i).transpose());
    present.insert(i);
    if (i >= w) {
      m.remove(i - w);
      present.erase(i - w);
    }
    if (i % 50 == 49)
      EXPECT_EQ(m.state_sha256(), batch_hash(x, present, m.settings().problem)) << i;
  }
}

TEST(Memory, EvictionLeavesReadoutsBitIdentical) {
  const RowMatrix x = make_keys(Stream::kGaussian, 300, 6, 13);
  Memory m(msettings(0.02, 2.0), 6, 6);
  TokenSet t = TokenSet::from_rows(x);
  m.add_batch(t);
  const RowMatrix q = make_keys(Stream::kGaussian, 40, 6, 99);
  std::vector<Eigen::VectorXd> before;
  std::vector<double> dec;
  for (int i = 0; i < 40; ++i) {
    before.push_back(m.readout(q.row(i).transpose()));
    dec.push_back(m.decision(q.row(i).transpose()));
  }
  const State s0 = m.state();
  const std::vector<TokenId> ev = m.evict_reserve();
  EXPECT_EQ(ev, s0.partition.reserve);
  EXPECT_EQ(m.size(), 300 - static_cast<int>(ev.size()));
  for (int i = 0; i < 40; ++i) {
    const Eigen::VectorXd after = m.readout(q.row(i).transpose());
    for (int c = 0; c < 6; ++c) EXPECT_EQ(after[c], before[i][c]);  // bit for bit
    EXPECT_EQ(m.decision(q.row(i).transpose()), dec[i]);
  }
  const State s1 = m.state();
  EXPECT_EQ(s1.b, s0.b);
  EXPECT_TRUE(s1.partition.reserve.empty());
}

TEST(Memory, BoundedModeEvictsAsReserveAppears) {
  const RowMatrix x = make_keys(Stream::kGaussian, 400, 4, 14);
  MemorySettings s = msettings(0.05, 1.5);
  s.mode = MemoryMode::kBounded;
  Memory m(s, 4, 4);
  for (int i = 0; i < 400; ++i) {
    m.add(i, x.row(i).transpose(), x.row(i).transpose());
    if (!m.state().warmup) EXPECT_TRUE(m.state().partition.reserve.empty()) << i;
  }
  // The retained set is exactly the support, and its state equals the batch solve on it.
  const TokenSet kept = m.tokens();
  BatchSettings bs;
  bs.problem = s.problem;
  EXPECT_EQ(solve_batch(kept, bs).state.state_sha256, m.state_sha256());
  // Budgeted: reserve tokens are only evicted above the budget.
  s.token_budget = 250;
  Memory mb(s, 4, 4);
  for (int i = 0; i < 400; ++i) mb.add(i, x.row(i).transpose(), x.row(i).transpose());
  EXPECT_GE(mb.size(), 250);
  EXPECT_LE(mb.size(), 250 + static_cast<int>(mb.state().partition.margin.size() +
                                              mb.state().partition.error.size()));
}

TEST(Memory, RemoveThenReaddRestoresTheHash) {
  const RowMatrix x = make_keys(Stream::kNearDuplicate, 200, 4, 15);
  Memory m(msettings(0.03, 1.0), 4, 4);
  m.add_batch(TokenSet::from_rows(x));
  const std::string h0 = m.state_sha256();
  const State s = m.state();
  for (TokenId v :
       {s.partition.margin.front(), s.partition.margin.back(), s.partition.reserve.front()}) {
    m.remove(v);
    EXPECT_NE(m.state_sha256(), h0);
    m.add(v, x.row(v).transpose(), x.row(v).transpose());
    EXPECT_EQ(m.state_sha256(), h0) << "token " << v;
  }
}

TEST(Memory, DiagnosticsCountKernelValuesAndCanonicalTime) {
  const RowMatrix x = make_keys(Stream::kGaussian, 300, 4, 17);
  Memory m(msettings(0.02, 1.5), 4, 4);
  const OpDiagnostics b = m.add_batch(TokenSet::from_rows(x));
  const State s = m.state();
  ASSERT_FALSE(s.partition.margin.empty());
  ASSERT_FALSE(s.partition.reserve.empty());
  // A margin token's removal moves coefficients: at least one canonical refinement, timed inside
  // the operation's own wall time.
  const TokenId v = s.partition.margin[s.partition.margin.size() / 2];
  const OpDiagnostics d = m.remove(v);
  EXPECT_GE(d.canonical_solves, 1);
  EXPECT_GT(d.canonical_seconds, 0.0);
  EXPECT_LE(d.canonical_seconds, d.seconds);
  // A reserve token's removal moves nothing: no refinement and no kernel value.
  const OpDiagnostics e = m.remove(s.partition.reserve.front());
  EXPECT_EQ(e.canonical_solves, 0);
  EXPECT_EQ(e.canonical_seconds, 0.0);
  EXPECT_EQ(e.kernel_evaluations, 0);
  // A new token's gradient reads its row over every support column: one kernel value each.
  const OpDiagnostics a = m.add(v, x.row(v).transpose(), x.row(v).transpose());
  EXPECT_GE(a.kernel_evaluations, static_cast<long>(s.partition.margin.size()) - 1);
  EXPECT_EQ(m.totals().kernel_evaluations, b.kernel_evaluations + d.kernel_evaluations +
                                               e.kernel_evaluations + a.kernel_evaluations);
  EXPECT_DOUBLE_EQ(m.totals().canonical_seconds, b.canonical_seconds + d.canonical_seconds +
                                                     e.canonical_seconds + a.canonical_seconds);
}

TEST(Memory, BatchOpsEqualSingleOps) {
  const RowMatrix x = make_keys(Stream::kGaussian, 250, 5, 16);
  Memory a(msettings(0.02, 2.0), 5, 5), b(msettings(0.02, 2.0), 5, 5);
  a.add_batch(TokenSet::from_rows(x));
  for (int i = 0; i < 250; ++i) b.add(i, x.row(i).transpose(), x.row(i).transpose());
  EXPECT_EQ(a.state_sha256(), b.state_sha256());
  const std::vector<TokenId> rm = {1, 5, 17, 33, 100, 200, 249};
  a.remove_batch(rm);
  for (TokenId v : rm) b.remove(v);
  EXPECT_EQ(a.state_sha256(), b.state_sha256());
}

TEST(Memory, StepCapFallsBackAndSaysSo) {
  const RowMatrix x = make_keys(Stream::kGaussian, 200, 4, 17);
  MemorySettings s = msettings(0.02, 1.0);
  s.max_steps_per_op = 1;
  Memory m(s, 4, 4);
  for (int i = 0; i < 200; ++i) m.add(i, x.row(i).transpose(), x.row(i).transpose());
  EXPECT_GT(m.totals().batch_fallbacks, 0);  // the cap was hit and recorded
  std::set<TokenId> present;
  for (int i = 0; i < 200; ++i) present.insert(i);
  EXPECT_EQ(m.state_sha256(), batch_hash(x, present, s.problem));  // and the answer is still exact
}

TEST(Memory, ZeroRidgeDuplicatesReportSingular) {
  RowMatrix x = make_keys(Stream::kGaussian, 40, 2, 18);
  for (int i = 20; i < 40; ++i) x.row(i) = x.row(i - 20);
  Memory m(msettings(0.05, 1.0, 0.0), 2, 2);
  m.add_batch(TokenSet::from_rows(x));  // must terminate
  const Status st = m.status();
  EXPECT_TRUE(st == Status::kSingular || st == Status::kOptimal) << to_string(st);
}

TEST(Memory, MisuseThrowsTypedErrors) {
  Memory m(msettings(0.1, 1.0), 2, 2);
  Eigen::VectorXd k(2), v(2), bad(3);
  k << 1, 2;
  v << 0, 0;
  m.add(1, k, v);
  EXPECT_THROW(m.add(1, k, v), AlreadyExists);
  EXPECT_THROW(m.add(2, bad, v), InvalidArgument);
  Eigen::VectorXd nan = k;
  nan[0] = std::nan("");
  EXPECT_THROW(m.add(3, nan, v), InvalidArgument);
  EXPECT_THROW(m.remove(42), NotFound);
  EXPECT_THROW(m.remove_batch({1, 1}), InvalidArgument);
  EXPECT_EQ(m.size(), 1);  // nothing changed
  MemorySettings s;
  s.refactor_period = 0;
  EXPECT_THROW(Memory(s, 2, 2), InvalidArgument);
  EXPECT_THROW(Memory(MemorySettings{}, 0, 2), InvalidArgument);
}

TEST(Memory, SerializeRoundTripAndCorruption) {
  const RowMatrix x = make_keys(Stream::kClustered, 150, 3, 19);
  Memory m(msettings(0.03, 1.0), 3, 3);
  m.add_batch(TokenSet::from_rows(x));
  const std::vector<std::uint8_t> bytes = m.serialize();
  const Memory r = Memory::deserialize(bytes);
  EXPECT_EQ(r.state_sha256(), m.state_sha256());
  EXPECT_EQ(r.totals().batch_fallbacks, 0);  // restored from the stored state, no re-solve
  Eigen::VectorXd q(3);
  q << 0.1, 0.2, 0.3;
  EXPECT_EQ(r.readout(q)[0], m.readout(q)[0]);
  // The restored memory keeps working exactly.
  Memory r2 = r;
  r2.remove(10);
  Memory m2 = m;
  m2.remove(10);
  EXPECT_EQ(r2.state_sha256(), m2.state_sha256());

  std::vector<std::uint8_t> corrupt = bytes;
  corrupt[corrupt.size() / 2] ^= 0x01;
  EXPECT_THROW(Memory::deserialize(corrupt), FormatError);
  std::vector<std::uint8_t> truncated(bytes.begin(), bytes.begin() + bytes.size() / 3);
  EXPECT_THROW(Memory::deserialize(truncated), FormatError);
  std::vector<std::uint8_t> junk(100, 7);
  EXPECT_THROW(Memory::deserialize(junk), FormatError);

  // Format version 1 (no eviction count) is still read; its count reads as 0. Built from the
  // version-2 bytes: drop the 8-byte count after schur_tol (offset 102), set the version, re-sum.
  {
    Memory ev = m;
    const std::size_t nev = ev.evict_reserve().size();
    ASSERT_GT(nev, 0u);
    const std::vector<std::uint8_t> v2 = ev.serialize();
    EXPECT_EQ(Memory::deserialize(v2).evictions(), nev);
    std::vector<std::uint8_t> v1(v2.begin(), v2.begin() + 102);
    v1.insert(v1.end(), v2.begin() + 110, v2.end() - 64);
    v1[16] = 1;
    v1[17] = v1[18] = v1[19] = 0;
    const std::string sum = sha256_hex(v1.data(), v1.size());
    v1.insert(v1.end(), sum.begin(), sum.end());
    const Memory old = Memory::deserialize(v1);
    EXPECT_EQ(old.state_sha256(), ev.state_sha256());
    EXPECT_EQ(old.evictions(), 0u);
    std::vector<std::uint8_t> v9(v1.begin(), v1.end() - 64);
    v9[16] = 9;
    const std::string sum9 = sha256_hex(v9.data(), v9.size());
    v9.insert(v9.end(), sum9.begin(), sum9.end());
    try {
      Memory::deserialize(v9);
      FAIL() << "version 9 was accepted";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find("unsupported version 9"), std::string::npos) << e.what();
    }
  }

  const std::string path = ::testing::TempDir() + "svattn_mem_test.bin";
  m.save(path);
  EXPECT_EQ(Memory::load(path).state_sha256(), m.state_sha256());
  EXPECT_THROW(Memory::load(path + ".missing"), IoError);
  std::remove(path.c_str());
}

TEST(Memory, RestoreFromForeignStateResolves) {
  const RowMatrix x = make_keys(Stream::kGaussian, 100, 3, 20);
  const TokenSet t = TokenSet::from_rows(x);
  BatchSettings bs;
  bs.problem.C = 0.05;
  State s = solve_batch(t, bs).state;
  MemorySettings ms;
  ms.problem = bs.problem;
  OpDiagnostics dg;
  const Memory good = Memory::restore(ms, t, s, &dg);
  EXPECT_EQ(good.state_sha256(), s.state_sha256);
  EXPECT_EQ(dg.batch_fallbacks, 0);
  s.alpha[s.alpha.size() / 2] += 0.01;  // a state that does not describe the tokens
  s.state_sha256 = std::string(64, '0');
  const Memory fixed = Memory::restore(ms, t, s, &dg);
  EXPECT_EQ(fixed.state_sha256(), good.state_sha256());
}

TEST(Memory, RestoreRejectsAStateSolvedUnderOtherSettings) {
  const RowMatrix x = make_keys(Stream::kGaussian, 120, 3, 23);
  Memory m(msettings(0.03, 1.0), 3, 3);
  m.add_batch(TokenSet::from_rows(x));
  const TokenSet t = m.tokens();
  const State s = m.state();
  MemorySettings other = msettings(0.05, 1.0);
  try {
    Memory::restore(other, t, s);
    FAIL() << "restore accepted a state solved with another C";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("C = 0.03"), std::string::npos) << e.what();
  }
  other = msettings(0.03, 2.0);
  EXPECT_THROW(Memory::restore(other, t, s), InvalidArgument);
  other = msettings(0.03, 1.0, 1e-4);
  EXPECT_THROW(Memory::restore(other, t, s), InvalidArgument);
  EXPECT_EQ(Memory::restore(msettings(0.03, 1.0), t, s).state_sha256(), s.state_sha256);
}

TEST(Memory, EvictInWarmupEvictsNothingAndResetsTheDiagnostics) {
  const RowMatrix x = make_keys(Stream::kGaussian, 5, 2, 24);
  Memory m(msettings(0.1, 1.0), 2, 2);  // 5 * 0.1 < 1: warm-up
  m.add_batch(TokenSet::from_rows(x));
  OpDiagnostics d;
  d.ops = 42;
  EXPECT_TRUE(m.evict_reserve(&d).empty());
  EXPECT_EQ(d.ops, 0);
  EXPECT_EQ(m.evictions(), 0u);
}

TEST(Memory, BorderedInverseIsExposedAndValid) {
  const RowMatrix x = make_keys(Stream::kGaussian, 150, 4, 21);
  Memory m(msettings(0.04, 1.5), 4, 4);
  m.add_batch(TokenSet::from_rows(x));
  const Eigen::MatrixXd& R = m.bordered_inverse();
  const std::vector<TokenId> order = m.margin_order();
  ASSERT_EQ(R.rows(), static_cast<int>(order.size()) + 1);
  EXPECT_LT(R(0, 0), 0.0);
  m.check_invariants();
}

// ------------------------------------------------------------ empty and one-token memories

namespace {

// Every public read of a memory, exercised (results returned so the caller can compare them).
struct Reads {
  std::string hash;
  State state;
  Eigen::VectorXd readout;
  double decision = 0;
};

Reads read_all(const Memory& m) {
  Reads r;
  r.state = m.state();
  r.hash = m.state_sha256();
  Eigen::VectorXd q = Eigen::VectorXd::Constant(m.dim(), 0.25);
  r.readout = m.readout(q);
  r.decision = m.decision(q);
  EXPECT_EQ(r.hash, r.state.state_sha256);
  EXPECT_EQ(static_cast<int>(r.state.ids.size()), m.size());
  EXPECT_EQ(r.readout.size(), m.value_dim());
  m.check_invariants();
  return r;
}

void expect_empty(const Memory& m, const std::string& fresh_hash, const std::string& where) {
  EXPECT_EQ(m.size(), 0) << where;
  EXPECT_EQ(m.status(), Status::kEmpty) << where;
  const Reads r = read_all(m);
  EXPECT_EQ(r.hash, fresh_hash) << where;
  EXPECT_EQ(r.state.status, Status::kEmpty) << where;
  EXPECT_FALSE(r.state.warmup) << where;
  EXPECT_EQ(r.state.b, 0.0) << where;
  EXPECT_TRUE(r.state.partition.margin.empty() && r.state.partition.error.empty() &&
              r.state.partition.reserve.empty())
      << where;
  EXPECT_EQ(m.tokens().size(), 0) << where;
  EXPECT_TRUE(m.margin_order().empty()) << where;
  EXPECT_EQ(m.bordered_inverse().size(), 0) << where;
  for (Eigen::Index c = 0; c < r.readout.size(); ++c)
    EXPECT_TRUE(std::isnan(r.readout[c])) << where << ": readout of an empty memory";
  // No support, b = 0: f(q) = -k(q, q) / 2.
  EXPECT_EQ(r.decision, -0.5) << where;
}

}  // namespace

TEST(MemoryEmpty, FreshMemoryIsDefined) {
  Memory m(msettings(0.05, 1.0), 3, 2);
  const std::string h = m.state_sha256();
  EXPECT_EQ(h.size(), 64u);
  expect_empty(m, h, "fresh");
  OpDiagnostics d;
  d.ops = 7;
  EXPECT_TRUE(m.evict_reserve(&d).empty());
  EXPECT_EQ(d.ops, 0);
  const OpDiagnostics r = m.remove_batch({});
  EXPECT_EQ(r.ops, 0);
  EXPECT_THROW(m.remove(1), NotFound);
  const OpDiagnostics a = m.add_batch(TokenSet{});
  EXPECT_EQ(a.ops, 0);
  expect_empty(m, h, "after empty batches");
  // Copies, moves and a serialization round trip of an empty memory.
  Memory c = m;
  expect_empty(c, h, "copy");
  Memory mv = std::move(c);
  expect_empty(mv, h, "moved");
  expect_empty(Memory::deserialize(m.serialize()), h, "deserialized");
  // The same settings give the same empty hash; other settings another one.
  EXPECT_EQ(Memory(msettings(0.05, 1.0), 3, 2).state_sha256(), h);
  EXPECT_NE(Memory(msettings(0.06, 1.0), 3, 2).state_sha256(), h);
}

TEST(MemoryEmpty, OneTokenMemory) {
  Memory m(msettings(0.05, 1.0), 3, 2);
  const std::string h0 = m.state_sha256();
  Eigen::VectorXd k(3), v(2);
  k << 0.5, -1.0, 2.0;
  v << 3.0, -4.0;
  m.add(7, k, v);
  EXPECT_EQ(m.size(), 1);
  EXPECT_EQ(m.alpha(7), 1.0);
  const Reads r = read_all(m);
  EXPECT_TRUE(r.state.warmup);
  EXPECT_EQ(r.state.status, Status::kWarmup);
  EXPECT_EQ(r.readout[0], 3.0);  // one support token: the readout is its value
  EXPECT_EQ(r.readout[1], -4.0);
  TokenSet t;
  t.ids = {7};
  t.keys = k.transpose();
  t.values = v.transpose();
  BatchSettings bs;
  bs.problem = m.settings().problem;
  EXPECT_EQ(r.hash, solve_batch(t, bs).state.state_sha256);
  EXPECT_TRUE(m.evict_reserve().empty());  // warm-up: the one token carries all the weight
  EXPECT_EQ(m.size(), 1);
  const OpDiagnostics d = m.remove(7);
  EXPECT_EQ(d.ops, 1);
  EXPECT_EQ(d.status, Status::kEmpty);
  expect_empty(m, h0, "after removing the only token");
  m.add(7, k, v);
  EXPECT_EQ(m.state_sha256(), r.hash);
}

// Removing every token (one by one, in one batch, in and out of warm-up, in bounded mode) leaves
// the memory indistinguishable from a fresh one; re-adding then equals the batch solve.
TEST(MemoryEmpty, RemoveEveryTokenThenReadd) {
  const RowMatrix x = make_keys(Stream::kClustered, 120, 4, 31);
  for (double C : {0.02, 0.05, 0.5}) {  // n C = 2.4 / 6 / 60: margin, error and reserve tokens
    for (int how = 0; how < 4; ++how) {
      MemorySettings s = msettings(C, 1.5);
      if (how == 3) s.mode = MemoryMode::kBounded;
      Memory m(s, 4, 4);
      const std::string h0 = m.state_sha256();
      const std::string where = "C=" + std::to_string(C) + " how=" + std::to_string(how);
      m.add_batch(TokenSet::from_rows(x));
      std::vector<TokenId> all;
      for (const TokenId id : m.tokens().ids) all.push_back(id);
      if (how == 0 || how == 3) {
        m.remove_batch(all);
      } else if (how == 1) {
        for (TokenId id : all) m.remove(id);  // ascending
      } else {
        std::mt19937_64 rng(5);
        std::shuffle(all.begin(), all.end(), rng);
        for (TokenId id : all) {
          m.remove(id);
          expect_kkt(m, where);
        }
      }
      expect_empty(m, h0, where);
      EXPECT_TRUE(m.evict_reserve().empty()) << where;
      // Re-add (one by one) equals a batch solve on the re-added tokens.
      std::set<TokenId> present;
      for (int i = 0; i < 60; ++i) {
        m.add(i, x.row(i).transpose(), x.row(i).transpose());
        present.insert(i);
      }
      expect_kkt(m, where + " re-added");
      if (how != 3) {
        EXPECT_EQ(m.state_sha256(), batch_hash(x, present, s.problem)) << where;
      } else {
        BatchSettings bs;
        bs.problem = s.problem;
        EXPECT_EQ(m.state_sha256(), solve_batch(m.tokens(), bs).state.state_sha256) << where;
      }
      m.check_invariants();
    }
  }
}

TEST(MemoryEmpty, RestoreOfAnEmptyState) {
  Memory m(msettings(0.05, 1.0), 3, 3);
  const State s = m.state();
  TokenSet none;
  none.keys.resize(0, 3);
  none.values.resize(0, 3);
  OpDiagnostics dg;
  const Memory r = Memory::restore(m.settings(), none, s, &dg);
  EXPECT_EQ(dg.batch_fallbacks, 0);
  expect_empty(r, s.state_sha256, "restored");
}

// The removal certificate of erasing everything (svattn demo --n 20, forget-check of every row):
// defined, and the re-solve on the empty remainder hashes like the erased memory.
TEST(MemoryEmpty, CertificateOfRemovingEveryToken) {
  const RowMatrix x = make_keys(Stream::kGaussian, 30, 3, 32);
  for (double C : {0.02, 0.1}) {  // warm-up throughout, and leaving warm-up on the way down
    Memory m(msettings(C, 1.0), 3, 3);
    m.add_batch(TokenSet::from_rows(x));
    const State before = m.state();
    std::vector<TokenId> all = before.ids;
    const OpDiagnostics dg = m.remove_batch(all);
    const RowMatrix probes = make_keys(Stream::kGaussian, 4, 3, 33);
    const nlohmann::json cert = removal_certificate(before, m, all, "", dg, true, probes).to_json();
    EXPECT_EQ(cert.at("after").at("n").get<int>(), 0);
    EXPECT_TRUE(cert.at("check").at("hash_equal").get<bool>()) << cert.dump();
    EXPECT_TRUE(cert.at("check").at("partition_equal").get<bool>()) << cert.dump();
    const VerifyReport vr = verify_state(m.tokens(), m.state(), m.settings().tolerances, false);
    EXPECT_TRUE(vr.error.empty()) << vr.error;
    EXPECT_TRUE(vr.hash_ok);
    EXPECT_EQ(vr.kkt.max_violation, 0.0);
  }
}

// ------------------------------------------------------------ screening bound and sustained
// removals

namespace {

// Interleaved adds and removes with Memory::check_invariants after every operation: it recomputes
// every reserve token's gradient exactly and asserts that the screening bound kept for it is a
// lower bound and that its KKT sign holds (so the bound never skipped a token whose sign changed).
// Returns the reserve gradients the path recomputed because their bound failed.
long screened_ops(Stream stream, int n, int d, int ops, std::uint64_t seed) {
  const RowMatrix x = make_keys(stream, n, d, seed);
  Memory m(msettings(4.0 / (n / 2.0), 3.0), d, d);
  std::vector<TokenId> present, absent;
  for (int i = n - 1; i >= 0; --i) absent.push_back(i);
  std::mt19937_64 rng(seed + 3);
  long tracked = 0;
  for (int op = 0; op < ops; ++op) {
    const bool add = present.empty() || (!absent.empty() && (rng() % 100) < 55);
    std::vector<TokenId>& from = add ? absent : present;
    const size_t k = rng() % from.size();
    const TokenId id = from[k];
    from.erase(from.begin() + k);
    const OpDiagnostics dg =
        add ? m.add(id, x.row(id).transpose(), x.row(id).transpose()) : m.remove(id);
    (add ? present : absent).push_back(id);
    tracked += dg.tracked;
    m.check_invariants();
  }
  std::set<TokenId> now(present.begin(), present.end());
  EXPECT_EQ(m.state_sha256(), batch_hash(x, now, m.settings().problem));
  return tracked;
}

}  // namespace

TEST(Memory, ScreeningBoundHoldsOnEveryToken) {
  std::uint64_t seed = 50;
  long tracked = 0;
  const long cleared0 = svattn::detail::g_spread_cleared;
  for (Stream s : {Stream::kGaussian, Stream::kClustered, Stream::kNearDuplicate,
                   Stream::kDuplicate, Stream::kHeavyTailed})
    tracked += screened_ops(s, 400, 8, 300, seed++);
  EXPECT_GT(tracked, 0) << "the path never relied on the bound";
  EXPECT_GT(svattn::detail::g_spread_cleared, cleared0) << "the spread bound never cleared a token";
}

// The slack index and the spread bound change which tokens are recomputed, never the state: the
// same stream with each of them off ends in the same hash, and every op passes check_invariants.
TEST(Memory, ScreeningVariantsReachTheSameState) {
  const int n = 300, d = 6;
  const RowMatrix x = make_keys(Stream::kGaussian, n, d, 70);
  auto run = [&] {
    Memory m(msettings(4.0 / (n / 2.0), 3.0), d, d);
    for (int i = 0; i < n; ++i) m.add(i, x.row(i).transpose(), x.row(i).transpose());
    for (int i = 0; i < n; i += 3) {
      m.remove(i);
      m.check_invariants();
    }
    return m.state_sha256();
  };
  const std::string base = run();
  svattn::detail::g_spread_bound = false;
  EXPECT_EQ(run(), base);
  svattn::detail::g_spread_bound = true;
  svattn::detail::g_slack_index = false;
  EXPECT_EQ(run(), base);
  svattn::detail::g_slack_index = true;
  svattn::detail::g_net_displacement = false;
  EXPECT_EQ(run(), base);
  svattn::detail::g_net_displacement = true;
}

TEST(MemorySlow, ScreeningBoundNeverSkipsAChangedSign) {
  const int ops = 1100;  // 5 streams: 5,500 operations, every one checked
  std::uint64_t seed = 51;
  long tracked = 0;
  for (Stream s : {Stream::kGaussian, Stream::kClustered, Stream::kNearDuplicate,
                   Stream::kDuplicate, Stream::kHeavyTailed})
    tracked += screened_ops(s, 400, 8, ops, seed++);
  EXPECT_GT(tracked, 0) << "the path never relied on the bound";
  // The same workload under the looser bound (|db| counted as drift) and under the drift bound
  // alone (no spread bound) holds too.
  svattn::detail::g_exact_offset_screening = false;
  for (Stream s : {Stream::kGaussian, Stream::kClustered}) screened_ops(s, 400, 8, 600, seed++);
  svattn::detail::g_exact_offset_screening = true;
  svattn::detail::g_spread_bound = false;
  for (Stream s : {Stream::kGaussian, Stream::kHeavyTailed}) screened_ops(s, 400, 8, 600, seed++);
  svattn::detail::g_spread_bound = true;
}

// A sustained erasure workload: 1,000 different tokens (margin tokens first, then uniform draws)
// removed one after another from a 20k-token memory; KKT <= 1e-10 after every removal, the bound
// checked on every token every 250 removals, and the end state equals a batch solve bit for bit.
TEST(MemorySlow, ThousandRemovalsAtTwentyThousand) {
  const int n = 20000, d = 16;
  const RowMatrix x = make_keys(Stream::kGaussian, n, d, 60);
  const MemorySettings ms = msettings(0.01, 4.0);
  const TokenSet all = TokenSet::from_rows(x);
  BatchSettings bs;
  bs.problem = ms.problem;
  const State s0 = solve_batch(all, bs).state;
  Memory m = Memory::restore(ms, all, s0);
  ASSERT_EQ(m.state_sha256(), s0.state_sha256);
  std::vector<TokenId> victims(s0.partition.margin.begin(), s0.partition.margin.end());
  std::mt19937_64 rng(61);
  std::set<TokenId> chosen(victims.begin(), victims.end());
  while (victims.size() < 1000) {
    const TokenId id = static_cast<TokenId>(rng() % n);
    if (chosen.insert(id).second) victims.push_back(id);
  }
  std::set<TokenId> present;
  for (int i = 0; i < n; ++i) present.insert(i);
  for (size_t k = 0; k < victims.size(); ++k) {
    m.remove(victims[k]);
    present.erase(victims[k]);
    const State s = m.state();
    ASSERT_EQ(s.status, Status::kOptimal) << "removal " << k;
    ASSERT_LE(s.kkt.max_violation, 1e-10) << "removal " << k;
    if ((k + 1) % 250 == 0) m.check_invariants();
  }
  EXPECT_EQ(m.state_sha256(), batch_hash(x, present, ms.problem));
}
