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
  std::vector<char>& refused;  // Schur-guard and degenerate-entry refusals of this walk
  std::vector<int> refused_list;
  // Tokens that entered the margin set by a step of length 0 in this walk. A second such entry is
  // refused: duplicate keys (K_ij = K_ii = K_jj up to the ridge) give gradients and sensitivities
  // at round-off level, and one token could otherwise enter and leave at zero length without end
  // (docs/math.md §4, "Degenerate steps"). The canonical refinement decides the token's set.
  std::vector<int> zero_entered;
  std::vector<int> elist;    // error tokens (their gradients are tracked exactly)
  std::vector<double>& gam;  // gamma_i = d g_i / d a_c of tracked tokens
  std::vector<int> near;     // reserve tokens whose bound fails within the current step
  std::vector<int> prev_near;
  // exact[i]: reserve token i's gradient was recomputed or updated exactly at every step since its
  // last refresh (it was in `near` at the previous step), so grad[i] is its gradient at the current
  // (a, b) and only its gamma is needed.
  std::vector<char>& exact;
  std::vector<int> exact_list;
  // Net displacement (docs/math.md §4 "Net displacement of an operation"): the coefficients of
  // the support and of c at the start of the walk, the drift then, and the tokens whose bound was
  // reset during the walk.
  std::vector<int> start_slots;
  std::vector<double> start_alpha;
  double drift_start = 0;
  bool net_ok = true;  // false after a step that refreshed every reserve token
  std::vector<char>& is_marked;  // per slot: in `marked`
  std::vector<int> marked;       // tokens whose bound was reset during the walk, once each
  double step_round = 0;  // the coefficients' rounding in one step, as mass change
  int steps_taken = 0;
  // Sensitivities of the current step.
  Eigen::VectorXd beta;  // (beta_b, beta_S) = d(b, a_S) / d a_c
  int posc = -1, beta_end = 0;
  double drift_rate = 0;
  // L1 movement and mass change of the coefficients per unit step (the spread bound).
  double move_rate = 0, mass_rate = 0;

  PathWalk(Memory::Impl& mem, int moving, int direction, OpDiagnostics& diag)
      : m(mem),
        c(moving),
        dir(direction),
        dg(diag),
        C(mem.settings.problem.C),
        refused(mem.walk_refused),
        gam(mem.walk_gamma),
        exact(mem.walk_exact),
        is_marked(mem.walk_marked) {
    m.ensure_column(c);
    for (int j : m.support_by_id)
      if (j != c && m.live[j] && m.set_of[j] == Set::kError) {
        m.ensure_column(j);
        elist.push_back(j);
      }
    drift_start = m.drift;
    start_slots = m.margin;
    start_slots.insert(start_slots.end(), elist.begin(), elist.end());
    start_slots.push_back(c);
    for (int j : start_slots) start_alpha.push_back(m.alpha[j]);
  }
  ~PathWalk() {
    for (int i : refused_list) refused[i] = 0;
    for (int i : exact_list) exact[i] = 0;
    for (int i : marked) is_marked[i] = 0;
  }
  void mark(int i) {
    if (is_marked[i]) return;
    is_marked[i] = 1;
    marked.push_back(i);
  }
  PathWalk(const PathWalk&) = delete;
  PathWalk& operator=(const PathWalk&) = delete;

  bool run() {
    if (!walk()) return false;
    // One step is a straight segment: its net displacement is its length (the O(|S ∪ E|^2)
    // quadratic form would only confirm it).
    if (m.exact_offset && net_ok && detail::g_net_displacement && steps_taken > 1)
      account_net_displacement();
    return true;
  }

  bool walk() {
    for (int step = 0; step < m.settings.max_steps_per_op; ++step) {
      ++steps_taken;
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
      net_ok = false;
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
    // under the bound that counts |db| as drift, kept for A/B runs (offset_drift).
    drift_rate =
        std::sqrt(m.kmax * (w2 + 1e-12 * (1 + std::abs(gam[c])))) + m.offset_drift(beta(0));
    // c moves by 1 per unit step, margin token k by beta_k; 1' beta_S = -1 up to round-off, and the
    // update of each coefficient rounds by an ulp of it (both go into the mass change).
    double l1 = 1, mass = 1, amax = std::abs(m.alpha[c]);
    for (int k = 0; k < ms; ++k) {
      l1 += std::abs(beta(k + 1));
      mass += beta(k + 1);
      amax = std::max(amax, std::abs(m.alpha[m.margin[k]]));
    }
    move_rate = l1;
    mass_rate = std::abs(mass) + 1e-15 * l1;
    step_round = 2.3e-16 * (ms + 1) * (amax + C);
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
      // The spread bound, also checked at both ends of the step (docs/math.md §4). A proof at the
      // start also restarts the drift bound from the proven value.
      double lower = 0;
      if (m.spread_safe(i, 0.0, 0.0, m.b, &lower)) {
        m.rebase_screening(i, lower);
        if (m.reserve_safe(i, drift_rate * ev.t, b_end()) ||
            m.spread_safe(i, move_rate * ev.t, mass_rate * ev.t + step_round, b_end())) {
          ++m.spread_hits;  // spared a recomputation
          return;
        }
      }
      if (!exact[i]) {
        if (!loaded) {
          m.load_support(c, elist);
          loaded = true;
        }
        m.refresh(i, dg);
        mark(i);
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
    // The movement, recorded before the tracked tokens take their new exact values.
    m.record_move(c, t);
    for (size_t k = 0; k < m.margin.size(); ++k)
      m.record_move(m.margin[k], std::abs(beta(static_cast<Eigen::Index>(k) + 1)) * t);
    m.move_mass += mass_rate * t + step_round;
    m.drift += drift_rate * t;
    m.grad[c] += gam[c] * dc;
    for (int i : elist) m.grad[i] += gam[i] * dc;
    for (int i : prev_near) exact[i] = 0;
    for (int i : near) {
      m.grad[i] += gam[i] * dc;  // exact again after the step
      m.mark_refreshed(i, m.b);
      mark(i);
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
      snap(who, ev.target == Set::kError ? C : 0.0);
      m.set_of[who] = ev.target;
      m.grad[who] = 0;
      exact[who] = 0;
      m.mark_refreshed(who, m.b);  // bound 0: checked exactly at the next step
      mark(who);
      m.contract_slot(who);
      if (ev.target == Set::kError) elist.push_back(who);
      return Next::kContinue;
    }
    // kEnters: an error or reserve token enters the margin set.
    if (ev.t == 0) {
      if (std::find(zero_entered.begin(), zero_entered.end(), who) != zero_entered.end()) {
        refused[who] = 1;
        refused_list.push_back(who);
        ++dg.refused_entrants;
        return Next::kContinue;
      }
      zero_entered.push_back(who);
    }
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

  // Replaces the walk's path length in `drift` by its net displacement sqrt(kmax) |w_end -
  // w_start| (docs/math.md §4 "Net displacement of an operation"), computed while c's kernel
  // values are still available. Tokens whose bound was reset during the walk keep the path length
  // from their reset to the end: their drift_at_refresh moves down by the same amount.
  void account_net_displacement() {
    std::vector<int> movers = start_slots;
    std::vector<double> da;
    for (size_t k = 0; k < start_slots.size(); ++k) da.push_back(-start_alpha[k]);
    auto add_end = [&](int j) {
      const auto it = std::find(movers.begin(), movers.end(), j);
      if (it == movers.end()) {
        movers.push_back(j);
        da.push_back(0.0);
      }
    };
    for (int j : m.margin) add_end(j);
    for (int j : elist) add_end(j);
    for (size_t k = 0; k < movers.size(); ++k) da[k] += m.alpha[movers[k]];
    for (int j : movers) m.ensure_column(j);
    std::vector<int> pos;
    for (int j : movers) pos.push_back(m.columns.pos(j));
    double q = 0, l1 = 0;
    for (size_t k = 0; k < movers.size(); ++k) {
      if (da[k] == 0) continue;
      const double* rk = m.row_ready(movers[k]);
      double acc = 0;
      for (size_t l = 0; l < movers.size(); ++l) acc += rk[pos[l]] * da[l];
      q += da[k] * acc;
      l1 += std::abs(da[k]);
    }
    // Rounding of the quadratic form: at most (m + 2) eps kmax |da|_1^2 (docs/math.md §4).
    const double err = 4.0 * (static_cast<double>(movers.size()) + 2) * 1.2e-16 * m.kmax * l1 * l1;
    const double net = std::sqrt(m.kmax * (std::max(0.0, q) + err)) * (1 + 1e-12);
    const double shift = m.drift - (drift_start + net);
    if (!(shift > 0)) return;
    m.drift = drift_start + net;
    for (int i : marked)
      if (m.live[i] && m.drift_at_refresh[i] > drift_start) {
        m.drift_at_refresh[i] -= shift;
        m.screen_touch(i);
      }
  }

  void settle_moving(Set target) {
    settle_moving_set(target);
    m.screen_touch(c);  // c's set (or its gradient) changed
  }
  // Sets a coefficient to its bound (a round-off move, recorded for the spread bound).
  void snap(int j, double value) {
    const double d = value - m.alpha[j];
    m.alpha[j] = value;
    m.record_move(j, std::abs(d));
    m.move_mass += std::abs(d);
  }

  void settle_moving_set(Set target) {
    if (dir < 0) {
      snap(c, 0.0);
      return;
    }
    if (target == Set::kError) {
      snap(c, C);
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
