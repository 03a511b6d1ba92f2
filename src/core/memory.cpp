// Exact memory: Cauwenberghs–Poggio incremental/decremental path on the bordered KKT system,
// finished after every partition-changing operation by the canonical refinement (canonical.cpp).
#include "svattn/memory.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>
#include <unordered_map>

#include "canonical.h"
#include "fixed_sum.h"
#include "support_columns.h"
#include "svattn/batch_solver.h"
#include "svattn/errors.h"
#include "svattn/readout.h"

namespace svattn {

using detail::Set;

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

// The bordered inverse R = [[0, 1'], [1, Q_SS]]^-1 kept in a buffer with spare capacity: a margin
// entrant (rank-one expansion) and a leaver (Schur contraction) update it in place in O(|S|^2)
// without allocating. (A fresh (|S| + 2)^2 matrix per event cost an mmap, page faults and two full
// copies: half a millisecond at |S| = 240.)
class BorderedInverse {
 public:
  int dim() const { return dim_; }
  bool empty() const { return dim_ == 0; }
  Eigen::Block<Eigen::MatrixXd> m() { return buf_.topLeftCorner(dim_, dim_); }
  Eigen::Block<const Eigen::MatrixXd> m() const { return buf_.topLeftCorner(dim_, dim_); }
  double operator()(int r, int c) const { return buf_(r, c); }
  void clear() { dim_ = 0; }
  void assign(const Eigen::MatrixXd& r) {
    reserve(static_cast<int>(r.rows()));
    dim_ = static_cast<int>(r.rows());
    m() = r;
  }
  /// R <- [[R, 0], [0, 0]] + u u' / kappa, u of size dim() + 1.
  void expand(const Eigen::VectorXd& u, double kappa) {
    reserve(dim_ + 1);
    buf_.row(dim_).head(dim_ + 1).setZero();
    buf_.col(dim_).head(dim_ + 1).setZero();
    ++dim_;
    m().noalias() += (u * u.transpose()) / kappa;
  }
  /// Schur contraction that removes row and column p: R_ac - R_ap R_pc / R_pp, then deletes p.
  void contract(int p) {
    const int n = dim_;
    const double rpp = buf_(p, p);
    col_ = buf_.col(p).head(n);
    row_ = buf_.row(p).head(n).transpose();
    // Column-major walk in increasing source order: every destination (r', c') with r' <= r and
    // c' <= c lies at or before the source, so no unread entry is overwritten.
    for (int c = 0, cd = 0; c < n; ++c) {
      if (c == p) continue;
      for (int r = 0, rd = 0; r < n; ++r) {
        if (r == p) continue;
        buf_(rd, cd) = buf_(r, c) - col_(r) * row_(c) / rpp;
        ++rd;
      }
      ++cd;
    }
    --dim_;
  }
  /// A plain matrix copy for the public accessor (rebuilt on demand).
  const Eigen::MatrixXd& view() const {
    if (!view_valid_) {
      view_ = m();
      view_valid_ = true;
    }
    return view_;
  }
  void touch() { view_valid_ = false; }

 private:
  void reserve(int need) {
    if (need <= buf_.rows()) return;
    int cap = std::max<int>(16, static_cast<int>(buf_.rows()));
    while (cap < need) cap *= 2;
    Eigen::MatrixXd nb(cap, cap);
    nb.topLeftCorner(dim_, dim_) = m();
    buf_.swap(nb);
  }
  Eigen::MatrixXd buf_;
  int dim_ = 0;
  Eigen::VectorXd col_, row_;
  mutable Eigen::MatrixXd view_;
  mutable bool view_valid_ = false;
};

struct Memory::Impl final : detail::KernelAccess {
  MemorySettings st;
  int d = 0, dv = 0;

  // Token slots.
  int cap = 0;
  int used = 0;  // slots [0, used) have been handed out
  int n = 0;     // active tokens
  std::vector<double> keys, values;
  std::vector<TokenId> ids;
  std::vector<char> act;
  std::vector<double> kdiag, alpha, g;
  std::vector<Set> set;
  std::vector<int> free_slots;
  std::unordered_map<TokenId, int> slot_of;

  // Kernel columns K(:, j) for the support and the moving token, stored row-major.
  detail::SupportColumns kc;

  // Path state.
  std::vector<int> S;    // margin slots in the order of Rinv (index k -> row k + 1)
  BorderedInverse Rinv;  // inverse of [[0, 1'], [1, Q_SS]]; empty when S is empty
  double b = 0;
  Status status = Status::kEmpty;
  bool warmup = false;
  detail::CholeskyCache chol;
  std::vector<int> support_sorted;  // S ∪ E slots, ascending id
  KktReport kkt;                    // residuals of the last canonical refinement

  // Screening (docs/math.md "Screened KKT checks"). Every change of (a, b) adds
  // kmax * |da|_1 + |db| to the drift D; since |K_ij| <= kmax, a reserve token whose gradient was
  // g_i when D was dref_i still has g_i(now) >= g_i - (D - dref_i). Tokens whose bound stays
  // positive need neither path updates nor canonical re-checks; only the others get their
  // gradient recomputed. This keeps a path step's cost O(|S ∪ E| |S| + near * |S ∪ E| + n)
  // instead of O(n |S ∪ E|), without weakening the KKT check.
  std::vector<double> dref;
  double D = 0;
  double kmax = 0;
  int ops_since_refactor = 0;
  OpDiagnostics totals;
  std::uint64_t evicted = 0;  // tokens evicted over the memory's life (Memory::evictions)

  // Caches of the public views (invalidated on every change).
  mutable bool support_valid = false;
  mutable Support support_cache;
  mutable bool state_valid = false;
  mutable State state_cache;

  // ---------------------------------------------------------------- KernelAccess
  int num_slots() const override { return used; }
  bool active(int s) const override { return act[s] != 0; }
  TokenId id(int s) const override { return ids[s]; }
  double diag(int s) const override { return kdiag[s]; }
  void require(int j) override { ensure_column(j); }
  int pos(int j) const override { return kc.pos(j); }
  const double* row(int i) override { return row_ready(i); }
  double kernel_value(int i, int j) const override { return kern(i, j); }

