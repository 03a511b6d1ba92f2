// The exact path's training solver: the Cauwenberghs–Poggio path of docs/math.md §4 on a dense
// Gram matrix with every gradient tracked exactly (docs/layers.md §1 "The lean solver").
#include "svattn/torch/lean_solver.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "../core/bordered_inverse.h"
#include "svattn/batch_solver.h"
#include "svattn/errors.h"
#include "svattn/kernel.h"

namespace svattn::layers {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
// Rank-one updates of R after which the end of an add() rebuilds R from the margin system.
constexpr int kRefactorUpdates = 256;
// Iterative refinement steps of the margin system after an add, at most.
constexpr int kRefineSteps = 8;
// Path steps one token's walk may take before the add is finished by a batch solve.
constexpr int kMaxStepsPerToken = 20000;
// Schur-complement guard of an entrant (MemorySettings::schur_tol's default).
constexpr double kSchurTol = 1e-12;
// A refused token whose gradient ends the walk beyond this many units of the kernel scale on the
// wrong side sends the add to the batch solver.
constexpr double kRefusedSlack = 1e-9;
// The core's tolerances (Tolerances defaults) for the canonical rules of refine().
constexpr double kAlphaTol = 1e-10, kKktTol = 1e-15;
constexpr int kMaxRefineRounds = 64;

bool in_warmup(int n, double C) { return static_cast<double>(n) * C <= 1.0 + 1e-9; }
}  // namespace

struct LeanSolver::Impl {
  ProblemSettings p;
  int d = 0, n = 0, cap = 0;
  std::vector<double> keys;  // cap rows of d
  std::vector<TokenId> ids;
  Eigen::MatrixXd K;  // K(i, j) for i, j < n (column-major, cap x cap)
  std::vector<double> alpha, g;
  std::vector<LeanSet> set;
  std::vector<int> margin;  // R order
  detail::BorderedInverse R;
  double b = 0;
  bool warm = false;
  Status status = Status::kEmpty;
  long events = 0, fallbacks = 0;
  int updates = 0;  // rank-one updates of R since it was last rebuilt
  // Walk scratch.
  Eigen::VectorXd beta, gam, v, u, rhs;
  std::vector<char> refused;
  std::vector<int> zero_entered;

  void grow(int need);
  void append(const double* key, TokenId id);
  void add_one(const double* key, TokenId id);
  bool leave_warmup();
  double new_gradient(int c) const;
  struct Event;
  Event offset_step(int c);
  Event path_step(int c);
  int settle(const Event& ev, int c);
  bool walk(int c);
  void refactor();
  double schur(int i, Eigen::VectorXd* bi);
  void expand(int i, const Eigen::VectorXd& bi, double kappa);
  void contract_at(int k);
  void batch_solve(bool fallback);
  void solve();
  void gradients(double offset);
  bool offset_convention();
  bool refine();
  int count_error() const;
  void warmup_point();
};

// ---------------------------------------------------------------- storage

void LeanSolver::Impl::grow(int need) {
  if (need <= cap) return;
  int nc = std::max(16, cap);
  while (nc < need) nc *= 2;
  Eigen::MatrixXd nk(nc, nc);
  nk.topLeftCorner(n, n) = K.topLeftCorner(n, n);
  K.swap(nk);
  keys.resize(static_cast<std::size_t>(nc) * d);
  for (auto* vec : {&alpha, &g}) vec->resize(static_cast<std::size_t>(nc));
  ids.resize(static_cast<std::size_t>(nc));
  set.resize(static_cast<std::size_t>(nc));
  refused.resize(static_cast<std::size_t>(nc));
  gam.resize(nc);
  cap = nc;
}

