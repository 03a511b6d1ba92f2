// Exact-path SV attention: fp64 svattn::Memory forward, KKT-inverse backward (docs/layers.md §1).
// Derivation and scaling: docs/layers.md.
#include "svattn/torch/exact.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "check_settings.h"
#include "svattn/certificate.h"
#include "svattn/errors.h"

namespace svattn::layers {

void ExactSettings::validate() const { check_problem(problem, "problem."); }

MemorySettings ExactSettings::memory_settings(double sigma) const {
  MemorySettings m;
  m.problem = problem;
  m.problem.kernel.bandwidth = sigma;
  m.mode = MemoryMode::kAudit;
  return m;
}

namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;
using torch::Tensor;

// One memory state and the queries that read it.
struct Unit {
  std::int64_t q_begin = 0, q_end = 0;  // query rows of this unit
  std::int64_t mem_size = 0;
  bool warmup = false;
  double b = 0;
  Status status = Status::kEmpty;
  std::vector<std::int64_t> support;  // positions of S ∪ E, ascending
  std::vector<double> alpha;          // aligned with support
  std::vector<std::int8_t> role;      // aligned with support: 1 margin, 2 error
  std::vector<std::int64_t> margin;   // positions in the row order of R (after the border)
  MatrixXd R;                         // bordered inverse, (|margin|+1)^2
  long events = 0, fallbacks = 0;
  std::int8_t verified = -1;  // certify: 1 the verifier accepts the state, 0 it does not
};

// Packs units into a flat tensor list (5 tensors per unit) for the autograd context.
std::vector<Tensor> pack(const std::vector<Unit>& units) {
  std::vector<Tensor> out;
  out.reserve(units.size() * 5);
  auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  for (const Unit& u : units) {
    Tensor meta = torch::tensor({u.q_begin, u.q_end, static_cast<std::int64_t>(u.warmup)}, i64);
    const auto ns = static_cast<std::int64_t>(u.support.size());
    const auto nm = static_cast<std::int64_t>(u.margin.size());
    Tensor sup = torch::empty({ns}, i64);
    Tensor alp = torch::empty({ns}, f64);
    std::copy(u.support.begin(), u.support.end(), sup.data_ptr<std::int64_t>());
    std::copy(u.alpha.begin(), u.alpha.end(), alp.data_ptr<double>());
    Tensor mar = torch::empty({nm}, i64);
    std::copy(u.margin.begin(), u.margin.end(), mar.data_ptr<std::int64_t>());
    Tensor R = torch::empty({u.R.rows(), u.R.cols()}, f64);
    Eigen::Map<MatrixXd>(R.data_ptr<double>(), u.R.rows(), u.R.cols()) =
        u.R;  // symmetric: layout-free
    out.insert(out.end(), {meta, sup, alp, mar, R});
  }
  return out;
}

Unit unpack(const std::vector<Tensor>& list, std::size_t index) {
  const Tensor* t = &list[index * 5];
  Unit u;
  const auto* meta = t[0].data_ptr<std::int64_t>();
  u.q_begin = meta[0];
  u.q_end = meta[1];
  u.warmup = meta[2] != 0;
  u.support.assign(t[1].data_ptr<std::int64_t>(), t[1].data_ptr<std::int64_t>() + t[1].numel());
  u.alpha.assign(t[2].data_ptr<double>(), t[2].data_ptr<double>() + t[2].numel());
  u.margin.assign(t[3].data_ptr<std::int64_t>(), t[3].data_ptr<std::int64_t>() + t[3].numel());
  u.R = Eigen::Map<const MatrixXd>(t[4].data_ptr<double>(), t[4].size(0), t[4].size(1));
  return u;
}

// Captures the current state of `mem` (token ids are positions) as a unit; with `certify` the
// state is also checked against the memory's tokens by the independent verifier (docs/math.md §7).
Unit capture(const Memory& mem, std::int64_t q_begin, std::int64_t q_end, bool certify) {
  Unit u;
  u.q_begin = q_begin;
  u.q_end = q_end;
  u.mem_size = mem.size();
  State st = mem.state();
  if (certify)
    u.verified = verify_state(mem.tokens(), st, mem.settings().tolerances, false).ok() ? 1 : 0;
  u.warmup = st.warmup;
  u.b = st.b;
  u.status = st.status;
  const auto& S = st.partition.margin;
  const auto& E = st.partition.error;
  for (std::size_t i = 0; i < st.ids.size(); ++i) {
    const double a = st.alpha[i];
    if (!(a > 0)) continue;
    const TokenId id = st.ids[i];
    u.support.push_back(id);
    u.alpha.push_back(a);
    std::int8_t r = 2;  // warm-up tokens (a = 1/n at the raised bound) count as error-like
    if (std::binary_search(S.begin(), S.end(), id))
      r = 1;
    else if (std::binary_search(E.begin(), E.end(), id))
      r = 2;
    u.role.push_back(r);
  }
  if (!u.warmup && u.mem_size > 0) {
    const std::vector<TokenId> order = mem.margin_order();
    u.margin.assign(order.begin(), order.end());
    std::vector<TokenId> sorted(order.begin(), order.end());
    std::sort(sorted.begin(), sorted.end());
    SVATTN_ASSERT(sorted == S, "margin order disagrees with the canonical partition");
    if (order.empty()) {
      // S = ∅: every support token sits at C (|E| C = 1) and b is the midpoint of its feasible
      // interval (docs/math.md §3, step 5). No coefficient moves with the keys: the memory keeps
      // no bordered inverse and the backward has no implicit term (docs/layers.md §1).
      u.R = MatrixXd(0, 0);
    } else {
      u.R = mem.bordered_inverse();
      SVATTN_ASSERT(
          u.R.rows() == static_cast<Eigen::Index>(u.margin.size()) + 1 && u.R.cols() == u.R.rows(),
          "bordered inverse size disagrees with the margin order");
    }
  } else {
    u.R = MatrixXd(0, 0);
  }
  return u;
}

// Output rows [q_begin, q_end) of one (b, h) slice. X: rows of keys (pos -> pointer), V values.
// LZ (may be null) receives log sum_j a_j k(q, x_j) per query (-inf for an empty memory).
void unit_readout(const Unit& u, const double* X, const double* V, const double* Q, double* O,
                  double* LZ, std::int64_t d, std::int64_t dv, double sigma) {
  const double inv_s2 = 1.0 / (sigma * sigma);
  const std::size_t ns = u.support.size();
  std::vector<double> logit(ns);
  for (std::int64_t m = u.q_begin; m < u.q_end; ++m) {
    const double* q = Q + m * d;
    double* o = O + m * dv;
    std::fill(o, o + dv, 0.0);
    if (LZ != nullptr) LZ[m] = -std::numeric_limits<double>::infinity();
    if (ns == 0) continue;
    double mx = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < ns; ++j) {
      const double* x = X + u.support[j] * d;
      double dist = 0;
      for (std::int64_t k = 0; k < d; ++k) {
        const double df = q[k] - x[k];
        dist += df * df;
      }
      logit[j] = std::log(u.alpha[j]) - dist * inv_s2;
      mx = std::max(mx, logit[j]);
    }
    double z = 0;
    for (std::size_t j = 0; j < ns; ++j) {
      const double w = std::exp(logit[j] - mx);
      logit[j] = w;
      z += w;
    }
    if (LZ != nullptr) LZ[m] = mx + std::log(z);
    for (std::size_t j = 0; j < ns; ++j) {
      const double p = logit[j] / z;
      const double* v = V + u.support[j] * dv;
      for (std::int64_t k = 0; k < dv; ++k) o[k] += p * v[k];
    }
  }
}

