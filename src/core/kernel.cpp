#include "svattn/kernel.h"

#include <cmath>
#include <sstream>

#include "svattn/errors.h"
#include "svattn/settings_fields.h"
#include "fixed_sum.h"

namespace svattn {

std::string to_string(KernelType t) {
  switch (t) {
    case KernelType::kRbf: return "rbf";
    case KernelType::kLinear: return "linear";
    case KernelType::kPoly: return "poly";
  }
  return "unknown";
}

KernelType kernel_type_from_string(const std::string& s) {
  if (s == "rbf") return KernelType::kRbf;
  if (s == "linear") return KernelType::kLinear;
  if (s == "poly") return KernelType::kPoly;
  throw InvalidArgument("kernel: unknown kernel '" + s + "' (expected rbf, linear or poly)");
}

void KernelSettings::validate() const { validate_fields(kernel_settings_fields(), *this, "kernel."); }

// Fixed-order sums (fixed_sum.h): one evaluation order for every build, identical for (a, b) and
// (b, a).
static inline double sq_dist(const double* a, const double* b, int d) {
  return detail::sq_dist_fixed(a, b, static_cast<std::size_t>(d));
}

static inline double dot(const double* a, const double* b, int d) {
  return detail::dot_fixed(a, b, static_cast<std::size_t>(d));
}

double kernel(const KernelSettings& k, const double* a, const double* b, int d) {
  switch (k.type) {
    case KernelType::kRbf: {
      const double s2 = k.bandwidth * k.bandwidth;
      return std::exp(-sq_dist(a, b, d) / s2);
    }
    case KernelType::kLinear:
      return dot(a, b, d);
    case KernelType::kPoly: {
      const double base = dot(a, b, d) + k.coef0;
      double r = 1.0;
      for (int i = 0; i < k.degree; ++i) r *= base;
      return r;
    }
  }
  return 0.0;
}

Eigen::MatrixXd gram(const KernelSettings& k, const RowMatrix& x) {
  const int n = static_cast<int>(x.rows()), d = static_cast<int>(x.cols());
  Eigen::MatrixXd g(n, n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j <= i; ++j) {
      const double v = kernel(k, x.row(i).data(), x.row(j).data(), d);
      g(i, j) = v;
      g(j, i) = v;
    }
  }
  return g;
}

Eigen::MatrixXd cross_kernel(const KernelSettings& k, const RowMatrix& a, const RowMatrix& b) {
  if (a.cols() != b.cols()) throw InvalidArgument("cross_kernel: dimension mismatch");
  const int d = static_cast<int>(a.cols());
  Eigen::MatrixXd g(a.rows(), b.rows());
  for (Eigen::Index i = 0; i < a.rows(); ++i)
    for (Eigen::Index j = 0; j < b.rows(); ++j) g(i, j) = kernel(k, a.row(i).data(), b.row(j).data(), d);
  return g;
}

Eigen::VectorXd kernel_row(const KernelSettings& k, const Eigen::Ref<const Eigen::VectorXd>& q,
                           const RowMatrix& x) {
  if (q.size() != x.cols()) throw InvalidArgument("kernel_row: dimension mismatch");
  const int d = static_cast<int>(x.cols());
  Eigen::VectorXd r(x.rows());
  for (Eigen::Index j = 0; j < x.rows(); ++j) r(j) = kernel(k, q.data(), x.row(j).data(), d);
  return r;
}

Eigen::VectorXd kernel_grad_first(const KernelSettings& k,
                                  const Eigen::Ref<const Eigen::VectorXd>& a,
                                  const Eigen::Ref<const Eigen::VectorXd>& b) {
  if (a.size() != b.size()) throw InvalidArgument("kernel_grad_first: dimension mismatch");
  const int d = static_cast<int>(a.size());
  switch (k.type) {
    case KernelType::kRbf: {
      const double s2 = k.bandwidth * k.bandwidth;
      const double kv = kernel(k, a.data(), b.data(), d);
      return (-2.0 / s2) * kv * (a - b);
    }
    case KernelType::kLinear:
      return b;
    case KernelType::kPoly: {
      const double base = dot(a.data(), b.data(), d) + k.coef0;
      double p = 1.0;
      for (int i = 0; i < k.degree - 1; ++i) p *= base;
      return (k.degree * p) * b;
    }
  }
  return Eigen::VectorXd::Zero(d);
}

}  // namespace svattn