// Stores the token and its kernel row (the core's kernel values: svattn::kernel).
void LeanSolver::Impl::append(const double* key, TokenId id) {
  grow(n + 1);
  const int c = n;
  std::copy(key, key + d, keys.begin() + static_cast<std::ptrdiff_t>(c) * d);
  ids[c] = id;
  alpha[c] = 0;
  g[c] = 0;
  set[c] = LeanSet::kReserve;
  const double* kc = keys.data() + static_cast<std::ptrdiff_t>(c) * d;
  for (int j = 0; j < c; ++j) K(c, j) = K(j, c) = kernel(p.kernel, kc, keys.data() + j * d, d);
  K(c, c) = kernel(p.kernel, kc, kc, d);
  ++n;
}

// g_c at a_c = 0 from the support (ascending id).
double LeanSolver::Impl::new_gradient(int c) const {
  double acc = 0;
  for (int j = 0; j < n; ++j)
    if (j != c && alpha[j] != 0) acc += K(c, j) * alpha[j];
  return acc - K(c, c) / 2 + b;
}

void LeanSolver::Impl::add_one(const double* key, TokenId id) {
  const bool was_warm = warm || status == Status::kEmpty;
  append(key, id);
  const int c = n - 1;
  if (in_warmup(n, p.C)) {
    warm = true;
    status = Status::kWarmup;
    return;  // the warm-up point is set at the end of add()
  }
  if (was_warm && !leave_warmup()) return;  // a batch solve placed every token
  g[c] = new_gradient(c);
  if (g[c] >= 0) return;  // inside the description: reserve, nothing moves
  if (!walk(c)) batch_solve(true);
}

// From warm-up to the optimum. When the tokens before the entrant filled the box exactly
// ((n - 1) C = 1) their only feasible point a = C is optimal: every one is error, S = ∅ and b the
// top of its interval, and the entrant takes the path (returns true: the entrant is still to be
// placed). Otherwise a batch solve of the n tokens (returns false).
bool LeanSolver::Impl::leave_warmup() {
  warm = false;
  const int n0 = n - 1;
  if (n0 < 1 || static_cast<double>(n0) * p.C != 1.0) {
    batch_solve(false);
    return false;
  }
  status = Status::kOptimal;
  margin.clear();
  R.clear();
  updates = 0;
  double hi = kInf;
  for (int i = 0; i < n0; ++i) {
    double acc = 0;
    for (int j = 0; j < n0; ++j) acc += K(i, j) * p.C;
    g[i] = acc + p.ridge * p.C - K(i, i) / 2;  // h_i for now
    hi = std::min(hi, -g[i]);
    alpha[i] = p.C;
    set[i] = LeanSet::kError;
  }
  b = hi;
  for (int i = 0; i < n0; ++i) g[i] += b;
  return true;
}

// ---------------------------------------------------------------- the bordered inverse

void LeanSolver::Impl::refactor() {
  const int m = static_cast<int>(margin.size());
  updates = 0;
  if (m == 0) {
    R.clear();
    return;
  }
  Eigen::MatrixXd B(m + 1, m + 1);
  B(0, 0) = 0;
  for (int k = 0; k < m; ++k) {
    B(0, k + 1) = B(k + 1, 0) = 1;
    for (int l = 0; l < m; ++l)
      B(k + 1, l + 1) = K(margin[k], margin[l]) + (k == l ? p.ridge : 0.0);
  }
  R.assign(B.partialPivLu().inverse());
}

// Schur complement of entrant i against the margin system, and its sensitivities -R [1; Q_Si].
double LeanSolver::Impl::schur(int i, Eigen::VectorXd* bi) {
  const int m = static_cast<int>(margin.size());
  if (m == 0) return K(i, i) + p.ridge;
  v.resize(m + 1);
  v(0) = 1;
  for (int k = 0; k < m; ++k) v(k + 1) = K(margin[k], i);
  *bi = -(R.m() * v);
  return K(i, i) + p.ridge + v.dot(*bi);
}

void LeanSolver::Impl::expand(int i, const Eigen::VectorXd& bi, double kappa) {
  const int m = static_cast<int>(margin.size());
  if (m == 0) {
    Eigen::MatrixXd r2(2, 2);
    r2 << -(K(i, i) + p.ridge), 1, 1, 0;
    R.assign(r2);
  } else {
    u.resize(m + 2);
    u.head(m + 1) = bi;
    u(m + 1) = 1;
    R.expand(u, kappa);
  }
  margin.push_back(i);
  set[i] = LeanSet::kMargin;
  g[i] = 0;
  ++updates;
}

