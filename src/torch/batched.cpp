// Batch-stabilised SV attention (docs/layers.md §2). Tensor ops only, so the same code runs on
// CUDA.
#include "svattn/torch/batched.h"

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "check_settings.h"
#include "svattn/torch/settings_fields.h"
#include "support/clock.h"
#include "svattn/errors.h"

namespace svattn::layers {

using torch::Tensor;
namespace F = torch::nn::functional;

void BatchedSettings::validate() const {
  check_problem(problem, "problem.");
  validate_fields(batched_settings_fields(), *this);
}

Tensor rbf_kernel(const Tensor& a, const Tensor& b, const Tensor& sigma) {
  // ||a - b||^2 by expansion (clamped at 0: rounding can make it slightly negative).
  Tensor aa = a.pow(2).sum(-1).unsqueeze(-1);
  Tensor bb = b.pow(2).sum(-1).unsqueeze(-2);
  Tensor d2 = (aa + bb - 2 * torch::matmul(a, b.transpose(-1, -2))).clamp_min(0);
  Tensor s2 = sigma.pow(2).reshape({-1, 1, 1});
  return torch::exp(-d2 / s2);
}

namespace {

int resolve_bisections(int b, torch::ScalarType t) {
  return b > 0 ? b : (t == torch::kFloat64 ? 40 : 20);
}
// Inside FISTA the bracket starts from the previous iteration's threshold (a few multiples of its
// last change wide), so fewer halvings reach the same resolution.
int resolve_warm_bisections(int b, torch::ScalarType t) {
  return b > 0 ? b : (t == torch::kFloat64 ? 16 : 8);
}

// A value added to padding tokens (u = 0) so that they never set the bisection bracket.
constexpr double kPadShift = 1e30;

// Threshold tau [..., 1] of the projection of y [..., N] onto {sum a = 1, 0 <= a <= u}, i.e. the
// root of h(tau) = sum_i clip(y_i - tau, 0, u_i) = 1 (h is continuous, piecewise linear,
// nonincreasing). `pad` is kPadShift on padding tokens and 0 elsewhere (undefined: no padding).
// Optional warm start: a guess tau0 [..., 1] and half-width delta [..., 1]; each end of [tau0 -
// delta, tau0 + delta] that h confirms (h >= 1 below the root, h <= 1 above it) tightens the cold
// bracket, per problem.
Tensor capped_simplex_tau(const Tensor& y, const Tensor& u, const Tensor& pad, int bisections,
                          const Tensor& tau0 = Tensor(), const Tensor& delta = Tensor()) {
  Tensor d = torch::empty_like(y);
  auto h = [&](const Tensor& tau) {
    at::sub_out(d, y, tau);
    d.clamp_min_(0);
    at::minimum_out(d, d, u);
    return d.sum(-1, true);
  };
  // Bracket: h(min(y - u)) = sum u >= 1 and h(max y) = 0 (over the real tokens).
  Tensor lo = (pad.defined() ? (y - u) + pad : y - u).amin(-1, true);
  Tensor hi = (pad.defined() ? y - pad : y).amax(-1, true);
  if (tau0.defined()) {
    Tensor lw = tau0 - delta, hw = tau0 + delta;
    lo = torch::where(h(lw) >= 1, torch::maximum(lo, lw), lo);
    hi = torch::where(h(hw) <= 1, torch::minimum(hi, hw), hi);
  }
  Tensor tau = (lo + hi).mul_(0.5);
  Tensor w = (hi - lo).mul_(0.25);  // invariant: the root lies in [tau - 2w, tau + 2w]
  for (int k = 0; k < bisections; ++k) {
    // h > 1: the root is above tau; h < 1: below; h == 1: tau is the root (sign 0).
    tau.addcmul_(h(tau).sub_(1).sign_(), w);
    w.mul_(0.5);
  }
  // Closed-form finish. On the free set F = {0 < y - tau < u} h is linear with slope -|F|, so one
  // Newton step tau + (h(tau) - 1) / |F| lands on the root whenever no breakpoint lies between tau
  // and the root; a second step repairs the rare case where one does. Both stay in the bracket.
  Tensor blo = tau - 2 * w, bhi = tau + 2 * w;
  for (int r = 0; r < 2; ++r) {
    Tensor hr = h(tau);  // d = clip(y - tau, 0, u)
    Tensor nf = ((d > 0) & (d < u)).sum(-1, true).to(y.scalar_type());
    // No free token: h is flat at tau, and tau is as good as the bracket allows.
    Tensor step = hr.sub_(1).div_(nf.clamp_min(1)).mul_(nf.clamp_max(1));
    tau = at::clamp(tau + step, blo, bhi);
  }
  return tau;
}

Tensor pad_shift(const Tensor& upper) {
  return (upper <= 0).to(upper.scalar_type()).mul_(kPadShift);
}

}  // namespace

Tensor project_capped_simplex(const Tensor& y, const Tensor& upper, int bisections) {
  if (y.sizes() != upper.sizes())
    throw InvalidArgument("project_capped_simplex: y and upper must have the same shape");
  if (bisections < 0 || bisections > 100)
    throw InvalidArgument("project_capped_simplex: bisections = " + std::to_string(bisections) +
                          ": must be in [0, 100]");
  torch::NoGradGuard ng;
  Tensor tau = capped_simplex_tau(y, upper, pad_shift(upper),
                                  resolve_bisections(bisections, y.scalar_type()));
  return at::clamp(y - tau, torch::zeros({}, y.options()), upper);
}

Tensor box_upper(const Tensor& valid, double C, torch::ScalarType dtype) {
  Tensor v = valid.to(dtype);
  Tensor n = v.sum(-1, /*keepdim=*/true).clamp_min(1);
  return torch::maximum(torch::full_like(n, C), 1.0 / n) * v;
}

namespace {

// ---------------------------------------------------------------- problem sets
//
// Internally the batched path solves R problems per Gram matrix: K [G, N, N] is shared, problem
// (g, r) uses the tokens valid[g, r, :] (in full chunked mode: the leading block of chunk r + 1).
// Tokens outside a problem are padding: bound 0, coefficient 0.

// Lipschitz bound [G, R, 1] of grad F = 2 A a - diag(K), A = K + mu I, on each problem's affine
// hull (module comment of LipschitzBound). K64: fp64 [G, N, N]; vm: fp64 0/1 [G, R, N].
Tensor lipschitz(const Tensor& K64, const Tensor& vm, const BatchedSettings& s) {
  const double mu = s.problem.ridge;
  Tensor n = vm.sum(-1, true).clamp_min(1);
  Tensor dK = torch::diagonal(K64, 0, -2, -1).unsqueeze(1);  // [G, 1, N]
  Tensor rs_abs = (torch::bmm(vm, K64.abs()) + mu) * vm;  // sum_j |A_ij| over the problem's tokens
  Tensor gersh = rs_abs.amax(-1, true);
  Tensor bound = gersh;
  if (s.lipschitz != LipschitzBound::kGershgorin) {
    // ||P A P||_F^2 = ||A||_F^2 - (2/n) ||A 1||^2 + (1'A1)^2 / n^2 on the problem's block (fp64:
    // the terms cancel when the keys are concentrated).
    Tensor rs = (torch::bmm(vm, K64) + mu) * vm;  // A 1
    Tensor tot = rs.sum(-1, true);
    Tensor fro_a = (torch::bmm(vm, K64 * K64) * vm).sum(-1, true) +
                   ((2 * mu) * dK * vm + mu * mu * vm).sum(-1, true);
    Tensor fro2 = fro_a - 2 * rs.pow(2).sum(-1, true) / n + tot.pow(2) / n.pow(2);
    bound = torch::minimum(bound, fro2.clamp_min(0).sqrt());
  }
  if (s.lipschitz == LipschitzBound::kPowerIteration) {
    // Collatz–Wielandt: for A >= 0 entrywise and v > 0, lambda_max(A) <= max_i (A v)_i / v_i.
    const double tiny = 1e-280;
    Tensor v = vm.clone();
    for (int i = 0; i < s.power_iterations; ++i) {
      v = torch::bmm(v, K64) + mu * v;
      v = v / v.amax(-1, true).clamp_min(tiny);
      v = v.clamp_min(tiny) * vm;
    }
    Tensor Av = torch::bmm(v, K64) + mu * v;
    Tensor ratio = Av / v.clamp_min(tiny) * vm;
    bound = torch::minimum(bound, ratio.amax(-1, true));
  }
  // lambda_max(P A P) >= mu on a tangent space of dimension >= 1; the floor only guards rounding.
  return 2 * torch::maximum(bound, torch::maximum(gersh * 1e-9, torch::full_like(gersh, mu)));
}

struct FistaResult {
  Tensor x;         // [G, R, N]
  Tensor residual;  // [G, R]
};

// FISTA on F over {sum a = 1, 0 <= a <= u} for every problem (no gradient). Kd: [G, N, N] detached
// in the compute dtype; L: [G, R, 1]; warm: [G, R, N] or undefined (uniform start).
FistaResult fista(const Tensor& Kd, const Tensor& vm, const Tensor& upper, const Tensor& L,
                  const BatchedSettings& s, const Tensor& warm) {
  torch::NoGradGuard ng;
  const int bis = resolve_bisections(s.bisections, Kd.scalar_type());
  Tensor pad = pad_shift(upper);
  // Shifted operator A - c 11': on {sum a = 1} it changes the gradient by the constant 2c, which no
  // projection sees, and it keeps the iterates' magnitudes small for learned keys (K ~ c 11').
  Tensor As = Kd - Kd.mean({-2, -1}, true);
  As.diagonal(0, -2, -1).add_(s.problem.ridge);
  Tensor twoL = 2 / L;                                                // [G, R, 1]
  Tensor dKL = torch::diagonal(Kd, 0, -2, -1).unsqueeze(1) / L * vm;  // [G, R, N]
  auto step = [&](const Tensor& y) {  // y - grad F(y) / L, 0 outside the problem
    return torch::addcmul(dKL, torch::bmm(y, As), twoL, -1).add_(y).mul_(vm);
  };
  // Projections warm-started from the previous threshold: bracket half-width 2 |last change|, at
  // least 1e-4 of the largest bound.
  const int warm_bis = resolve_warm_bisections(s.bisections, Kd.scalar_type());
  Tensor delta_min = upper.amax(-1, true) * 1e-4;
  Tensor tau, delta;
  auto project = [&](const Tensor& z) {
    Tensor tn = tau.defined() ? capped_simplex_tau(z, upper, pad, warm_bis, tau, delta)
                              : capped_simplex_tau(z, upper, pad, bis);
    if (tau.defined())
      delta = torch::maximum((tn - tau).abs_().mul_(2), delta_min);
    else
      delta = delta_min.clone();
    tau = tn;
    Tensor x = z - tn;
    x.clamp_min_(0);
    return at::minimum_out(x, x, upper);
  };
  Tensor x = project(warm.defined() ? warm.to(Kd.scalar_type()) * vm : torch::zeros_like(upper));
  tau = Tensor();  // the start's threshold says nothing about the first step's
  Tensor y = x;
  Tensor t = torch::ones_like(L);
  for (int it = 0; it < s.iterations; ++it) {
    Tensor z = step(y);
    Tensor xn = project(z);
    Tensor dx = xn - x;
    // Gradient restart (O'Donoghue & Candes): y - z = grad F(y) / L on the problem's tokens.
    Tensor keep = ((y - z).mul_(dx).sum(-1, true) <= 0).to(Kd.scalar_type());
    Tensor tn = (t * t * 4 + 1).sqrt_().add_(1).mul_(0.5);
    Tensor beta = (t - 1).div_(tn).mul_(keep);
    y = torch::addcmul(xn, dx, beta);
    t = (tn - 1).mul_(keep).add_(1);
    x = xn;
  }
  FistaResult r;
  r.x = x;
  tau = Tensor();
  r.residual = (x - project(step(x))).abs().amax(-1);
  return r;
}

// Roles from an iterate: 0 reserve/padding, 1 margin, 2 error.
Tensor masks(const Tensor& x, const Tensor& upper, const Tensor& valid, double mask_tol) {
  Tensor tol = mask_tol * upper;
  Tensor is_r = (x <= tol) | ~valid;
  Tensor is_e = (x >= upper - tol) & ~is_r;
  Tensor role = torch::zeros(x.sizes(), x.options().dtype(torch::kInt8));
  role.masked_fill_(is_e, 2);
  role.masked_fill_(~is_r & ~is_e, 1);
  return role;
}

// ---------------------------------------------------------------- problem lists
//
// The problems of a set are numbered p = g * R + r. A list names some of them (pidx [F]); its
// per-problem tensors are [F, N]. The Gram matrices stay [G, N, N] and are indexed, not copied.
struct ProblemList {
  std::int64_t G = 0, R = 0, N = 0;
  Tensor pidx, gidx;  // int64 [F]
  bool all = false;   // pidx == arange(G * R)
};

ProblemList make_list(std::int64_t G, std::int64_t R, std::int64_t N, const Tensor& pidx,
                      const torch::Device& dev) {
  ProblemList pl;
  pl.G = G;
  pl.R = R;
  pl.N = N;
  pl.all = !pidx.defined();
  pl.pidx =
      pl.all ? torch::arange(G * R, torch::TensorOptions().dtype(torch::kInt64).device(dev)) : pidx;
  pl.gidx = torch::div(pl.pidx, R, "floor");
  return pl;
}

// K a per problem: a [F, N] -> [F, N] (one batched product over the Gram matrices).
Tensor kmv(const ProblemList& pl, const Tensor& K, const Tensor& a) {
  if (pl.all) return torch::bmm(a.view({pl.G, pl.R, pl.N}), K).view({pl.G * pl.R, pl.N});
  Tensor full = torch::zeros({pl.G * pl.R, pl.N}, a.options()).index_copy(0, pl.pidx, a);
  return torch::bmm(full.view({pl.G, pl.R, pl.N}), K)
      .view({pl.G * pl.R, pl.N})
      .index_select(0, pl.pidx);
}

// K[g_f][idx_f, idx_f] -> [F, m, m] and diag(K)[g_f][idx_f] -> [F, m] (K contiguous).
Tensor gather_block(const Tensor& K, const ProblemList& pl, const Tensor& idx) {
  const auto F = idx.size(0), m = idx.size(1), N = pl.N;
  // Rows first (a small [F, m] index into [G N, N]), then the columns of each row.
  Tensor rows = K.reshape({-1, N})
                    .index_select(0, (pl.gidx.unsqueeze(-1) * N + idx).reshape({-1}))
                    .view({F, m, N});
  return rows.gather(2, idx.unsqueeze(1).expand({F, m, m}));
}
Tensor gather_diag(const Tensor& K, const ProblemList& pl, const Tensor& idx) {
  const auto N = pl.N;
  Tensor flat = pl.gidx.unsqueeze(-1) * (N * N) + idx * (N + 1);
  return K.reshape({-1}).index_select(0, flat.reshape({-1})).view(idx.sizes());
}

// Compaction of the tokens `take` [F, N] of every problem to the front, in index order (cumsum, no
// sort): idx [F, m], m = the largest count; slots past a problem's count point at token 0 and are
// flagged false in `real` [F, m].
std::pair<Tensor, Tensor> compact(const Tensor& take) {
  const auto F = take.size(0), N = take.size(1);
  auto i64 = take.options().dtype(torch::kInt64);
  Tensor count = take.sum(-1, true);
  const std::int64_t m = std::max<std::int64_t>(F > 0 ? count.max().item<std::int64_t>() : 0, 1);
  Tensor slot = torch::where(take, take.to(torch::kInt64).cumsum(-1) - 1, torch::full({}, m, i64));
  Tensor idx = torch::zeros({F, m + 1}, i64)
                   .scatter_(-1, slot, torch::arange(N, i64).expand({F, N}))
                   .narrow(-1, 0, m);
  return {idx, torch::arange(m, i64) < count};
}

// Problems whose sets (margin or working sets, `count` per problem) differ a lot in size are solved
// in three groups by size, each padded to its own largest set, instead of all padded to the largest
// (~2x less work at initialisation). Returns the groups' row indices (ascending size), or nothing
// when the sizes are similar, there are fewer than 16 problems, or the largest set is below
// `min_largest`.
std::vector<Tensor> size_groups(const Tensor& count, std::int64_t min_largest) {
  const auto F = count.size(0);
  if (F < 16) return {};
  Tensor order = std::get<1>(count.sort());
  Tensor sorted = count.index_select(0, order);
  const std::int64_t cmax = sorted[F - 1].item<std::int64_t>();
  const std::int64_t c1 = sorted[F / 3].item<std::int64_t>(),
                     c2 = sorted[2 * F / 3].item<std::int64_t>();
  if (cmax < min_largest || (c1 * 10 >= cmax * 7 && c2 * 10 >= cmax * 7)) return {};
  std::vector<Tensor> groups;
  const std::int64_t cuts[4] = {0, F / 3, 2 * F / 3, F};
  for (int k = 0; k < 3; ++k)
    if (cuts[k + 1] > cuts[k]) groups.push_back(order.narrow(0, cuts[k], cuts[k + 1] - cuts[k]));
  return groups;
}

// The bordered solve of every listed problem (module comment of bordered_coefficients),
// differentiable w.r.t. K: role int8 [F, N], upper [F, N] -> {alpha [F, N], b [F]}.
std::pair<Tensor, Tensor> bordered_solve(const Tensor& K, const ProblemList& pl, const Tensor& role,
                                         const Tensor& upper, double ridge, bool bucket = true) {
  const auto F = role.size(0), N = pl.N;
  const auto dt = K.scalar_type();
  Tensor mS = role == 1;
  if (bucket) {
    // Margin sets of very different sizes (e.g. the 64-, 128- and 192-token memories of one batch
    // at initialisation, when every token is margin).
    const std::vector<Tensor> groups = size_groups(mS.sum(-1), 48);
    if (!groups.empty()) {
      Tensor alpha = torch::zeros({F, N}, K.options()), b = torch::zeros({F}, K.options());
      for (const Tensor& rows : groups) {
        ProblemList sub = make_list(pl.G, pl.R, N, pl.pidx.index_select(0, rows), pl.pidx.device());
        auto ab = bordered_solve(K, sub, role.index_select(0, rows), upper.index_select(0, rows),
                                 ridge, false);
        alpha = alpha.index_copy(0, rows, ab.first);
        b = b.index_copy(0, rows, ab.second);
      }
      return {alpha, b};
    }
  }
  Tensor uE = upper.to(dt) * (role == 2).to(dt);
  auto [idx, real] = compact(mS);  // margin tokens to the front; other slots become identity rows
  const auto smax = idx.size(1);
  Tensor ms = real.to(dt);
  Tensor Kss = gather_block(K, pl, idx);
  Tensor dS = gather_diag(K, pl, idx);
  Tensor KuE = kmv(pl, K, uE).gather(-1, idx);  // (K u_E) on the margin slots (K symmetric)
  // K_SS + ridge I with identity rows/columns on the padding slots (in place: at init every token
  // of a 192-token memory can be margin, and each pass over [F, 192, 192] costs tens of ms).
  Tensor H = Kss;
  if (!real.all().item<bool>()) H = H.mul(ms.unsqueeze(-1) * ms.unsqueeze(-2));
  H.diagonal(0, -2, -1).add_(ms * ridge + (1 - ms));
  Tensor has_s = (ms.sum(-1, true) > 0).to(dt);  // [F, 1]
  Tensor rhs_b = (1 - uE.sum(-1, true)) * has_s;
  Tensor rhs_s = ms * (dS / 2 - KuE);
  Tensor b, aS;
  // H is symmetric positive definite for ridge > 0: eliminate the border (Schur complement) and use
  // Cholesky, half the work of an LU of the bordered system. LU when a factorisation fails.
  Tensor Lc, info;
  std::tie(Lc, info) = torch::linalg_cholesky_ex(H);
  if (ridge > 0 && (info == 0).all().item<bool>()) {
    Tensor sol = torch::cholesky_solve(torch::stack({rhs_s, ms}, -1), Lc);  // H^-1 [r_S, 1_S]
    Tensor h1 = sol.select(-1, 0), hm = sol.select(-1, 1);
    // 1'a = r_b with a = H^-1 (r_S - b 1): b = (1'H^-1 r_S - r_b) / (1'H^-1 1); 0 when S is empty.
    Tensor den = (ms * hm).sum(-1, true) + (1 - has_s);
    b = ((ms * h1).sum(-1, true) - rhs_b) / den;
    aS = (h1 - b * hm) * ms;
    b = b.squeeze(-1);
  } else {
    Tensor top = torch::cat({(1 - has_s).unsqueeze(-1), ms.unsqueeze(-2)}, -1);  // [F, 1, smax+1]
    Tensor body = torch::cat({ms.unsqueeze(-1), H}, -1);  // [F, smax, smax+1]
    Tensor A = torch::cat({top, body}, -2);
    Tensor rhs = torch::cat({rhs_b, rhs_s}, -1).unsqueeze(-1);
    Tensor z = torch::linalg_solve(A, rhs, /*left=*/true).squeeze(-1);
    b = z.select(-1, 0);
    aS = z.narrow(-1, 1, smax) * ms;
  }
  // scatter_add: the padding slots (token 0, value 0) may repeat.
  Tensor alpha = torch::zeros({F, N}, K.options()).scatter_add(-1, idx, aS) + uE;
  return {alpha, b};
}

constexpr double kKktTol = 1e-9;

struct FaceCheck {
  Tensor alpha;  // face minimiser [F, N]
  Tensor ok;     // bool [F]: the partition is optimal (alpha in the box on S, KKT signs on R and E)
  Tensor enter;  // bool [F, N]: reserve tokens whose gradient says they belong to the support
};

// Exact problem (ridge mu), fp64: the face minimiser of each partition and whether it is optimal.
FaceCheck check_partition(const Tensor& K64, const ProblemList& pl, const Tensor& role,
                          const Tensor& u, const Tensor& valid, double mu) {
  auto [af, b] = bordered_solve(K64, pl, role, u, mu);
  Tensor dK =
      gather_diag(K64, pl, torch::arange(pl.N, pl.pidx.options()).expand({role.size(0), pl.N}));
  Tensor q = kmv(pl, K64, af) + mu * af - 0.5 * dK;  // half-gradient without b
  Tensor isS = role == 1, isE = role == 2, isR = (role == 0) & valid;
  // With S empty b is not pinned by the system: take the largest b that keeps every E token's
  // g <= 0 (then an R token with g < 0 must enter S).
  Tensor inf = torch::full({}, std::numeric_limits<double>::infinity(), q.options());
  Tensor b_free = torch::where(isE, -q, inf).amin(-1);
  b = torch::where(isS.any(-1), b,
                   torch::where(torch::isfinite(b_free), b_free, torch::zeros_like(b)));
  Tensor g = q + b.unsqueeze(-1);
  Tensor bad = (isS & ((af <= 0) | (af >= u))) | (isR & (g < -kKktTol)) | (isE & (g > kKktTol));
  return {af, ~bad.any(-1), isR & (g < -kKktTol)};
}

struct ActiveSet {
  Tensor role;  // [F, N]
  long unconverged = 0;
  Tensor open;   // rows (into the input list) still not optimal
  Tensor x;      // their last iterate [open, N]
  Tensor enter;  // their reserve tokens with a negative gradient [open, N]
};

// Active-set rounds (fp64, no gradient) on the exact problem (ridge mu). Each round is monotone in
// F, so it cannot cycle:
//   1. a projected-gradient step x <- P(x - grad F(x) / L) (tokens at 0 / u whose KKT sign is
//      violated move into the box; tokens an interior-point iterate left at ~1e-10 snap to 0);
//   2. the partition of x (the projection clips, so R and E sit exactly at 0 / u) and its face
//      minimiser a_f (bordered solve on S with E at u); stop if it is optimal (check_partition);
//   3. x <- the best (lowest F) of x, P(a_f) and x + t (a_f - x) with the largest t <= 1 that stays
//      in the box (the classical active-set step: F decreases along the segment).
ActiveSet refine_active_set(const Tensor& K64, const ProblemList& pl_in, const Tensor& x_in,
                            const Tensor& upper_in, const Tensor& valid_in, const Tensor& L_in,
                            double mu, double mask_tol, int rounds) {
  torch::NoGradGuard ng;
  const auto F = x_in.size(0), N = pl_in.N;
  ActiveSet out;
  out.role = masks(x_in, upper_in, valid_in, mask_tol);
  // The problems still open: their list, rows in the output, and their state.
  ProblemList pl = pl_in;
  Tensor rows = torch::arange(F, pl.pidx.options());
  Tensor u = upper_in.to(torch::kFloat64), valid = valid_in, L64 = L_in.to(torch::kFloat64);
  Tensor x = x_in.to(torch::kFloat64) * valid.to(torch::kFloat64);
  const Tensor zero = torch::zeros({}, u.options());
  const int bis = resolve_bisections(0, torch::kFloat64);
  for (int k = 0; k < rounds; ++k) {
    const auto n = x.size(0);
    Tensor vm = valid.to(torch::kFloat64), pad = pad_shift(u);
    Tensor dK = gather_diag(K64, pl, torch::arange(N, pl.pidx.options()).expand({n, N}));
    auto project = [&](const Tensor& z) {
      return at::clamp(z - capped_simplex_tau(z, u, pad, bis), zero, u);
    };
    auto Aa = [&](const Tensor& a) { return kmv(pl, K64, a) + mu * a; };
    auto objective = [&](const Tensor& a) {
      return (Aa(a) * a).sum(-1) - (dK * a).sum(-1);
    };  // [n]
    Tensor xg = project((x - (2 * Aa(x) - dK) / L64) * vm);
    Tensor f0 = objective(x), fg = objective(xg);
    x = torch::where((f0 < fg).unsqueeze(-1), x, xg);
    f0 = torch::minimum(f0, fg);
    Tensor role = masks(x, u, valid, 1e-12);
    FaceCheck fc = check_partition(K64, pl, role, u, valid, mu);
    out.role.index_copy_(0, rows,
                         role);  // optimal rows are final; the others are overwritten below
    Tensor open = (~fc.ok).nonzero().view({-1});
    out.unconverged = open.numel();
    if (open.numel() == 0) {
      out.open = open;
      return out;
    }
    out.enter = fc.enter.index_select(0, open);
    // The feasible step toward a_f (ratio test over S) and the projected a_f; keep the best.
    Tensor d = fc.alpha - x;
    Tensor big = torch::full({}, 2.0, u.options());
    Tensor t_i = torch::where(d < 0, x / (-d), torch::where(d > 0, (u - x) / d, big));
    Tensor t = torch::where(role == 1, t_i, big).amin(-1, true).clamp_max(1);
    Tensor c_step = at::clamp(x + t * d, zero, u);
    Tensor c_proj = project(fc.alpha);
    Tensor f1 = objective(c_step), f2 = objective(c_proj);
    x = torch::where((f1 < f0).unsqueeze(-1), c_step, x);
    x = torch::where((f2 < torch::minimum(f0, f1)).unsqueeze(-1), c_proj, x);
    // Continue with the open problems only.
    rows = rows.index_select(0, open);
    pl = make_list(pl.G, pl.R, N, pl.pidx.index_select(0, open), pl.pidx.device());
    x = x.index_select(0, open);
    u = u.index_select(0, open);
    valid = valid.index_select(0, open);
    L64 = L64.index_select(0, open);
  }
  out.role.index_copy_(0, rows, masks(x, u, valid, mask_tol));
  out.open = rows;
  out.x = x;
  return out;
}

// Largest working set of the interior point (tokens per problem).
constexpr std::int64_t kMaxWorkingSet = 256;

// Primal-dual interior-point method (Mehrotra predictor-corrector, fp64, no gradient) on the
// working set W = the tokens FISTA left above 0; the tokens outside W stay at 0 (the active-set
// rounds afterwards check them). Per problem:
//   min a'(K_WW + mu I) a - diag(K)_W' a   s.t.  sum a = 1, 0 <= a <= u.
// The Newton systems are |W| x |W| Cholesky solves and the iteration count does not depend on the
// conditioning of K_WW, which is what makes FISTA slow on trained keys (docs/layers.md §2). A
// problem stops moving once its residuals and complementarity are below 1e-14. Returns [F, N].
Tensor interior_point(const Tensor& K64, const ProblemList& pl, const Tensor& x,
                      const Tensor& valid, const Tensor& upper, double mu, int iterations,
                      const Tensor& extra = Tensor(), bool bucket = true) {
  torch::NoGradGuard ng;
  const auto F = x.size(0), N = pl.N;
  Tensor take = ((x > 0) | (extra.defined() ? extra : torch::zeros_like(valid))) & valid;
  if (bucket) {
    // Working sets of very different sizes: three groups by size (as in bordered_solve).
    const std::vector<Tensor> groups = size_groups(take.sum(-1), 32);
    if (!groups.empty()) {
      Tensor out = torch::zeros({F, N}, x.options().dtype(torch::kFloat64));
      for (const Tensor& rows : groups) {
        ProblemList sub = make_list(pl.G, pl.R, N, pl.pidx.index_select(0, rows), pl.pidx.device());
        out.index_copy_(
            0, rows,
            interior_point(K64, sub, x.index_select(0, rows), valid.index_select(0, rows),
                           upper.index_select(0, rows), mu, iterations,
                           extra.defined() ? extra.index_select(0, rows) : Tensor(), false));
      }
      return out;
    }
  }
  Tensor idx, real;
  if (take.sum(-1).max().item<std::int64_t>() <= kMaxWorkingSet) {
    std::tie(idx, real) = compact(take);
  } else {
    // Long memories far from converged: the kMaxWorkingSet largest coefficients (the others stay
    // at 0; the active-set rounds check them). Bounds the Newton systems' memory and time.
    Tensor score = torch::where(
        take,
        x.to(torch::kFloat64) +
            (extra.defined() ? extra.to(torch::kFloat64) : torch::zeros_like(x, torch::kFloat64)),
        torch::full({}, -1.0, x.options().dtype(torch::kFloat64)));
    auto top = score.topk(kMaxWorkingSet, -1);
    idx = std::get<1>(top);
    real = std::get<0>(top) >= 0;
  }
  const auto m = idx.size(-1);
  Tensor wm = real.to(torch::kFloat64);  // [F, m]
  Tensor pair = wm.unsqueeze(-1) * wm.unsqueeze(-2);
  // Padding slots: Q = 1, c = 0, u = 1, outside the equality -> they go to 0.
  Tensor Q = 2 * gather_block(K64, pl, idx) * pair + torch::diag_embed(2 * mu * wm + (1 - wm));
  Tensor c = -gather_diag(K64, pl, idx) * wm;
  Tensor u = upper.to(torch::kFloat64).gather(-1, idx) * wm + (1 - wm);
  const Tensor& a = wm;
  const Tensor eye = torch::eye(m, wm.options());
  const double n2 = 2.0 * static_cast<double>(m);
  auto matvec = [&](const Tensor& v) { return torch::bmm(Q, v.unsqueeze(-1)).squeeze(-1); };
  // Start: FISTA's point pulled into the interior, multipliers from the reduced gradient.
  Tensor alpha = x.to(torch::kFloat64).gather(-1, idx) * wm + 0.5 * (1 - wm);
  alpha = torch::minimum(torch::maximum(alpha, 0.05 * u), 0.95 * u);
  Tensor g0 = matvec(alpha) + c;
  Tensor y = -(g0 * a).sum(-1, true) / a.sum(-1, true).clamp_min(1);
  Tensor r0 = g0 + y * a;
  Tensor scale = r0.abs().amax(-1, true).clamp_min(1e-3);
  Tensor z = r0.clamp_min(0) + 0.1 * scale;
  Tensor w = (-r0).clamp_min(0) + 0.1 * scale;
  const Tensor one = torch::full({}, 1.0, alpha.options());
  auto max_step = [&](const Tensor& v, const Tensor& dv) {  // largest t <= 1 with v + t dv >= 0
    return torch::where(dv < 0, -v / dv, one).amin(-1, true).clamp_max(1);
  };
  constexpr double kIpmTol = 1e-14;
  for (int k = 0; k < iterations; ++k) {
    Tensor sl = u - alpha;
    Tensor rd = matvec(alpha) + c + y * a - z + w;
    Tensor rp = (a * alpha).sum(-1, true) - 1;
    Tensor muc = ((alpha * z).sum(-1, true) + (sl * w).sum(-1, true)) / n2;
    // A converged problem stops moving: at mu ~ 1e-16 the scaling z / a would divide by ~0.
    Tensor live_b = (muc > kIpmTol) | (rp.abs() > kIpmTol) | (rd.abs().amax(-1, true) > kIpmTol);
    if (!live_b.any().item<bool>()) break;
    Tensor live = live_b.to(alpha.scalar_type());
    Tensor D = z / alpha + w / sl;
    auto [Lc, info] = torch::linalg_cholesky_ex(Q + torch::diag_embed(D));
    // A factorisation that failed (K_WW singular to working precision, e.g. duplicate keys with
    // mu = 0) stops that problem where it is; the identity keeps its (unused) step finite.
    Tensor fact_ok = (info == 0).unsqueeze(-1);
    Lc = torch::where(fact_ok.unsqueeze(-1), Lc, eye);
    live = live * fact_ok.to(live.scalar_type());
    auto solve = [&](const Tensor& r1) {  // [[Q + D, a], [a', 0]] [da; dy] = [r1; -rp]
      Tensor sol = torch::cholesky_solve(torch::stack({r1, a}, -1), Lc);  // [F, m, 2]
      Tensor h1 = sol.select(-1, 0), ha = sol.select(-1, 1);
      Tensor dy = ((a * h1).sum(-1, true) + rp) / (a * ha).sum(-1, true).clamp_min(1e-300);
      return std::make_pair(h1 - ha * dy, dy);
    };
    // Predictor (affine scaling).
    auto [da, dy] = solve(-rd - z + w);
    Tensor dz = -z - z / alpha * da, dw = -w + w / sl * da;
    Tensor t = torch::minimum(torch::minimum(max_step(alpha, da), max_step(sl, -da)),
                              torch::minimum(max_step(z, dz), max_step(w, dw)));
    Tensor mu_aff = (((alpha + t * da) * (z + t * dz)).sum(-1, true) +
                     ((sl - t * da) * (w + t * dw)).sum(-1, true)) /
                    n2;
    Tensor sigma = (mu_aff / muc.clamp_min(1e-300)).pow(3).clamp_max(1);
    // Corrector.
    Tensor cz = sigma * muc - alpha * z - da * dz;
    Tensor cw = sigma * muc - sl * w + da * dw;
    auto [da2, dy2] = solve(-rd + cz / alpha - cw / sl);
    Tensor dz2 = (cz - z * da2) / alpha, dw2 = (cw + w * da2) / sl;
    Tensor t2 = torch::minimum(torch::minimum(max_step(alpha, da2), max_step(sl, -da2)),
                               torch::minimum(max_step(z, dz2), max_step(w, dw2)));
    t2 = (0.995 * t2).clamp_max(1) * live;
    alpha = alpha + t2 * da2;
    y = y + t2 * dy2;
    z = z + t2 * dz2;
    w = w + t2 * dw2;
  }
  return torch::zeros({F, N}, alpha.options()).scatter_add(-1, idx, alpha * wm);
}

struct SolvedSet {
  Tensor alpha, b, role, iterate, residual;  // [G, R, N] / [G, R]
  long changes = 0, unconverged = 0, out_of_box = 0, negative = 0;
};

// FISTA -> masks -> (problems whose partition is not optimal for the exact problem: interior point
// on the working set + active-set rounds) -> differentiable ridge solve, for R problems per Gram
// matrix. K64: the same Gram matrix in fp64 computed from the keys (undefined: K in fp64). The
// partition decisions are made on it: near-duplicate keys split their mass on differences that an
// fp32 Gram matrix rounds away.
SolvedSet solve_set(const Tensor& K_in, const Tensor& valid, const BatchedSettings& s,
                    const Tensor& warm, const Tensor& K64_in = Tensor()) {
  Tensor K = K_in.contiguous();
  const auto dt = K.scalar_type();
  const auto G = K.size(0), N = K.size(1), R = valid.size(1), P = G * R;
  Tensor upper = box_upper(valid, s.problem.C, dt);
  Tensor upper_p = upper.view({P, N}), valid_p = valid.reshape({P, N});
  SolvedSet out;
  Tensor role;
  {
    torch::NoGradGuard ng;
    Tensor K64 = K64_in.defined() ? K64_in.contiguous() : K.detach().to(torch::kFloat64);
    Tensor L = lipschitz(K64, valid.to(torch::kFloat64), s);
    FistaResult fr = fista(K.detach(), valid.to(dt), upper, L.to(dt), s, warm);
    out.iterate = fr.x;
    out.residual = fr.residual;
    role = masks(fr.x, upper, valid, s.mask_tol).view({P, N});
    if (s.active_set_rounds > 0) {
      // FISTA's partition is kept where it is optimal for the exact problem (face solve in fp64,
      // KKT signs); any other problem -- FISTA's fixed budget has not settled it -- is re-solved. A
      // floor on the ridge keeps the fp64 face solves nonsingular when mu = 0 and keys repeat
      // exactly (the optimum is then not unique anyway).
      const double mu = std::max(s.problem.ridge, 1e-12);
      ProblemList all = make_list(G, R, N, Tensor(), K.device());
      Tensor u64 = upper_p.to(torch::kFloat64);
      FaceCheck fc = check_partition(K64, all, role, u64, valid_p, mu);
      Tensor bad = (~fc.ok).nonzero().view({-1});
      if (bad.numel() > 0) {
        ProblemList pl = make_list(G, R, N, bad, K.device());
        Tensor xb = fr.x.view({P, N}).index_select(0, bad);
        Tensor vb = valid_p.index_select(0, bad), ub = u64.index_select(0, bad);
        Tensor Lb = L.view({P, 1}).index_select(0, bad);
        Tensor start =
            s.ipm_iterations > 0 ? interior_point(K64, pl, xb, vb, ub, mu, s.ipm_iterations) : xb;
        ActiveSet as =
            refine_active_set(K64, pl, start, ub, vb, Lb, mu, s.mask_tol, s.active_set_rounds);
        if (as.open.numel() > 0 && s.ipm_iterations > 0) {
          // Still open: typically a token FISTA had left at 0 belongs to the support. One more
          // interior-point pass on those problems with it in the working set.
          const Tensor& o = as.open;
          ProblemList po = make_list(G, R, N, pl.pidx.index_select(0, o), K.device());
          Tensor vo = vb.index_select(0, o), uo = ub.index_select(0, o);
          Tensor st2 = interior_point(K64, po, as.x, vo, uo, mu, s.ipm_iterations, as.enter);
          ActiveSet as2 = refine_active_set(K64, po, st2, uo, vo, Lb.index_select(0, o), mu,
                                            s.mask_tol, s.active_set_rounds);
          as.role.index_copy_(0, o, as2.role);
          as.unconverged = as2.unconverged;
        }
        out.unconverged = as.unconverged;
        out.changes = (as.role != role.index_select(0, bad)).sum().item<std::int64_t>();
        role.index_copy_(0, bad, as.role);
      }
    }
  }
  // The coefficients: the ridge solve on the final partition (differentiable).
  auto ab = bordered_solve(K, make_list(G, R, N, Tensor(), K.device()), role, upper_p,
                           s.problem.ridge + s.solve_ridge);
  Tensor alpha = ab.first, b = ab.second;
  {
    torch::NoGradGuard ng;
    Tensor a = alpha.detach();
    Tensor margin = role == 1;
    out.negative = (margin & (a <= 0)).sum().item<std::int64_t>();
    out.out_of_box = (margin & ((a < 0) | (a > upper_p))).sum().item<std::int64_t>();
  }
  // The ridge (lambda) solve on the exact problem's partition can leave the box slightly (it is a
  // different problem); the readout needs alpha >= 0, and alpha <= u keeps it a feasible SVDD
  // weight.
  out.alpha = at::clamp(alpha, torch::zeros({}, upper.options()), upper_p).view({G, R, N});
  out.b = b.view({G, R});
  out.role = role.view({G, R, N});
  return out;
}

}  // namespace

Tensor lipschitz_bound(const Tensor& K, const Tensor& valid, const BatchedSettings& s) {
  s.validate();
  if (K.dim() != 3 || K.size(1) != K.size(2))
    throw InvalidArgument("lipschitz_bound: K must be [G, N, N]");
  torch::NoGradGuard ng;
  Tensor vm = valid.defined()
                  ? valid.to(torch::kFloat64)
                  : torch::ones({K.size(0), K.size(1)}, K.options().dtype(torch::kFloat64));
  return lipschitz(K.detach().to(torch::kFloat64), vm.unsqueeze(1), s).view({K.size(0)});
}

BatchedSolution batched_svdd(const Tensor& K, const Tensor& valid_in, const BatchedSettings& s,
                             const Tensor& warm_start) {
  s.validate();
  if (K.dim() != 3 || K.size(1) != K.size(2))
    throw InvalidArgument("batched_svdd: K must be [G, N, N]");
  const auto G = K.size(0), N = K.size(1);
  Tensor valid = valid_in.defined() ? valid_in.to(torch::kBool)
                                    : torch::ones({G, N}, K.options().dtype(torch::kBool));
  if (valid.sizes() != torch::IntArrayRef({G, N}))
    throw InvalidArgument("batched_svdd: valid must be [G, N]");
  if (warm_start.defined() && warm_start.sizes() != torch::IntArrayRef({G, N}))
    throw InvalidArgument("batched_svdd: warm_start must be [G, N]");
  SolvedSet r = solve_set(K, valid.unsqueeze(1), s,
                          warm_start.defined() ? warm_start.detach().unsqueeze(1) : Tensor());
  BatchedSolution out;
  out.alpha = r.alpha.squeeze(1);
  out.b = r.b.squeeze(1);
  out.role = r.role.squeeze(1);
  out.iterate = r.iterate.squeeze(1);
  out.residual = r.residual.squeeze(1);
  out.active_set_changes = r.changes;
  out.unconverged = r.unconverged;
  out.out_of_box = r.out_of_box;
  return out;
}

std::pair<Tensor, Tensor> bordered_coefficients(const Tensor& K, const Tensor& role,
                                                const Tensor& upper, double ridge) {
  if (K.dim() != 3 || K.size(1) != K.size(2) ||
      role.sizes() != torch::IntArrayRef({K.size(0), K.size(1)}) || upper.sizes() != role.sizes())
    throw InvalidArgument("bordered_coefficients: K must be [G, N, N], role and upper [G, N]");
  Tensor Kc = K.contiguous();
  return bordered_solve(Kc, make_list(K.size(0), 1, K.size(1), Tensor(), K.device()), role, upper,
                        ridge);
}

namespace {

// Readout of R memories per (batch, head): q [G, R, M, d] reads problem r's memory over the keys
// x [G, N, d] with coefficients alpha [G, R, N] on the support sup [G, R, N] -> [G, R, M, dv].
// lz (may be null) receives log sum_j alpha_j k(q, x_j) [G, R, M] (-inf for an empty support).
Tensor readout_set(const Tensor& q, const Tensor& x, const Tensor& v, const Tensor& alpha,
                   const Tensor& sup, const Tensor& sigma, Tensor* lz = nullptr) {
  const auto G = q.size(0), R = q.size(1), M = q.size(2), N = x.size(1);
  Tensor qf = q.reshape({G, R * M, q.size(3)});
  Tensor qq = qf.pow(2).sum(-1, true);
  Tensor kk = x.pow(2).sum(-1).unsqueeze(1);
  Tensor d2 = (qq + kk - 2 * torch::bmm(qf, x.transpose(-1, -2))).clamp_min(0);  // [G, R*M, N]
  Tensor logits = (d2 / (-sigma.pow(2).reshape({-1, 1, 1}))).view({G, R, M, N});
  Tensor supq = sup.unsqueeze(2);  // [G, R, 1, N]
  logits = logits.masked_fill(~supq, -std::numeric_limits<double>::infinity());
  Tensor m = std::get<0>(logits.detach().max(-1, true));
  m = torch::where(torch::isfinite(m), m, torch::zeros_like(m));
  Tensor w = alpha.clamp_min(0).unsqueeze(2) * torch::exp(logits - m);
  Tensor z = w.sum(-1, true);
  Tensor has = z > 0;
  z = torch::where(has, z, torch::ones_like(z));
  if (lz != nullptr)  // log of the guarded z: no 0 * inf in the backward of an empty memory
    *lz = torch::where(has, torch::log(z) + m,
                       torch::full_like(z, -std::numeric_limits<double>::infinity()))
              .squeeze(-1);
  return (torch::bmm(w.view({G, R * M, N}), v).view({G, R, M, v.size(-1)}) / z);
}

}  // namespace

Tensor sv_readout(const Tensor& queries, const Tensor& keys, const Tensor& values,
                  const Tensor& alpha, const Tensor& role, const Tensor& sigma) {
  return readout_set(queries.unsqueeze(1), keys, values, alpha.unsqueeze(1),
                     (role > 0).unsqueeze(1), sigma)
      .squeeze(1);
}

namespace {

struct Prepared {
  std::int64_t B, H, N, M, d, dv;
  torch::ScalarType dtype;
  Tensor x, v, q, sigma;  // [G, *, *] in the compute dtype; sigma [G]
};

Prepared prepare(const Tensor& keys, const Tensor& values, const Tensor& queries,
                 const Tensor& log_sigma, const BatchedSettings& s, bool same_length) {
  s.validate();
  auto fail = [](const std::string& msg) { throw InvalidArgument("sv_batched_attention: " + msg); };
  if (keys.dim() != 4 || values.dim() != 4 || queries.dim() != 4)
    fail("keys, values and queries must be 4-D [B, H, N, *]");
  Prepared p;
  p.B = keys.size(0);
  p.H = keys.size(1);
  p.N = keys.size(2);
  p.d = keys.size(3);
  p.M = queries.size(2);
  p.dv = values.size(3);
  if (values.size(0) != p.B || values.size(1) != p.H || values.size(2) != p.N)
    fail("values must be [B, H, N, dv] with the keys' B, H, N");
  if (queries.size(0) != p.B || queries.size(1) != p.H || queries.size(3) != p.d)
    fail("queries must be [B, H, M, d] with the keys' B, H, d");
  if (same_length && p.M != p.N) fail("chunked attention needs queries and keys of equal length");
  if (log_sigma.defined() && (log_sigma.dim() != 1 || log_sigma.size(0) != p.H))
    fail("log_sigma must be undefined or [H]");
  check_sv_data(keys, values, queries,
                same_length ? "sv_batched_chunked_attention" : "sv_batched_attention");
  p.dtype = s.fp64 ? torch::kFloat64 : queries.scalar_type();
  const auto G = p.B * p.H;
  p.x = keys.to(p.dtype).reshape({G, p.N, p.d});
  p.v = values.to(p.dtype).reshape({G, p.N, p.dv});
  p.q = queries.to(p.dtype).reshape({G, p.M, p.d});
  if (log_sigma.defined())
    p.sigma = torch::exp(log_sigma.to(p.dtype)).unsqueeze(0).expand({p.B, p.H}).reshape({G});
  else
    p.sigma = torch::full({G}, s.problem.kernel.bandwidth, keys.options().dtype(p.dtype));
  return p;
}

// The Gram matrix in fp64 from the keys, for the partition decisions (no gradient).
Tensor gram64(const Tensor& x, const Tensor& sigma, const Tensor& K) {
  torch::NoGradGuard ng;
  if (K.scalar_type() == torch::kFloat64) return K.detach();
  Tensor a = x.detach().to(torch::kFloat64);
  Tensor sq = a.pow(2).sum(-1);
  // exp(-(|a|^2 + |b|^2 - 2 a.b) / sigma^2), in place after one fused product.
  Tensor d2 = torch::baddbmm(sq.unsqueeze(-1) + sq.unsqueeze(-2), a, a.transpose(1, 2), /*beta=*/1,
                             /*alpha=*/-2);
  d2.clamp_min_(0).mul_((-1 / sigma.detach().to(torch::kFloat64).pow(2)).view({-1, 1, 1}));
  return d2.exp_();
}

// Chunk memories solved together in full mode (the LM presets have 3 per sequence).
constexpr std::int64_t kJointChunks = 4;

void record(BatchedInfo* info, const SolvedSet& sol) {
  info->residual = std::max(info->residual, sol.residual.max().item<double>());
  info->negative_coefficients += sol.negative;
  info->out_of_box += sol.out_of_box;
  info->active_set_changes += sol.changes;
  info->unconverged += sol.unconverged;
}

}  // namespace

Tensor sv_batched_attention(const Tensor& keys, const Tensor& values, const Tensor& queries,
                            const Tensor& log_sigma, const BatchedSettings& s, BatchedInfo* info) {
  const support::Stopwatch watch;
  Prepared p = prepare(keys, values, queries, log_sigma, s, false);
  const auto G = p.B * p.H;
  Tensor K = rbf_kernel(p.x, p.x, p.sigma);
  Tensor valid = torch::ones({G, 1, p.N}, p.x.options().dtype(torch::kBool));
  SolvedSet sol = solve_set(K, valid, s, Tensor(), gram64(p.x, p.sigma, K));
  Tensor o = readout_set(p.q.unsqueeze(1), p.x, p.v, sol.alpha, sol.role > 0, p.sigma).squeeze(1);
  if (info != nullptr) {
    *info = BatchedInfo{};
    info->role = sol.role.reshape({p.B, p.H, p.N});
    info->alpha = sol.alpha.detach().reshape({p.B, p.H, p.N});
    info->support = (sol.role > 0).sum(-1).reshape({p.B, p.H});
    record(info, sol);
    info->seconds = watch.seconds();
  }
  return o.reshape({p.B, p.H, p.M, p.dv}).to(queries.scalar_type());
}

Tensor sv_batched_chunked_attention(const Tensor& keys, const Tensor& values, const Tensor& queries,
                                    const Tensor& log_sigma, std::int64_t chunk,
                                    const BatchedSettings& s, BatchedInfo* info,
                                    Tensor* log_normalizer) {
  if (chunk < 1)
    throw InvalidArgument("sv_batched_chunked_attention: chunk = " + std::to_string(chunk) +
                          ": must be >= 1");
  const support::Stopwatch watch;
  Prepared p = prepare(keys, values, queries, log_sigma, s, true);
  const auto G = p.B * p.H, T = p.N, L = chunk;
  const std::int64_t n_chunks = (T + L - 1) / L;
  auto i64 = p.x.options().dtype(torch::kInt64);
  Tensor role_all, alpha_all;
  if (info != nullptr) {
    *info = BatchedInfo{};
    role_all = torch::zeros({G, n_chunks, T}, i64.dtype(torch::kInt8));
    alpha_all = torch::zeros({G, n_chunks, T}, p.x.options());
  }
  Tensor o;
  // Log-normalisers per query (log_normalizer only); chunk 0 has no memory: -inf.
  const bool want_lz = log_normalizer != nullptr;
  std::vector<Tensor> lzs;
  if (want_lz)
    lzs.push_back(
        torch::full({G, std::min(T, L)}, -std::numeric_limits<double>::infinity(), p.x.options()));
  if (n_chunks == 1) {
    o = torch::zeros({G, T, p.dv}, p.x.options());
  } else if (!s.bounded) {
    // Full mode: the memory of chunk c = r + 1 is the leading cL x cL block of one Gram matrix. The
    // memories are solved together, up to kJointChunks at a time (one batched product per FISTA
    // iteration for the group; the group bounds the memory of long sequences).
    const std::int64_t R = n_chunks - 1, N = R * L;
    Tensor xm = p.x.narrow(1, 0, N), vmem = p.v.narrow(1, 0, N);
    Tensor Kfull = rbf_kernel(xm, xm, p.sigma);
    Tensor Kfull64 = gram64(xm, p.sigma, Kfull);
    // Queries of chunks 1..R, padded to R * L rows.
    Tensor qm = p.q.narrow(1, L, T - L);
    if (T - L < R * L)
      qm = torch::cat({qm, torch::zeros({G, R * L - (T - L), p.d}, qm.options())}, 1);
    std::vector<Tensor> outs = {torch::zeros({G, L, p.dv}, p.x.options())};
    for (std::int64_t r0 = 0; r0 < R; r0 += kJointChunks) {
      const std::int64_t r1 = std::min(R, r0 + kJointChunks), Rg = r1 - r0, n = r1 * L;
      Tensor limit = (torch::arange(r0 + 1, r1 + 1, i64) * L).view({1, Rg, 1});
      Tensor valid = (torch::arange(n, i64).view({1, 1, n}) < limit).expand({G, Rg, n});
      SolvedSet sol = solve_set(Kfull.narrow(1, 0, n).narrow(2, 0, n), valid, s, Tensor(),
                                Kfull64.narrow(1, 0, n).narrow(2, 0, n));
      Tensor lz;
      Tensor og = readout_set(qm.narrow(1, r0 * L, Rg * L).view({G, Rg, L, p.d}),
                              xm.narrow(1, 0, n), vmem.narrow(1, 0, n), sol.alpha, sol.role > 0,
                              p.sigma, want_lz ? &lz : nullptr);
      outs.push_back(og.reshape({G, Rg * L, p.dv}));
      if (want_lz) lzs.push_back(lz.reshape({G, Rg * L}));
      if (info != nullptr) {
        role_all.narrow(1, r0 + 1, Rg).narrow(2, 0, n).copy_(sol.role);
        alpha_all.narrow(1, r0 + 1, Rg).narrow(2, 0, n).copy_(sol.alpha.detach());
        record(info, sol);
      }
    }
    o = torch::cat(outs, 1).narrow(1, 0, T);
  } else {
    // Bounded mode: chunk c's memory is the support of chunk c-1's memory plus chunk c-1's tokens.
    std::vector<Tensor> outs;
    outs.push_back(torch::zeros({G, L, p.dv}, p.x.options()));
    Tensor mem_idx = torch::zeros({G, 0}, i64);  // retained positions
    Tensor mem_valid = torch::zeros({G, 0}, i64.dtype(torch::kBool));
    Tensor warm;
    for (std::int64_t c = 1; c < n_chunks; ++c) {
      const std::int64_t qb = c * L, qe = std::min(T, qb + L);
      Tensor fresh = torch::arange(qb - L, qb, i64).unsqueeze(0).expand({G, L});
      Tensor idx = torch::cat({mem_idx, fresh}, 1);
      Tensor valid = torch::cat({mem_valid, torch::ones({G, L}, mem_valid.options())}, 1);
      const auto n = idx.size(1);
      Tensor xk = p.x.gather(1, idx.unsqueeze(-1).expand({G, n, p.d}));
      Tensor vk = p.v.gather(1, idx.unsqueeze(-1).expand({G, n, p.dv}));
      Tensor K = rbf_kernel(xk, xk, p.sigma);
      Tensor ws;
      if (warm.defined())
        ws =
            torch::cat({warm, torch::zeros({G, n - warm.size(1)}, warm.options())}, 1).unsqueeze(1);
      SolvedSet sol = solve_set(K, valid.unsqueeze(1), s, ws, gram64(xk, p.sigma, K));
      Tensor lz;
      outs.push_back(readout_set(p.q.narrow(1, qb, qe - qb).unsqueeze(1), xk, vk, sol.alpha,
                                 sol.role > 0, p.sigma, want_lz ? &lz : nullptr)
                         .squeeze(1));
      if (want_lz) lzs.push_back(lz.squeeze(1));
      Tensor role = sol.role.squeeze(1);
      if (info != nullptr) {
        role_all.select(1, c).scatter_(-1, idx, role);
        alpha_all.select(1, c).scatter_(-1, idx, sol.alpha.detach().squeeze(1));
        record(info, sol);
      }
      // Keep S ∪ E (stable order), trimmed to the largest support in the batch.
      Tensor keep = role > 0;
      const std::int64_t m = keep.sum(-1).max().item<std::int64_t>();
      Tensor order_key = (~keep).to(torch::kInt64) * (n + 1) + torch::arange(n, i64);
      Tensor order = std::get<1>(order_key.sort(-1)).narrow(-1, 0, m);
      mem_idx = idx.gather(1, order);
      mem_valid = keep.gather(1, order);
      warm = (sol.iterate.squeeze(1) * keep).gather(1, order);
    }
    o = torch::cat(outs, 1);
  }
  if (info != nullptr) {
    info->role = role_all.reshape({p.B, p.H, n_chunks, T});
    info->alpha = alpha_all.reshape({p.B, p.H, n_chunks, T});
    info->support = (info->role > 0).sum(-1);
    info->seconds = watch.seconds();
  }
  if (want_lz)
    *log_normalizer =
        torch::cat(lzs, 1).narrow(1, 0, T).reshape({p.B, p.H, T}).to(queries.scalar_type());
  return o.reshape({p.B, p.H, T, p.dv}).to(queries.scalar_type());
}

std::pair<double, long> partition_agreement(const Tensor& role_a, const Tensor& role_b) {
  TORCH_CHECK(role_a.sizes() == role_b.sizes(), "partition_agreement: shapes differ");
  const auto n = role_a.size(-1);
  Tensor a = role_a.reshape({-1, n}).cpu(), b = role_b.reshape({-1, n}).cpu();
  Tensor nonempty = (a > 0).any(-1) | (b > 0).any(-1);
  Tensor equal = (a == b).all(-1) & nonempty;
  const long units = nonempty.sum().item<std::int64_t>();
  if (units == 0) return {1.0, 0};
  return {static_cast<double>(equal.sum().item<std::int64_t>()) / static_cast<double>(units),
          units};
}

}  // namespace svattn::layers