// Accumulates the gradients of one unit into the (b, h) slices Xg, Vg, Qg and *sg (d loss / d
// sigma). G: d loss / d output; GZ (may be null): d loss / d log-normaliser per query.
void unit_backward(const Unit& u, const double* X, const double* V, const double* Q,
                   const double* G, const double* GZ, double* Xg, double* Vg, double* Qg,
                   double* sg, std::int64_t d, std::int64_t dv, double sigma) {
  const std::size_t ns = u.support.size();
  if (ns == 0) return;
  const double inv_s2 = 1.0 / (sigma * sigma);
  const double inv_s3 = inv_s2 / sigma;
  std::vector<double> p(ns), dist(ns), abar(ns, 0.0), o(dv), diff(d);
  double sbar = 0;
  for (std::int64_t m = u.q_begin; m < u.q_end; ++m) {
    const double* q = Q + m * d;
    const double* g = G + m * dv;
    double* qg = Qg + m * d;
    double mx = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < ns; ++j) {
      const double* x = X + u.support[j] * d;
      double s = 0;
      for (std::int64_t k = 0; k < d; ++k) {
        const double df = q[k] - x[k];
        s += df * df;
      }
      dist[j] = s;
      p[j] = std::log(u.alpha[j]) - s * inv_s2;
      mx = std::max(mx, p[j]);
    }
    double z = 0;
    for (std::size_t j = 0; j < ns; ++j) {
      p[j] = std::exp(p[j] - mx);
      z += p[j];
    }
    std::fill(o.begin(), o.end(), 0.0);
    for (std::size_t j = 0; j < ns; ++j) {
      p[j] /= z;
      const double* v = V + u.support[j] * dv;
      for (std::int64_t k = 0; k < dv; ++k) o[k] += p[j] * v[k];
    }
    double go = 0;
    for (std::int64_t k = 0; k < dv; ++k) go += g[k] * o[k];
    // d log z / d logit_j = p_j: the log-normaliser's gradient joins the output's.
    const double gz = GZ != nullptr ? GZ[m] : 0.0;
    for (std::size_t j = 0; j < ns; ++j) {
      const std::int64_t pos = u.support[j];
      const double* v = V + pos * dv;
      const double* x = X + pos * d;
      double gv = 0;
      for (std::int64_t k = 0; k < dv; ++k) gv += g[k] * v[k];
      // s_j = d loss / d logit_j, logit_j = log a_j - ||q - x_j||^2 / sigma^2.
      const double s = p[j] * (gv - go + gz);
      double* vg = Vg + pos * dv;
      for (std::int64_t k = 0; k < dv; ++k) vg[k] += p[j] * g[k];
      double* xg = Xg + pos * d;
      const double c = 2.0 * s * inv_s2;
      for (std::int64_t k = 0; k < d; ++k) {
        const double df = q[k] - x[k];
        qg[k] -= c * df;
        xg[k] += c * df;
      }
      abar[j] += s / u.alpha[j];
      sbar += s * 2.0 * dist[j] * inv_s3;
    }
  }
  // Implicit differentiation of the bordered system on S (alpha_E = C and alpha_R = 0 are locally
  // constant; in warm-up every alpha is 1/n).
  const std::size_t nm = u.margin.size();
  if (!u.warmup && nm > 0) {
    // Index of each margin position in the support list.
    VectorXd gbar = VectorXd::Zero(static_cast<Eigen::Index>(nm) + 1);
    for (std::size_t r = 0; r < nm; ++r) {
      const auto it = std::lower_bound(u.support.begin(), u.support.end(), u.margin[r]);
      SVATTN_ASSERT(it != u.support.end() && *it == u.margin[r],
                    "margin token outside the support");
      gbar[static_cast<Eigen::Index>(r) + 1] =
          abar[static_cast<std::size_t>(it - u.support.begin())];
    }
    const VectorXd w = u.R * gbar;  // [w_b; w_S], R symmetric
    for (std::size_t r = 0; r < nm; ++r) {
      const double wi = w[static_cast<Eigen::Index>(r) + 1];
      if (wi == 0) continue;
      const std::int64_t pi = u.margin[r];
      const double* xi = X + pi * d;
      double* xgi = Xg + pi * d;
      for (std::size_t j = 0; j < ns; ++j) {
        const std::int64_t pj = u.support[j];
        if (pj == pi) continue;  // K_ii = 1 for RBF: no dependence on the key
        const double* xj = X + pj * d;
        double s = 0;
        for (std::int64_t k = 0; k < d; ++k) {
          diff[k] = xi[k] - xj[k];
          s += diff[k] * diff[k];
        }
        const double kij = std::exp(-s * inv_s2);
        const double kbar = -wi * u.alpha[j];  // d loss / d K_ij
        // d K_ij / d x_i = -(2/sigma^2) K_ij (x_i - x_j); d K_ij / d x_j = -(that).
        const double c = -2.0 * kbar * kij * inv_s2;
        double* xgj = Xg + pj * d;
        for (std::int64_t k = 0; k < d; ++k) {
          xgi[k] += c * diff[k];
          xgj[k] -= c * diff[k];
        }
        sbar += kbar * kij * 2.0 * s * inv_s3;
      }
    }
  }
  *sg += sbar;
}

