// Row-major store of kernel columns K(:, j) for a small set of "required" slots j (the support and
// the moving token). Row i, position pos(j) holds K(i, j), so both "K(i, support)" (a row) and the
// gradient sums of docs/math.md §4 read contiguous memory. Columns are filled eagerly (add) or
// lazily (add_lazy): a lazy column's entries are computed row by row when a row is first read after
// the column appeared (ready_row), so a new support token costs O(rows actually read) kernel
// values, not O(n). The entries live in calloc'd zero pages, so rows that are never read (reserve
// tokens a restore skips, docs/store.md "Persisted screening") take no resident memory. Internal.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace svattn::detail {

/// fp64 entries, zero-initialised by calloc (large blocks are fresh, untouched pages).
class ZeroedDoubles {
 public:
  ZeroedDoubles() = default;
  ~ZeroedDoubles() { std::free(p_); }
  ZeroedDoubles(const ZeroedDoubles& o) : ZeroedDoubles() {
    assign_zero(o.n_);
    if (o.n_ > 0) std::memcpy(p_, o.p_, o.n_ * sizeof(double));
  }
  ZeroedDoubles& operator=(const ZeroedDoubles& o) {
    if (this != &o) {
      ZeroedDoubles t(o);
      swap(t);
    }
    return *this;
  }
  ZeroedDoubles(ZeroedDoubles&& o) noexcept { swap(o); }
  ZeroedDoubles& operator=(ZeroedDoubles&& o) noexcept {
    swap(o);
    return *this;
  }
  void swap(ZeroedDoubles& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
  }
  /// n zeros (the old entries are dropped).
  void assign_zero(size_t n) {
    double* q = n > 0 ? static_cast<double*>(std::calloc(n, sizeof(double))) : nullptr;
    if (n > 0 && q == nullptr) throw std::bad_alloc();
    std::free(p_);
    p_ = q;
    n_ = n;
  }
  /// Grows to n entries keeping the first size() (the new ones are zero).
  void grow_keep(size_t n) {
    if (n <= n_) return;
    ZeroedDoubles t;
    t.assign_zero(n);
    if (n_ > 0) std::memcpy(t.p_, p_, n_ * sizeof(double));
    swap(t);
  }
  double* data() { return p_; }
  const double* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  double* p_ = nullptr;
  size_t n_ = 0;
};

class SupportColumns {
 public:
  int rows() const { return rows_; }
  int capacity() const { return kcap_; }
  int count() const { return count_; }
  int pos(int j) const { return j < static_cast<int>(pos_.size()) ? pos_[j] : -1; }
  const double* row(int i) const { return data_.data() + static_cast<size_t>(i) * kcap_; }
  double* row(int i) { return data_.data() + static_cast<size_t>(i) * kcap_; }
  /// Slot held at position p, or -1.
  int slot_at(int p) const { return slot_[p]; }

  /// Grows the number of rows (slots); new rows are zero.
  void resize_rows(int rows) {
    if (rows <= rows_) return;
    data_.grow_keep(static_cast<size_t>(rows) * kcap_);
    pos_.resize(rows, -1);
    row_epoch_.resize(rows, 0);
    rows_ = rows;
  }

  /// Makes room for `k` columns now (cheap while there are few rows: a restore calls it first).
  void reserve_columns(int k) {
    while (kcap_ < k) grow_columns();
  }

  /// Adds column j (if absent) without computing it; rows fill it on their next ready_row().
  int add_lazy(int j) {
    if (pos(j) >= 0) return pos_[j];
    const int p = take_position(j);
    col_epoch_[p] = ++epoch_;
    lazy_log_.push_back({epoch_, p});
    if (lazy_log_.size() > 2 * static_cast<size_t>(kcap_) + 64) compact_log();
    return p;
  }

