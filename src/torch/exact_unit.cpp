// One memory state of the exact path: capture, readout and backward as blocked matrix products
// over the support (docs/layers.md §1 for the derivation in the core's scaling).
#include "exact_unit.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "svattn/certificate.h"
#include "svattn/errors.h"
#include "svattn/hash.h"

namespace svattn::layers::detail {

namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;
using ConstMap = Eigen::Map<const RowMat>;

// Squared distances between the rows of a [p, d] and b [q, d], clamped at 0.
MatrixXd sq_dists(const RowMat& a, const RowMat& b) {
  MatrixXd D = -2.0 * (a * b.transpose());
  D.colwise() += a.rowwise().squaredNorm();
  D.rowwise() += b.rowwise().squaredNorm().transpose();
  return D.cwiseMax(0.0);
}

RowMat gather(const double* rows, std::int64_t width, const std::vector<std::int64_t>& at) {
  RowMat out(static_cast<Eigen::Index>(at.size()), width);
  for (std::size_t j = 0; j < at.size(); ++j)
    out.row(static_cast<Eigen::Index>(j)) = ConstMap(rows + at[j] * width, 1, width);
  return out;
}

// The readout of one unit's queries, in the pieces the backward reuses. With c_m the largest
// unweighted logit -||q_m - x_j||^2 / sigma^2 of row m: E = exp(logit - c), z = E a, P = E a' / z.
struct Readout {
  RowMat Xs, Vs;
  MatrixXd D, E, P;
  VectorXd z, c, a;
};

Readout readout_parts(const ExactUnit& u, const Slice& s, double sigma) {
  Readout r;
  const auto L = static_cast<Eigen::Index>(u.q_end - u.q_begin);
  r.Xs = gather(s.X, s.d, u.support);
  r.Vs = gather(s.V, s.dv, u.support);
  r.a = Eigen::Map<const VectorXd>(u.alpha.data(), static_cast<Eigen::Index>(u.alpha.size()));
  const RowMat Qm = ConstMap(s.Q + u.q_begin * s.d, L, s.d);
  r.D = sq_dists(Qm, r.Xs);
  const MatrixXd logit = r.D * (-1.0 / (sigma * sigma));
  r.c = logit.rowwise().maxCoeff();
  r.E = (logit.colwise() - r.c).array().exp().matrix();
  r.z = r.E * r.a;
  r.P = (r.E * r.a.asDiagonal()).array().colwise() / r.z.array();
  return r;
}

}  // namespace

// ---------------------------------------------------------------- capture

ExactUnit capture_lean(const LeanSolver& solver, const Slice& s, std::int64_t q_begin,
                       std::int64_t q_end, bool certify) {
  ExactUnit u;
  u.q_begin = q_begin;
  u.q_end = q_end;
  u.mem_size = solver.size();
  u.warmup = solver.warmup();
  u.b = solver.b();
  u.status = solver.status();
  u.events = solver.events();
  u.fallbacks = solver.fallbacks();
  std::vector<int> index(static_cast<std::size_t>(solver.size()), -1);
  for (int i = 0; i < solver.size(); ++i) {
    const LeanSet set = solver.set(i);
    if (set == LeanSet::kReserve) continue;
    index[static_cast<std::size_t>(i)] = static_cast<int>(u.support.size());
    u.support.push_back(solver.id(i));
    u.alpha.push_back(solver.alpha(i));
    u.role.push_back(set == LeanSet::kMargin ? 1 : 2);
  }
  if (!u.warmup) {
    for (int i : solver.margin_order()) u.margin.push_back(index[static_cast<std::size_t>(i)]);
    u.R = solver.bordered_inverse();
  }
  if (certify) {
    State st = solver.state(static_cast<int>(s.dv));
    TokenSet ts;
    ts.ids = st.ids;
    ts.keys.resize(solver.size(), s.d);
    ts.values.resize(solver.size(), s.dv);
    std::vector<int> order(static_cast<std::size_t>(solver.size()));
    for (int i = 0; i < solver.size(); ++i) {
      ts.keys.row(i) = ConstMap(solver.key(i), 1, s.d);
      ts.values.row(i) = ConstMap(s.V + solver.id(i) * s.dv, 1, s.dv);
      order[static_cast<std::size_t>(i)] = i;
    }
    st.state_sha256 = canonical_sha256(st.settings, ts, order, st.alpha, st.b);
    u.verified = verify_state(ts, st, Tolerances{}, false).ok() ? 1 : 0;
  }
  return u;
}