  const double* key(int s) const { return keys.data() + static_cast<size_t>(s) * d; }
  const double* value(int s) const { return values.data() + static_cast<size_t>(s) * dv; }
  double kern(int a, int bslot) const { return kernel(st.problem.kernel, key(a), key(bslot), d); }
  double Q(int a, int bslot) const {
    return kern(a, bslot) + (a == bslot ? st.problem.ridge : 0.0);
  }

  void invalidate_views() {
    support_valid = false;
    state_valid = false;
  }

  void ensure_column(int s) { kc.add_lazy(s); }
  // K(i, .) over the support columns, computing entries of columns added since row i was read.
  const double* row_ready(int i) {
    return kc.ready_row(i, [&](int p) {
      ++kernel_evaluations;
      return kern(i, kc.slot_at(p));
    });
  }
  // Kernel values filled by row_ready (diagnostics: OpDiagnostics::kernel_evaluations).
  long kernel_evaluations = 0;
  long kernel_evaluations_mark = 0;
  // Starts a public operation: its clock and the diagnostics counters' marks.
  Clock::time_point begin_op() {
    kernel_evaluations_mark = kernel_evaluations;
    return Clock::now();
  }
  // One canonical refinement, counted and timed into dg.
  detail::CanonicalResult timed_canonicalize(const std::vector<double>& guess,
                                             const std::vector<char>* skip, OpDiagnostics& dg) {
    const auto t0 = Clock::now();
    detail::CanonicalResult res =
        detail::canonicalize(*this, guess, st.problem, st.tolerances, &chol, skip);
    dg.canonical_seconds += seconds_since(t0);
    ++dg.canonical_solves;
    return res;
  }
  void drop_column(int s) { kc.release(s); }

  void grow(int need) {
    if (need <= cap) return;
    int nc = std::max(16, cap);
    while (nc < need) nc *= 2;
    keys.resize(static_cast<size_t>(nc) * d);
    values.resize(static_cast<size_t>(nc) * dv);
    ids.resize(nc);
    act.resize(nc, 0);
    kdiag.resize(nc);
    alpha.resize(nc, 0.0);
    g.resize(nc, 0.0);
    set.resize(nc, Set::kReserve);
    dref.resize(nc, 0.0);
    kc.resize_rows(nc);
    cap = nc;
  }

  int insert_token(TokenId id_, const double* k, const double* v) {
    int s;
    if (!free_slots.empty()) {
      s = free_slots.back();
      free_slots.pop_back();
    } else {
      grow(used + 1);
      s = used++;
    }
    std::copy(k, k + d, keys.begin() + static_cast<size_t>(s) * d);
    std::copy(v, v + dv, values.begin() + static_cast<size_t>(s) * dv);
    ids[s] = id_;
    act[s] = 1;
    kdiag[s] = kern(s, s);
    kmax = std::max(kmax, std::abs(kdiag[s]));
    alpha[s] = 0;
    g[s] = 0;
    set[s] = Set::kReserve;
    dref[s] = D;
    slot_of[id_] = s;
    ++n;
    kc.invalidate_row(s);
    return s;
  }

  void erase_token(int s) {
    act[s] = 0;
    alpha[s] = 0;
    g[s] = 0;
    set[s] = Set::kReserve;
    drop_column(s);
    slot_of.erase(ids[s]);
    free_slots.push_back(s);
    --n;
  }

  // ---------------------------------------------------------------- bordered inverse
  void refactor() {
    const int m = static_cast<int>(S.size());
    Rinv.touch();
    if (m == 0) {
      Rinv.clear();
      return;
    }
    Eigen::MatrixXd B(m + 1, m + 1);
    B(0, 0) = 0;
    for (int k = 0; k < m; ++k) ensure_column(S[k]);
    for (int k = 0; k < m; ++k) {
      B(0, k + 1) = B(k + 1, 0) = 1;
      const double* rk = row_ready(S[k]);
      for (int l = 0; l < m; ++l)
        B(k + 1, l + 1) = rk[kc.pos(S[l])] + (l == k ? st.problem.ridge : 0.0);
    }
    Rinv.assign(B.partialPivLu().inverse());
  }

  // Sensitivities beta = -Rinv [1; Q_Sc] of (b, a_S) to a unit increase of a_c.
  Eigen::VectorXd beta_of(int c) {
    const int m = static_cast<int>(S.size());
    Eigen::VectorXd v(m + 1);
    v(0) = 1;
    const double* rc = row_ready(c);
    for (int k = 0; k < m; ++k) v(k + 1) = rc[kc.pos(S[k])];
    return -(Rinv.m() * v);
  }

  // Schur complement of entrant i and its sensitivity vector (for expansion).
  double schur(int i, Eigen::VectorXd* beta_i) {
    const int m = static_cast<int>(S.size());
    if (m == 0) return Q(i, i);
    Eigen::VectorXd v(m + 1);
    v(0) = 1;
    const double* ri = row_ready(i);
    for (int k = 0; k < m; ++k) v(k + 1) = ri[kc.pos(S[k])];
    Eigen::VectorXd bi = -(Rinv.m() * v);
    if (beta_i) *beta_i = bi;
    return Q(i, i) + v.dot(bi);
  }

  void expand(int i) {
    ensure_column(i);
    const int m = static_cast<int>(S.size());
    Rinv.touch();
    if (m == 0) {
      const double qii = Q(i, i);
      Eigen::MatrixXd r2(2, 2);
      r2 << -qii, 1, 1, 0;
      Rinv.assign(r2);
      S.push_back(i);
      return;
    }
    Eigen::VectorXd bi;
    const double kappa = schur(i, &bi);
    Eigen::VectorXd u(m + 2);
    u.head(m + 1) = bi;
    u(m + 1) = 1;
    Rinv.expand(u, kappa);
    S.push_back(i);
  }

  void contract(int k) {  // remove S[k]
    const int m = static_cast<int>(S.size());
    Rinv.touch();
    if (m == 1) {
      S.clear();
      Rinv.clear();
      return;
    }
    Rinv.contract(k + 1);
    S.erase(S.begin() + k);
  }

