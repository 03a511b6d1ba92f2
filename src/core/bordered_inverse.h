// The bordered inverse R = [[0, 1'], [1, Q_SS]]^-1 of the path's margin system (docs/math.md §4),
// kept in a buffer with spare capacity: a margin entrant (rank-one expansion) and a leaver (Schur
// contraction) update it in place in O(|S|^2) without allocating. (A fresh (|S| + 2)^2 matrix per
// event cost an mmap, page faults and two full copies: half a millisecond at |S| = 240.)
// Row/column 0 is the border (b), row k + 1 the k-th margin token. Internal header.
#pragma once
#include <Eigen/Dense>
#include <algorithm>

namespace svattn::detail {

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
    // In place, element by element: Eigen evaluated the outer product into a fresh (|S| + 2)^2
    // temporary (zero-filled, often mmap'd: page faults on every entrant). Same arithmetic per
    // entry, (u_r u_c) / kappa, so the same bits.
    for (int c = 0; c < dim_; ++c) {
      double* col = buf_.col(c).data();
      const double uc = u[c];
      for (int r = 0; r < dim_; ++r) col[r] += (u[r] * uc) / kappa;
    }
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

}  // namespace svattn::detail