void LeanSolver::Impl::contract_at(int k) {
  if (margin.size() == 1)
    R.clear();
  else
    R.contract(k + 1);
  margin.erase(margin.begin() + k);
  ++updates;
}

// ---------------------------------------------------------------- the path

// The next event of a walk: the shortest step, ties by kind (c settles, a margin token hits a
// bound, a token enters) and then the smaller id — the core's order (docs/math.md §4).
struct LeanSolver::Impl::Event {
  enum Kind { kSettles = 0, kLeaves = 1, kEnters = 2, kNone = 3 };
  double t = kInf;
  int kind = kNone, who = -1;
  LeanSet target = LeanSet::kMargin;
  void offer(double ts, int k, int w, LeanSet tg) {
    if (!(ts >= 0)) ts = 0;  // round-off negatives become zero steps
    if (ts < t || (ts == t && (k < kind || (k == kind && w < who)))) {
      t = ts;
      kind = k;
      who = w;
      target = tg;
    }
  }
};

// S = ∅: only b can move (every gradient by db); c or an error token reaches g = 0. The step is
// taken here.
LeanSolver::Impl::Event LeanSolver::Impl::offset_step(int c) {
  Event ev;
  ev.offer(-g[c], Event::kSettles, c, LeanSet::kMargin);
  for (int i = 0; i < n; ++i)
    if (i != c && set[i] == LeanSet::kError && !refused[i])
      ev.offer(-g[i], Event::kEnters, i, LeanSet::kMargin);
  b += ev.t;
  for (int i = 0; i < n; ++i) g[i] += ev.t;
  return ev;
}

// The sensitivities of (b, a_S) (beta = -R [1; Q_Sc], with the core's guards on R) and of every
// gradient (gamma = Q_ic + Q_iS beta_S + beta_b) to a_c, the next event, and the step to it.
LeanSolver::Impl::Event LeanSolver::Impl::path_step(int c) {
  const int m = static_cast<int>(margin.size());
  v.resize(m + 1);
  v(0) = 1;
  for (int k = 0; k < m; ++k) v(k + 1) = K(margin[k], c);
  beta = -(R.m() * v);
  if (!(R(0, 0) < 0) || std::abs(beta.tail(m).sum() + 1) > 1e-6) {
    refactor();
    beta = -(R.m() * v);
  }
  gam.head(n) = K.col(c).head(n).array() + beta(0);
  for (int k = 0; k < m; ++k) gam.head(n) += beta(k + 1) * K.col(margin[k]).head(n);
  gam(c) += p.ridge;
  Event ev;
  if (gam(c) > 0) ev.offer(-g[c] / gam(c), Event::kSettles, c, LeanSet::kMargin);
  ev.offer(p.C - alpha[c], Event::kSettles, c, LeanSet::kError);
  for (int k = 0; k < m; ++k) {
    const int j = margin[k];
    const double rate = beta(k + 1);
    if (rate < 0)
      ev.offer(alpha[j] / -rate, Event::kLeaves, j, LeanSet::kReserve);
    else if (rate > 0)
      ev.offer((p.C - alpha[j]) / rate, Event::kLeaves, j, LeanSet::kError);
  }
  for (int i = 0; i < n; ++i) {
    if (i == c || refused[i] || set[i] == LeanSet::kMargin) continue;
    if (set[i] == LeanSet::kError && gam(i) > 0)
      ev.offer(-g[i] / gam(i), Event::kEnters, i, LeanSet::kMargin);
    else if (set[i] == LeanSet::kReserve && gam(i) < 0)
      ev.offer(g[i] / -gam(i), Event::kEnters, i, LeanSet::kMargin);
  }
  const double t = ev.t;
  alpha[c] += t;
  b += beta(0) * t;
  for (int k = 0; k < m; ++k) alpha[margin[k]] += beta(k + 1) * t;
  for (int i = 0; i < n; ++i)
    if (set[i] != LeanSet::kMargin) g[i] += gam(i) * t;
  return ev;
}