  // ---------------------------------------------------------------- canonical finish
  void set_from_canonical(const detail::CanonicalResult& res, const std::vector<char>* skip) {
    // Drift of the canonical adjustment relative to the path's coefficients.
    double da = 0;
    for (int i = 0; i < used; ++i)
      if (act[i]) da += std::abs(res.alpha[i] - alpha[i]);
    D += kmax * da + std::abs(res.b - b);
    for (int i = 0; i < used; ++i) {
      if (!act[i]) continue;
      alpha[i] = res.alpha[i];
      set[i] = res.set[i];
      if (!(res.screened && skip && (*skip)[i])) {
        g[i] = res.g[i];
        dref[i] = D;
      }
    }
    kkt = res.kkt;
    b = res.b;
    status = res.status;
    warmup = res.warmup;
    support_sorted.clear();
    std::merge(res.margin.begin(), res.margin.end(), res.error.begin(), res.error.end(),
               std::back_inserter(support_sorted), [&](int x, int y) { return ids[x] < ids[y]; });
  }

  // Runs the canonical refinement from the current coefficients; rebuilds R when the partition
  // differs from the path's (a repair) or when it is due.
  // Lower bound of a screened reserve token's gradient given extra drift `extra`.
  bool reserve_safe(int i, double extra) const {
    const double slack = g[i] - (D + extra - dref[i]);
    return slack > 1e-12 * (1.0 + D) * std::max(1.0, kmax);
  }

  void finish(OpDiagnostics& dg) {
    std::vector<double> guess(used, 0.0);
    std::vector<char> skip(used, 0);
    for (int i = 0; i < used; ++i) {
      if (!act[i]) continue;
      guess[i] = alpha[i];
      skip[i] = set[i] == Set::kReserve && alpha[i] == 0 && reserve_safe(i, 0.0);
    }
    detail::CanonicalResult res = timed_canonicalize(guess, &skip, dg);
    if (res.screened) {
      // The canonical adjustment (and any repair) moved (a, b): re-check the screened bounds.
      double da = 0;
      for (int i = 0; i < used; ++i)
        if (act[i]) da += std::abs(res.alpha[i] - alpha[i]);
      const double extra = kmax * da + std::abs(res.b - b);
      bool ok = true;
      for (int i = 0; i < used && ok; ++i)
        if (act[i] && skip[i] && !reserve_safe(i, extra)) ok = false;
      if (!ok) {
        res = timed_canonicalize(guess, nullptr, dg);
      }
    }
    if (res.status != Status::kOptimal && res.status != Status::kWarmup &&
        res.status != Status::kEmpty) {
      // The path's partition could not be repaired: fall back to a batch re-solve.
      batch_rebuild(dg);
      return;
    }
    bool changed = false;
    for (int i = 0; i < used && !changed; ++i)
      if (act[i] && set[i] != res.set[i] && !(warmup || res.warmup)) changed = true;
    if (changed) ++dg.repairs;
    set_from_canonical(res, &skip);
    rebuild_margin(changed || ++ops_since_refactor >= st.refactor_period, dg);
  }

  // Makes S (the path's margin list) equal the canonical margin set and refreshes R if asked.
  void rebuild_margin(bool force, OpDiagnostics& dg) {
    std::vector<int> canon;
    if (!warmup)
      for (int s : support_sorted)
        if (set[s] == Set::kMargin) canon.push_back(s);
    std::vector<int> a = S, c2 = canon;
    std::sort(a.begin(), a.end());
    std::sort(c2.begin(), c2.end());
    if (force || a != c2 || (S.size() > 0 && Rinv.dim() != static_cast<int>(S.size()) + 1)) {
      S = canon;
      refactor();
      ++dg.refactorizations;
      ops_since_refactor = 0;
    }
    trim_columns();
    invalidate_views();
  }

  void trim_columns() {
    const int keep = 2 * static_cast<int>(support_sorted.size()) + 64;
    if (kc.count() <= keep) return;
    for (int p = 0; p < kc.capacity() && kc.count() > keep; ++p) {
      const int j = kc.slot_at(p);
      if (j >= 0 && (!act[j] || set[j] == Set::kReserve)) drop_column(j);
    }
  }

  void batch_rebuild(OpDiagnostics& dg, bool boundary = false) {
    if (boundary)
      ++dg.boundary_solves;
    else
      ++dg.batch_fallbacks;
    TokenSet t = tokens_sorted();
    BatchSettings bs;
    bs.problem = st.problem;
    bs.tolerances = st.tolerances;
    BatchResult br = solve_batch(t, bs);
    std::vector<double> guess(used, 0.0);
    for (size_t r = 0; r < t.ids.size(); ++r) guess[slot_of.at(t.ids[r])] = br.state.alpha[r];
    chol.clear();
    detail::CanonicalResult res = timed_canonicalize(guess, nullptr, dg);
    set_from_canonical(res, nullptr);
    if (res.status != Status::kOptimal && res.status != Status::kWarmup &&
        res.status != Status::kEmpty)
      dg.status = res.status;
    rebuild_margin(true, dg);
  }

  TokenSet tokens_sorted() const {
    std::vector<int> sl;
    for (int i = 0; i < used; ++i)
      if (act[i]) sl.push_back(i);
    std::sort(sl.begin(), sl.end(), [&](int x, int y) { return ids[x] < ids[y]; });
    TokenSet t;
    t.ids.resize(sl.size());
    t.keys.resize(static_cast<Eigen::Index>(sl.size()), d);
    t.values.resize(static_cast<Eigen::Index>(sl.size()), dv);
    for (size_t r = 0; r < sl.size(); ++r) {
      t.ids[r] = ids[sl[r]];
      for (int k = 0; k < d; ++k) t.keys(r, k) = key(sl[r])[k];
      for (int k = 0; k < dv; ++k) t.values(r, k) = value(sl[r])[k];
    }
    return t;
  }

