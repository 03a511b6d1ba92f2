// Token slots and the kernel-column cache of the exact memory: where a token's key, value,
// coefficient and gradient live (slots are reused after a removal), the support in ascending-id
// order, and the public Support view. Kernel columns K(:, j) are kept only for the support and the
// moving token (support_columns.h); an erased token's slot and column are overwritten, never kept.
#include <algorithm>
#include <limits>

#include "memory_impl.h"

namespace svattn {

void Memory::Impl::grow(int need, bool exact) {
  if (need <= slot_capacity) return;
  int nc = std::max(16, slot_capacity);
  while (nc < need) nc *= 2;
  if (exact) nc = need;  // later adds double from here
  keys.resize(static_cast<size_t>(nc) * key_dim);
  values.resize(static_cast<size_t>(nc) * value_dim);
  ids.resize(nc);
  live.resize(nc, 0);
  kdiag.resize(nc);
  alpha.resize(nc, 0.0);
  grad.resize(nc, 0.0);
  set_of.resize(nc, Set::kReserve);
  drift_at_refresh.resize(nc, 0.0);
  b_at_refresh.resize(nc, 0.0);
  slack_version.resize(nc, 0);
  spread_s.resize(nc, std::numeric_limits<double>::infinity());
  spread_kappa.resize(nc, 0.0);
  spread_b.resize(nc, 0.0);
  screen_base.resize(nc, 0.0);
  spread_l1.resize(nc, 0.0);
  spread_mass.resize(nc, 0.0);
  spread_young.resize(nc, 0.0);
  spread_epoch.resize(nc, 0);
  slack_key_now.resize(nc, 0.0);
  walk_refused.resize(nc, 0);
  walk_exact.resize(nc, 0);
  walk_marked.resize(nc, 0);
  walk_gamma.resize(nc, 0.0);
  columns.resize_rows(nc);
  slot_capacity = nc;
}

int Memory::Impl::insert_token(TokenId id_, const double* k, const double* v) {
  int s;
  if (!free_slots.empty()) {
    s = free_slots.back();
    free_slots.pop_back();
  } else {
    grow(slots_used + 1);
    s = slots_used++;
  }
  std::copy(k, k + key_dim, keys.begin() + static_cast<size_t>(s) * key_dim);
  std::copy(v, v + value_dim, values.begin() + static_cast<size_t>(s) * value_dim);
  ids[s] = id_;
  live[s] = 1;
  kdiag[s] = kernel_at(s, s);
  kmax = std::max(kmax, std::abs(kdiag[s]));
  alpha[s] = 0;
  grad[s] = 0;
  set_of[s] = Set::kReserve;
  spread_s[s] = std::numeric_limits<double>::infinity();  // a new row: nothing cached yet
  columns.invalidate_row(s);  // before the snapshot: the slot's previous row is not this token's
  mark_refreshed(s, b);
  slot_of[id_] = s;
  buckets.insert(id_, s);
  ++num_tokens;
  return s;
}

void Memory::Impl::erase_token(int s) {
  live[s] = 0;
  alpha[s] = 0;
  grad[s] = 0;
  set_of[s] = Set::kReserve;
  screen_touch(s);  // its index entry is stale from now on
  drop_column(s);
  slot_of.erase(ids[s]);
  buckets.erase(ids[s]);
  free_slots.push_back(s);
  --num_tokens;
}

TokenSet Memory::Impl::tokens_sorted() const {
  std::vector<int> sl;
  sl.reserve(static_cast<size_t>(num_tokens));
  buckets.for_each_slot([&](int s) { sl.push_back(s); });
  TokenSet t;
  t.ids.resize(sl.size());
  t.keys.resize(static_cast<Eigen::Index>(sl.size()), key_dim);
  t.values.resize(static_cast<Eigen::Index>(sl.size()), value_dim);
  for (size_t r = 0; r < sl.size(); ++r) {
    t.ids[r] = ids[sl[r]];
    for (int k = 0; k < key_dim; ++k) t.keys(r, k) = key(sl[r])[k];
    for (int k = 0; k < value_dim; ++k) t.values(r, k) = value(sl[r])[k];
  }
  return t;
}

// S ∪ E in ascending id order, from the current sets (the path changes them).
void Memory::Impl::refresh_support() {
  support_by_id.clear();
  for (int i = 0; i < slots_used; ++i)
    if (live[i] && set_of[i] != Set::kReserve) support_by_id.push_back(i);
  std::sort(support_by_id.begin(), support_by_id.end(),
            [&](int x, int y) { return ids[x] < ids[y]; });
}

void Memory::Impl::trim_columns() {
  const int keep = 2 * static_cast<int>(support_by_id.size()) + 64;
  if (columns.count() <= keep) return;
  for (int p = 0; p < columns.capacity() && columns.count() > keep; ++p) {
    const int j = columns.slot_at(p);
    if (j >= 0 && (!live[j] || set_of[j] == Set::kReserve)) drop_column(j);
  }
}

const Support& Memory::Impl::support() const {
  if (!support_valid) {
    const int m = static_cast<int>(support_by_id.size());
    support_cache.keys.resize(m, key_dim);
    support_cache.values.resize(m, value_dim);
    support_cache.alpha.resize(m);
    int r = 0;
    for (int s : support_by_id) {
      if (!(alpha[s] > 0)) continue;
      for (int k = 0; k < key_dim; ++k) support_cache.keys(r, k) = key(s)[k];
      for (int k = 0; k < value_dim; ++k) support_cache.values(r, k) = value(s)[k];
      support_cache.alpha[r] = alpha[s];
      ++r;
    }
    support_cache.keys.conservativeResize(r, key_dim);
    support_cache.values.conservativeResize(r, value_dim);
    support_cache.alpha.conservativeResize(r);
    support_valid = true;
  }
  return support_cache;
}

}  // namespace svattn
