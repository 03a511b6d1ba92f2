// The state hash (docs/math.md §6): the bytes are the documented two-level layout, the version-1
// layout is kept for upgrades, the memory's incremental bucket digests equal a from-scratch hash
// after any sequence of operations, and a version-2 memory file is upgraded on read.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <cstring>

#include "streams.h"
#include "svattn/batch_solver.h"
#include "svattn/hash.h"
#include "svattn/memory.h"

using namespace svattn;
using namespace svattn::testing;

namespace {

struct Bytes {
  std::vector<std::uint8_t> v;
  template <typename T>
  void put(T x) {  // little-endian host (x86-64)
    const auto* p = reinterpret_cast<const std::uint8_t*>(&x);
    v.insert(v.end(), p, p + sizeof(T));
  }
  void str(const char* s, std::size_t n) { v.insert(v.end(), s, s + n); }
};

std::array<std::uint8_t, 32> sha(const std::vector<std::uint8_t>& v) {
  std::array<std::uint8_t, 32> md{};
  unsigned int len = 0;
  EVP_Digest(v.data(), v.size(), md.data(), &len, EVP_sha256(), nullptr);
  return md;
}

std::string hex(const std::array<std::uint8_t, 32>& md) {
  static const char* h = "0123456789abcdef";
  std::string s;
  for (std::uint8_t c : md) {
    s.push_back(h[c >> 4]);
    s.push_back(h[c & 15]);
  }
  return s;
}

}  // namespace

// Three tokens in two buckets (ids 1, 2 in bucket 0; id 300 in bucket 1), d = 2, dv = 1, RBF,
// written byte by byte from the table in docs/math.md §6.
TEST(StateHash, BytesAreTheDocumentedLayout) {
  TokenSet t;
  t.ids = {1, 2, 300};
  t.keys = RowMatrix(3, 2);
  t.keys << 0.5, -1.0, 2.0, 0.25, -3.0, 1.5;
  t.values = RowMatrix(3, 1);
  t.values << 7.0, 8.0, 9.0;
  const std::vector<int> order = {0, 1, 2};
  const std::vector<double> alpha = {0.75, 0.0, 0.25};
  ProblemSettings p;
  p.kernel.bandwidth = 1.5;
  p.C = 0.8;
  p.ridge = 0.0;
  auto bucket = [&](std::int64_t b, std::vector<int> rows) {
    Bytes x;
    x.str("SVATTN-BUCKET-v1", 17);
    x.put<std::int64_t>(b);
    x.put<std::uint32_t>(static_cast<std::uint32_t>(rows.size()));
    for (int r : rows) {
      x.put<std::int64_t>(t.ids[r]);
      for (int k = 0; k < 2; ++k) x.put<double>(t.keys(r, k));
      x.put<double>(t.values(r, 0));
    }
    return sha(x.v);
  };
  Bytes top;
  top.str("SVATTN-STATE-v2", 16);
  top.put<std::uint8_t>(0);  // rbf
  top.put<double>(1.5);
  top.put<double>(0.8);
  top.put<double>(0.0);
  top.put<std::uint64_t>(3);
  top.put<std::uint32_t>(2);
  top.put<std::uint32_t>(1);
  top.put<double>(-0.125);  // b
  top.put<std::uint64_t>(2);  // nonzero coefficients
  top.put<std::int64_t>(1);
  top.put<double>(0.75);
  top.put<std::int64_t>(300);
  top.put<double>(0.25);
  top.put<std::uint64_t>(2);  // buckets
  top.put<std::int64_t>(0);
  top.put<std::uint32_t>(2);
  const auto b0 = bucket(0, {0, 1});
  top.v.insert(top.v.end(), b0.begin(), b0.end());
  top.put<std::int64_t>(1);
  top.put<std::uint32_t>(1);
  const auto b1 = bucket(1, {2});
  top.v.insert(top.v.end(), b1.begin(), b1.end());
  EXPECT_EQ(canonical_bytes(p, t, order, alpha, -0.125), top.v);
  EXPECT_EQ(canonical_sha256(p, t, order, alpha, -0.125), hex(sha(top.v)));
  // A coefficient of -0.0 is not +0.0: it is listed (the layout commits to every bit of alpha).
  const std::vector<double> negzero = {0.75, -0.0, 0.25};
  EXPECT_NE(canonical_sha256(p, t, order, negzero, -0.125),
            canonical_sha256(p, t, order, alpha, -0.125));
}