// The set change of an event other than c reaching C. Returns 1 when c has settled in S, -1 when
// the walk cannot go on (c refused by the Schur guard), 0 to take the next step.
int LeanSolver::Impl::settle(const Event& ev, int c) {
  const int who = ev.who;
  if (ev.kind == Event::kLeaves) {
    const auto k = std::find(margin.begin(), margin.end(), who) - margin.begin();
    alpha[who] = ev.target == LeanSet::kError ? p.C : 0.0;
    set[who] = ev.target;
    g[who] = 0;
    contract_at(static_cast<int>(k));
    return 0;
  }
  // c settles in S, or an error / reserve token enters it; a token's second zero-length entry in
  // one walk is refused (duplicate keys could otherwise enter and leave without end).
  if (ev.kind == Event::kEnters && ev.t == 0) {
    if (std::find(zero_entered.begin(), zero_entered.end(), who) != zero_entered.end()) {
      refused[who] = 1;
      return 0;
    }
    zero_entered.push_back(who);
  }
  Eigen::VectorXd bi;
  const double kap = schur(who, &bi);
  if (kap <= kSchurTol * K(who, who)) {
    if (who == c) return -1;
    refused[who] = 1;
    return 0;
  }
  expand(who, bi, kap);
  return who == c ? 1 : 0;
}

// One walk: a_c rises from 0 while every other token keeps its KKT conditions (docs/math.md §4).
// Returns false when the walk cannot finish on the path (the step cap, c refused by the Schur
// guard, or a refused token left beyond round-off on the wrong side).
bool LeanSolver::Impl::walk(int c) {
  std::fill(refused.begin(), refused.begin() + n, 0);
  zero_entered.clear();
  bool settled = false;
  for (int step = 0; step < kMaxStepsPerToken && !settled; ++step) {
    ++events;
    const bool offset_only = margin.empty();
    const Event ev = offset_only ? offset_step(c) : path_step(c);
    if (offset_only && ev.who == c && alpha[c] == 0) {
      g[c] = 0;
      return true;  // c stays reserve at g = 0
    }
    if (ev.kind == Event::kSettles && ev.target == LeanSet::kError) {
      alpha[c] = p.C;
      set[c] = LeanSet::kError;
      break;
    }
    const int r = settle(ev, c);
    if (r < 0) return false;
    settled = r > 0;
  }
  if (set[c] == LeanSet::kReserve) return false;  // the step cap
  for (int i = 0; i < n; ++i) {
    if (!refused[i]) continue;
    if ((set[i] == LeanSet::kReserve && g[i] < -kRefusedSlack) ||
        (set[i] == LeanSet::kError && g[i] > kRefusedSlack))
      return false;
  }
  return true;
}

// ---------------------------------------------------------------- finishing

// The core's batch solver on the tokens held: the warm-up exit off n C = 1 and, counted, the
// fallback of a walk that could not finish.
void LeanSolver::Impl::batch_solve(bool fallback) {
  TokenSet ts;
  ts.ids.assign(ids.begin(), ids.begin() + n);
  ts.keys = Eigen::Map<const RowMatrix>(keys.data(), n, d);
  ts.values = RowMatrix::Zero(n, 1);
  BatchSettings bs;
  bs.problem = p;
  bs.cache_mib = 1 + static_cast<std::size_t>(n) * n * 8 / (1 << 20);
  const State st = solve_batch(ts, bs).state;
  if (fallback) ++fallbacks;
  warm = st.warmup;
  status = st.status;
  margin.clear();
  for (int i = 0; i < n; ++i) {
    alpha[i] = st.alpha[static_cast<std::size_t>(i)];
    set[i] = LeanSet::kReserve;
  }
  auto index_of = [&](TokenId id) {
    return static_cast<int>(std::lower_bound(ids.begin(), ids.begin() + n, id) - ids.begin());
  };
  for (TokenId id : st.partition.error) set[index_of(id)] = LeanSet::kError;
  for (TokenId id : st.partition.margin) {
    set[index_of(id)] = LeanSet::kMargin;
    margin.push_back(index_of(id));
  }
  b = st.b;
  refactor();
  for (int i = 0; i < n; ++i) {
    double acc = 0;
    for (int j = 0; j < n; ++j)
      if (alpha[j] != 0) acc += K(i, j) * alpha[j];
    g[i] = set[i] == LeanSet::kMargin ? 0.0 : acc + p.ridge * alpha[i] - K(i, i) / 2 + b;
  }
}