struct Shapes {
  std::int64_t B, H, N, M, d, dv;
};

Shapes check_inputs(const Tensor& keys, const Tensor& values, const Tensor& queries,
                    const Tensor& log_sigma, bool same_length) {
  auto fail = [](const std::string& msg) { throw InvalidArgument("sv_exact_attention: " + msg); };
  if (keys.dim() != 4 || values.dim() != 4 || queries.dim() != 4)
    fail("keys, values and queries must be 4-D [B, H, N, *]");
  if (!keys.is_floating_point() || !values.is_floating_point() || !queries.is_floating_point())
    fail("keys, values and queries must be floating point");
  Shapes s{keys.size(0), keys.size(1), keys.size(2), queries.size(2), keys.size(3), values.size(3)};
  if (values.size(0) != s.B || values.size(1) != s.H || values.size(2) != s.N)
    fail("values must be [B, H, N, dv] with the keys' B, H, N");
  if (queries.size(0) != s.B || queries.size(1) != s.H || queries.size(3) != s.d)
    fail("queries must be [B, H, M, d] with the keys' B, H, d");
  if (same_length && s.M != s.N) fail("chunked attention needs queries and keys of equal length");
  if (log_sigma.defined() && (log_sigma.dim() != 1 || log_sigma.size(0) != s.H))
    fail("log_sigma must be undefined or [H]");
  return s;
}