ExactUnit capture_memory(const Memory& mem, std::int64_t q_begin, std::int64_t q_end,
                         bool certify) {
  ExactUnit u;
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
  for (std::size_t i = 0; i < st.ids.size(); ++i) {
    if (!(st.alpha[i] > 0)) continue;
    u.support.push_back(st.ids[i]);
    u.alpha.push_back(st.alpha[i]);
    // Warm-up tokens (a = 1/n at the raised bound) count as error-like.
    u.role.push_back(std::binary_search(S.begin(), S.end(), st.ids[i]) ? 1 : 2);
  }
  if (u.warmup || u.mem_size == 0) return u;
  for (TokenId id : mem.margin_order()) {
    const auto it = std::lower_bound(u.support.begin(), u.support.end(), id);
    SVATTN_ASSERT(it != u.support.end() && *it == id, "margin token outside the support");
    u.margin.push_back(static_cast<int>(it - u.support.begin()));
  }
  // S = ∅ (every support token at C): no bordered inverse and no implicit term (docs/layers.md).
  if (!u.margin.empty()) u.R = mem.bordered_inverse();
  SVATTN_ASSERT(u.margin.empty() || u.R.rows() == static_cast<Eigen::Index>(u.margin.size()) + 1,
                "bordered inverse size disagrees with the margin order");
  return u;
}

// ---------------------------------------------------------------- readout

void unit_readout(const ExactUnit& u, const Slice& s, double sigma, double* O, double* LZ) {
  const auto L = static_cast<Eigen::Index>(u.q_end - u.q_begin);
  Eigen::Map<RowMat> Om(O + u.q_begin * s.dv, L, s.dv);
  if (u.support.empty()) {
    Om.setZero();
    if (LZ != nullptr)
      std::fill(LZ + u.q_begin, LZ + u.q_end, -std::numeric_limits<double>::infinity());
    return;
  }
  const Readout r = readout_parts(u, s, sigma);
  Om = r.P * r.Vs;
  if (LZ != nullptr)
    Eigen::Map<VectorXd>(LZ + u.q_begin, L) = r.c + r.z.array().log().matrix();
}

// ---------------------------------------------------------------- backward

