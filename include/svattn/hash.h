// Canonical byte layout and SHA-256 of a state (documented in docs/math.md §6). The state hash is
// two-level: tokens are grouped in buckets of consecutive ids (id >> kHashBucketBits), each bucket
// has its own digest, and the state hash covers the settings, b, the nonzero coefficients and the
// bucket digests. A holder that keeps the bucket digests (the memory) rehashes only the buckets an
// operation touched.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "svattn/types.h"

namespace svattn {

/// Tokens whose ids agree above the low kHashBucketBits bits share a hash bucket (a store record's
/// positions are its low bits, so a record of up to 256 tokens is one bucket).
constexpr int kHashBucketBits = 8;
inline std::int64_t hash_bucket(TokenId id) { return id >> kHashBucketBits; }

/// One token of the canonical layout: its id and its key (d) and value (dv) entries.
struct CanonicalRow {
  TokenId id;
  const double* key;
  const double* value;
};

/// The digest of one bucket: SHA-256 of its tokens' ids, keys and values in ascending id.
struct BucketDigest {
  std::int64_t bucket = 0;
  std::uint32_t count = 0;
  std::array<std::uint8_t, 32> sha256{};
  bool operator==(const BucketDigest& o) const {
    return bucket == o.bucket && count == o.count && sha256 == o.sha256;
  }
};
/// Digest of bucket `bucket` holding `count` tokens given row by row in ascending id (each id in
/// the bucket; asserted).
BucketDigest bucket_digest(std::int64_t bucket, std::size_t count, int d, int dv,
                           const std::function<CanonicalRow(std::size_t)>& row);

/// The digests of every bucket of n rows given in ascending id (asserted), ascending bucket.
std::vector<BucketDigest> bucket_digests(std::size_t n, int d, int dv,
                                         const std::function<CanonicalRow(std::size_t)>& row);

/// What the state hash covers besides the bucket digests (docs/math.md §6).
struct StateHashParts {
  std::uint64_t n = 0;  ///< tokens
  int d = 0, dv = 0;
  double b = 0;
  /// Every coefficient whose bits are not +0.0, ascending id.
  std::vector<std::pair<TokenId, double>> nonzero_alpha;
};
/// The top-level bytes of the state hash: settings, sizes, b, nonzero coefficients, bucket digests
/// (ascending bucket).
std::vector<std::uint8_t> state_hash_bytes(const ProblemSettings& settings,
                                           const StateHashParts& parts,
                                           const std::vector<BucketDigest>& buckets);
/// sha256_hex(state_hash_bytes(...)): the state hash from its parts.
std::string state_sha256_from_parts(const ProblemSettings& settings, const StateHashParts& parts,
                                    const std::vector<BucketDigest>& buckets);

/// The top-level bytes hashed for `tokens` in `order` (row indices in ascending id; alpha aligned
/// with order): state_hash_bytes with every bucket digest computed.
std::vector<std::uint8_t> canonical_bytes(const ProblemSettings& settings, const TokenSet& tokens,
                                          const std::vector<int>& order,
                                          const std::vector<double>& alpha, double b);
/// sha256_hex(canonical_bytes(...)), streaming the tokens through their bucket digests.
std::string canonical_sha256(const ProblemSettings& settings, const TokenSet& tokens,
                             const std::vector<int>& order, const std::vector<double>& alpha,
                             double b);
/// The same digest over n tokens given row by row in ascending id order (alpha aligned), for
/// holders whose tokens are not a TokenSet (the store's rows).
std::string canonical_sha256_rows(const ProblemSettings& settings, std::size_t n, int d, int dv,
                                  const std::function<CanonicalRow(std::size_t)>& row,
                                  const std::vector<double>& alpha, double b);
/// The hash format of stores of schema version <= 3 and memory files of version <= 2 (one SHA-256
/// over every token; docs/math.md §6 "Version 1"), kept only to check such files when they are
/// upgraded.
std::string canonical_sha256_v1(const ProblemSettings& settings, std::size_t n, int d, int dv,
                                const std::function<CanonicalRow(std::size_t)>& row,
                                const std::vector<double>& alpha, double b);

std::string sha256_hex(const std::uint8_t* data, std::size_t n);
inline std::string sha256_hex(const std::vector<std::uint8_t>& v) {
  return sha256_hex(v.data(), v.size());
}

}  // namespace svattn