std::vector<double> head_sigmas(const Tensor& log_sigma, std::int64_t H, double bandwidth) {
  std::vector<double> out(static_cast<std::size_t>(H), bandwidth);
  if (log_sigma.defined()) {
    Tensor ls = log_sigma.detach().to(torch::kCPU, torch::kFloat64).contiguous();
    for (std::int64_t h = 0; h < H; ++h)
      out[static_cast<std::size_t>(h)] = std::exp(ls.data_ptr<double>()[h]);
  }
  for (double s : out)
    if (!std::isfinite(s) || s <= 0)
      throw InvalidArgument("sv_exact_attention: bandwidth exp(log_sigma) must be finite and > 0");
  return out;
}

Tensor cpu64(const Tensor& t) { return t.detach().to(torch::kCPU, torch::kFloat64).contiguous(); }

TokenSet token_rows(const double* X, const double* V, std::int64_t begin, std::int64_t end,
                    std::int64_t d, std::int64_t dv) {
  TokenSet ts;
  const auto n = static_cast<Eigen::Index>(end - begin);
  ts.ids.resize(static_cast<std::size_t>(n));
  for (Eigen::Index i = 0; i < n; ++i) ts.ids[static_cast<std::size_t>(i)] = begin + i;
  ts.keys = Eigen::Map<const RowMatrix>(X + begin * d, n, static_cast<Eigen::Index>(d));
  ts.values = Eigen::Map<const RowMatrix>(V + begin * dv, n, static_cast<Eigen::Index>(dv));
  return ts;
}

