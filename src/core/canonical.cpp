// The canonical refinement (docs/math.md §3 "Canonical state"): from any approximate optimum,
// re-derive the partition and solve the KKT system on (S, E) in ascending-id order with a
// row-wise Cholesky factor, every sum in the fixed four-lane order of fixed_sum.h (blocks of eight
// rows, two right-hand sides and eight gradient sums at a time, same bits), so the state is a
// function of the token set alone. Also assembles the public State from per-row arrays.
#include "canonical.h"
#include "fixed_sum.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <limits>

namespace svattn::detail {

bool is_warmup(int n, double C) { return static_cast<double>(n) * C <= 1.0 + 1e-9; }

// docs/math.md §1, "μ = 0 and duplicates": computed K_ij = K_ii = K_jj leaves ||phi_i - phi_j||^2
// <= 4 delta in reals (delta >= the error of one computed kernel value, taken as 1e-10 scale), so
// |g_i - g_j| <= 2 sqrt(delta (scale + delta)) + delta (sum_k a_k = 1), about 2e-5 scale; a support
// token has g_j <= max(kkt_tol scale, alpha_tol min(C, 1) gamma_j) with gamma_j <= 4 scale. The
// limit adds these with a margin of 50 on the twin term.
bool g_twin_filter = true;

double twin_gradient_limit(double scale, const Tolerances& tol, double C) {
  if (!g_twin_filter) return std::numeric_limits<double>::infinity();
  return tol.kkt_tol * scale + 8 * tol.alpha_tol * std::min(C, 1.0) * scale + 1e-3 * scale;
}

bool g_reuse_row_prefixes = true;

namespace {
thread_local std::uint64_t t_reused_row_entries = 0;
}  // namespace

std::uint64_t reused_row_entries() { return t_reused_row_entries; }

void CholeskyCache::invalidate_from(TokenId id) {
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] == id) {
      order.erase(order.begin() + static_cast<std::ptrdiff_t>(i));
      rows.erase(rows.begin() + static_cast<std::ptrdiff_t>(i));
      complete = std::min(complete, i);
      return;
    }
  }
}

namespace {

struct Refiner {
  KernelAccess& ka;
  const ProblemSettings& p;
  const Tolerances& tol;
  CholeskyCache* cache;
  CholeskyCache local;
  int ns = 0;
  int num_active = 0;
  std::vector<int> checked;     // active slots whose gradient is computed (not screened out)
  std::vector<int> candidates;  // slots that were ever outside the reserve set in this refinement
  std::vector<double> acc;      // per slot: the gradient sums of the last kernel_sums()
  std::vector<int> active_;     // all_active()
  double scale = 1, tau = 0, gtol = 0;  // scale: max(1, max_i K_ii), for relative tolerances
  // The margin system is solved with Q_SS + shift * 11' (shift = scale). On the constraint
  // sum a_S = s this only moves b by shift * s, but it makes the factor positive definite whenever
  // Q is positive definite on the subspace 1' v = 0 (e.g. linear kernels with ridge 0), which is
  // what the bordered KKT system actually needs.
  double shift = 1;

  Refiner(KernelAccess& k, const ProblemSettings& ps, const Tolerances& t, CholeskyCache* c)
      : ka(k), p(ps), tol(t), cache(c ? c : &local) {}

  // One pass over the slots: the active ones counted, those whose gradient is checked, the kernel
  // scale (max(1, max K_ii), slot order) and the initial partition from the alpha thresholds.
  void scan_slots(const std::vector<double>& guess, const std::vector<char>* skip,
                  std::vector<Set>& set) {
    const char* live = ka.live_flags();
    const double* kd = ka.diag_values();
    const int ng = static_cast<int>(guess.size());
    checked.reserve(ns);
    for (int i = 0; i < ns; ++i) {
      if (live && !live[i]) continue;
      ++num_active;
      if (!skip || !(*skip)[i]) checked.push_back(i);
      scale = std::max(scale, kd[i]);
      const double a = i < ng ? guess[i] : 0.0;
      if (a <= tau) continue;  // reserve
      set[i] = a >= p.C - tau ? Set::kError : Set::kMargin;
      candidates.push_back(i);
    }
  }

