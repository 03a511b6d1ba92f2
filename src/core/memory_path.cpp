// The Cauwenberghs–Poggio path of the exact memory (docs/math.md §4): moves one coefficient a_c
// up (add) or down to 0 (remove) while every other token keeps its KKT conditions, taking the
// partition events (S <-> E, S <-> R, c settles) in order of step length. Path-side sums only
// decide events; the canonical refinement recomputes the state afterwards.
#include <algorithm>
#include <cmath>
#include <limits>

#include "fixed_sum.h"
#include "memory_impl.h"
#include "svattn/errors.h"

namespace svattn {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

// g_c of a token at a_c = 0 from the current support (ascending id order).
double Memory::Impl::gradient_of_new(int c) {
  for (int j : support_by_id) ensure_column(j);
  const double* rc = row_ready(c);
  double acc = 0.0;
  for (int j : support_by_id) acc += rc[columns.pos(j)] * alpha[j];
  return acc - kdiag[c] / 2 + b;
}

// ---------------------------------------------------------------- the path
// One walk of the path. Each step: the sensitivities of (b, a_S) and of the tracked gradients to
// a_c, the next event (the shortest step at which a set changes), the reserve tokens whose
// screening bound fails within that step (recomputed, possibly shortening it), the step itself,
// and the bookkeeping of the event (which may end the walk).
struct Memory::Impl::PathWalk {
  enum class Next { kContinue, kDone, kStuck };
  // Event kinds, in tie-break order: c settles, a margin token hits a bound, an error or reserve
  // token enters the margin set. Equal steps of one kind go to the smaller token id.
  enum Kind { kSettles = 0, kLeaves = 1, kEnters = 2, kNone = 3 };
  struct Event {
    double t = kInf;
    int kind = kNone;
    int who = -1;
    Set target = Set::kMargin;
  };

  Memory::Impl& m;
  const int c, dir;
  OpDiagnostics& dg;
  const double C;
  // Per-slot arrays live in Memory::Impl (walk_*) and are reset on the entries this walk touched.
  std::vector<char>& refused;  // Schur-guard refusals of this walk
  std::vector<int> refused_list;
  std::vector<int> elist;       // error tokens (their gradients are tracked exactly)
  std::vector<double>& gam;     // gamma_i = d g_i / d a_c of tracked tokens
  std::vector<int> near;        // reserve tokens whose bound fails within the current step
  std::vector<int> prev_near;
  // exact[i]: reserve token i's gradient was recomputed or updated exactly at every step since its
  // last refresh (it was in `near` at the previous step), so grad[i] is its gradient at the current
  // (a, b) and only its gamma is needed.
  std::vector<char>& exact;
  std::vector<int> exact_list;
  // Sensitivities of the current step.
  Eigen::VectorXd beta;  // (beta_b, beta_S) = d(b, a_S) / d a_c
  int posc = -1, beta_end = 0;
  double drift_rate = 0;

  PathWalk(Memory::Impl& mem, int moving, int direction, OpDiagnostics& diag)
      : m(mem),
        c(moving),
        dir(direction),
        dg(diag),
        C(mem.settings.problem.C),
        refused(mem.walk_refused),
        gam(mem.walk_gamma),
        exact(mem.walk_exact) {
    m.ensure_column(c);
    for (int j : m.support_by_id)
      if (j != c && m.live[j] && m.set_of[j] == Set::kError) {
        m.ensure_column(j);
        elist.push_back(j);
      }
  }
  ~PathWalk() {
    for (int i : refused_list) refused[i] = 0;
    for (int i : exact_list) exact[i] = 0;
  }
  PathWalk(const PathWalk&) = delete;
  PathWalk& operator=(const PathWalk&) = delete;

  bool run() {
    for (int step = 0; step < m.settings.max_steps_per_op; ++step) {
      Next next;
      if (m.margin.empty()) {
        next = offset_only_step();
      } else {
        sensitivities();
        Event ev = choose_event();
        if (ev.who < 0) return false;
        screen_reserve(ev);
        take_step(ev);
        next = settle(ev);
      }
      if (next == Next::kDone) return true;
      if (next == Next::kStuck) return false;
    }
    return false;
  }

  bool tracked_reserve(int i) const {
    return m.live[i] && i != c && m.set_of[i] == Set::kReserve && !refused[i];
  }
  void elist_erase(int j) { elist.erase(std::remove(elist.begin(), elist.end(), j), elist.end()); }