class ExactFunction : public torch::autograd::Function<ExactFunction> {
 public:
  // chunk == 0: one memory of all N keys per (b, h) read by all M queries. chunk > 0: causal
  // chunked memory (queries of chunk c read the memory of chunks 0..c-1).
  // Returns {output [B,H,M,dv], log-normaliser [B,H,M] (-inf where the memory is empty)}.
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const Tensor& keys, const Tensor& values,
                                                const Tensor& queries, const Tensor& log_sigma,
                                                std::int64_t chunk, const ExactSettings& settings,
                                                ExactInfo* info) {
    settings.validate();
    const Shapes s = check_inputs(keys, values, queries, log_sigma, chunk > 0);
    if (chunk < 0) throw InvalidArgument("sv_exact_chunked_attention: chunk must be >= 1");
    const std::vector<double> sig = head_sigmas(log_sigma, s.H, settings.problem.kernel.bandwidth);
    const Tensor X = cpu64(keys), V = cpu64(values), Q = cpu64(queries);
    Tensor O = torch::zeros({s.B, s.H, s.M, s.dv}, torch::kFloat64);
    Tensor LZ =
        torch::full({s.B, s.H, s.M}, -std::numeric_limits<double>::infinity(), torch::kFloat64);
    const std::int64_t n_chunks = chunk > 0 ? (s.N + chunk - 1) / chunk : 1;
    const std::int64_t units_per = chunk > 0 ? n_chunks : 1;
    std::vector<Unit> units(static_cast<std::size_t>(s.B * s.H * units_per));
    const double* xp = X.data_ptr<double>();
    const double* vp = V.data_ptr<double>();
    const double* qp = Q.data_ptr<double>();
    double* op = O.data_ptr<double>();
    double* lzp = LZ.data_ptr<double>();
    const auto t0 = std::chrono::steady_clock::now();
    at::parallel_for(0, s.B * s.H, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t bh = begin; bh < end; ++bh) {
        const double sigma = sig[static_cast<std::size_t>(bh % s.H)];
        const double* x = xp + bh * s.N * s.d;
        const double* v = vp + bh * s.N * s.dv;
        const double* q = qp + bh * s.M * s.d;
        double* o = op + bh * s.M * s.dv;
        double* lz = lzp + bh * s.M;
        Memory mem(settings.memory_settings(sigma), static_cast<int>(s.d), static_cast<int>(s.dv));
        if (chunk == 0) {
          OpDiagnostics dg = mem.add_batch(token_rows(x, v, 0, s.N, s.d, s.dv));
          Unit u = capture(mem, 0, s.M, settings.certify);
          u.events = dg.events;
          u.fallbacks = dg.batch_fallbacks;
          unit_readout(u, x, v, q, o, lz, s.d, s.dv, sigma);
          units[static_cast<std::size_t>(bh)] = std::move(u);
          continue;
        }
        for (std::int64_t c = 0; c < n_chunks; ++c) {
          const std::int64_t qb = c * chunk, qe = std::min(s.N, qb + chunk);
          Unit u;
          u.q_begin = qb;
          u.q_end = qe;
          if (c > 0) {
            OpDiagnostics dg = mem.add_batch(token_rows(x, v, qb - chunk, qb, s.d, s.dv));
            if (settings.bounded) mem.evict_reserve(&dg);
            u = capture(mem, qb, qe, settings.certify);
            u.events = dg.events;
            u.fallbacks = dg.batch_fallbacks;
            unit_readout(u, x, v, q, o, lz, s.d, s.dv, sigma);
          }
          units[static_cast<std::size_t>(bh * n_chunks + c)] = std::move(u);
        }
      }
    });
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    if (info != nullptr) {
      std::vector<std::int64_t> shape = {s.B, s.H};
      if (chunk > 0) shape.push_back(n_chunks);
      std::vector<std::int64_t> full = shape;
      full.push_back(s.N);
      info->role = torch::zeros(full, torch::kInt8);
      info->alpha = torch::zeros(full, torch::kFloat64);
      info->b = torch::zeros(shape, torch::kFloat64);
      info->support = torch::zeros(shape, torch::kInt64);
      info->memory_size = torch::zeros(shape, torch::kInt64);
      info->verified = torch::full(shape, -1, torch::kInt8);
      info->status.assign(units.size(), Status::kEmpty);
      info->events = 0;
      info->batch_fallbacks = 0;
      info->seconds = secs;
      auto* rp = info->role.data_ptr<std::int8_t>();
      auto* ap = info->alpha.data_ptr<double>();
      for (std::size_t k = 0; k < units.size(); ++k) {
        const Unit& u = units[k];
        for (std::size_t j = 0; j < u.support.size(); ++j) {
          rp[static_cast<std::int64_t>(k) * s.N + u.support[j]] = u.role[j];
          ap[static_cast<std::int64_t>(k) * s.N + u.support[j]] = u.alpha[j];
        }
        info->b.data_ptr<double>()[k] = u.b;
        info->support.data_ptr<std::int64_t>()[k] = static_cast<std::int64_t>(u.support.size());
        info->memory_size.data_ptr<std::int64_t>()[k] = u.mem_size;
        info->verified.data_ptr<std::int8_t>()[k] = u.verified;
        info->status[k] = u.status;
        info->events += u.events;
        info->batch_fallbacks += u.fallbacks;
      }
    }

    ctx->save_for_backward({keys, values, queries, log_sigma});
    ctx->saved_data["units"] = pack(units);
    ctx->saved_data["chunk"] = chunk;
    ctx->saved_data["n_chunks"] = n_chunks;
    ctx->saved_data["bandwidth"] = settings.problem.kernel.bandwidth;
    return {O.to(queries.options()), LZ.to(queries.options())};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &keys = saved[0], &values = saved[1], &queries = saved[2], &log_sigma = saved[3];
    const std::vector<Tensor> packed = ctx->saved_data["units"].toTensorVector();
    const std::int64_t chunk = ctx->saved_data["chunk"].toInt();
    const std::int64_t units_per = chunk > 0 ? ctx->saved_data["n_chunks"].toInt() : 1;
    const double bandwidth = ctx->saved_data["bandwidth"].toDouble();
    const Shapes s = check_inputs(keys, values, queries, log_sigma, chunk > 0);
    const std::vector<double> sig = head_sigmas(log_sigma, s.H, bandwidth);
    const Tensor X = cpu64(keys), V = cpu64(values), Q = cpu64(queries);
    Tensor G =
        grads[0].defined() ? cpu64(grads[0]) : torch::zeros({s.B, s.H, s.M, s.dv}, torch::kFloat64);
    const bool has_gz = grads.size() > 1 && grads[1].defined();
    Tensor GZ = has_gz ? cpu64(grads[1]) : Tensor();
    Tensor Xg = torch::zeros_like(X), Vg = torch::zeros_like(V), Qg = torch::zeros_like(Q);
    Tensor Sg = torch::zeros({s.B, s.H}, torch::kFloat64);
    at::parallel_for(0, s.B * s.H, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t bh = begin; bh < end; ++bh) {
        const double sigma = sig[static_cast<std::size_t>(bh % s.H)];
        for (std::int64_t c = 0; c < units_per; ++c) {
          const Unit u = unpack(packed, static_cast<std::size_t>(bh * units_per + c));
          unit_backward(
              u, X.data_ptr<double>() + bh * s.N * s.d, V.data_ptr<double>() + bh * s.N * s.dv,
              Q.data_ptr<double>() + bh * s.M * s.d, G.data_ptr<double>() + bh * s.M * s.dv,
              has_gz ? GZ.data_ptr<double>() + bh * s.M : nullptr,
              Xg.data_ptr<double>() + bh * s.N * s.d, Vg.data_ptr<double>() + bh * s.N * s.dv,
              Qg.data_ptr<double>() + bh * s.M * s.d, Sg.data_ptr<double>() + bh, s.d, s.dv, sigma);
        }
      }
    });
    Tensor lsg;
    if (log_sigma.defined()) {
      // d loss / d log sigma = sigma * d loss / d sigma.
      Tensor sig_t = torch::exp(cpu64(log_sigma));
      lsg = (Sg.sum(0) * sig_t).to(log_sigma.options());
    }
    return {Xg.to(keys.options()),
            Vg.to(values.options()),
            Qg.to(queries.options()),
            lsg,
            Tensor(),
            Tensor(),
            Tensor()};
  }
};