// (b, a_S) from the margin system by R and iterative refinement (the residual's rows of duplicate
// keys are bit-identical sums, so the refinement also splits their mass evenly), then every
// gradient from the kernel values.
void LeanSolver::Impl::solve() {
  const int m = static_cast<int>(margin.size());
  if (updates >= kRefactorUpdates) refactor();
  rhs.resize(m + 1);
  int ne = 0;
  for (int k = 0; k < m; ++k) rhs(k + 1) = K(margin[k], margin[k]) / 2;
  for (int j = 0; j < n; ++j) {
    if (set[j] != LeanSet::kError) continue;
    ++ne;
    for (int k = 0; k < m; ++k) rhs(k + 1) -= p.C * K(margin[k], j);
  }
  rhs(0) = 1.0 - ne * p.C;
  u = R.m() * rhs;
  // Refinement until the residual stops shrinking (R after many rank-one updates on duplicate keys
  // is a rougher inverse: more steps), at most kRefineSteps.
  double last = kInf;
  for (int step = 0; step < kRefineSteps; ++step) {
    v.resize(m + 1);
    v(0) = rhs(0) - u.tail(m).sum();
    for (int k = 0; k < m; ++k) {
      double acc = u(0) + p.ridge * u(k + 1);
      for (int l = 0; l < m; ++l) acc += K(margin[k], margin[l]) * u(l + 1);
      v(k + 1) = rhs(k + 1) - acc;
    }
    const double res = v.lpNorm<Eigen::Infinity>();
    if (!(res < last) || res == 0) break;
    last = res;
    u += R.m() * v;
  }
  b = u(0);
  for (int k = 0; k < m; ++k) alpha[margin[k]] = u(k + 1);
  gradients(b);
}

// g_i - b for every token: h_i = ((K + mu I) a)_i - K_ii / 2, summed over the support.
void LeanSolver::Impl::gradients(double offset) {
  const Eigen::Map<const Eigen::VectorXd> a(alpha.data(), n);
  Eigen::Map<Eigen::VectorXd> gv(g.data(), n);
  gv.noalias() = K.topLeftCorner(n, n) * a;
  for (int i = 0; i < n; ++i) g[i] += p.ridge * alpha[i] - K(i, i) / 2 + offset;
}

// S = ∅: b is the midpoint of [max_R(-h_i), min_E(-h_i)], or its top without reserve tokens
// (docs/math.md §3 step 5). False when the interval is empty (the caller re-solves).
bool LeanSolver::Impl::offset_convention() {
  double lo = -kInf, hi = kInf;
  gradients(0.0);
  for (int i = 0; i < n; ++i) {
    if (set[i] == LeanSet::kReserve)
      lo = std::max(lo, -g[i]);
    else
      hi = std::min(hi, -g[i]);
  }
  if (!(lo <= hi + kKktTol)) return false;
  b = std::isfinite(lo) ? (lo + hi) / 2 : hi;
  for (int i = 0; i < n; ++i) g[i] += b;
  return true;
}