  // S empty: only b can move (every gamma is 1). Rare: tiny n or degenerate streams.
  Next offset_only_step() {
    for (int i : near) exact[i] = 0;
    near.clear();
    double t = kInf;
    int who = -1;
    if (dir > 0) {
      // raise b until c's or an error token's gradient reaches 0; reserve gradients only grow
      t = -m.grad[c];
      who = c;
      for (int i : elist)
        if (!refused[i] && (-m.grad[i] < t || (-m.grad[i] == t && m.ids[i] < m.ids[who]))) {
          t = -m.grad[i];
          who = i;
        }
    } else {
      // lower b until a reserve gradient reaches 0: exact gradients for every reserve token
      m.load_support(c, elist);
      for (int i = 0; i < m.slots_used; ++i) {
        if (!tracked_reserve(i)) continue;
        m.refresh(i, dg);
        if (who < 0 || m.grad[i] < t || (m.grad[i] == t && m.ids[i] < m.ids[who])) {
          t = m.grad[i];
          who = i;
        }
      }
      if (who < 0) return Next::kStuck;
    }
    t = std::max(0.0, t);
    if (t == 0) ++dg.zero_steps;
    const double db = dir > 0 ? t : -t;
    m.b += db;
    m.drift += m.offset_drift(db);  // w does not move
    m.grad[c] += db;
    for (int i : elist) m.grad[i] += db;
    if (dir < 0)
      for (int i = 0; i < m.slots_used; ++i)
        if (m.live[i] && i != c && m.set_of[i] == Set::kReserve) {
          m.grad[i] += db;
          m.mark_refreshed(i, m.b);
        }
    ++dg.events;
    if (who == c) {  // c joins the margin set at its current coefficient
      m.grad[c] = 0;
      m.set_of[c] = Set::kMargin;
      m.screen_touch(c);
      m.expand(c);
      return Next::kDone;
    }
    m.grad[who] = 0;
    if (m.set_of[who] == Set::kError) elist_erase(who);
    m.set_of[who] = Set::kMargin;
    m.screen_touch(who);
    m.expand(who);
    return Next::kContinue;
  }

  // beta, the dense beta_S over the column positions, gamma of c and of the error tokens, and the
  // drift rate of the screening bound.
  void sensitivities() {
    const int ms = static_cast<int>(m.margin.size());
    beta = m.beta_of(c);
    // Invariant guards: R_00 < 0 and 1' beta_S = -1.
    const double sb = beta.tail(ms).sum();
    if (!(m.bordered(0, 0) < 0) || std::abs(sb + 1) > 1e-6) {
      m.refactor();
      ++dg.refactorizations;
      beta = m.beta_of(c);
    }
    posc = m.columns.pos(c);
    m.beta_dense.assign(static_cast<size_t>(m.columns.capacity()), 0.0);
    beta_end = 0;
    for (int k = 0; k < ms; ++k) {
      const int p = m.columns.pos(m.margin[k]);
      m.beta_dense[p] = beta(k + 1);
      beta_end = std::max(beta_end, p + 1);
    }
    gam[c] = gamma_of(c);
    for (int i : elist) gam[i] = gamma_of(i);
    // Drift rate for the screening bound. A reserve token's gradient moves by <phi_i, dw> + db,
    // |<phi_i, dw>| <= sqrt(kmax) |dw|, and |dw|^2 per unit step is
    // beta~' K beta~ = gamma_c - mu (1 + |beta_S|^2) (margin gradients stay 0; docs/math.md).
    double bsq = 0;
    for (int k = 0; k < ms; ++k) bsq += beta(k + 1) * beta(k + 1);
    const double w2 = std::max(0.0, gam[c] - m.settings.problem.ridge * (1 + bsq));
    // The offset moves every gradient by exactly db: it is not drift (reserve_safe adds it), except
    // under the path-length bound of the earlier sessions (offset_drift).
    drift_rate =
        std::sqrt(m.kmax * (w2 + 1e-12 * (1 + std::abs(gam[c])))) + m.offset_drift(beta(0));
  }

  // gamma_i = Q_ic + Q_iS beta_S + beta_b, read from row i of the support columns as one
  // contiguous dot product with the dense vector of beta_S over the positions (as weights_dense).
  double gamma_of(int i) {
    const double* ri = m.row_ready(i);
    double v = (ri[posc] + beta(0)) +
               detail::dot_fixed(ri, m.beta_dense.data(), static_cast<size_t>(beta_end));
    if (i == c) v += m.settings.problem.ridge;
    return v;
  }

  void offer(Event& ev, double t, int kind, int who, Set target) const {
    if (!(t >= 0)) t = 0;  // round-off negatives become zero steps
    if (t < ev.t ||
        (t == ev.t && (kind < ev.kind || (kind == ev.kind && m.ids[who] < m.ids[ev.who])))) {
      ev.t = t;
      ev.kind = kind;
      ev.who = who;
      ev.target = target;
    }
  }

  // The shortest step among c, the margin tokens and the error tokens (reserve: screen_reserve).
  Event choose_event() const {
    Event ev;
    const double s = dir;
    if (dir > 0) {
      if (gam[c] > 0) offer(ev, -m.grad[c] / gam[c], kSettles, c, Set::kMargin);
      offer(ev, C - m.alpha[c], kSettles, c, Set::kError);
    } else {
      offer(ev, m.alpha[c], kSettles, c, Set::kReserve);
    }
    for (size_t k = 0; k < m.margin.size(); ++k) {
      const int j = m.margin[k];
      const double rate = beta(static_cast<Eigen::Index>(k) + 1) * s;
      if (rate < 0)
        offer(ev, m.alpha[j] / -rate, kLeaves, j, Set::kReserve);
      else if (rate > 0)
        offer(ev, (C - m.alpha[j]) / rate, kLeaves, j, Set::kError);
    }
    for (int i : elist) {
      const double rate = gam[i] * s;
      if (!refused[i] && rate > 0) offer(ev, -m.grad[i] / rate, kEnters, i, Set::kMargin);
    }
    return ev;
  }