namespace {

// Scatter-adds the rows of `rows` into buf at the support positions `at`.
void scatter_add(double* buf, std::int64_t width, const std::vector<std::int64_t>& at,
                 const RowMat& rows) {
  for (std::size_t j = 0; j < at.size(); ++j)
    Eigen::Map<RowMat>(buf + at[j] * width, 1, width) += rows.row(static_cast<Eigen::Index>(j));
}

// The implicit term: (b, a_S) solve the bordered system, so d loss / d K_ij = -w_i a_j for i in
// S, j in S ∪ E, with [w_b; w_S] = R [0; abar_S] (docs/layers.md §1). Adds the key gradients to
// Xg and returns the sigma gradient.
double implicit_term(const ExactUnit& u, const Slice& s, const Readout& r, const VectorXd& abar,
                     double sigma, const SliceGrad& g) {
  const auto m = static_cast<Eigen::Index>(u.margin.size());
  VectorXd gb = VectorXd::Zero(m + 1);
  RowMat XM(m, s.d);
  for (Eigen::Index k = 0; k < m; ++k) {
    gb(k + 1) = abar(u.margin[static_cast<std::size_t>(k)]);
    XM.row(k) = r.Xs.row(u.margin[static_cast<std::size_t>(k)]);
  }
  const VectorXd w = u.R * gb;
  const double inv_s2 = 1.0 / (sigma * sigma);
  MatrixXd Dms = sq_dists(XM, r.Xs);
  // A_ij = (d loss / d K_ij) K_ij; K_ii = 1 does not move with the key.
  MatrixXd A = (-(w.tail(m) * r.a.transpose())).cwiseProduct((Dms * -inv_s2).array().exp().matrix());
  for (Eigen::Index k = 0; k < m; ++k) {
    A(k, u.margin[static_cast<std::size_t>(k)]) = 0;
    Dms(k, u.margin[static_cast<std::size_t>(k)]) = 0;
  }
  // d K_ij / d x_i = -(2 / sigma^2) K_ij (x_i - x_j) = -(d K_ij / d x_j).
  const double c = -2.0 * inv_s2;
  const RowMat gm = c * (A.rowwise().sum().asDiagonal() * XM - A * r.Xs);
  const RowMat gs = -c * (A.transpose() * XM - A.colwise().sum().transpose().asDiagonal() * r.Xs);
  for (Eigen::Index k = 0; k < m; ++k)
    Eigen::Map<RowMat>(g.Xg + u.support[static_cast<std::size_t>(u.margin[static_cast<std::size_t>(k)])] * s.d, 1, s.d) += gm.row(k);
  scatter_add(g.Xg, s.d, u.support, gs);
  return A.cwiseProduct(Dms).sum() * 2.0 * inv_s2 / sigma;
}

}  // namespace

void unit_backward(const ExactUnit& u, const Slice& s, const double* G, const double* GZ,
                   double sigma, const SliceGrad& g) {
  if (u.support.empty()) return;
  const auto L = static_cast<Eigen::Index>(u.q_end - u.q_begin);
  const Readout r = readout_parts(u, s, sigma);
  const RowMat Qm = ConstMap(s.Q + u.q_begin * s.d, L, s.d);
  const RowMat Gm = ConstMap(G + u.q_begin * s.dv, L, s.dv);
  const RowMat O = r.P * r.Vs;
  // T_mj = d loss / d logit_mj / p_mj = g_m.v_j - g_m.o_m (+ the log-normaliser's gradient).
  MatrixXd T = Gm * r.Vs.transpose();
  VectorXd shift = -(Gm.cwiseProduct(O)).rowwise().sum();
  if (GZ != nullptr) shift += Eigen::Map<const VectorXd>(GZ + u.q_begin, L);
  T.colwise() += shift;
  // Y = T E / z: abar_j = d loss / d a_j = sum_m Y_mj; S = Y a' = d loss / d logit.
  const MatrixXd Y = (r.E.cwiseProduct(T)).array().colwise() / r.z.array();
  const MatrixXd S = Y * r.a.asDiagonal();
  const double inv_s2 = 1.0 / (sigma * sigma);
  scatter_add(g.Vg, s.dv, u.support, r.P.transpose() * Gm);
  Eigen::Map<RowMat>(g.Qg + u.q_begin * s.d, L, s.d) +=
      (-2.0 * inv_s2) * (S.rowwise().sum().asDiagonal() * Qm - S * r.Xs);
  scatter_add(g.Xg, s.d, u.support,
              (2.0 * inv_s2) * (S.transpose() * Qm - S.colwise().sum().transpose().asDiagonal() * r.Xs));
  double sbar = S.cwiseProduct(r.D).sum() * 2.0 * inv_s2 / sigma;
  // In warm-up every a is 1/n, and a_E = C, a_R = 0 are locally constant: only S moves.
  if (!u.warmup && !u.margin.empty())
    sbar += implicit_term(u, s, r, Y.colwise().sum().transpose(), sigma, g);
  *g.sg += sbar;
}

}  // namespace svattn::layers::detail