  // g_c of a token at a_c = 0 from the current support (ascending id order).
  double gradient_of_new(int c) {
    for (int j : support_sorted) ensure_column(j);
    const double* rc = row_ready(c);
    double acc = 0.0;
    for (int j : support_sorted) acc += rc[kc.pos(j)] * alpha[j];
    return acc - kdiag[c] / 2 + b;
  }

  // ---------------------------------------------------------------- the path
  // Moves a_c (c not in S) up (dir = +1, add) or down to 0 (dir = -1, remove) keeping KKT on all
  // other tokens. Returns false if the step cap was hit.
  bool path(int c, int dir, OpDiagnostics& dg) {
    const bool ok = path_steps(c, dir, dg);
    refresh_support();
    return ok;
  }

  // S ∪ E in ascending id order, from the current sets (the path changes them).
  void refresh_support() {
    support_sorted.clear();
    for (int i = 0; i < used; ++i)
      if (act[i] && set[i] != Set::kReserve) support_sorted.push_back(i);
    std::sort(support_sorted.begin(), support_sorted.end(),
              [&](int x, int y) { return ids[x] < ids[y]; });
  }

  // The current support (S ∪ elist ∪ {c}) as a dense weight vector over the column positions:
  // wdense[pos(j)] = a_j, 0 elsewhere, up to the last used position whi. A path-side gradient is
  // then one contiguous dot product with the token's row instead of a gather, which streams the
  // row through the cache (positions that hold no support column add exact zeros: every stored
  // entry is a finite kernel value). Path-side sums only decide events; the canonical refinement
  // recomputes every checked gradient in ascending-id order, so this order never reaches a state.
  std::vector<double> wdense, bdense;
  int whi = 0;
  void load_support(int c, const std::vector<int>& elist) {
    wdense.assign(static_cast<size_t>(kc.capacity()), 0.0);
    whi = 0;
    auto push = [&](int j) {
      const int p = kc.pos(j);
      wdense[p] = alpha[j];
      whi = std::max(whi, p + 1);
    };
    for (int j : S) push(j);
    for (int j : elist) push(j);
    if (c >= 0 && set[c] != Set::kMargin && alpha[c] != 0) push(c);
  }

  // Exact gradient of reserve token i from the loaded support. Path-side only (screening and
  // event detection); the canonical refinement recomputes checked gradients in id order.
  double exact_g(int i) {
    const double* ri = row_ready(i);
    return detail::dot_fixed(ri, wdense.data(), static_cast<size_t>(whi)) +
           st.problem.ridge * alpha[i] - kdiag[i] / 2 + b;
  }

  // Recomputes a screened reserve token's gradient exactly (bound reset).
  void refresh(int i, OpDiagnostics& dg) {
    g[i] = exact_g(i);
    dref[i] = D;
    ++dg.tracked;
  }