  // A repair: the token moves to `to`; one leaving the reserve set becomes a candidate.
  void move_to(int slot, Set to, std::vector<Set>& set) {
    if (to != Set::kReserve && set[slot] == Set::kReserve &&
        std::find(candidates.begin(), candidates.end(), slot) == candidates.end())
      candidates.push_back(slot);
    set[slot] = to;
  }

  // The active slots in slot order, listed on first use (only the warm-up, an empty margin set, a
  // failed refinement and the ridge-0 duplicate check visit every slot).
  const std::vector<int>& all_active() {
    if (active_.empty() && num_active > 0) {
      const char* live = ka.live_flags();
      active_.reserve(num_active);
      for (int i = 0; i < ns; ++i)
        if (!live || live[i]) active_.push_back(i);
    }
    return active_;
  }

  std::vector<int> sorted_by_id(std::vector<int> v) const {
    std::sort(v.begin(), v.end(), [&](int a, int b) { return ka.id(a) < ka.id(b); });
    return v;
  }

  // Row-wise Cholesky of Q_SS + shift 11' in ascending-id order (docs/math.md §3). Rows of the
  // common prefix with the cached factor are kept; of every later row whose token had a row, the
  // entries before the first changed position are kept too. The rest is computed kRowBlock rows
  // at a time. Returns false if a pivot is not positive enough (the cache then holds the rows
  // before it).
  bool factor(const std::vector<int>& S) {
    const size_t m = S.size();
    if (cache->shift != shift) {
      cache->clear();
      cache->shift = shift;
    }
    size_t pre = 0;
    while (pre < cache->complete && pre < m && cache->order[pre] == ka.id(S[pre])) ++pre;
    const auto cut = static_cast<std::ptrdiff_t>(pre);
    std::vector<TokenId> old_order(cache->order.begin() + cut, cache->order.end());
    std::vector<std::vector<double>> old_rows(std::make_move_iterator(cache->rows.begin() + cut),
                                              std::make_move_iterator(cache->rows.end()));
    cache->order.resize(pre);
    cache->rows.resize(pre);
    cache->complete = pre;
    size_t next_old = 0;  // both orders ascend by id: one merge walk finds the old rows
    for (size_t i0 = pre; i0 < m; i0 += kRowBlock) {
      const int nb = static_cast<int>(std::min<size_t>(kRowBlock, m - i0));
      size_t start[kRowBlock];
      for (int t = 0; t < nb; ++t) {
        const TokenId id = ka.id(S[i0 + t]);
        while (next_old < old_order.size() && old_order[next_old] < id) ++next_old;
        std::vector<double> row;
        start[t] = 0;
        if (g_reuse_row_prefixes && next_old < old_order.size() && old_order[next_old] == id) {
          row = std::move(old_rows[next_old]);  // entries [0, pre) are this row's
          start[t] = pre;
          t_reused_row_entries += pre;
        }
        row.resize(i0 + t + 1);
        cache->order.push_back(id);
        cache->rows.push_back(std::move(row));
      }
      const size_t bad = factor_block(S, i0, nb, start);
      if (bad < m) {
        cache->order.resize(bad);
        cache->rows.resize(bad);
        cache->complete = bad;
        return false;
      }
      cache->complete = i0 + nb;
    }
    return true;
  }

