// Batch-stabilised SV attention (SPEC §8). Tensor ops only, so the same code runs on CUDA.
#include "svattn/torch/batched.h"

#include <chrono>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "svattn/errors.h"

namespace svattn::layers {

using torch::Tensor;
namespace F = torch::nn::functional;

void BatchedSettings::validate() const {
  auto bad = [](const std::string& field, double v, const std::string& why) {
    std::ostringstream os;
    os << "BatchedSettings." << field << " = " << v << ": " << why;
    throw InvalidArgument(os.str());
  };
  if (iterations < 1) bad("iterations", iterations, "must be >= 1");
  if (!std::isfinite(ridge) || ridge < 0) bad("ridge", ridge, "must be finite and >= 0");
  if (!(mask_tol > 0 && mask_tol < 0.5)) bad("mask_tol", mask_tol, "must be in (0, 0.5)");
  if (!std::isfinite(C) || C <= 0) bad("C", C, "must be finite and > 0");
  if (!std::isfinite(bandwidth) || bandwidth <= 0) bad("bandwidth", bandwidth, "must be finite and > 0");
  if (!std::isfinite(mu) || mu < 0) bad("mu", mu, "must be finite and >= 0");
  if (power_iterations < 1) bad("power_iterations", power_iterations, "must be >= 1");
}

Tensor rbf_kernel(const Tensor& a, const Tensor& b, const Tensor& sigma) {
  // ||a - b||^2 by expansion (clamped at 0: rounding can make it slightly negative).
  Tensor aa = a.pow(2).sum(-1).unsqueeze(-1);
  Tensor bb = b.pow(2).sum(-1).unsqueeze(-2);
  Tensor d2 = (aa + bb - 2 * torch::matmul(a, b.transpose(-1, -2))).clamp_min(0);
  Tensor s2 = sigma.pow(2).reshape({-1, 1, 1});
  return torch::exp(-d2 / s2);
}

Tensor project_capped_simplex(const Tensor& y, const Tensor& upper) {
  // h(tau) = sum_i clip(y_i - tau, 0, u_i) is piecewise linear and nonincreasing in tau with
  // breakpoints y_i (token i becomes free going down) and y_i - u_i (token i saturates).
  const auto n = y.size(-1);
  Tensor bp = torch::cat({y, y - upper}, -1);
  Tensor ev = torch::cat({torch::ones_like(y), -torch::ones_like(y)}, -1);
  auto sorted = bp.sort(-1, /*descending=*/true);
  Tensor bs = std::get<0>(sorted);
  Tensor es = ev.gather(-1, std::get<1>(sorted));
  Tensor cnt = es.cumsum(-1);  // number of free tokens on (b_{k+1}, b_k)
  Tensor gap = bs.narrow(-1, 0, 2 * n - 1) - bs.narrow(-1, 1, 2 * n - 1);
  Tensor h = torch::cat({torch::zeros_like(bs.narrow(-1, 0, 1)),
                         (cnt.narrow(-1, 0, 2 * n - 1) * gap).cumsum(-1)}, -1);  // h(b_k)
  Tensor k = (h < 1).sum(-1, /*keepdim=*/true).clamp(1, 2 * n - 1);               // first h >= 1
  Tensor km1 = k - 1;
  Tensor b0 = bs.gather(-1, km1), h0 = h.gather(-1, km1), c0 = cnt.gather(-1, km1).clamp_min(1);
  Tensor tau = b0 - (1 - h0) / c0;
  return torch::minimum(torch::relu(y - tau), upper);
}

Tensor box_upper(const Tensor& valid, double C, torch::ScalarType dtype) {
  Tensor v = valid.to(dtype);
  Tensor n = v.sum(-1, /*keepdim=*/true).clamp_min(1);
  return torch::maximum(torch::full_like(n, C), 1.0 / n) * v;
}

namespace {

// A a for symmetric A [G, N, N] and a [G, N], as the row product a' A (the fastest batched
// matrix-vector form on CPU in LibTorch 1.13).
Tensor symv(const Tensor& A, const Tensor& a) { return torch::bmm(a.unsqueeze(1), A).squeeze(1); }

Tensor lipschitz(const Tensor& A, const Tensor& vmask, const BatchedSettings& s) {
  // A = K + mu I restricted to the valid tokens (entrywise >= 0 for RBF).
  Tensor gersh = A.abs().sum(-1).amax(-1);
  if (s.lipschitz == LipschitzBound::kGershgorin) return 2 * gersh;
  Tensor v = vmask.clone();
  const double tiny = v.scalar_type() == torch::kFloat64 ? 1e-280 : 1e-30;
  for (int i = 0; i < s.power_iterations; ++i) {
    v = symv(A, v);
    v = v / v.amax(-1, true).clamp_min(tiny);
    v = torch::where(vmask > 0, v.clamp_min(tiny), torch::zeros_like(v));
  }
  Tensor Av = symv(A, v);
  Tensor ratio = torch::where(vmask > 0, Av / v.clamp_min(tiny), torch::zeros_like(v));
  return 2 * torch::minimum(ratio.amax(-1), gersh);
}

}  // namespace

BatchedSolution batched_svdd(const Tensor& K, const Tensor& valid_in, const BatchedSettings& s,
                             const Tensor& warm_start) {
  s.validate();
  TORCH_CHECK(K.dim() == 3 && K.size(1) == K.size(2), "batched_svdd: K must be [G, N, N]");
  const auto G = K.size(0), N = K.size(1);
  Tensor valid = valid_in.defined() ? valid_in.to(torch::kBool)
                                    : torch::ones({G, N}, K.options().dtype(torch::kBool));
  Tensor upper = box_upper(valid, s.C, K.scalar_type());
  Tensor vm = valid.to(K.scalar_type());
  BatchedSolution out;
  {
    torch::NoGradGuard ng;
    Tensor Kd = K.detach() * vm.unsqueeze(-1) * vm.unsqueeze(-2);
    Tensor A = Kd + s.mu * torch::diag_embed(vm);
    Tensor dK = torch::diagonal(Kd, 0, -2, -1);
    Tensor L = lipschitz(A, vm, s).clamp_min(1e-12).unsqueeze(-1);
    auto grad = [&](const Tensor& a) {
      return 2 * symv(A, a) - dK;
    };
    Tensor x = warm_start.defined() ? project_capped_simplex(warm_start.detach().to(K.scalar_type()) * vm, upper)
                                    : project_capped_simplex(torch::zeros_like(upper), upper);
    Tensor y = x;
    Tensor t = torch::ones({G, 1}, K.options());
    for (int it = 0; it < s.iterations; ++it) {
      Tensor gy = grad(y);
      Tensor xn = project_capped_simplex(y - gy / L, upper);
      // Gradient restart (O'Donoghue & Candes): drop the momentum when it points uphill.
      Tensor restart = ((gy * (xn - x)).sum(-1, true) > 0);
      Tensor tn = (1 + torch::sqrt(1 + 4 * t * t)) / 2;
      Tensor yn = xn + ((t - 1) / tn) * (xn - x);
      y = torch::where(restart, xn, yn);
      t = torch::where(restart, torch::ones_like(tn), tn);
      x = xn;
    }
    Tensor fp = project_capped_simplex(x - grad(x) / L, upper);
    out.residual = (x - fp).abs().amax(-1);
    out.iterate = x;
    Tensor tol = s.mask_tol * upper;
    Tensor is_r = (x <= tol) | ~valid;
    Tensor is_e = (x >= upper - tol) & valid & ~is_r;
    out.role = torch::zeros({G, N}, K.options().dtype(torch::kInt8));
    out.role.masked_fill_(is_e, 2);
    out.role.masked_fill_(~is_r & ~is_e, 1);
  }
  auto ab = bordered_coefficients(K, out.role, upper, s.mu + s.ridge);
  out.alpha = ab.first;
  out.b = ab.second;
  return out;
}

std::pair<Tensor, Tensor> bordered_coefficients(const Tensor& K, const Tensor& role,
                                                const Tensor& upper, double ridge) {
  const auto G = K.size(0), N = K.size(1);
  Tensor mS = (role == 1);
  Tensor mE = (role == 2).to(K.scalar_type());
  Tensor uE = upper * mE;
  const std::int64_t smax = std::max<std::int64_t>(mS.sum(-1).max().item<std::int64_t>(), 1);
  // Margin tokens first (stable), padded to smax; non-margin padding rows become identity rows.
  Tensor key = (~mS).to(torch::kInt64) * (N + 1) + torch::arange(N, role.options().dtype(torch::kInt64));
  Tensor idx = std::get<1>(key.sort(-1)).narrow(-1, 0, smax);  // [G, smax]
  Tensor ms = mS.gather(-1, idx).to(K.scalar_type());           // 1 on real margin rows
  Tensor Krows = K.gather(1, idx.unsqueeze(-1).expand({G, smax, N}));           // [G, smax, N]
  Tensor Kss = Krows.gather(2, idx.unsqueeze(1).expand({G, smax, smax}));       // [G, smax, smax]
  Tensor dS = torch::diagonal(K, 0, -2, -1).gather(-1, idx);
  Tensor pair = ms.unsqueeze(-1) * ms.unsqueeze(-2);
  Tensor Abody = Kss * pair + torch::diag_embed(ms * ridge + (1 - ms));
  Tensor has_s = (ms.sum(-1, true) > 0).to(K.scalar_type());  // [G, 1]
  Tensor top = torch::cat({(1 - has_s).unsqueeze(-1), ms.unsqueeze(1)}, -1);   // [G, 1, smax+1]
  Tensor body = torch::cat({ms.unsqueeze(-1), Abody}, -1);                     // [G, smax, smax+1]
  Tensor A = torch::cat({top, body}, 1);
  Tensor rhs_b = (1 - uE.sum(-1, true)) * has_s;
  Tensor rhs_s = ms * (dS / 2 - torch::matmul(Krows, uE.unsqueeze(-1)).squeeze(-1));
  Tensor rhs = torch::cat({rhs_b, rhs_s}, -1).unsqueeze(-1);
  Tensor z = torch::linalg_solve(A, rhs, /*left=*/true).squeeze(-1);
  Tensor b = z.select(-1, 0);
  Tensor aS = z.narrow(-1, 1, smax) * ms;
  Tensor alpha = torch::zeros({G, N}, K.options()).scatter(-1, idx, aS) + uE;
  return {alpha, b};
}

Tensor sv_readout(const Tensor& queries, const Tensor& keys, const Tensor& values,
                  const Tensor& alpha, const Tensor& role, const Tensor& sigma) {
  Tensor qq = queries.pow(2).sum(-1).unsqueeze(-1);
  Tensor kk = keys.pow(2).sum(-1).unsqueeze(-2);
  Tensor d2 = (qq + kk - 2 * torch::matmul(queries, keys.transpose(-1, -2))).clamp_min(0);
  Tensor logits = -d2 / sigma.pow(2).reshape({-1, 1, 1});
  Tensor sup = (role > 0).unsqueeze(1);  // [G, 1, N]
  logits = logits.masked_fill(~sup, -std::numeric_limits<double>::infinity());
  Tensor m = std::get<0>(logits.detach().max(-1, true));
  m = torch::where(torch::isfinite(m), m, torch::zeros_like(m));
  Tensor w = alpha.clamp_min(0).unsqueeze(1) * torch::exp(logits - m);
  Tensor z = w.sum(-1, true);
  z = torch::where(z > 0, z, torch::ones_like(z));
  return torch::matmul(w, values) / z;
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
  p.dtype = s.fp64 ? torch::kFloat64 : queries.scalar_type();
  const auto G = p.B * p.H;
  p.x = keys.to(p.dtype).reshape({G, p.N, p.d});
  p.v = values.to(p.dtype).reshape({G, p.N, p.dv});
  p.q = queries.to(p.dtype).reshape({G, p.M, p.d});
  if (log_sigma.defined())
    p.sigma = torch::exp(log_sigma.to(p.dtype)).unsqueeze(0).expand({p.B, p.H}).reshape({G});
  else
    p.sigma = torch::full({G}, s.bandwidth, keys.options().dtype(p.dtype));
  return p;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Tensor sv_batched_attention(const Tensor& keys, const Tensor& values, const Tensor& queries,
                            const Tensor& log_sigma, const BatchedSettings& s, BatchedInfo* info) {
  const auto t0 = std::chrono::steady_clock::now();
  Prepared p = prepare(keys, values, queries, log_sigma, s, false);
  Tensor K = rbf_kernel(p.x, p.x, p.sigma);
  BatchedSolution sol = batched_svdd(K, Tensor(), s);
  Tensor o = sv_readout(p.q, p.x, p.v, sol.alpha, sol.role, p.sigma);
  if (info != nullptr) {
    info->role = sol.role.reshape({p.B, p.H, p.N});
    info->alpha = sol.alpha.detach().reshape({p.B, p.H, p.N});
    info->support = (sol.role > 0).sum(-1).reshape({p.B, p.H});
    info->residual = sol.residual.max().item<double>();
    info->negative_coefficients = ((sol.role == 1) & (sol.alpha.detach() <= 0)).sum().item<std::int64_t>();
    info->seconds = seconds_since(t0);
  }
  return o.reshape({p.B, p.H, p.M, p.dv}).to(queries.scalar_type());
}

Tensor sv_batched_chunked_attention(const Tensor& keys, const Tensor& values, const Tensor& queries,
                                    const Tensor& log_sigma, std::int64_t chunk,
                                    const BatchedSettings& s, BatchedInfo* info) {
  if (chunk < 1) throw InvalidArgument("sv_batched_chunked_attention: chunk must be >= 1");
  const auto t0 = std::chrono::steady_clock::now();
  Prepared p = prepare(keys, values, queries, log_sigma, s, true);
  const auto G = p.B * p.H, T = p.N;
  const std::int64_t n_chunks = (T + chunk - 1) / chunk;
  auto i64 = p.x.options().dtype(torch::kInt64);
  std::vector<Tensor> outs;
  outs.push_back(torch::zeros({G, std::min(chunk, T), p.dv}, p.x.options()));
  Tensor role_all, alpha_all;
  if (info != nullptr) {
    role_all = torch::zeros({G, n_chunks, T}, i64.dtype(torch::kInt8));
    alpha_all = torch::zeros({G, n_chunks, T}, p.x.options());
    info->residual = 0;
    info->negative_coefficients = 0;
  }
  // Full mode: one Gram matrix of the first T - L keys, sliced per chunk.
  Tensor Kfull;
  if (!s.bounded && n_chunks > 1) {
    Tensor xm = p.x.narrow(1, 0, (n_chunks - 1) * chunk);
    Kfull = rbf_kernel(xm, xm, p.sigma);
  }
  Tensor mem_idx = torch::zeros({G, 0}, i64);            // bounded mode: retained positions
  Tensor mem_valid = torch::zeros({G, 0}, i64.dtype(torch::kBool));
  Tensor warm;
  for (std::int64_t c = 1; c < n_chunks; ++c) {
    const std::int64_t qb = c * chunk, qe = std::min(T, qb + chunk);
    Tensor idx, valid, K;
    if (!s.bounded) {
      idx = torch::arange(qb, i64).unsqueeze(0).expand({G, qb});
      K = Kfull.narrow(1, 0, qb).narrow(2, 0, qb);
    } else {
      Tensor fresh = torch::arange(qb - chunk, qb, i64).unsqueeze(0).expand({G, chunk});
      idx = torch::cat({mem_idx, fresh}, 1);
      valid = torch::cat({mem_valid, torch::ones({G, chunk}, mem_valid.options())}, 1);
      Tensor xk = p.x.gather(1, idx.unsqueeze(-1).expand({G, idx.size(1), p.d}));
      K = rbf_kernel(xk, xk, p.sigma);
    }
    const auto n = idx.size(1);
    Tensor ws;
    if (warm.defined()) ws = torch::cat({warm, torch::zeros({G, n - warm.size(1)}, warm.options())}, 1);
    BatchedSolution sol = batched_svdd(K, valid, s, ws);
    Tensor xk = p.x.gather(1, idx.unsqueeze(-1).expand({G, n, p.d}));
    Tensor vk = p.v.gather(1, idx.unsqueeze(-1).expand({G, n, p.dv}));
    outs.push_back(sv_readout(p.q.narrow(1, qb, qe - qb), xk, vk, sol.alpha, sol.role, p.sigma));
    if (info != nullptr) {
      role_all.select(1, c).scatter_(-1, idx, sol.role);
      alpha_all.select(1, c).scatter_(-1, idx, sol.alpha.detach() * (sol.role > 0));
      info->residual = std::max(info->residual, sol.residual.max().item<double>());
      info->negative_coefficients +=
          ((sol.role == 1) & (sol.alpha.detach() <= 0)).sum().item<std::int64_t>();
    }
    if (s.bounded) {
      // Keep S ∪ E (stable order), trimmed to the largest support in the batch.
      Tensor keep = sol.role > 0;
      const std::int64_t m = keep.sum(-1).max().item<std::int64_t>();
      Tensor order_key = (~keep).to(torch::kInt64) * (n + 1) + torch::arange(n, i64);
      Tensor order = std::get<1>(order_key.sort(-1)).narrow(-1, 0, m);
      mem_idx = idx.gather(1, order);
      mem_valid = keep.gather(1, order);
      warm = (sol.iterate * keep).gather(1, order);
    } else {
      warm = sol.iterate;
    }
  }
  Tensor o = torch::cat(outs, 1);
  if (info != nullptr) {
    info->role = role_all.reshape({p.B, p.H, n_chunks, T});
    info->alpha = alpha_all.reshape({p.B, p.H, n_chunks, T});
    info->support = (info->role > 0).sum(-1);
    info->seconds = seconds_since(t0);
  }
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
  return {static_cast<double>(equal.sum().item<std::int64_t>()) / static_cast<double>(units), units};
}

}  // namespace svattn::layers