  bool path_steps(int c, int dir, OpDiagnostics& dg) {
    const double C = st.problem.C;
    std::vector<char> refused(used, 0);
    std::vector<int> elist;
    ensure_column(c);
    for (int j : support_sorted)
      if (j != c && act[j] && set[j] == Set::kError) {
        ensure_column(j);
        elist.push_back(j);
      }
    auto elist_erase = [&](int j) {
      elist.erase(std::remove(elist.begin(), elist.end(), j), elist.end());
    };
    std::vector<double> gam(used, 0.0);
    std::vector<int> near;  // reserve tokens whose bound fails within the tentative step
    std::vector<int> prev_near;
    // exact[i]: reserve token i's g was recomputed or updated exactly at every step since its last
    // refresh (it was in `near` at the previous step), so g[i] is its gradient at the current
    // (a, b) and only its gamma is needed.
    std::vector<char> exact(used, 0);
    for (int step = 0; step < st.max_steps_per_op; ++step) {
      const int m = static_cast<int>(S.size());
      if (m == 0) {
        for (int i : near) exact[i] = 0;
        near.clear();
        // Only b can move (every gamma is 1). Rare: tiny n or degenerate streams.
        double t = kInf;
        int who = -1;
        if (dir > 0) {
          // raise b until c's or an error token's gradient reaches 0; reserve gradients only grow
          t = -g[c];
          who = c;
          for (int i : elist)
            if (!refused[i] && (-g[i] < t || (-g[i] == t && ids[i] < ids[who]))) {
              t = -g[i];
              who = i;
            }
        } else {
          // lower b until a reserve gradient reaches 0: exact gradients for every reserve token
          load_support(c, elist);
          for (int i = 0; i < used; ++i) {
            if (!act[i] || i == c || set[i] != Set::kReserve || refused[i]) continue;
            refresh(i, dg);
            if (who < 0 || g[i] < t || (g[i] == t && ids[i] < ids[who])) {
              t = g[i];
              who = i;
            }
          }
          if (who < 0) return false;
        }
        t = std::max(0.0, t);
        if (t == 0) ++dg.zero_steps;
        const double db = dir > 0 ? t : -t;
        b += db;
        D += std::abs(db);
        g[c] += db;
        for (int i : elist) g[i] += db;
        if (dir < 0)
          for (int i = 0; i < used; ++i)
            if (act[i] && i != c && set[i] == Set::kReserve) {
              g[i] += db;
              dref[i] = D;
            }
        ++dg.events;
        if (who == c) {  // c joins the margin set at its current coefficient
          g[c] = 0;
          set[c] = Set::kMargin;
          expand(c);
          return true;
        }
        g[who] = 0;
        if (set[who] == Set::kError) elist_erase(who);
        set[who] = Set::kMargin;
        expand(who);
        continue;
      }

      Eigen::VectorXd beta = beta_of(c);
      // Invariant guards: R_00 < 0 and 1' beta_S = -1.
      const double sb = beta.tail(m).sum();
      if (!(Rinv(0, 0) < 0) || std::abs(sb + 1) > 1e-6) {
        refactor();
        ++dg.refactorizations;
        beta = beta_of(c);
      }
      // gamma_i = Q_ic + Q_iS beta_S + beta_b, read from row i of the support columns as one
      // contiguous dot product with the dense vector of beta_S over the positions (as wdense).
      const int posc = kc.pos(c);
      bdense.assign(static_cast<size_t>(kc.capacity()), 0.0);
      int bhi = 0;
      for (int k = 0; k < m; ++k) {
        const int p = kc.pos(S[k]);
        bdense[p] = beta(k + 1);
        bhi = std::max(bhi, p + 1);
      }
      auto gamma_of = [&](int i) {
        const double* ri = row_ready(i);
        double v =
            (ri[posc] + beta(0)) + detail::dot_fixed(ri, bdense.data(), static_cast<size_t>(bhi));
        if (i == c) v += st.problem.ridge;
        return v;
      };
      gam[c] = gamma_of(c);
      for (int i : elist) gam[i] = gamma_of(i);
      const double s = dir;
      // Drift rate for the screening bound. A reserve token's gradient moves by <phi_i, dw> + db,
      // |<phi_i, dw>| <= sqrt(kmax) |dw|, and |dw|^2 per unit step is
      // beta~' K beta~ = gamma_c - mu (1 + |beta_S|^2) (margin gradients stay 0; docs/math.md).
      double bsq = 0;
      for (int k = 0; k < m; ++k) bsq += beta(k + 1) * beta(k + 1);
      const double w2 = std::max(0.0, gam[c] - st.problem.ridge * (1 + bsq));
      const double drift_rate =
          std::sqrt(kmax * (w2 + 1e-12 * (1 + std::abs(gam[c])))) + std::abs(beta(0));

      // Candidate events. Ties resolved by kind (0: c settles, 1: margin token hits a bound,
      // 2: error/reserve token enters) and then by ascending token id.
      double tbest = kInf;
      int kind = 3, who = -1;
      Set target = Set::kMargin;
      auto offer = [&](double t, int k, int w, Set tg) {
        if (!(t >= 0)) t = 0;  // round-off negatives become zero steps
        if (t < tbest || (t == tbest && (k < kind || (k == kind && ids[w] < ids[who])))) {
          tbest = t;
          kind = k;
          who = w;
          target = tg;
        }
      };
      if (dir > 0) {
        if (gam[c] > 0) offer(-g[c] / gam[c], 0, c, Set::kMargin);
        offer(C - alpha[c], 0, c, Set::kError);
      } else {
        offer(alpha[c], 0, c, Set::kReserve);
      }
      for (int k = 0; k < m; ++k) {
        const int j = S[k];
        const double rate = beta(k + 1) * s;
        if (rate < 0)
          offer(alpha[j] / -rate, 1, j, Set::kReserve);
        else if (rate > 0)
          offer((C - alpha[j]) / rate, 1, j, Set::kError);
      }
      for (int i : elist) {
        const double rate = gam[i] * s;
        if (!refused[i] && rate > 0) offer(-g[i] / rate, 2, i, Set::kMargin);
      }
      if (who < 0) return false;
      // Reserve tokens: only those whose bound fails within the tentative step can reach g = 0
      // first; recompute them exactly (the step only shrinks, so no others are needed).
      prev_near.swap(near);
      near.clear();
      bool loaded = false;
      for (int i = 0; i < used; ++i) {
        if (!act[i] || i == c || set[i] != Set::kReserve || refused[i]) continue;
        if (!reserve_safe(i, drift_rate * tbest)) {
          if (!exact[i]) {
            if (!loaded) {
              load_support(c, elist);
              loaded = true;
            }
            refresh(i, dg);
          }
          gam[i] = gamma_of(i);
          near.push_back(i);
          const double rate = gam[i] * s;
          if (rate < 0) offer(g[i] / -rate, 2, i, Set::kMargin);
        }
      }
      const double t = tbest;
      if (t == 0) ++dg.zero_steps;
      // Apply the step.
      const double dc = s * t;
      alpha[c] += dc;
      b += beta(0) * dc;
      for (int k = 0; k < m; ++k) alpha[S[k]] += beta(k + 1) * dc;
      D += drift_rate * t;
      g[c] += gam[c] * dc;
      for (int i : elist) g[i] += gam[i] * dc;
      for (int i : prev_near) exact[i] = 0;
      for (int i : near) {
        g[i] += gam[i] * dc;  // exact again after the step
        dref[i] = D;
        exact[i] = 1;
      }
      ++dg.events;
      // Bookkeeping.
      if (kind == 0) {
        if (dir < 0) {
          alpha[c] = 0;
          return true;
        }
        if (target == Set::kError) {
          alpha[c] = C;
          set[c] = Set::kError;
          return true;
        }
        g[c] = 0;
        const double kap = schur(c, nullptr);
        if (kap <= st.schur_tol * kdiag[c]) {
          // Near affine dependence: c cannot enter the margin system. Leave it where the path
          // stopped; the canonical refinement decides its final set.
          ++dg.refused_entrants;
          set[c] = alpha[c] > 0 ? Set::kMargin : Set::kReserve;
          return true;
        }
        set[c] = Set::kMargin;
        expand(c);
        return true;
      }
      if (kind == 1) {
        const int k = static_cast<int>(std::find(S.begin(), S.end(), who) - S.begin());
        alpha[who] = target == Set::kError ? C : 0.0;
        set[who] = target;
        g[who] = 0;
        exact[who] = 0;
        dref[who] = D;  // bound 0: checked exactly at the next step
        contract(k);
        if (target == Set::kError) elist.push_back(who);
        continue;
      }
      // kind == 2: an error or reserve token enters the margin set.
      const double kap = schur(who, nullptr);
      if (kap <= st.schur_tol * kdiag[who]) {
        refused[who] = 1;
        ++dg.refused_entrants;
        continue;
      }
      g[who] = 0;
      exact[who] = 0;
      if (set[who] == Set::kError) elist_erase(who);
      set[who] = Set::kMargin;
      expand(who);
    }
    return false;
  }

  // Common end of add/add_batch/remove_batch: bounded-mode eviction, status, timing, totals.
  OpDiagnostics close_op(OpDiagnostics& dg, Clock::time_point t0) {
    evict_if_bounded(dg, nullptr);
    if (dg.status == Status::kOptimal) dg.status = status;
    dg.seconds = seconds_since(t0);
    dg.kernel_evaluations = kernel_evaluations - kernel_evaluations_mark;
    totals += dg;
    return dg;
  }