TEST(StateHash, VersionOneLayoutIsKeptForUpgrades) {
  TokenSet t = TokenSet::from_rows(make_keys(Stream::kGaussian, 3, 2, 5));
  const std::vector<double> alpha = {0.5, 0.5, 0.0};
  ProblemSettings p;
  Bytes x;
  x.str("SVATTN-STATE-v1", 16);
  x.put<std::uint8_t>(0);
  x.put<double>(p.kernel.bandwidth);
  x.put<double>(p.C);
  x.put<double>(p.ridge);
  x.put<std::uint64_t>(3);
  x.put<std::uint32_t>(2);
  x.put<std::uint32_t>(2);
  for (int r = 0; r < 3; ++r) {
    x.put<std::int64_t>(t.ids[r]);
    for (int k = 0; k < 2; ++k) x.put<double>(t.keys(r, k));
    for (int k = 0; k < 2; ++k) x.put<double>(t.values(r, k));
    x.put<double>(alpha[r]);
  }
  x.put<double>(0.5);
  const auto row = [&](std::size_t r) {
    return CanonicalRow{t.ids[r], t.keys.row(r).data(), t.values.row(r).data()};
  };
  EXPECT_EQ(canonical_sha256_v1(p, 3, 2, 2, row, alpha, 0.5), hex(sha(x.v)));
}

// Random adds and removes over ids that span many buckets (buckets emptied and refilled): after
// every operation the memory's hash, kept from cached bucket digests, equals the hash computed
// from scratch over its tokens and state, and at the end it equals a batch solve.
TEST(StateHash, IncrementalBucketDigestsEqualAFromScratchHash) {
  const RowMatrix keys = make_keys(Stream::kGaussian, 900, 4, 41);
  MemorySettings s;
  s.problem.kernel.bandwidth = 2.0;
  s.problem.C = 0.05;
  Memory m(s, 4, 4);
  svattn::support::Rng rng(7);
  std::vector<TokenId> present;
  std::vector<char> in(900, 0);
  for (int op = 0; op < 400; ++op) {
    const bool add = present.size() < 40 || rng.next() % 3 != 0;
    if (add) {
      const int r = static_cast<int>(rng.next() % 900);
      if (in[r]) continue;
      const TokenId id = static_cast<TokenId>(r) * 37;  // about 7 tokens per bucket
      m.add(id, keys.row(r).transpose(), keys.row(r).transpose());
      in[r] = 1;
      present.push_back(id);
    } else {
      const std::size_t k = rng.next() % present.size();
      m.remove(present[k]);
      in[present[k] / 37] = 0;
      present.erase(present.begin() + static_cast<std::ptrdiff_t>(k));
    }
    const State st = m.state();
    const TokenSet ts = m.tokens();
    std::vector<int> order(ts.ids.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    ASSERT_EQ(st.state_sha256, canonical_sha256(s.problem, ts, order, st.alpha, st.b)) << op;
  }
  BatchSettings bs;
  bs.problem = s.problem;
  EXPECT_EQ(m.state_sha256(), solve_batch(m.tokens(), bs).state.state_sha256);
}

// A memory file of version 2 holds a version-1 hash: read, it is checked and replaced by the
// current hash of the same state (no re-solve needed, the same coefficients).
TEST(StateHash, VersionTwoMemoryFileIsUpgradedOnRead) {
  MemorySettings s;
  s.problem.kernel.bandwidth = 2.0;
  s.problem.C = 0.1;
  Memory m(s, 3, 3);
  m.add_batch(TokenSet::from_rows(make_keys(Stream::kGaussian, 60, 3, 9)));
  std::vector<std::uint8_t> f = m.serialize();
  const State st = m.state();
  const TokenSet ts = m.tokens();
  const auto row = [&](std::size_t r) {
    return CanonicalRow{ts.ids[r], ts.keys.row(r).data(), ts.values.row(r).data()};
  };
  const std::string v1 = canonical_sha256_v1(s.problem, ts.ids.size(), 3, 3, row, st.alpha, st.b);
  ASSERT_NE(v1, st.state_sha256);
  const std::size_t body = f.size() - 64;
  const std::uint32_t two = 2;
  std::memcpy(f.data() + 16, &two, 4);
  std::memcpy(f.data() + body - 64, v1.data(), 64);
  const std::string sum = sha256_hex(f.data(), body);
  std::memcpy(f.data() + body, sum.data(), 64);
  const Memory back = Memory::deserialize(f);
  EXPECT_EQ(back.state_sha256(), st.state_sha256);
  EXPECT_EQ(back.state().alpha, st.alpha);
}
