// TokenBuckets (token_buckets.h): membership of the hash buckets and their cached digests.
#include "token_buckets.h"

#include <algorithm>

#include "svattn/errors.h"

namespace svattn::detail {

namespace {
bool id_less(const std::pair<TokenId, int>& m, TokenId id) { return m.first < id; }
}  // namespace

void TokenBuckets::insert(TokenId id, int slot) {
  Bucket& b = buckets_[hash_bucket(id)];
  auto it = std::lower_bound(b.members.begin(), b.members.end(), id, id_less);
  SVATTN_ASSERT(it == b.members.end() || it->first != id, "token id already in its bucket");
  b.members.insert(it, {id, slot});
  b.stale = true;
  list_stale_ = true;
  ++tokens_;
}

void TokenBuckets::erase(TokenId id) {
  auto bit = buckets_.find(hash_bucket(id));
  SVATTN_ASSERT(bit != buckets_.end(), "token id not in any bucket");
  Bucket& b = bit->second;
  auto it = std::lower_bound(b.members.begin(), b.members.end(), id, id_less);
  SVATTN_ASSERT(it != b.members.end() && it->first == id, "token id not in its bucket");
  b.members.erase(it);
  if (b.members.empty()) {
    buckets_.erase(bit);
  } else {
    b.stale = true;
  }
  list_stale_ = true;
  --tokens_;
}

const std::vector<BucketDigest>& TokenBuckets::digests(
    int d, int dv, const std::function<CanonicalRow(int)>& row) {
  if (!list_stale_) return list_;
  list_.clear();
  list_.reserve(buckets_.size());
  for (auto& [key, b] : buckets_) {
    if (b.stale) {
      b.digest = bucket_digest(key, b.members.size(), d, dv,
                               [&](std::size_t k) { return row(b.members[k].second); });
      b.stale = false;
      ++rehashed_;
    }
    list_.push_back(b.digest);
  }
  list_stale_ = false;
  return list_;
}

}  // namespace svattn::detail