  void evict_if_bounded(OpDiagnostics& dg, std::vector<TokenId>* out) {
    if (st.mode != MemoryMode::kBounded) return;
    std::vector<int> r;
    for (int i = 0; i < used; ++i)
      if (act[i] && set[i] == Set::kReserve && !warmup) r.push_back(i);
    std::sort(r.begin(), r.end(), [&](int x, int y) { return ids[x] < ids[y]; });
    for (int s : r) {
      if (st.token_budget > 0 && static_cast<std::size_t>(n) <= st.token_budget) break;
      if (out) out->push_back(ids[s]);
      erase_token(s);
      ++evicted;
      ++dg.ops;
    }
    invalidate_views();
  }

  // Adds without the canonical finish (batched callers finish once).
  bool add_one(TokenId id_, const double* k, const double* v, OpDiagnostics& dg) {
    const bool was_warm = n == 0 || detail::is_warmup(n, st.problem.C) || status == Status::kEmpty;
    const int c = insert_token(id_, k, v);
    ++dg.ops;
    if (detail::is_warmup(n, st.problem.C)) return true;  // finish computes the warm-up point
    if (was_warm) return true;                            // boundary: finish re-solves
    const double gc = gradient_of_new(c);
    g[c] = gc;
    if (gc >= 0) {  // inside the description: a reserve token, nothing else moves
      set[c] = Set::kReserve;
      return false;
    }
    if (!path(c, +1, dg)) {
      dg.status = Status::kIterationLimit;
      needs_batch = true;
    }
    return true;
  }

  bool remove_one(int c, OpDiagnostics& dg) {
    ++dg.ops;
    const TokenId idc = ids[c];
    chol.invalidate_from(idc);
    const bool warm_after = n - 1 == 0 || detail::is_warmup(n - 1, st.problem.C);
    if (set[c] == Set::kReserve && !warmup && !warm_after) {
      erase_token(c);  // a reserve token carries no weight: nothing else moves
      return false;
    }
    if (warmup || warm_after || needs_batch) {
      if (set[c] == Set::kMargin) {
        auto it = std::find(S.begin(), S.end(), c);
        if (it != S.end()) contract(static_cast<int>(it - S.begin()));
      }
      erase_token(c);
      needs_batch = needs_batch || (!warm_after);
      return true;
    }
    if (set[c] == Set::kMargin) {
      auto it = std::find(S.begin(), S.end(), c);
      SVATTN_ASSERT(it != S.end(), "margin token missing from the path's margin list");
      contract(static_cast<int>(it - S.begin()));
    }
    set[c] = Set::kError;  // a free coefficient being lowered; not a margin token
    if (!path(c, -1, dg)) {
      dg.status = Status::kIterationLimit;
      needs_batch = true;
    }
    erase_token(c);
    refresh_support();
    return true;
  }

  bool needs_batch = false;

  void finalize(bool changed, OpDiagnostics& dg) {
    if (!changed) {
      invalidate_views();
      return;
    }
    const bool warm_now = n == 0 || detail::is_warmup(n, st.problem.C);
    if (n == 0) {
      S.clear();
      Rinv.clear();
      Rinv.touch();
      support_sorted.clear();
      status = Status::kEmpty;
      warmup = false;
      b = 0;
      chol.clear();
      invalidate_views();
      needs_batch = false;
      return;
    }
    if (needs_batch) {
      // The path hit its step cap: finish by a batch re-solve (recorded as a fallback).
      needs_batch = false;
      if (dg.status == Status::kIterationLimit) dg.status = Status::kOptimal;
      batch_rebuild(dg);
      return;
    }
    if (!warm_now && (warmup || status == Status::kEmpty)) {
      // Leaving warm-up: a small batch solve at the boundary (SPEC §4; n is about 1/C here).
      batch_rebuild(dg, /*boundary=*/true);
      return;
    }
    finish(dg);
  }

