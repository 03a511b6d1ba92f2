// The screening bound of reserve gradients (docs/math.md §4, "Screened KKT checks"): a reserve
// token is skipped (its gradient neither updated by the path nor re-checked by the canonical
// refinement) only while a bound proves that its KKT sign g_i >= 0 cannot have changed. Tokens
// whose bound fails get their gradient recomputed exactly from the current support.
#include <algorithm>

#include "fixed_sum.h"
#include "memory_impl.h"

namespace svattn {

namespace detail {
bool g_exact_offset_screening = true;
}  // namespace detail

// Lower bound of reserve token i's gradient once the w-drift has grown by `extra` and the offset
// is `b_then`: grad_i + (b_then - b_i) - (drift + extra - drift_i) (docs/math.md §4, "Screened KKT
// checks"), compared with a round-off margin.
bool Memory::Impl::reserve_safe(int i, double extra, double b_then) const {
  const double gain = detail::g_exact_offset_screening ? b_then - b_at_refresh[i] : 0.0;
  const double slack = (grad[i] + gain) - (drift + extra - drift_at_refresh[i]);
  const double scale = 1.0 + drift + std::abs(b_then) + std::abs(b_at_refresh[i]);
  return slack > 1e-12 * scale * std::max(1.0, kmax);
}

double Memory::Impl::offset_drift(double db) const {
  return detail::g_exact_offset_screening ? 0.0 : std::abs(db);
}

void Memory::Impl::mark_refreshed(int i, double b_now) {
  drift_at_refresh[i] = drift;
  b_at_refresh[i] = b_now;
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
  const double gain = detail::g_exact_offset_screening ? b - b_at_refresh[i] : 0.0;
  return (grad[i] + gain) - (drift - drift_at_refresh[i]);
}

// Starts the screening of reserve token i from `lower`, a lower bound of its gradient at the
// current (a, b) (Memory::restore with hints): as if its gradient had just been refreshed.
void Memory::Impl::seed_gradient_bound(int i, double lower) {
  grad[i] = lower;
  mark_refreshed(i, b);
}

}  // namespace svattn
