// The screening bound of reserve gradients (docs/math.md §4, "Screened KKT checks"): a reserve
// token is skipped (its gradient neither updated by the path nor re-checked by the canonical
// refinement) only while a bound proves that its KKT sign g_i >= 0 cannot have changed. Tokens
// whose bound fails get their gradient recomputed exactly from the current support. The slack
// index (slack_index.h) finds those tokens without visiting the others.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "fixed_sum.h"
#include "memory_impl.h"
#include "svattn/errors.h"

namespace svattn {

namespace detail {
bool g_exact_offset_screening = true;
bool g_slack_index = true;
bool g_net_displacement = true;
bool g_spread_bound = true;
long g_slack_scan_share = 1024;
long g_spread_cleared = 0;
}  // namespace detail

// Lower bound of reserve token i's gradient once the w-drift has grown by `extra` and the offset
// is `b_then`: grad_i + (b_then - b_i) - (drift + extra - drift_i) (docs/math.md §4, "Screened KKT
// checks"), compared with a round-off margin.
bool Memory::Impl::reserve_safe(int i, double extra, double b_then) const {
  const double gain = exact_offset ? b_then - b_at_refresh[i] : 0.0;
  const double slack = (screen_base[i] + gain) - (drift + extra - drift_at_refresh[i]);
  const double scale = 1.0 + drift + std::abs(b_then) + std::abs(b_at_refresh[i]);
  return slack > 1e-12 * scale * std::max(1.0, kmax);
}

double Memory::Impl::offset_drift(double db) const { return exact_offset ? 0.0 : std::abs(db); }

void Memory::Impl::mark_refreshed(int i, double b_now) {
  screen_base[i] = grad[i];
  drift_at_refresh[i] = drift;
  b_at_refresh[i] = b_now;
  spread_b[i] = b_now;
  spread_snapshot(i);
  screen_touch(i);
}

// The spread bound proved g_i >= lower at the current (a, b): the drift bound restarts from
// there (its base is then a proven lower bound, no longer an exact gradient; docs/math.md §4).
void Memory::Impl::rebase_screening(int i, double lower) {
  screen_base[i] = lower;
  drift_at_refresh[i] = drift;
  b_at_refresh[i] = b;
  screen_touch(i);
}

// ---------------------------------------------------------------- the spread bound
// docs/math.md §4 "The spread bound". Every change of the coefficients conserves the mass up to
// round-off (sum_j a_j = 1), so sum_j K_ij da_j = sum_j (K_ij - kappa_i) da_j + kappa_i sum_j da_j.
// A column cached in row i when grad_i was exact has |K_ij - kappa_i| <= s_i; any other
// |K_ij - kappa_i| <= r_i (K_ij in [0, kmax] for RBF, [-kmax, kmax] otherwise).

// Records kappa_i, s_i over the valid entries of row i as it is (no new kernel values), the row's
// epoch and the accumulators. Called with every exact gradient (mark_refreshed).
void Memory::Impl::spread_snapshot(int i) {
  if (!use_spread) return;
  if (!live[i] || set_of[i] != Set::kReserve || columns.count() == 0) {
    spread_s[i] = std::numeric_limits<double>::infinity();  // (no column: nothing cached)
    return;
  }
  if (!spread_take()) {
    spread_s[i] = std::numeric_limits<double>::infinity();  // no snapshot: the bound is off
    return;
  }
  const double* r = columns.row(i);
  const int own = columns.pos(i);  // a reserve token's own coefficient does not move
  const std::uint64_t re = columns.row_epoch(i);
  // Every valid entry of the row, recomputed at each snapshot (an incremental range missed
  // entries in the slow screening test, so it is not used).
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (int p = 0; p < columns.capacity(); ++p)
    if (p != own && columns.valid(i, p)) {
      lo = std::min(lo, r[p]);
      hi = std::max(hi, r[p]);
    }
  if (!(lo <= hi)) {
    spread_s[i] = std::numeric_limits<double>::infinity();  // nothing known: the bound is off
    return;
  }
  spread_kappa[i] = lo + (hi - lo) / 2;
  // Half the range, rounded up by a few ulps so that |K_ij - kappa_i| <= s_i holds in reals.
  spread_s[i] = (hi - lo) / 2 * (1 + 1e-15) + 4e-16 * (std::abs(lo) + std::abs(hi));
  spread_epoch[i] = re;
  spread_l1[i] = move_l1;
  spread_mass[i] = move_mass;
  spread_young[i] = young_movement(re);
}

// Whether this exact gradient gets a spread snapshot (the adaptive rule in memory_impl.h): every
// one while the last window's clears paid for its snapshots (kSpreadPayoff snapshots per clear at
// most), else one in kSpreadSample. A window is kSpreadWindow snapshots taken.
bool Memory::Impl::spread_take() {
  ++spread_decisions;
  if (!spread_every && spread_decisions % kSpreadSample != 0) return false;
  if (++spread_taken == kSpreadWindow) {
    spread_every = spread_hits * kSpreadPayoff >= spread_taken;
    spread_hits = 0;
    spread_taken = 0;
  }
  return true;
}

// Adds |da_j| = amount to the movement of j's column epoch (no column: an epoch younger than every
// row, i.e. unknown to every token).
void Memory::Impl::record_move(int j, double amount) {
  if (!use_spread || !(amount > 0)) return;
  const int p = columns.pos(j);
  const std::uint64_t e = p >= 0 ? columns.col_epoch(p) : std::numeric_limits<std::uint64_t>::max();
  move_l1 += amount;
  auto it = std::lower_bound(move_log.begin(), move_log.end(), e,
                             [](const MoveEntry& x, std::uint64_t v) { return x.epoch < v; });
  if (it != move_log.end() && it->epoch == e) {
    it->amount += amount;
  } else {
    move_log.insert(it, {e, amount});
    if (move_log.size() > 2 * static_cast<std::size_t>(columns.count()) + 64) compact_move_log();
  }
  move_dirty = true;
}

// Merges the entries of columns no longer cached into the next younger entry (or the
// unknown-to-all entry): a token counts them as young at least as often as before, never less.
void Memory::Impl::compact_move_log() {
  std::vector<std::uint64_t> alive;
  for (int p = 0; p < columns.capacity(); ++p)
    if (columns.slot_at(p) >= 0) alive.push_back(columns.col_epoch(p));
  alive.push_back(std::numeric_limits<std::uint64_t>::max());
  std::sort(alive.begin(), alive.end());
  std::vector<MoveEntry> kept;
  double carry = 0;
  for (const MoveEntry& x : move_log) {
    carry += x.amount;
    if (std::binary_search(alive.begin(), alive.end(), x.epoch)) {
      kept.push_back({x.epoch, carry});
      carry = 0;
    }
  }
  if (carry > 0) {
    const std::uint64_t top = std::numeric_limits<std::uint64_t>::max();
    if (!kept.empty() && kept.back().epoch == top)
      kept.back().amount += carry;
    else
      kept.push_back({top, carry});
  }
  move_log.swap(kept);
  move_dirty = true;
}

// Movement recorded for column epochs above `epoch` (columns younger than a row of that epoch).
double Memory::Impl::young_movement(std::uint64_t epoch) const {
  if (move_dirty || move_suffix_sums.size() != move_log.size() + 1) {
    move_suffix_sums.assign(move_log.size() + 1, 0.0);
    for (std::size_t k = move_log.size(); k-- > 0;)
      move_suffix_sums[k] = move_suffix_sums[k + 1] + move_log[k].amount;
    move_dirty = false;
  }
  const auto it = std::upper_bound(move_log.begin(), move_log.end(), epoch,
                                   [](std::uint64_t v, const MoveEntry& x) { return v < x.epoch; });
  return move_suffix_sums[static_cast<std::size_t>(it - move_log.begin())];
}

// The most the w-part of g_i can have moved since its snapshot, plus a step of L1 movement
// step_l1 (counted as unknown) and mass change step_mass:
// s_i dA + (r_i - s_i) dU + r_i step_l1 + kmax (dM + step_mass), with 1e-15 of the accumulators'
// magnitude for their rounding (docs/math.md §4 "The spread bound").
double Memory::Impl::spread_loss(int i, double step_l1, double step_mass) const {
  const double s = spread_s[i], kap = spread_kappa[i];
  const bool nonneg = settings.problem.kernel.type == KernelType::kRbf;
  const double r = nonneg ? std::max(std::abs(kap), std::abs(kmax - kap)) : kmax + std::abs(kap);
  const double d_l1 = std::max(0.0, move_l1 - spread_l1[i]);
  const double d_young = std::max(0.0, young_movement(spread_epoch[i]) - spread_young[i]);
  const double d_mass = std::max(0.0, move_mass - spread_mass[i]);
  const double round = 1e-15 * (move_l1 + move_mass) * (r + kmax);
  return s * d_l1 + std::max(0.0, r - s) * d_young + r * step_l1 + kmax * (d_mass + step_mass) +
         round;
}

// The spread bound's proof that reserve token i keeps g_i > 0 (exact-offset mode only); *lower
// (optional) receives the proven lower bound of g_i less the round-off margin.
bool Memory::Impl::spread_safe(int i, double step_l1, double step_mass, double b_then,
                               double* lower) const {
  if (!exact_offset || !use_spread || !std::isfinite(spread_s[i])) return false;
  const double loss = spread_loss(i, step_l1, step_mass);
  const double slack = (grad[i] + (b_then - spread_b[i])) - loss;
  const double scale = 1.0 + loss + std::abs(grad[i]) + std::abs(b_then) + std::abs(spread_b[i]);
  const double margin = 1e-12 * scale * std::max(1.0, kmax);
  if (lower) *lower = slack - margin;
  if (slack > margin) ++detail::g_spread_cleared;
  return slack > margin;
}

// ---------------------------------------------------------------- the slack index
// docs/math.md §4 "The slack index". With k_i = (grad_i - b_i) + drift_i the bound of
// reserve_safe is k_i + b_then - (drift + extra) in exact arithmetic (without the offset term:
// k_i = grad_i + drift_i and the threshold drift + extra), so one threshold serves every token.

double Memory::Impl::slack_key(int i) const {
  return exact_offset ? (screen_base[i] - b_at_refresh[i]) + drift_at_refresh[i]
                      : screen_base[i] + drift_at_refresh[i];
}

// Call after any change of token i's grad, drift_at_refresh, b_at_refresh, set or liveness: its
// old entry becomes stale and a live reserve token gets a new one.
void Memory::Impl::screen_touch(int i) {
  ++slack_version[i];
  if (!live[i] || set_of[i] != Set::kReserve) {
    slack_key_now[i] = std::numeric_limits<double>::quiet_NaN();
    return;
  }
  const double key = slack_key(i);
  slack_key_now[i] = key;
  bref_absmax = std::max(bref_absmax, std::abs(b_at_refresh[i]));
  if (!slack_scan_next) slack_index.push({key, i, slack_version[i]});
}

// A fresh index of every live reserve token (drops the stale entries).
void Memory::Impl::rebuild_slack_index() {
  std::vector<detail::SlackIndex::Entry> entries;
  bref_absmax = 0;
  for (int i = 0; i < slots_used; ++i) {
    ++slack_version[i];
    slack_key_now[i] = std::numeric_limits<double>::quiet_NaN();
    if (!live[i] || set_of[i] != Set::kReserve) continue;
    slack_key_now[i] = slack_key(i);
    bref_absmax = std::max(bref_absmax, std::abs(b_at_refresh[i]));
    entries.push_back({slack_key_now[i], i, slack_version[i]});
  }
  slack_index.assign(std::move(entries));
}

// The largest key whose token may fail reserve_safe(i, extra0, b0) or reserve_safe(i, extra1, b1):
// the larger exact threshold plus reserve_safe's margin at the largest scale any indexed token can
// have, plus 1e-14 of the magnitudes for the rounding of the key and of reserve_safe's sum (a few
// ulps each; docs/math.md §4). A token above it passes both checks, so the index never skips a
// token the scan would have rechecked.
double Memory::Impl::screen_limit(double extra0, double b0, double extra1, double b1) const {
  const double t0 = drift + extra0 - (exact_offset ? b0 : 0.0);
  const double t1 = drift + extra1 - (exact_offset ? b1 : 0.0);
  const double t = std::max(t0, t1);
  const double scale = 1.0 + drift + std::max(std::abs(extra0), std::abs(extra1)) +
                       std::max(std::abs(b0), std::abs(b1)) + bref_absmax;
  return t + 1e-12 * scale * std::max(1.0, kmax) + 1e-14 * (std::abs(t0) + std::abs(t1) + scale);
}

// The index holds the current key of every live reserve token (a missed screen_touch would let a
// changed token hide behind a stale key).
void Memory::Impl::check_slack_index() const {
  if (!use_slack_index) return;
  for (int i = 0; i < slots_used; ++i) {
    if (!live[i] || set_of[i] != Set::kReserve) continue;
    const double key = slack_key(i);
    SVATTN_ASSERT(slack_key_now[i] == key,
                  "slack index holds a stale key for token " + std::to_string(ids[i]) + ": " +
                      std::to_string(slack_key_now[i]) + " vs " + std::to_string(key));
    SVATTN_ASSERT(std::abs(b_at_refresh[i]) <= bref_absmax, "slack index offset bound too small");
  }
}

// The current support (S ∪ elist ∪ {c}) as a dense weight vector over the column positions:
// weights_dense[pos(j)] = a_j, 0 elsewhere, up to the last used position weights_end. A path-side
// gradient is then one contiguous dot product with the token's row instead of a gather, which
// streams the row through the cache (positions that hold no support column add exact zeros: every
// stored entry is a finite kernel value). Path-side sums only decide events; the canonical
// refinement recomputes every checked gradient in ascending-id order, so this order never reaches
// a state.
void Memory::Impl::load_support(int c, const std::vector<int>& elist) {
  weights_dense.assign(static_cast<size_t>(columns.capacity()), 0.0);
  weights_end = 0;
  auto push = [&](int j) {
    const int p = columns.pos(j);
    weights_dense[p] = alpha[j];
    weights_end = std::max(weights_end, p + 1);
  };
  for (int j : margin) push(j);
  for (int j : elist) push(j);
  if (c >= 0 && set_of[c] != Set::kMargin && alpha[c] != 0) push(c);
}

// Exact gradient of reserve token i from the loaded support. Path-side only (screening and
// event detection); the canonical refinement recomputes checked gradients in id order.
double Memory::Impl::exact_g(int i) {
  const double* ri = row_ready(i);
  return detail::dot_fixed(ri, weights_dense.data(), static_cast<size_t>(weights_end)) +
         settings.problem.ridge * alpha[i] - kdiag[i] / 2 + b;
}

// Recomputes a screened reserve token's gradient exactly (bound reset).
void Memory::Impl::refresh(int i, OpDiagnostics& dg) {
  grad[i] = exact_g(i);
  mark_refreshed(i, b);
  ++dg.tracked;
}

// Lower bound of reserve token i's gradient at the current (a, b): the bound reserve_safe tests
// with extra = 0. Persisted by the store for Memory::restore (docs/store.md "Persisted screening").
double Memory::Impl::gradient_lower_bound(int i) const {
  // The drift bound reserve_safe tests (extra = 0, b_then = b), from its base screen_base_i (an
  // exact gradient or a proven lower bound, docs/math.md §4), not from grad_i, which a rebase
  // leaves at an older exact value.
  const double gain = exact_offset ? b - b_at_refresh[i] : 0.0;
  return (screen_base[i] + gain) - (drift - drift_at_refresh[i]);
}

// Starts the screening of reserve token i from `lower`, a lower bound of its gradient at the
// current (a, b) (Memory::restore with hints): as if its gradient had just been refreshed.
void Memory::Impl::seed_gradient_bound(int i, double lower) {
  grad[i] = lower;
  mark_refreshed(i, b);
}

}  // namespace svattn