  // Fills rows i0 .. i0 + nb - 1 (in the cache, entries before start[t] present) column by column:
  // entry j of every block row that needs it in one dot_fixed_rows call, and at j = i0 + t row t's
  // diagonal before the later rows read it. Each entry is the expression of the one-row
  // factorisation, ((K_ij + shift) - dot_fixed(row_i, row_j, j)) / L_jj, so the bits are the same.
  // Returns the position of a pivot that is not positive enough, or SIZE_MAX.
  size_t factor_block(const std::vector<int>& S, size_t i0, int nb, const size_t* start) {
    const double pivot_floor = 1e-14 * scale;
    auto& L = cache->rows;
    const double* krow[kRowBlock];  // K(S_i, .); K(S_i, S_j) = krow[pos(S_j)]
    double* row[kRowBlock];
    for (int t = 0; t < nb; ++t) {
      krow[t] = ka.row(S[i0 + t]);
      row[t] = L[i0 + t].data();
    }
    const double* lhs[kRowBlock];
    int who[kRowBlock];
    double dots[kRowBlock];
    for (size_t j = *std::min_element(start, start + nb); j < i0 + nb; ++j) {
      const int pj = ka.pos(S[j]);
      if (j >= i0) {
        const int t = static_cast<int>(j - i0);
        const double s = (krow[t][pj] + p.ridge + shift) - dot_fixed(row[t], row[t], j);
        if (!(s > pivot_floor)) return j;
        row[t][j] = std::sqrt(s);
      }
      int count = 0;
      for (int t = 0; t < nb; ++t)
        if (start[t] <= j && j < i0 + t) {
          lhs[count] = row[t];
          who[count++] = t;
        }
      if (count == 0) continue;
      const double* rj = L[j].data();
      dot_fixed_rows(lhs, count, rj, j, dots);
      for (int c = 0; c < count; ++c)
        row[who[c]][j] = ((krow[who[c]][pj] + shift) - dots[c]) / rj[j];
    }
    return static_cast<size_t>(-1);
  }

  // L y = v
  void forward(std::vector<double>& v) const {
    const auto& L = cache->rows;
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = (v[i] - dot_fixed(L[i].data(), v.data(), i)) / L[i][i];
    }
  }
  // L y = v for two right-hand sides at once: their dot products side by side (dot_fixed_rows);
  // each vector gets exactly the arithmetic of forward() alone.
  void forward2(std::vector<double>& v0, std::vector<double>& v1) const {
    const auto& L = cache->rows;
    const double* lhs[2] = {v0.data(), v1.data()};
    double d[2];
    for (size_t i = 0; i < v0.size(); ++i) {
      dot_fixed_rows(lhs, 2, L[i].data(), i, d);
      v0[i] = (v0[i] - d[0]) / L[i][i];
      v1[i] = (v1[i] - d[1]) / L[i][i];
    }
  }
  // L' x = y for two right-hand sides: two interleaved subtraction chains, each in the order
  // k = ii + 1, ii + 2, ... of a single solve (a chain cannot be split without changing its bits).
  void backward2(std::vector<double>& v0, std::vector<double>& v1) const {
    const auto& L = cache->rows;
    for (size_t ii = v0.size(); ii-- > 0;) {
      double s0 = v0[ii], s1 = v1[ii];
      for (size_t k = ii + 1; k < v0.size(); ++k) {
        const double l = L[k][ii];
        s0 -= l * v0[k];
        s1 -= l * v1[k];
      }
      v0[ii] = s0 / L[ii][ii];
      v1[ii] = s1 / L[ii][ii];
    }
  }

  // acc_i = sum over j in `support` (ascending id) of K_ij * a_j, for every active slot i.
  // Requires every column in `support`, then per checked token i sums K_ij a_j over the support
  // in its (ascending id) order, kRowBlock tokens per gather_dot_fixed_rows call.
  const std::vector<double>& kernel_sums(const std::vector<int>& support,
                                         const std::vector<double>& a) {
    for (int j : support) ka.require(j);
    std::vector<int> pj(support.size());
    std::vector<double> aj(support.size());
    for (size_t t = 0; t < support.size(); ++t) {
      pj[t] = ka.pos(support[t]);
      aj[t] = a[support[t]];
    }
    acc.resize(ns);  // kept between calls: only the checked entries are read
    const double* rows[kRowBlock];
    double out[kRowBlock];
    for (size_t c0 = 0; c0 < checked.size(); c0 += kRowBlock) {
      const int nb = static_cast<int>(std::min<size_t>(kRowBlock, checked.size() - c0));
      for (int t = 0; t < nb; ++t) rows[t] = ka.row(checked[c0 + t]);
      gather_dot_fixed_rows(rows, nb, pj.data(), aj.data(), pj.size(), out);
      for (int t = 0; t < nb; ++t) acc[checked[c0 + t]] = out[t];
    }
    return acc;
  }
};