// The core's canonical rules on the path's partition (docs/math.md §3 step 4): a margin
// coefficient within tau of a bound leaves S; a reserve (error) token whose gradient is below
// (above) -(+)max(kkt_tol, tau gamma_i) enters it, gamma_i its Schur complement; all at once for 8
// rounds, then the largest alone. False when no consistent partition is reached (the caller
// re-solves).
bool LeanSolver::Impl::refine() {
  const double tau = kAlphaTol * std::min(p.C, 1.0);
  struct Move {
    int who;
    LeanSet to;
    double size;
  };
  std::vector<Move> moves;
  for (int round = 0; round <= kMaxRefineRounds; ++round) {
    if (margin.empty()) {
      if (!offset_convention() || std::abs(1.0 - count_error() * p.C) > 1e-12) return false;
    } else {
      solve();
    }
    moves.clear();
    for (int i = 0; i < n; ++i) {
      const double a = alpha[i];
      if (set[i] == LeanSet::kMargin) {
        if (a <= tau) moves.push_back({i, LeanSet::kReserve, tau - a});
        else if (a >= p.C - tau) moves.push_back({i, LeanSet::kError, a - (p.C - tau)});
        continue;
      }
      const double wrong = set[i] == LeanSet::kReserve ? -g[i] : g[i];
      if (!(wrong > kKktTol)) continue;
      Eigen::VectorXd bi;
      const double gam = std::max(0.0, schur(i, &bi));
      if (wrong > tau * gam) moves.push_back({i, LeanSet::kMargin, gam > 0 ? wrong / gam : 1.0});
    }
    if (moves.empty()) return true;
    if (round >= 8) {
      const auto it = std::max_element(moves.begin(), moves.end(), [](const Move& x, const Move& y) {
        return x.size != y.size ? x.size < y.size : x.who > y.who;
      });
      moves = {*it};
    }
    for (const Move& mv : moves) {
      if (mv.to == LeanSet::kMargin) {
        Eigen::VectorXd bi;
        const double kap = schur(mv.who, &bi);
        if (kap <= kSchurTol * K(mv.who, mv.who)) return false;
        expand(mv.who, bi, kap);
        continue;
      }
      const auto k = std::find(margin.begin(), margin.end(), mv.who) - margin.begin();
      alpha[mv.who] = mv.to == LeanSet::kError ? p.C : 0.0;
      set[mv.who] = mv.to;
      contract_at(static_cast<int>(k));
    }
  }
  return false;
}

int LeanSolver::Impl::count_error() const {
  int ne = 0;
  for (int i = 0; i < n; ++i) ne += set[i] == LeanSet::kError;
  return ne;
}

// Warm-up: a_i = 1/n, every token error, b = -max_i h_i (docs/math.md §1).
void LeanSolver::Impl::warmup_point() {
  const double a = 1.0 / n;
  double hmax = -kInf;
  for (int i = 0; i < n; ++i) {
    alpha[i] = a;
    set[i] = LeanSet::kError;
    double acc = 0;
    for (int j = 0; j < n; ++j) acc += K(i, j) * a;
    g[i] = acc + p.ridge * a - K(i, i) / 2;
    hmax = std::max(hmax, g[i]);
  }
  b = -hmax;
  for (int i = 0; i < n; ++i) g[i] += b;
  margin.clear();
  R.clear();
}

// ---------------------------------------------------------------- public API

LeanSolver::LeanSolver() : impl_(new Impl) {}
LeanSolver::~LeanSolver() = default;
LeanSolver::LeanSolver(LeanSolver&&) noexcept = default;
LeanSolver& LeanSolver::operator=(LeanSolver&&) noexcept = default;

void LeanSolver::reset(const ProblemSettings& problem, int dim, int capacity) {
  if (problem.kernel.type != KernelType::kRbf)
    throw InvalidArgument("LeanSolver: kernel must be rbf, got " + to_string(problem.kernel.type));
  if (dim < 1) throw InvalidArgument("LeanSolver: dim must be >= 1, got " + std::to_string(dim));
  problem.validate();
  Impl& m = *impl_;
  if (dim != m.d) {
    m.cap = 0;
    m.K.resize(0, 0);
  }
  m.p = problem;
  m.d = dim;
  m.n = 0;
  m.margin.clear();
  m.R.clear();
  m.b = 0;
  m.warm = false;
  m.status = Status::kEmpty;
  m.events = m.fallbacks = 0;
  m.updates = 0;
  m.grow(std::max(capacity, 1));
}