  // Reserve tokens: only those whose bound fails within the tentative step can reach g = 0 first;
  // recompute them exactly (the step only shrinks, so no others are needed). The candidates come
  // from the slack index in ascending key order, the threshold following the shrinking step
  // (docs/math.md §4 "The slack index").
  void screen_reserve(Event& ev) {
    const double s = dir;
    prev_near.swap(near);
    near.clear();
    bool loaded = false;
    auto b_end = [&] { return m.b + beta(0) * (dir * ev.t); };
    auto limit = [&] {
      const double t = std::isfinite(ev.t) ? ev.t : 0.0;
      const double extra = std::isfinite(ev.t) ? drift_rate * t : kInf;
      return m.screen_limit(0.0, m.b, extra, m.b + beta(0) * (dir * t));
    };
    m.for_each_screen_candidate(limit, [&](int i) {
      if (!tracked_reserve(i)) return;
      // The bound is linear along the step: positive at both ends means positive throughout.
      if (m.reserve_safe(i, 0.0, m.b) && m.reserve_safe(i, drift_rate * ev.t, b_end())) return;
      if (!exact[i]) {
        if (!loaded) {
          m.load_support(c, elist);
          loaded = true;
        }
        m.refresh(i, dg);
      }
      gam[i] = gamma_of(i);
      near.push_back(i);
      const double rate = gam[i] * s;
      if (rate < 0) offer(ev, m.grad[i] / -rate, kEnters, i, Set::kMargin);
    });
  }

  // Moves a_c by dir * t and everything tracked with it.
  void take_step(const Event& ev) {
    const double t = ev.t;
    if (t == 0) ++dg.zero_steps;
    const double dc = dir * t;
    m.alpha[c] += dc;
    m.b += beta(0) * dc;
    for (size_t k = 0; k < m.margin.size(); ++k)
      m.alpha[m.margin[k]] += beta(static_cast<Eigen::Index>(k) + 1) * dc;
    m.drift += drift_rate * t;
    m.grad[c] += gam[c] * dc;
    for (int i : elist) m.grad[i] += gam[i] * dc;
    for (int i : prev_near) exact[i] = 0;
    for (int i : near) {
      m.grad[i] += gam[i] * dc;  // exact again after the step
      m.mark_refreshed(i, m.b);
      exact[i] = 1;
      exact_list.push_back(i);
    }
    ++dg.events;
  }

  // The event's set change; kDone when c has settled.
  Next settle(const Event& ev) {
    const int who = ev.who;
    if (ev.kind == kSettles) {
      settle_moving(ev.target);
      return Next::kDone;
    }
    if (ev.kind == kLeaves) {
      m.alpha[who] = ev.target == Set::kError ? C : 0.0;
      m.set_of[who] = ev.target;
      m.grad[who] = 0;
      exact[who] = 0;
      m.mark_refreshed(who, m.b);  // bound 0: checked exactly at the next step
      m.contract_slot(who);
      if (ev.target == Set::kError) elist.push_back(who);
      return Next::kContinue;
    }
    // kEnters: an error or reserve token enters the margin set.
    const double kap = m.schur(who, nullptr);
    if (kap <= m.settings.schur_tol * m.kdiag[who]) {
      refused[who] = 1;
      refused_list.push_back(who);
      ++dg.refused_entrants;
      return Next::kContinue;
    }
    m.grad[who] = 0;
    exact[who] = 0;
    if (m.set_of[who] == Set::kError) elist_erase(who);
    m.set_of[who] = Set::kMargin;
    m.screen_touch(who);
    m.expand(who);
    return Next::kContinue;
  }

  void settle_moving(Set target) {
    settle_moving_set(target);
    m.screen_touch(c);  // c's set (or its gradient) changed
  }
  void settle_moving_set(Set target) {
    if (dir < 0) {
      m.alpha[c] = 0;
      return;
    }
    if (target == Set::kError) {
      m.alpha[c] = C;
      m.set_of[c] = Set::kError;
      return;
    }
    m.grad[c] = 0;
    const double kap = m.schur(c, nullptr);
    if (kap <= m.settings.schur_tol * m.kdiag[c]) {
      // Near affine dependence: c cannot enter the margin system. Leave it where the path
      // stopped; the canonical refinement decides its final set.
      ++dg.refused_entrants;
      m.set_of[c] = m.alpha[c] > 0 ? Set::kMargin : Set::kReserve;
      return;
    }
    m.set_of[c] = Set::kMargin;
    m.expand(c);
  }
};

// Moves a_c (c not in S) up (dir = +1, add) or down to 0 (dir = -1, remove) keeping KKT on all
// other tokens. Returns false if the step cap was hit.
bool Memory::Impl::path(int c, int dir, OpDiagnostics& dg) {
  PathWalk walk(*this, c, dir, dg);
  const bool ok = walk.run();
  refresh_support();
  return ok;
}

}  // namespace svattn