  const Support& support() const {
    if (!support_valid) {
      const int m = static_cast<int>(support_sorted.size());
      support_cache.keys.resize(m, d);
      support_cache.values.resize(m, dv);
      support_cache.alpha.resize(m);
      int r = 0;
      for (int s : support_sorted) {
        if (!(alpha[s] > 0)) continue;
        for (int k = 0; k < d; ++k) support_cache.keys(r, k) = key(s)[k];
        for (int k = 0; k < dv; ++k) support_cache.values(r, k) = value(s)[k];
        support_cache.alpha[r] = alpha[s];
        ++r;
      }
      support_cache.keys.conservativeResize(r, d);
      support_cache.values.conservativeResize(r, dv);
      support_cache.alpha.conservativeResize(r);
      support_valid = true;
    }
    return support_cache;
  }
};

// ------------------------------------------------------------------ public API

Memory::Memory(const MemorySettings& settings, int dim, int value_dim) : impl_(new Impl) {
  settings.validate();
  if (dim < 1) throw InvalidArgument("dim must be >= 1, got " + std::to_string(dim));
  if (value_dim < 1)
    throw InvalidArgument("value_dim must be >= 1, got " + std::to_string(value_dim));
  impl_->st = settings;
  impl_->d = dim;
  impl_->dv = value_dim;
}
Memory::~Memory() = default;
Memory::Memory(Memory&&) noexcept = default;
Memory& Memory::operator=(Memory&&) noexcept = default;
Memory::Memory(const Memory& o) : impl_(new Impl(*o.impl_)) {}
Memory& Memory::operator=(const Memory& o) {
  if (this != &o) impl_.reset(new Impl(*o.impl_));
  return *this;
}

const MemorySettings& Memory::settings() const { return impl_->st; }
int Memory::dim() const { return impl_->d; }
int Memory::value_dim() const { return impl_->dv; }
int Memory::size() const { return impl_->n; }
bool Memory::contains(TokenId id) const { return impl_->slot_of.count(id) != 0; }
Status Memory::status() const { return impl_->status; }
const OpDiagnostics& Memory::totals() const { return impl_->totals; }
std::uint64_t Memory::evictions() const { return impl_->evicted; }
void Memory::set_evictions(std::uint64_t count) { impl_->evicted = count; }

namespace {
void check_vec(const Eigen::Ref<const Eigen::VectorXd>& v, int want, const char* what, TokenId id) {
  if (v.size() != want)
    throw InvalidArgument(std::string(what) + " of token " + std::to_string(id) + " has size " +
                          std::to_string(v.size()) + ", expected " + std::to_string(want));
  for (Eigen::Index k = 0; k < v.size(); ++k)
    if (!std::isfinite(v[k]))
      throw InvalidArgument(std::string(what) + " of token " + std::to_string(id) +
                            " has a non-finite entry at column " + std::to_string(k));
}
}  // namespace

OpDiagnostics Memory::add(TokenId id, const Eigen::Ref<const Eigen::VectorXd>& key,
                          const Eigen::Ref<const Eigen::VectorXd>& value) {
  Impl& m = *impl_;
  if (contains(id)) throw AlreadyExists("add: token id " + std::to_string(id) + " already present");
  check_vec(key, m.d, "key", id);
  check_vec(value, m.dv, "value", id);
  m.st.problem.check_key(key.data(), m.d, id);
  const auto t0 = m.begin_op();
  OpDiagnostics dg;
  const bool changed = m.add_one(id, key.data(), value.data(), dg);
  m.finalize(changed, dg);
  return m.close_op(dg, t0);
}

OpDiagnostics Memory::add_batch(const TokenSet& tokens) {
  Impl& m = *impl_;
  if (tokens.keys.cols() != m.d && tokens.size() > 0)
    throw InvalidArgument("add_batch: keys have dimension " + std::to_string(tokens.keys.cols()) +
                          ", memory has " + std::to_string(m.d));
  if (tokens.values.cols() != m.dv && tokens.size() > 0)
    throw InvalidArgument("add_batch: values have dimension " +
                          std::to_string(tokens.values.cols()) + ", memory has " +
                          std::to_string(m.dv));
  tokens.validate(m.st.problem);
  for (TokenId id : tokens.ids)
    if (contains(id))
      throw AlreadyExists("add_batch: token id " + std::to_string(id) + " already present");
  const auto t0 = m.begin_op();
  OpDiagnostics dg;
  bool pending = false;
  for (int r = 0; r < tokens.size(); ++r) {
    const bool changed =
        m.add_one(tokens.ids[r], tokens.keys.row(r).data(), tokens.values.row(r).data(), dg);
    if (changed) {
      // The path needs an exact KKT point to continue; a warm-up boundary needs the canonical
      // warm-up point. Finish eagerly only where the next step depends on it.
      pending = true;
      if (m.needs_batch || detail::is_warmup(m.n, m.st.problem.C) || m.status == Status::kEmpty ||
          m.warmup) {
        m.finalize(true, dg);
        pending = false;
      }
    }
  }
  if (pending) m.finalize(true, dg);
  m.invalidate_views();
  return m.close_op(dg, t0);
}

OpDiagnostics Memory::remove(TokenId id) { return remove_batch({id}); }

OpDiagnostics Memory::remove_batch(const std::vector<TokenId>& ids_in) {
  Impl& m = *impl_;
  std::vector<TokenId> ids = ids_in;
  std::sort(ids.begin(), ids.end());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!contains(ids[i]))
      throw NotFound("remove: token id " + std::to_string(ids[i]) + " not present");
    if (i > 0 && ids[i] == ids[i - 1])
      throw InvalidArgument("remove: token id " + std::to_string(ids[i]) + " listed twice");
  }
  const auto t0 = m.begin_op();
  OpDiagnostics dg;
  bool changed = false;
  for (TokenId id : ids) {
    const bool was_warm = m.warmup;
    changed = m.remove_one(m.slot_of.at(id), dg) || changed;
    if (changed && (was_warm || m.warmup)) {
      m.finalize(true, dg);
      changed = false;
    }
  }
  m.finalize(changed, dg);
  return m.close_op(dg, t0);
}

std::vector<TokenId> Memory::evict_reserve(OpDiagnostics* diag) {
  Impl& m = *impl_;
  std::vector<TokenId> out;
  OpDiagnostics dg;
  if (m.warmup) {  // in warm-up every token carries weight
    if (diag) *diag = dg;
    return out;
  }
  std::vector<int> r;
  for (int i = 0; i < m.used; ++i)
    if (m.act[i] && m.set[i] == Set::kReserve) r.push_back(i);
  std::sort(r.begin(), r.end(), [&](int x, int y) { return m.ids[x] < m.ids[y]; });
  for (int s : r) {
    out.push_back(m.ids[s]);
    m.erase_token(s);
    ++m.evicted;
    ++dg.ops;
  }
  m.state_valid = false;  // support (and so readouts) unchanged
  if (diag) *diag = dg;
  m.totals += dg;
  return out;
}

Eigen::VectorXd Memory::readout(const Eigen::Ref<const Eigen::VectorXd>& q) const {
  return svattn::readout(impl_->st.problem.kernel, impl_->support(), q);
}

double Memory::decision(const Eigen::Ref<const Eigen::VectorXd>& q) const {
  return decision_function(impl_->st.problem.kernel, impl_->support(), impl_->b, q);
}

State Memory::state() const {
  Impl& m = *impl_;
  if (!m.state_valid) {
    TokenSet t = m.tokens_sorted();
    std::vector<double> a(t.ids.size());
    std::vector<Set> s(t.ids.size());
    for (size_t r = 0; r < t.ids.size(); ++r) {
      const int sl = m.slot_of.at(t.ids[r]);
      a[r] = m.alpha[sl];
      s[r] = m.set[sl];
    }
    // Residuals of the last canonical refinement; operations that leave (a, b) untouched (a new
    // reserve token with g >= 0, removing or evicting reserve tokens) leave them unchanged.
    const KktReport kkt = m.n > 0 ? m.kkt : KktReport{};
    m.state_cache = detail::build_state(m.st.problem, t, a, s, m.b, kkt, m.status, m.warmup);
    m.state_valid = true;
  }
  return m.state_cache;
}