std::vector<int> merge_by_id(KernelAccess& ka, const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  out.reserve(a.size() + b.size());
  std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out),
             [&](int x, int y) { return ka.id(x) < ka.id(y); });
  return out;
}

KktReport kkt_report(const Refiner& r, const CanonicalResult& res) {
  KktReport k;
  // Reserve tokens hold exactly 0, so the sum over the support in ascending id order is the sum
  // over all tokens.
  std::vector<int> support = merge_by_id(r.ka, res.margin, res.error);
  double sum = 0.0;
  for (int i : support) {
    const double a = res.alpha[i];
    sum += a;
    const double C = res.warmup ? a : r.p.C;
    k.box_violation = std::max({k.box_violation, -a, a - C});
  }
  for (int i : r.checked) {
    const double g = res.g[i];
    double v = 0;
    switch (res.set[i]) {
      case Set::kMargin: v = std::abs(g); break;
      case Set::kError: v = std::max(0.0, g); break;
      case Set::kReserve: v = std::max(0.0, -g); break;
    }
    k.max_violation = std::max(k.max_violation, v);
  }
  k.sum_error = std::abs(sum - 1.0);
  k.box_violation = std::max(0.0, k.box_violation);
  return k;
}

}  // namespace

/// Ridge 0 only: true when two tokens have identical kernel columns (K_ij = K_ii = K_jj, i.e.
/// duplicate keys, or keys the kernel cannot tell apart in fp64) and mass can move between them
/// inside the box: one is margin, or one is error and the other reserve. Then every split of their
/// mass is optimal, the optimum is not unique and which split a path reaches depends on the path
/// (docs/math.md §1): the state is reported `singular`, never as a certified optimum.
/// Only the support and the reserve tokens in `reserve` are examined: a reserve token whose
/// gradient exceeds twin_gradient_limit cannot be a twin of a support token (docs/math.md §1,
/// "μ = 0 and duplicates"), so the caller leaves it out without reading its row.
bool has_tradable_duplicate(KernelAccess& ka, const std::vector<int>& support,
                            const std::vector<int>& reserve, const CanonicalResult& res) {
  for (int j : support) ka.require(j);
  const double* kd = ka.diag_values();
  std::vector<int> pos;
  std::vector<double> dj;
  for (int j : support) {
    pos.push_back(ka.pos(j));
    dj.push_back(kd[j]);
  }
  auto twin_of = [&](int i) {
    const double* row = ka.row(i);
    const double di = kd[i];
    for (size_t t = 0; t < support.size(); ++t) {
      const double kij = row[pos[t]];
      if (!(kij == di && kij == dj[t])) continue;
      const int j = support[t];
      if (j == i) continue;
      const bool tradable = res.set[j] == Set::kMargin || res.set[i] == Set::kMargin ||
                            res.set[i] == Set::kReserve;
      if (tradable) return true;  // (else both at the upper bound C)
    }
    return false;
  };
  for (int i : support)
    if (twin_of(i)) return true;
  for (int i : reserve)
    if (twin_of(i)) return true;
  return false;
}