  /// Row i with every lazy column filled (value(p) = K(i, slot_at(p))). Visits only the columns
  /// added lazily since the row was last read (the tail of the epoch-ordered log), not every
  /// position: reading a row after one new column costs one kernel value.
  template <typename F>
  const double* ready_row(int i, F&& value) {
    const std::uint64_t re = row_epoch_[i];
    if (re < epoch_) {
      double* r = row(i);
      auto it = std::upper_bound(lazy_log_.begin(), lazy_log_.end(), re,
                                 [](std::uint64_t e, const LazyEntry& x) { return e < x.epoch; });
      for (; it != lazy_log_.end(); ++it) {
        const int p = it->pos;
        if (slot_[p] >= 0 && col_epoch_[p] == it->epoch) r[p] = value(p);
      }
      row_epoch_[i] = epoch_;
    }
    return row(i);
  }

  /// Row i holds a new token: none of its lazy entries is valid.
  void invalidate_row(int i) { row_epoch_[i] = 0; }

  /// Whether entry (i, p) holds K(i, slot_at(p)).
  bool valid(int i, int p) const { return slot_[p] >= 0 && col_epoch_[p] <= row_epoch_[i]; }
  /// Epoch of the column at position p (0: eager, valid in every row) and of row i's last fill:
  /// entry (i, p) is valid when col_epoch(p) <= row_epoch(i).
  std::uint64_t col_epoch(int p) const { return col_epoch_[p]; }
  std::uint64_t row_epoch(int i) const { return row_epoch_[i]; }

  /// Adds column j (if absent) and fills row i with value(i) for every i in `fill_rows`.
  template <typename F>
  int add(int j, const std::vector<int>& fill_rows, F&& value) {
    if (pos(j) >= 0) return pos_[j];
    const int p = take_position(j);
    col_epoch_[p] = 0;  // filled for every row below
    for (int i : fill_rows) data_.data()[static_cast<size_t>(i) * kcap_ + p] = value(i);
    return p;
  }

  void release(int j) {
    const int p = pos(j);
    if (p < 0) return;
    pos_[j] = -1;
    slot_[p] = -1;
    free_.push_back(p);
    --count_;
  }

  void clear_all() {
    std::fill(pos_.begin(), pos_.end(), -1);
    std::fill(slot_.begin(), slot_.end(), -1);
    free_.clear();
    lazy_log_.clear();
    for (int p = kcap_ - 1; p >= 0; --p) free_.push_back(p);
    count_ = 0;
  }

 private:
  int take_position(int j) {
    if (free_.empty()) grow_columns();
    const int p = free_.back();
    free_.pop_back();
    pos_[j] = p;
    slot_[p] = j;
    ++count_;
    return p;
  }

  void grow_columns() {
    const int nk = std::max(16, 2 * kcap_);
    ZeroedDoubles nd;
    nd.assign_zero(static_cast<size_t>(rows_) * nk);
    for (int i = 0; i < rows_ && kcap_ > 0; ++i)
      std::memcpy(nd.data() + static_cast<size_t>(i) * nk,
                  data_.data() + static_cast<size_t>(i) * kcap_, kcap_ * sizeof(double));
    data_.swap(nd);
    slot_.resize(nk, -1);
    col_epoch_.resize(nk, 0);
    for (int p = nk - 1; p >= kcap_; --p) free_.push_back(p);
    kcap_ = nk;
  }

  // Drops log entries of released or re-assigned positions (never needed again); keeps the order.
  void compact_log() {
    std::vector<LazyEntry> kept;
    kept.reserve(static_cast<size_t>(kcap_));
    for (const LazyEntry& e : lazy_log_)
      if (slot_[e.pos] >= 0 && col_epoch_[e.pos] == e.epoch) kept.push_back(e);
    lazy_log_.swap(kept);
  }

  struct LazyEntry {
    std::uint64_t epoch;
    int pos;
  };

  ZeroedDoubles data_;
  std::vector<LazyEntry> lazy_log_;  // lazy columns in ascending epoch (entries may be stale)
  std::vector<int> pos_;             // per slot
  std::vector<int> slot_;            // per position
  std::vector<int> free_;
  std::vector<std::uint64_t> col_epoch_;  // per position: 0 = eager (valid for every row)
  std::vector<std::uint64_t> row_epoch_;  // per row: lazy columns with a larger epoch are stale
  std::uint64_t epoch_ = 0;
  int rows_ = 0, kcap_ = 0, count_ = 0;
};

}  // namespace svattn::detail
