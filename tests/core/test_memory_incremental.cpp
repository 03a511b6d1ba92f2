// The path users take: a memory built by add (records of tokens), then records removed by
// remove_batch. An incremental build and a restored build of the same tokens end in the same state
// after the same removals; duplicate keys take a bounded number of path steps; the ridge-0
// duplicate check that reads only the rows near g = 0 reports what the full check reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/canonical.h"
#include "streams.h"
#include "svattn/batch_solver.h"
#include "svattn/memory.h"

namespace svattn {
namespace {

using testing::make_keys;
using testing::Stream;

MemorySettings settings(double C, double sigma, double ridge) {
  MemorySettings s;
  s.problem.C = C;
  s.problem.kernel.bandwidth = sigma;
  s.problem.ridge = ridge;
  return s;
}

// Tokens [first, first + count) of x with ids from id0.
TokenSet rows(const RowMatrix& x, int first, int count, TokenId id0) {
  TokenSet t;
  t.keys = x.middleRows(first, count);
  t.values = t.keys;
  for (int r = 0; r < count; ++r) t.ids.push_back(id0 + r);
  return t;
}

std::string batch_hash(const TokenSet& tokens, const ProblemSettings& p) {
  BatchSettings bs;
  bs.problem = p;
  return solve_batch(tokens, bs).state.state_sha256;
}

// A record of 24 ids holding `support` support tokens (margin first, then error) and reserve ones.
std::vector<TokenId> record_with(const State& st, int support) {
  std::vector<TokenId> sup = st.partition.margin;
  sup.insert(sup.end(), st.partition.error.begin(), st.partition.error.end());
  std::vector<TokenId> rec;
  for (int k = 0; k < support; ++k) rec.push_back(sup[(k * sup.size()) / 3 + 1]);
  for (std::size_t k = 0; rec.size() < 24; k += 7) rec.push_back(st.partition.reserve[k]);
  return rec;
}

TEST(MemoryIncremental, IncrementalAndRestoredAgreeAfterRemoveBatch) {
  const MemorySettings s = settings(0.02, std::sqrt(8.0), 1e-6);
  const RowMatrix x = make_keys(Stream::kGaussian, 720, 8, 47);
  Memory built(s, 8, 8);
  for (int r = 0; r < 720; r += 24) built.add_batch(rows(x, r, 24, r));
  const State st = built.state();
  ASSERT_GE(st.partition.margin.size() + st.partition.error.size(), 6u);
  const std::vector<double> hints = built.gradient_lower_bounds();
  const Memory restored = Memory::restore(s, built.tokens(), st, nullptr, &hints);
  ASSERT_EQ(restored.state_sha256(), st.state_sha256);
  for (int support : {0, 1, 3}) {
    const std::vector<TokenId> rec = record_with(st, support);
    Memory a = built, b = restored;
    const OpDiagnostics da = a.remove_batch(rec);
    const OpDiagnostics db = b.remove_batch(rec);
    EXPECT_EQ(da.batch_fallbacks + db.batch_fallbacks, 0);
    EXPECT_EQ(a.state_sha256(), b.state_sha256()) << support << " support tokens";
    EXPECT_EQ(a.state_sha256(), batch_hash(a.tokens(), s.problem)) << support;
    a.check_invariants();
    b.check_invariants();
  }
}

// The same 200 keys added as records, again and again (ridge 1e-6): a copy's gradient and its
// sensitivity are round-off, and the path used to let one token enter and leave the margin set at
// zero length until the step cap (20,000 steps, then a batch re-solve) on the sixth record.
TEST(MemoryIncremental, DuplicateRecordsTakeBoundedSteps) {
  const MemorySettings s = settings(0.1, 0.5, 1e-6);
  const RowMatrix base = make_keys(Stream::kGaussian, 200, 3, 31);
  Memory m(s, 3, 3);
  long zero_max = 0;
  for (int rec = 0; rec < 6; ++rec) {
    if (rec == 5) {  // the last record also goes into a restored memory
      Memory restored = Memory::restore(s, m.tokens(), m.state());
      const OpDiagnostics dr = restored.add_batch(rows(base, 0, 200, 200 * rec));
      EXPECT_EQ(dr.batch_fallbacks, 0);
      EXPECT_LT(dr.zero_steps, 1000);
      EXPECT_EQ(restored.state_sha256(), batch_hash(restored.tokens(), s.problem));
    }
    const OpDiagnostics dg = m.add_batch(rows(base, 0, 200, 200 * rec));
    EXPECT_EQ(dg.batch_fallbacks, 0) << "record " << rec;
    zero_max = std::max(zero_max, dg.zero_steps);
  }
  EXPECT_LT(zero_max, 1000);  // 19,999 before: one token entering and leaving at zero length
  EXPECT_EQ(m.state_sha256(), batch_hash(m.tokens(), s.problem));
}

// Ridge 0 with duplicate and near-duplicate keys: the check that reads only the support and the
// reserve tokens near g = 0 gives the status (and state) of the check that reads every row.
TEST(MemoryIncremental, FilteredDuplicateCheckMatchesTheFullCheck) {
  int singular = 0;
  for (Stream kind : {Stream::kDuplicate, Stream::kNearDuplicate}) {
    const MemorySettings s = settings(0.03, 1.0, 0.0);
    const RowMatrix x = make_keys(kind, 320, 3, 5);
    Memory filtered(s, 3, 3), full(s, 3, 3);
    for (int r = 0; r < 320; r += 16) {
      detail::g_twin_filter = true;
      filtered.add_batch(rows(x, r, 16, r));
      detail::g_twin_filter = false;
      full.add_batch(rows(x, r, 16, r));
      detail::g_twin_filter = true;
      ASSERT_EQ(filtered.status(), full.status()) << testing::stream_name(kind) << " n=" << r + 16;
      ASSERT_EQ(filtered.state_sha256(), full.state_sha256());
      singular += filtered.status() == Status::kSingular;
    }
    for (TokenId id : {3, 40, 41, 200}) {
      filtered.remove(id);
      detail::g_twin_filter = false;
      full.remove(id);
      detail::g_twin_filter = true;
      ASSERT_EQ(filtered.status(), full.status()) << testing::stream_name(kind) << " remove " << id;
    }
  }
  EXPECT_GT(singular, 0);  // the check was exercised
}

// Every support token at C (C = 1/16, a ring of 16 keys around reserve keys): the margin set is
// empty, so b is free inside an interval whose lower end a reserve token sets, and the canonical
// state takes its midpoint (docs/math.md §3). A reserve token added or removed moves that end: the
// incremental memory must end where a memory that never saw it (the batch solve) ends.
TEST(MemoryIncremental, EmptyMarginSetFollowsTheReserveTokensThatBoundTheOffset) {
  const MemorySettings s = settings(1.0 / 16, 1.0, 1e-6);
  const double pi = std::acos(-1.0);
  RowMatrix x(28, 2);
  for (int k = 0; k < 16; ++k) x.row(k) << std::cos(2 * pi * k / 16), std::sin(2 * pi * k / 16);
  for (int k = 0; k < 12; ++k) {  // reserve keys at radii 0.05 .. 0.6, the innermost added first
    const double r = 0.05 + 0.05 * k, t = 0.7 * k;
    x.row(16 + k) << r * std::cos(t), r * std::sin(t);
  }
  Memory m(s, 2, 2);
  m.add_batch(rows(x, 0, 17, 0));
  ASSERT_TRUE(m.state().partition.margin.empty());
  for (int k = 17; k < 28; ++k) {
    m.add(k, x.row(k), x.row(k));
    ASSERT_TRUE(m.state().partition.margin.empty()) << "after adding " << k;
    EXPECT_EQ(m.state_sha256(), batch_hash(m.tokens(), s.problem)) << "after adding " << k;
  }
  for (TokenId id : {27, 26, 16}) {  // the outermost reserve key sets the interval's end
    m.remove(id);
    EXPECT_EQ(m.state_sha256(), batch_hash(m.tokens(), s.problem)) << "after removing " << id;
  }
  m.check_invariants();
}

}  // namespace
}  // namespace svattn