// Autograd needs every tensor input defined: an absent log_sigma becomes a constant [H] tensor.
Tensor defined_log_sigma(const Tensor& keys, const Tensor& log_sigma,
                         const ExactSettings& settings) {
  if (log_sigma.defined()) return log_sigma;
  return torch::full({keys.size(1)}, std::log(settings.problem.kernel.bandwidth), torch::kFloat64);
}

}  // namespace

Tensor sv_exact_attention(const Tensor& keys, const Tensor& values, const Tensor& queries,
                          const Tensor& log_sigma, const ExactSettings& settings, ExactInfo* info) {
  settings.validate();
  check_inputs(keys, values, queries, log_sigma, false);
  check_sv_data(keys, values, queries, "sv_exact_attention");
  check_distinct_keys_for_gradient(keys, keys.size(2), settings.problem.ridge,
                                   "sv_exact_attention");
  return ExactFunction::apply(keys, values, queries, defined_log_sigma(keys, log_sigma, settings),
                              std::int64_t{0}, settings, info)[0];
}

Tensor sv_exact_chunked_attention(const Tensor& keys, const Tensor& values, const Tensor& queries,
                                  const Tensor& log_sigma, std::int64_t chunk,
                                  const ExactSettings& settings, ExactInfo* info,
                                  Tensor* log_normalizer) {
  if (chunk < 1) throw InvalidArgument("sv_exact_chunked_attention: chunk must be >= 1");
  settings.validate();
  check_inputs(keys, values, queries, log_sigma, true);
  check_sv_data(keys, values, queries, "sv_exact_chunked_attention");
  const std::int64_t N = keys.size(2);
  check_distinct_keys_for_gradient(keys, ((N + chunk - 1) / chunk - 1) * chunk,
                                   settings.problem.ridge, "sv_exact_chunked_attention");
  auto outs = ExactFunction::apply(
      keys, values, queries, defined_log_sigma(keys, log_sigma, settings), chunk, settings, info);
  if (log_normalizer != nullptr) *log_normalizer = outs[1];
  return outs[0];
}

}  // namespace svattn::layers
