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
}  // namespace detail

// Lower bound of reserve token i's gradient once the w-drift has grown by `extra` and the offset
// is `b_then`: grad_i + (b_then - b_i) - (drift + extra - drift_i) (docs/math.md §4, "Screened KKT
// checks"), compared with a round-off margin.
bool Memory::Impl::reserve_safe(int i, double extra, double b_then) const {
  const double gain = exact_offset ? b_then - b_at_refresh[i] : 0.0;
  const double slack = (grad[i] + gain) - (drift + extra - drift_at_refresh[i]);
  const double scale = 1.0 + drift + std::abs(b_then) + std::abs(b_at_refresh[i]);
  return slack > 1e-12 * scale * std::max(1.0, kmax);
}

double Memory::Impl::offset_drift(double db) const {
  return exact_offset ? 0.0 : std::abs(db);
}

void Memory::Impl::mark_refreshed(int i, double b_now) {
  drift_at_refresh[i] = drift;
  b_at_refresh[i] = b_now;
  screen_touch(i);
}

// ---------------------------------------------------------------- the slack index
// docs/math.md §4 "The slack index". With k_i = (grad_i - b_i) + drift_i the bound of
// reserve_safe is k_i + b_then - (drift + extra) in exact arithmetic (without the offset term:
// k_i = grad_i + drift_i and the threshold drift + extra), so one threshold serves every token.

double Memory::Impl::slack_key(int i) const {
  return exact_offset ? (grad[i] - b_at_refresh[i]) + drift_at_refresh[i]
                      : grad[i] + drift_at_refresh[i];
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
  slack_index.push({key, i, slack_version[i]});
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
    SVATTN_ASSERT(slack_key_now[i] == key, "slack index holds a stale key for token " +
                                               std::to_string(ids[i]) + ": " +
                                               std::to_string(slack_key_now[i]) + " vs " +
                                               std::to_string(key));
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

}  // namespace svattn
