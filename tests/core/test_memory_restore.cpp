// Memory::restore seeded with gradient_lower_bounds() (docs/store.md "Persisted screening"): the
// same state and hash with fewer kernel values, a memory that keeps working bit-exactly, valid
// screening invariants, and hints of the wrong length ignored.
#include <gtest/gtest.h>

#include "streams.h"
#include "svattn/errors.h"
#include "svattn/hash.h"
#include "svattn/kernel.h"
#include "svattn/memory.h"

namespace svattn {
namespace {

using testing::make_keys;
using testing::Stream;

MemorySettings restore_settings() {
  MemorySettings s;
  s.problem.C = 0.02;
  s.problem.kernel.bandwidth = 1.5;
  return s;
}

TEST(MemoryRestore, BoundsSeedTheRestoreWithFewerKernelValues) {
  const RowMatrix x = make_keys(Stream::kGaussian, 400, 4, 23);
  Memory m(restore_settings(), 4, 4);
  m.add_batch(TokenSet::from_rows(x));
  m.remove_batch({3, 17, 250});
  const State st = m.state();
  const TokenSet tokens = m.tokens();
  const std::vector<double> hints = m.gradient_lower_bounds();
  ASSERT_EQ(hints.size(), tokens.ids.size());
  OpDiagnostics plain_dg, seeded_dg, wrong_dg;
  Memory plain = Memory::restore(restore_settings(), tokens, st, &plain_dg);
  Memory seeded = Memory::restore(restore_settings(), tokens, st, &seeded_dg, &hints);
  EXPECT_EQ(plain.state_sha256(), st.state_sha256);
  EXPECT_EQ(seeded.state_sha256(), st.state_sha256);
  EXPECT_EQ(seeded_dg.batch_fallbacks, 0);
  EXPECT_LT(seeded_dg.kernel_evaluations, plain_dg.kernel_evaluations);
  seeded.check_invariants();  // includes: every kept bound is below the exact gradient
  const std::vector<double> short_hints(hints.begin(), hints.end() - 1);
  const Memory wrong = Memory::restore(restore_settings(), tokens, st, &wrong_dg, &short_hints);
  EXPECT_EQ(wrong.state_sha256(), st.state_sha256);
  EXPECT_EQ(wrong_dg.kernel_evaluations, plain_dg.kernel_evaluations);  // ignored
  // Both restored memories keep working exactly like the original.
  TokenSet more = TokenSet::from_rows(make_keys(Stream::kGaussian, 30, 4, 24));
  for (TokenId& id : more.ids) id += 1000;
  for (Memory* r : {&m, &plain, &seeded}) {
    r->remove_batch({5, 6, 7, 100});
    r->add_batch(more);
  }
  EXPECT_EQ(seeded.state_sha256(), m.state_sha256());
  EXPECT_EQ(plain.state_sha256(), m.state_sha256());
  seeded.check_invariants();
}

// The bounds a store persists stay below the exact gradients after a long mixed sequence (the
// spread bound rebases the drift bound's base many times there; the persisted bound must follow
// the base, not the last exact gradient).
TEST(MemoryRestore, PersistedBoundsStayBelowTheExactGradients) {
  const RowMatrix x = make_keys(Stream::kGaussian, 600, 4, 31);
  Memory m(restore_settings(), 4, 4);
  m.add_batch(TokenSet::from_rows(x.topRows(400)));
  for (int r = 0; r < 200; ++r) {
    m.add(400 + r, x.row(400 + r).transpose(), x.row(400 + r).transpose());
    m.remove(static_cast<TokenId>((r * 7) % 400));
    if (r % 3 == 0)
      m.add(static_cast<TokenId>((r * 7) % 400), x.row((r * 7) % 400).transpose(),
            x.row((r * 7) % 400).transpose());
  }
  m.check_invariants();  // asserts gradient_lower_bound(i) <= g_i on every reserve token
  const State st = m.state();
  const TokenSet tokens = m.tokens();
  const std::vector<double> bounds = m.gradient_lower_bounds();
  ASSERT_EQ(bounds.size(), tokens.ids.size());
  const KernelSettings& k = st.settings.kernel;
  int reserve = 0;
  for (int i = 0; i < tokens.size(); ++i) {
    if (st.alpha[static_cast<size_t>(i)] != 0.0) continue;
    ++reserve;
    double acc = 0;
    for (int j = 0; j < tokens.size(); ++j)
      if (st.alpha[static_cast<size_t>(j)] != 0.0)
        acc += st.alpha[static_cast<size_t>(j)] *
               kernel(k, tokens.keys.row(i).data(), tokens.keys.row(j).data(), 4);
    const double g =
        acc - kernel(k, tokens.keys.row(i).data(), tokens.keys.row(i).data(), 4) / 2 + st.b;
    EXPECT_LE(bounds[static_cast<size_t>(i)], g + 1e-9) << "token " << tokens.ids[i];
  }
  EXPECT_GT(reserve, 100);
  // The bounds of a few ids (a store rewriting one bounds group) are the same numbers, in the
  // order asked; an id the memory does not hold is named.
  const std::vector<TokenId> some = {tokens.ids[7], tokens.ids[2], tokens.ids[300]};
  EXPECT_EQ(m.gradient_lower_bounds(some),
            (std::vector<double>{bounds[7], bounds[2], bounds[300]}));
  EXPECT_THROW(m.gradient_lower_bounds({tokens.ids[0], 987654}), NotFound);
  OpDiagnostics dg;
  Memory seeded = Memory::restore(restore_settings(), tokens, st, &dg, &bounds);
  EXPECT_EQ(seeded.state_sha256(), st.state_sha256);
  seeded.check_invariants();
}

// The streamed hash is the digest of the documented byte layout (docs/math.md "Canonical state
// hash"), for every kernel type and for a permuted row order.
TEST(CanonicalHash, StreamedDigestEqualsTheDigestOfTheBytes) {
  TokenSet t = TokenSet::from_rows(make_keys(Stream::kGaussian, 50, 3, 26));
  std::vector<int> order(50);
  std::vector<double> alpha(50);
  for (int i = 0; i < 50; ++i) {
    t.ids[i] = 300 * (49 - i);  // rows in descending id, spread over many hash buckets
    order[i] = 49 - i;          // ascending id
    alpha[i] = i % 3 == 0 ? 0.0 : 0.01 * i;
  }
  for (KernelType k : {KernelType::kRbf, KernelType::kLinear, KernelType::kPoly}) {
    ProblemSettings p;
    p.kernel.type = k;
    EXPECT_EQ(canonical_sha256(p, t, order, alpha, 0.25),
              sha256_hex(canonical_bytes(p, t, order, alpha, 0.25)));
  }
  const std::vector<int> none;
  const std::vector<double> no_alpha;
  EXPECT_EQ(canonical_sha256(ProblemSettings{}, t, none, no_alpha, 0.0),
            sha256_hex(canonical_bytes(ProblemSettings{}, t, none, no_alpha, 0.0)));
}

TEST(MemoryRestore, NoBoundsForAnEmptyOrWarmupMemory) {
  Memory empty(restore_settings(), 4, 4);
  EXPECT_TRUE(empty.gradient_lower_bounds().empty());
  Memory few(restore_settings(), 4, 4);
  few.add_batch(TokenSet::from_rows(make_keys(Stream::kGaussian, 10, 4, 25)));  // n C < 1
  EXPECT_TRUE(few.gradient_lower_bounds().empty());
  EXPECT_TRUE(few.gradient_lower_bounds({0, 1}).empty());
}

}  // namespace
}  // namespace svattn