void LeanSolver::add(const double* keys, TokenId id0, int count) {
  Impl& m = *impl_;
  if (count <= 0) return;
  if (m.n > 0 && id0 <= m.ids[m.n - 1])
    throw InvalidArgument("LeanSolver::add: id " + std::to_string(id0) +
                          " is not above every id held");
  m.grow(m.n + count);
  for (int t = 0; t < count; ++t) m.add_one(keys + static_cast<std::ptrdiff_t>(t) * m.d, id0 + t);
  if (m.warm)
    m.warmup_point();
  else if (!m.refine())
    m.batch_solve(true);
}

void LeanSolver::evict_reserve() {
  Impl& m = *impl_;
  if (m.warm || m.n == 0) return;
  std::vector<int> to(static_cast<std::size_t>(m.n), -1);
  int kept = 0;
  for (int i = 0; i < m.n; ++i)
    if (m.set[i] != LeanSet::kReserve) to[i] = kept++;
  if (kept == m.n) return;
  // In place: every destination index is at most its source (columns, then rows, ascending).
  for (int j = 0; j < m.n; ++j) {
    if (to[j] < 0) continue;
    for (int i = 0; i < m.n; ++i)
      if (to[i] >= 0) m.K(to[i], to[j]) = m.K(i, j);
    const int nj = to[j];
    std::copy(m.keys.begin() + static_cast<std::ptrdiff_t>(j) * m.d,
              m.keys.begin() + static_cast<std::ptrdiff_t>(j + 1) * m.d,
              m.keys.begin() + static_cast<std::ptrdiff_t>(nj) * m.d);
    m.ids[nj] = m.ids[j];
    m.alpha[nj] = m.alpha[j];
    m.g[nj] = m.g[j];
    m.set[nj] = m.set[j];
  }
  for (int& s : m.margin) s = to[s];
  m.n = kept;  // b stays: still inside its interval (as svattn::Memory::evict_reserve keeps it)
}

int LeanSolver::size() const { return impl_->n; }
bool LeanSolver::warmup() const { return impl_->warm; }
Status LeanSolver::status() const { return impl_->status; }
double LeanSolver::b() const { return impl_->b; }
TokenId LeanSolver::id(int i) const { return impl_->ids[i]; }
double LeanSolver::alpha(int i) const { return impl_->alpha[i]; }
LeanSet LeanSolver::set(int i) const { return impl_->set[i]; }
const double* LeanSolver::key(int i) const {
  return impl_->keys.data() + static_cast<std::ptrdiff_t>(i) * impl_->d;
}
const std::vector<int>& LeanSolver::margin_order() const { return impl_->margin; }
Eigen::Block<const Eigen::MatrixXd> LeanSolver::bordered_inverse() const {
  const detail::BorderedInverse& r = impl_->R;
  return r.m();
}
long LeanSolver::events() const { return impl_->events; }
long LeanSolver::fallbacks() const { return impl_->fallbacks; }

State LeanSolver::state(int value_dim) const {
  const Impl& m = *impl_;
  State s;
  s.settings = m.p;
  s.dim = m.d;
  s.value_dim = value_dim;
  s.ids.assign(m.ids.begin(), m.ids.begin() + m.n);
  s.alpha.assign(m.alpha.begin(), m.alpha.begin() + m.n);
  s.b = m.b;
  s.status = m.status;
  s.warmup = m.warm;
  for (int i = 0; i < m.n; ++i) {
    if (m.set[i] == LeanSet::kMargin) s.partition.margin.push_back(m.ids[i]);
    else if (m.set[i] == LeanSet::kError) s.partition.error.push_back(m.ids[i]);
    else s.partition.reserve.push_back(m.ids[i]);
  }
  return s;
}

}  // namespace svattn::layers
