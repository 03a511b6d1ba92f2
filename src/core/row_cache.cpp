#include "row_cache.h"

#include <algorithm>

namespace svattn::detail {

RowCache::RowCache(const KernelSettings& k, const RowMatrix& keys, std::size_t budget_bytes)
    : k_(k), x_(keys), n_(static_cast<int>(keys.rows())), d_(static_cast<int>(keys.cols())) {
  const std::size_t row_bytes = std::max<std::size_t>(1, sizeof(double) * n_);
  capacity_ = std::max<std::size_t>(2, budget_bytes / row_bytes);
  rows_.resize(n_);
  where_.resize(n_);
  present_.assign(n_, false);
}

const double* RowCache::row(int i) {
  if (present_[i]) {
    lru_.splice(lru_.begin(), lru_, where_[i]);
    return rows_[i].data();
  }
  if (lru_.size() >= capacity_) {
    const int victim = lru_.back();
    lru_.pop_back();
    present_[victim] = false;
    std::vector<double>().swap(rows_[victim]);
  }
  std::vector<double>& r = rows_[i];
  r.resize(n_);
  const double* xi = x_.row(i).data();
  for (int j = 0; j < n_; ++j) r[j] = kernel(k_, xi, x_.row(j).data(), d_);
  ++computed_;
  lru_.push_front(i);
  where_[i] = lru_.begin();
  present_[i] = true;
  return r.data();
}

}  // namespace svattn::detail
