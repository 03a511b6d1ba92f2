// LRU cache of kernel rows K(i, :) over a fixed token array (internal).
#pragma once
#include <cstddef>
#include <list>
#include <vector>

#include "svattn/kernel.h"

namespace svattn::detail {

class RowCache {
 public:
  /// keys: n x d rows; budget in bytes (at least two rows are always kept).
  RowCache(const KernelSettings& k, const RowMatrix& keys, std::size_t budget_bytes);
  /// K(i, :) of length n. Valid until two further row() calls with other indices.
  const double* row(int i);
  long rows_computed() const { return computed_; }

 private:
  const KernelSettings& k_;
  const RowMatrix& x_;
  int n_, d_;
  std::size_t capacity_;
  std::vector<std::vector<double>> rows_;
  std::vector<std::list<int>::iterator> where_;
  std::vector<bool> present_;
  std::list<int> lru_;  // front = most recent
  long computed_ = 0;
};

}  // namespace svattn::detail
