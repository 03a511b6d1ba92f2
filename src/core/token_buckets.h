// The live tokens of the exact memory grouped in hash buckets (docs/math.md §6): each bucket's
// slots in ascending id and the bucket's digest, recomputed only after a token of the bucket came
// or went. It gives the memory its ascending-id order without a sort, and its state hash in
// O(bytes of the touched buckets + number of buckets) instead of O(n (d + dv)).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "svattn/hash.h"

namespace svattn::detail {

class TokenBuckets {
 public:
  void insert(TokenId id, int slot);
  void erase(TokenId id);
  std::size_t size() const { return tokens_; }

  /// Calls f(slot) for every live token in ascending id.
  template <class F>
  void for_each_slot(F&& f) const {
    for (const auto& entry : buckets_)
      for (const auto& member : entry.second.members) f(member.second);
  }

  /// The bucket digests in ascending bucket; stale ones are recomputed from row(slot).
  const std::vector<BucketDigest>& digests(int d, int dv,
                                           const std::function<CanonicalRow(int)>& row);
  /// Buckets whose digest was recomputed over this object's life (tests: a removal rehashes one).
  std::uint64_t rehashed() const { return rehashed_; }

 private:
  struct Bucket {
    std::vector<std::pair<TokenId, int>> members;  // ascending id
    BucketDigest digest;
    bool stale = true;
  };
  std::map<std::int64_t, Bucket> buckets_;
  std::vector<BucketDigest> list_;
  bool list_stale_ = true;
  std::size_t tokens_ = 0;
  std::uint64_t rehashed_ = 0;
};

}  // namespace svattn::detail
