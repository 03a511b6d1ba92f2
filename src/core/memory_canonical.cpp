// The canonical finish of the exact memory (docs/math.md §3 "Canonical state"): after an
// operation that changed the partition, the canonical refinement (canonical.cpp) re-derives the
// partition and solves the KKT system in ascending-id order, so the state is a function of the
// token set alone. Screened reserve tokens are skipped when their bound still holds after the
// refinement's own adjustment. A repair of the path's partition rebuilds R; a failure falls back to
// a batch re-solve.
#include <algorithm>
#include <cmath>
#include <iterator>

#include "memory_impl.h"
#include "svattn/batch_solver.h"

namespace svattn {

// One canonical refinement, counted and timed into dg.
detail::CanonicalResult Memory::Impl::timed_canonicalize(const std::vector<double>& guess,
                                                         const std::vector<char>* skip,
                                                         OpDiagnostics& dg) {
  const support::Stopwatch watch;
  detail::CanonicalResult res =
      detail::canonicalize(*this, guess, settings.problem, settings.tolerances, &cholesky, skip);
  dg.canonical_seconds += watch.seconds();
  ++dg.canonical_solves;
  return res;
}

void Memory::Impl::set_from_canonical(const detail::CanonicalResult& res,
                                      const std::vector<char>* skip) {
  // Drift of the canonical adjustment relative to the path's coefficients; its movement and mass
  // change for the spread bound (docs/math.md §4).
  double da = 0, mass = 0;
  for (int i = 0; i < slots_used; ++i)
    if (live[i]) {
      const double d = res.alpha[i] - alpha[i];
      da += std::abs(d);
      mass += d;
      record_move(i, std::abs(d));
    }
  move_mass += std::abs(mass) + 4.6e-16 * (slots_used + 1) * (1 + da);
  // |<phi_i, dw>| <= sqrt(kmax) |dw| <= kmax |da|_1; the offset enters every gradient exactly.
  drift += kmax * da + offset_drift(res.b - b);
  for (int i = 0; i < slots_used; ++i) {
    if (!live[i]) continue;
    alpha[i] = res.alpha[i];
    set_of[i] = res.set[i];
    if (!(res.screened && skip && (*skip)[i])) {
      grad[i] = res.g[i];
      mark_refreshed(i, res.b);
    }
  }
  kkt = res.kkt;
  b = res.b;
  status = res.status;
  warmup = res.warmup;
  support_by_id.clear();
  std::merge(res.margin.begin(), res.margin.end(), res.error.begin(), res.error.end(),
             std::back_inserter(support_by_id), [&](int x, int y) { return ids[x] < ids[y]; });
}

// Runs the canonical refinement from the current coefficients; rebuilds R when the partition
// differs from the path's (a repair) or when it is due.
void Memory::Impl::finish(OpDiagnostics& dg) {
  std::vector<double> guess(slots_used, 0.0);
  std::vector<char> skip(slots_used, 0);
  for (int i = 0; i < slots_used; ++i) {
    if (!live[i]) continue;
    guess[i] = alpha[i];
    skip[i] = set_of[i] == Set::kReserve && alpha[i] == 0;
  }
  // Only the tokens the slack index cannot clear need their bound evaluated (docs/math.md §4).
  for_each_screen_candidate([&] { return screen_limit(0.0, b, 0.0, b); },
                            [&](int i) {
                              double lower = 0;
                              if (!skip[i] || reserve_safe(i, 0.0, b)) return;
                              if (spread_safe(i, 0.0, 0.0, b, &lower)) {
                                rebase_screening(i, lower);
                                ++spread_hits;
                              } else {
                                skip[i] = 0;
                              }
                            });
  detail::CanonicalResult res = timed_canonicalize(guess, &skip, dg);
  if (res.screened) {
    // The canonical adjustment (and any repair) moved (a, b): re-check the screened bounds.
    double da = 0, mass = 0;
    for (int i = 0; i < slots_used; ++i)
      if (live[i]) {
        da += std::abs(res.alpha[i] - alpha[i]);
        mass += res.alpha[i] - alpha[i];
      }
    const double extra = kmax * da + offset_drift(res.b - b);
    const double extra_mass = std::abs(mass) + 4.6e-16 * (slots_used + 1) * (1 + da);
    bool ok = true;
    for_each_screen_candidate(
        [&] { return screen_limit(extra, res.b, extra, res.b); },
        [&](int i) {
          if (skip[i] && !reserve_safe(i, extra, res.b) && !spread_safe(i, da, extra_mass, res.b))
            ok = false;
        });
    if (!ok) {
      res = timed_canonicalize(guess, nullptr, dg);
    } else if (settings.problem.ridge == 0 && res.status == Status::kOptimal &&
               screened_twin(res, skip, extra)) {
      res.status = Status::kSingular;
    }
  }
  if (res.status != Status::kOptimal && res.status != Status::kWarmup &&
      res.status != Status::kEmpty) {
    // The path's partition could not be repaired: fall back to a batch re-solve.
    batch_rebuild(dg);
    return;
  }
  bool changed = false;
  for (int i = 0; i < slots_used && !changed; ++i)
    if (live[i] && set_of[i] != res.set[i] && !(warmup || res.warmup)) changed = true;
  if (changed) ++dg.repairs;
  set_from_canonical(res, &skip);
  rebuild_margin(changed || ++ops_since_refactor >= settings.refactor_period, dg);
}

// Ridge 0: the duplicate check of the canonical refinement for the reserve tokens it skipped.
// Only those whose screening bound (grown by the refinement's own `extra`) does not prove g_i above
// the twin limit can be kernel twins of a support token (docs/math.md §1, "μ = 0 and
// duplicates"); the slack index lists them without visiting the others.
bool Memory::Impl::screened_twin(const detail::CanonicalResult& res, const std::vector<char>& skip,
                                 double extra) {
  const double limit =
      detail::twin_gradient_limit(std::max(1.0, kmax), settings.tolerances, settings.problem.C);
  std::vector<int> near;
  for_each_screen_candidate(
      [&] { return screen_limit(extra + limit, res.b, extra + limit, res.b); },
      [&](int i) {
        if (skip[i] && !reserve_safe(i, extra + limit, res.b)) near.push_back(i);
      });
  if (near.empty()) return false;
  std::vector<int> support;
  std::merge(res.margin.begin(), res.margin.end(), res.error.begin(), res.error.end(),
             std::back_inserter(support), [&](int x, int y) { return ids[x] < ids[y]; });
  return detail::has_tradable_duplicate(*this, support, near, res);
}

// Makes S (the path's margin list) equal the canonical margin set and refreshes R if asked.
void Memory::Impl::rebuild_margin(bool force, OpDiagnostics& dg) {
  std::vector<int> canon;
  if (!warmup)
    for (int s : support_by_id)
      if (set_of[s] == Set::kMargin) canon.push_back(s);
  std::vector<int> a = margin, c2 = canon;
  std::sort(a.begin(), a.end());
  std::sort(c2.begin(), c2.end());
  if (force || a != c2 ||
      (margin.size() > 0 && bordered.dim() != static_cast<int>(margin.size()) + 1)) {
    margin = canon;
    refactor();
    ++dg.refactorizations;
    ops_since_refactor = 0;
  }
  trim_columns();
  invalidate_views();
}

void Memory::Impl::batch_rebuild(OpDiagnostics& dg, bool boundary) {
  if (boundary)
    ++dg.boundary_solves;
  else
    ++dg.batch_fallbacks;
  TokenSet t = tokens_sorted();
  BatchSettings bs;
  bs.problem = settings.problem;
  bs.tolerances = settings.tolerances;
  BatchResult br = solve_batch(t, bs);
  std::vector<double> guess(slots_used, 0.0);
  for (size_t r = 0; r < t.ids.size(); ++r) guess[slot_of.at(t.ids[r])] = br.state.alpha[r];
  cholesky.clear();
  detail::CanonicalResult res = timed_canonicalize(guess, nullptr, dg);
  set_from_canonical(res, nullptr);
  if (res.status != Status::kOptimal && res.status != Status::kWarmup &&
      res.status != Status::kEmpty)
    dg.status = res.status;
  rebuild_margin(true, dg);
}

}  // namespace svattn
