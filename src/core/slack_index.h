// The slack index of the screening bound (docs/math.md §4, "The slack index"): reserve tokens
// ordered by their static key k_i = grad_i - b_i + drift_i, so the tokens whose bound can fail at a
// threshold are a prefix of the order and a step touches only them instead of every slot. A
// binary min-heap with versioned entries: updating a token pushes a new entry and makes the old
// one stale (dropped when it surfaces); entries popped by a query and not refreshed are pushed
// back. Internal.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace svattn::detail {

class SlackIndex {
 public:
  struct Entry {
    double key;
    int slot;
    std::uint32_t version;
  };

  /// Number of entries held (current and stale).
  std::size_t size() const { return heap_.size() + pending_.size(); }

  void clear() {
    heap_.clear();
    pending_.clear();
  }

  /// Queues an entry; it becomes visible to pop_below after flush().
  void push(const Entry& e) { pending_.push_back(e); }

  /// Moves the queued entries into the heap.
  void flush() {
    for (const Entry& e : pending_) {
      heap_.push_back(e);
      std::push_heap(heap_.begin(), heap_.end(), Greater{});
    }
    pending_.clear();
  }

  /// Replaces the whole content by `entries` (O(size)).
  void assign(std::vector<Entry> entries) {
    heap_ = std::move(entries);
    pending_.clear();
    std::make_heap(heap_.begin(), heap_.end(), Greater{});
  }

  /// Pops the entry of smallest key if its key may lie at or below `limit`: the comparison allows
  /// 1e-14 |key| of round-off in the key (docs/math.md §4). Stale entries are not filtered here.
  bool pop_below(double limit, Entry* out) {
    if (heap_.empty()) return false;
    const Entry& top = heap_.front();
    if (top.key - 1e-14 * std::abs(top.key) > limit) return false;
    std::pop_heap(heap_.begin(), heap_.end(), Greater{});
    *out = heap_.back();
    heap_.pop_back();
    return true;
  }

 private:
  struct Greater {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.key > b.key || (a.key == b.key && a.slot > b.slot);
    }
  };
  std::vector<Entry> heap_;
  std::vector<Entry> pending_;
};

}  // namespace svattn::detail