CanonicalResult canonicalize(KernelAccess& ka, const std::vector<double>& alpha_guess,
                             const ProblemSettings& p, const Tolerances& tol,
                             CholeskyCache* cache, const std::vector<char>* skip) {
  Refiner r(ka, p, tol, cache);
  r.ns = ka.num_slots();
  CanonicalResult res;
  res.alpha.assign(r.ns, 0.0);
  res.g.assign(r.ns, 0.0);
  res.set.assign(r.ns, Set::kReserve);
  const double C = p.C, mu = p.ridge;
  r.tau = tol.alpha_tol * std::min(C, 1.0);
  r.scan_slots(alpha_guess, skip, res.set);  // also the initial partition (step 1)
  const int n = r.num_active;
  res.screened = skip != nullptr;
  if (n == 0) {
    res.status = Status::kEmpty;
    return res;
  }
  r.shift = r.scale;
  r.gtol = tol.kkt_tol * r.scale;

  if (is_warmup(n, C)) {
    r.checked = r.all_active();
    res.screened = false;
    // The only feasible point with C raised to 1/n: a_i = 1/n, every token at its (raised) bound.
    const double a = 1.0 / n;
    for (int i : r.all_active()) {
      res.alpha[i] = a;
      res.set[i] = Set::kError;
    }
    res.error = r.sorted_by_id(r.all_active());
    // Every token is in the support: sum fresh kernel values (no column cache of n columns).
    std::vector<double> acc(r.ns, 0.0);
    for (int i : r.all_active()) {
      double s = 0.0;
      for (int j : res.error) s += ka.kernel_value(i, j) * a;
      acc[i] = s;
    }
    double hmax = -std::numeric_limits<double>::infinity();
    for (int i : r.all_active()) {
      const double h = acc[i] + mu * res.alpha[i] - ka.diag(i) / 2;
      res.g[i] = h;
      hmax = std::max(hmax, h);
    }
    res.b = -hmax;
    for (int i : r.all_active()) res.g[i] += res.b;
    res.warmup = true;
    res.status = Status::kWarmup;
    res.kkt = kkt_report(r, res);
    return res;
  }

  res.status = Status::kKktViolated;
  for (int iter = 0; iter <= tol.max_refine_iterations; ++iter) {
    // S and E from the candidates (every non-reserve slot is one), each in ascending id; only
    // candidates can hold a nonzero coefficient from an earlier round.
    std::vector<int> S, E;
    for (int i : r.candidates) {
      if (res.set[i] == Set::kMargin) S.push_back(i);
      else if (res.set[i] == Set::kError) E.push_back(i);
      res.alpha[i] = 0.0;
    }
    S = r.sorted_by_id(S);
    E = r.sorted_by_id(E);
    for (int j : E) res.alpha[j] = C;

    struct Violation {
      int slot;
      Set to;
      double size;
    };
    std::vector<Violation> viol;
    std::vector<double> y;  // L^{-1} 1
    double c = 0;

    if (S.empty()) {
      // Only b is free. Feasible only if |E| C == 1. Every gradient is needed here.
      r.checked = r.all_active();
      res.screened = false;
      const std::vector<double>& acc = r.kernel_sums(E, res.alpha);
      std::vector<double> h(r.ns, 0.0);
      for (int i : r.all_active()) h[i] = acc[i] + mu * res.alpha[i] - ka.diag(i) / 2;
      const double mass = static_cast<double>(E.size()) * C;
      auto pick = [&](Set from, bool smallest) {
        int best = -1;
        for (int i : r.all_active()) {
          if (res.set[i] != from) continue;
          if (best < 0 || (smallest ? h[i] < h[best] : h[i] > h[best]) ||
              (h[i] == h[best] && ka.id(i) < ka.id(best)))
            best = i;
        }
        return best;
      };
      if (mass < 1.0 - 1e-12) {
        int k = pick(Set::kReserve, true);
        if (k >= 0) viol.push_back({k, Set::kMargin, 1.0});
      } else if (mass > 1.0 + 1e-12) {
        int k = pick(Set::kError, false);
        if (k >= 0) viol.push_back({k, Set::kMargin, 1.0});
      } else {
        double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
        for (int i : r.all_active()) {
          if (res.set[i] == Set::kReserve) lo = std::max(lo, -h[i]);
          else hi = std::min(hi, -h[i]);
        }
        if (lo <= hi + r.gtol) {
          // Canonical choice inside the feasible interval [lo, hi]: its midpoint (hi if no reserve).
          res.b = std::isfinite(lo) ? (lo + hi) / 2 : hi;
        } else {
          int k = pick(Set::kReserve, true);
          viol.push_back({k, Set::kMargin, 1.0});
        }
      }
      if (viol.empty()) {
        for (int i : r.all_active()) res.g[i] = h[i] + res.b;
      }
    } else {
      for (int j : S) ka.require(j);
      for (int j : E) ka.require(j);
      if (!r.factor(S)) {
        res.status = Status::kSingular;
        break;
      }
      const size_t m = S.size();
      std::vector<double> rhs(m, 0.0);
      if (!E.empty()) {
        for (size_t t = 0; t < m; ++t) {
          const double* kr = ka.row(S[t]);
          double acc = 0.0;
          for (int j : E) acc += kr[ka.pos(j)];
          rhs[t] = ka.diag(S[t]) / 2 - C * acc;
        }
      } else {
        for (size_t t = 0; t < m; ++t) rhs[t] = ka.diag(S[t]) / 2;
      }
      const double s = 1.0 - static_cast<double>(E.size()) * C;
      // u = Q^-1 rhs and w = Q^-1 1 through y = L^-1 1, the two solves side by side.
      std::vector<double> u = rhs;
      y.assign(m, 1.0);
      r.forward2(u, y);
      std::vector<double> w = y;
      r.backward2(u, w);
      double sw = 0, su = 0;
      for (size_t t = 0; t < m; ++t) {
        sw += w[t];
        su += u[t];
        c += y[t] * y[t];
      }
      const double bshift = (su - s) / sw;
      for (size_t t = 0; t < m; ++t) res.alpha[S[t]] = u[t] - bshift * w[t];
      res.b = bshift + r.shift * s;

      const std::vector<int> support = merge_by_id(ka, S, E);
      const std::vector<double>& acc = r.kernel_sums(support, res.alpha);
      for (int i : r.checked) res.g[i] = acc[i] + mu * res.alpha[i] - ka.diag(i) / 2 + res.b;

      // Schur complement of a non-margin token i: gamma = Q_ii - z'z + (1 - y'z)^2 / c, z = L^-1 K_Si.
      auto gamma_of = [&](int i) {
        const double* kr = ka.row(i);
        std::vector<double> z(m);
        for (size_t t = 0; t < m; ++t) z[t] = kr[ka.pos(S[t])] + r.shift;
        r.forward(z);
        double zz = 0, yz = 0;
        for (size_t t = 0; t < m; ++t) {
          zz += z[t] * z[t];
          yz += y[t] * z[t];
        }
        return std::max(0.0, ka.diag(i) + mu + r.shift - zz + (1 - yz) * (1 - yz) / c);
      };
      for (int i : r.checked) {
        const double a = res.alpha[i], g = res.g[i];
        switch (res.set[i]) {
          case Set::kMargin:
            if (a <= r.tau) viol.push_back({i, Set::kReserve, r.tau - a});
            else if (a >= C - r.tau) viol.push_back({i, Set::kError, a - (C - r.tau)});
            break;
          case Set::kReserve:
            if (g < -r.gtol) {
              const double gam = gamma_of(i);
              if (-g > r.tau * gam) viol.push_back({i, Set::kMargin, gam > 0 ? -g / gam : 1.0});
            }
            break;
          case Set::kError:
            if (g > r.gtol) {
              const double gam = gamma_of(i);
              if (g > r.tau * gam) viol.push_back({i, Set::kMargin, gam > 0 ? g / gam : 1.0});
            }
            break;
        }
      }
    }

    if (viol.empty()) {
      res.status = Status::kOptimal;
      res.margin = S;
      res.error = E;
      break;
    }
    if (iter == tol.max_refine_iterations) break;
    ++res.repairs;
    if (iter >= 8) {
      // Past a few rounds, repair one violation at a time (the largest) to rule out cycling.
      auto it = std::max_element(viol.begin(), viol.end(), [&](const Violation& a, const Violation& b) {
        if (a.size != b.size) return a.size < b.size;
        return ka.id(a.slot) > ka.id(b.slot);
      });
      r.move_to(it->slot, it->to, res.set);
    } else {
      for (const Violation& v : viol) r.move_to(v.slot, v.to, res.set);
    }
  }
  if (res.status != Status::kOptimal) {
    // No verified canonical point: report the (feasible) input coefficients with their partition
    // and gradients, b chosen as the mean over the margin set, so the residuals say how far from
    // optimal the returned state is.
    r.checked = r.all_active();
    res.screened = false;
    for (int i : r.all_active()) {
      const double a = i < static_cast<int>(alpha_guess.size()) ? alpha_guess[i] : 0.0;
      res.alpha[i] = std::min(C, std::max(0.0, a));
      res.set[i] = res.alpha[i] <= r.tau ? Set::kReserve
                   : res.alpha[i] >= C - r.tau ? Set::kError
                                               : Set::kMargin;
      if (res.set[i] == Set::kReserve) res.alpha[i] = 0.0;
      if (res.set[i] == Set::kError) res.alpha[i] = C;
    }
    res.margin.clear();
    res.error.clear();
    for (int i : r.sorted_by_id(r.all_active())) {
      if (res.set[i] == Set::kMargin) res.margin.push_back(i);
      else if (res.set[i] == Set::kError) res.error.push_back(i);
    }
    const std::vector<int> support = merge_by_id(ka, res.margin, res.error);
    const std::vector<double>& acc = r.kernel_sums(support, res.alpha);
    double bsum = 0.0;
    for (int i : res.margin) bsum += -(acc[i] + mu * res.alpha[i] - ka.diag(i) / 2);
    res.b = res.margin.empty() ? 0.0 : bsum / static_cast<double>(res.margin.size());
    for (int i : r.all_active()) res.g[i] = acc[i] + mu * res.alpha[i] - ka.diag(i) / 2 + res.b;
  }
  if (res.status == Status::kOptimal && mu == 0) {
    // The support and the checked reserve tokens near g = 0; screened reserve tokens are left to
    // the caller (res.screened), which holds their bounds.
    const double limit = twin_gradient_limit(r.scale, tol, C);
    const std::vector<int> support = merge_by_id(ka, res.margin, res.error);
    std::vector<int> near;
    for (int i : r.checked)
      if (res.set[i] == Set::kReserve && !(res.g[i] > limit)) near.push_back(i);
    if (has_tradable_duplicate(ka, support, near, res)) res.status = Status::kSingular;
  }
  res.kkt = kkt_report(r, res);
  return res;
}

}  // namespace svattn::detail

