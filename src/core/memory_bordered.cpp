// Margin-set changes on the bordered inverse R = [[0, 1'], [1, Q_SS]]^-1 (docs/math.md §4): a
// full refactorisation, the sensitivities beta of (b, a_S) to the moving coefficient, the Schur
// complement of an entrant, and the O(|S|^2) expansion / contraction.

#include <algorithm>

#include "memory_impl.h"

namespace svattn {

// ---------------------------------------------------------------- bordered inverse
void Memory::Impl::refactor() {
  const int m = static_cast<int>(margin.size());
  bordered.touch();
  if (m == 0) {
    bordered.clear();
    return;
  }
  Eigen::MatrixXd B(m + 1, m + 1);
  B(0, 0) = 0;
  for (int k = 0; k < m; ++k) ensure_column(margin[k]);
  for (int k = 0; k < m; ++k) {
    B(0, k + 1) = B(k + 1, 0) = 1;
    const double* rk = row_ready(margin[k]);
    for (int l = 0; l < m; ++l)
      B(k + 1, l + 1) = rk[columns.pos(margin[l])] + (l == k ? settings.problem.ridge : 0.0);
  }
  bordered.assign(B.partialPivLu().inverse());
}

// Sensitivities beta = -R [1; Q_Sc] of (b, a_S) to a unit increase of a_c.
Eigen::VectorXd Memory::Impl::beta_of(int c) {
  const int m = static_cast<int>(margin.size());
  Eigen::VectorXd v(m + 1);
  v(0) = 1;
  const double* rc = row_ready(c);
  for (int k = 0; k < m; ++k) v(k + 1) = rc[columns.pos(margin[k])];
  return -(bordered.m() * v);
}

// Schur complement of entrant i and its sensitivity vector (for expansion).
double Memory::Impl::schur(int i, Eigen::VectorXd* beta_i) {
  const int m = static_cast<int>(margin.size());
  if (m == 0) return q_at(i, i);
  Eigen::VectorXd v(m + 1);
  v(0) = 1;
  const double* ri = row_ready(i);
  for (int k = 0; k < m; ++k) v(k + 1) = ri[columns.pos(margin[k])];
  Eigen::VectorXd bi = -(bordered.m() * v);
  if (beta_i) *beta_i = bi;
  return q_at(i, i) + v.dot(bi);
}

void Memory::Impl::expand(int i) {
  ensure_column(i);
  const int m = static_cast<int>(margin.size());
  bordered.touch();
  if (m == 0) {
    const double qii = q_at(i, i);
    Eigen::MatrixXd r2(2, 2);
    r2 << -qii, 1, 1, 0;
    bordered.assign(r2);
    margin.push_back(i);
    return;
  }
  Eigen::VectorXd bi;
  const double kappa = schur(i, &bi);
  Eigen::VectorXd u(m + 2);
  u.head(m + 1) = bi;
  u(m + 1) = 1;
  bordered.expand(u, kappa);
  margin.push_back(i);
}

void Memory::Impl::contract(int k) {  // remove S[k]
  const int m = static_cast<int>(margin.size());
  bordered.touch();
  if (m == 1) {
    margin.clear();
    bordered.clear();
    return;
  }
  bordered.contract(k + 1);
  margin.erase(margin.begin() + k);
}

// Removes slot s from the margin list and R, if it is there.
bool Memory::Impl::contract_slot(int s) {
  auto it = std::find(margin.begin(), margin.end(), s);
  if (it == margin.end()) return false;
  contract(static_cast<int>(it - margin.begin()));
  return true;
}
}  // namespace svattn