std::string Memory::state_sha256() const { return state().state_sha256; }
TokenSet Memory::tokens() const { return impl_->tokens_sorted(); }

double Memory::alpha(TokenId id) const {
  auto it = impl_->slot_of.find(id);
  if (it == impl_->slot_of.end())
    throw NotFound("alpha: token id " + std::to_string(id) + " not present");
  return impl_->alpha[it->second];
}

const Eigen::MatrixXd& Memory::bordered_inverse() const { return impl_->Rinv.view(); }

std::vector<TokenId> Memory::margin_order() const {
  std::vector<TokenId> out;
  for (int s : impl_->S) out.push_back(impl_->ids[s]);
  return out;
}

Memory Memory::restore(const MemorySettings& settings, const TokenSet& tokens, const State& state,
                       OpDiagnostics* diag) {
  settings.validate();
  tokens.validate(settings.problem);
  if (tokens.size() > 0 &&
      (tokens.keys.cols() != state.dim || tokens.values.cols() != state.value_dim))
    throw InvalidArgument("restore: token dimensions do not match the state");
  {
    // The state must have been solved under these problem settings (they are part of its hash).
    const ProblemSettings& a = state.settings;
    const ProblemSettings& b = settings.problem;
    auto differ = [](const char* field, const std::string& x, const std::string& y) {
      throw InvalidArgument(std::string("restore: the state was solved with ") + field + " = " + x +
                            ", the settings have " + field + " = " + y);
    };
    auto num = [](double v) {  // shortest decimal that reads back as v
      for (int prec = 15;; ++prec) {
        std::ostringstream os;
        os.precision(prec);
        os << v;
        if (prec >= 17 || std::stod(os.str()) == v) return os.str();
      }
    };
    if (a.kernel.type != b.kernel.type)
      differ("kernel", to_string(a.kernel.type), to_string(b.kernel.type));
    if (a.kernel.bandwidth != b.kernel.bandwidth)
      differ("kernel.bandwidth", num(a.kernel.bandwidth), num(b.kernel.bandwidth));
    if (a.kernel.degree != b.kernel.degree)
      differ("kernel.degree", std::to_string(a.kernel.degree), std::to_string(b.kernel.degree));
    if (a.kernel.coef0 != b.kernel.coef0)
      differ("kernel.coef0", num(a.kernel.coef0), num(b.kernel.coef0));
    if (a.C != b.C) differ("C", num(a.C), num(b.C));
    if (a.ridge != b.ridge) differ("ridge", num(a.ridge), num(b.ridge));
  }
  Memory mem(settings, state.dim > 0 ? state.dim : static_cast<int>(tokens.keys.cols()),
             state.value_dim > 0 ? state.value_dim : static_cast<int>(tokens.values.cols()));
  Impl& m = *mem.impl_;
  OpDiagnostics dg;
  std::unordered_map<TokenId, double> a;
  for (size_t t = 0; t < state.ids.size(); ++t) a[state.ids[t]] = state.alpha[t];
  for (int r = 0; r < tokens.size(); ++r) {
    const int s =
        m.insert_token(tokens.ids[r], tokens.keys.row(r).data(), tokens.values.row(r).data());
    auto it = a.find(tokens.ids[r]);
    m.alpha[s] = it == a.end() ? 0.0 : it->second;
  }
  if (m.n > 0) {
    m.finish(dg);
    const bool ok = m.status == Status::kOptimal || m.status == Status::kWarmup;
    if (!ok || mem.state_sha256() != state.state_sha256) {
      // The stored state does not describe these tokens: re-solve from scratch.
      m.batch_rebuild(dg);
    }
  }
  dg.kernel_evaluations = m.kernel_evaluations;
  if (diag) *diag = dg;
  m.totals += dg;
  return mem;
}

void Memory::check_invariants() const {
  Impl& m = *impl_;
  int count = 0;
  for (int i = 0; i < m.used; ++i) {
    if (!m.act[i]) continue;
    ++count;
    SVATTN_ASSERT(m.slot_of.at(m.ids[i]) == i, "slot map out of sync");
    const int p = m.kc.pos(i);
    if (p >= 0)
      for (int j = 0; j < m.used; ++j)
        if (m.act[j] && m.kc.valid(j, p))
          SVATTN_ASSERT(m.kc.row(j)[p] == m.kern(j, i),
                        "cached kernel column differs from a fresh value");
  }
  SVATTN_ASSERT(count == m.n, "token count out of sync");
  const int ms = static_cast<int>(m.S.size());
  for (int s : m.S)
    SVATTN_ASSERT(m.set[s] == Set::kMargin, "path margin list holds a non-margin token");
  if (ms > 0 && !m.warmup) {
    SVATTN_ASSERT(m.Rinv.dim() == ms + 1, "bordered inverse has the wrong size");
    Eigen::MatrixXd B(ms + 1, ms + 1);
    B(0, 0) = 0;
    for (int k = 0; k < ms; ++k) {
      B(0, k + 1) = B(k + 1, 0) = 1;
      for (int l = 0; l < ms; ++l) B(l + 1, k + 1) = m.Q(m.S[l], m.S[k]);
    }
    for (int k = 0; k < ms; ++k)
      SVATTN_ASSERT(m.kc.pos(m.S[k]) >= 0, "margin token without a kernel column");
    // Relative residual: |R B - I| / (|R| |B|) in the max norm, which rank-one updates keep near
    // machine precision times the growth since the last refactorisation.
    const double err =
        (m.Rinv.m() * B - Eigen::MatrixXd::Identity(ms + 1, ms + 1)).cwiseAbs().maxCoeff();
    const double rel =
        err / (m.Rinv.m().cwiseAbs().maxCoeff() * B.cwiseAbs().maxCoeff() * (ms + 1));
    SVATTN_ASSERT(rel < 1e-8, "bordered inverse drifted: |R B - I| = " + std::to_string(err) +
                                  " (relative " + std::to_string(rel) + ")");
  }
}

}  // namespace svattn