#include "svattn/hash.h"

namespace svattn::detail {

State build_state_unhashed(const ProblemSettings& p, std::vector<TokenId> ids, int dim,
                           int value_dim, std::vector<double> alpha,
                           const std::vector<Set>& set, double b, const KktReport& kkt,
                           Status status, bool warmup) {
  State s;
  s.settings = p;
  s.dim = dim;
  s.value_dim = value_dim;
  s.b = b;
  s.kkt = kkt;
  s.status = status;
  s.warmup = warmup;
  for (size_t r = 0; r < ids.size(); ++r) {
    switch (set[r]) {
      case Set::kMargin: s.partition.margin.push_back(ids[r]); break;
      case Set::kError: s.partition.error.push_back(ids[r]); break;
      case Set::kReserve: s.partition.reserve.push_back(ids[r]); break;
    }
  }
  s.ids = std::move(ids);  // taken by value: a caller that is done with its arrays moves them in
  s.alpha = std::move(alpha);
  return s;
}

State build_state(const ProblemSettings& p, const TokenSet& tokens, const std::vector<double>& alpha,
                  const std::vector<Set>& set, double b, const KktReport& kkt, Status status,
                  bool warmup) {
  State s = build_state_unhashed(p, tokens.ids, static_cast<int>(tokens.keys.cols()),
                                 static_cast<int>(tokens.values.cols()), alpha, set, b, kkt,
                                 status, warmup);
  std::vector<int> order(tokens.ids.size());
  for (size_t r = 0; r < order.size(); ++r) order[r] = static_cast<int>(r);
  s.state_sha256 = canonical_sha256(p, tokens, order, alpha, b);
  return s;
}

}  // namespace svattn::detail
