// fp64 kernels. Every value is computed by one scalar loop with a fixed summation order (no SIMD
// reductions, no FMA contraction), so kernel(a, b) == kernel(b, a) bit for bit and every cache of a
// kernel value equals a fresh evaluation.
#pragma once
#include <Eigen/Dense>
#include <string>

namespace svattn {

enum class KernelType { kRbf, kLinear, kPoly };

std::string to_string(KernelType t);
/// Parses "rbf" | "linear" | "poly"; throws InvalidArgument naming the bad string.
KernelType kernel_type_from_string(const std::string& s);

/// RBF bandwidths whose square is a normal fp64 number (KernelSettings::validate).
inline constexpr double kMinBandwidth = 1.5e-154;
inline constexpr double kMaxBandwidth = 1.3e154;
/// Largest polynomial degree (the kernel is evaluated by `degree` multiplications).
inline constexpr int kMaxDegree = 64;

struct KernelSettings {
  /// RBF: exp(-||a-b||^2 / bandwidth^2). Linear: a.b. Poly: (a.b + coef0)^degree.
  KernelType type = KernelType::kRbf;
  /// RBF bandwidth sigma. Must be in [kMinBandwidth, kMaxBandwidth] (sigma^2 a normal number).
  double bandwidth = 1.0;
  /// Polynomial degree. Must be in [1, kMaxDegree].
  int degree = 2;
  /// Polynomial offset. Must be finite and >= 0 (keeps K positive semidefinite).
  double coef0 = 1.0;

  /// Throws InvalidArgument naming the bad field.
  void validate() const;
};

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// kappa(a, b) for d-dimensional a and b.
double kernel(const KernelSettings& k, const double* a, const double* b, int d);
inline double kernel(const KernelSettings& k, const Eigen::Ref<const Eigen::VectorXd>& a,
                     const Eigen::Ref<const Eigen::VectorXd>& b) {
  return kernel(k, a.data(), b.data(), static_cast<int>(a.size()));
}
/// Gram matrix K_ij = kappa(x_i, x_j) of the rows of x (symmetric by construction).
Eigen::MatrixXd gram(const KernelSettings& k, const RowMatrix& x);
/// Cross kernel K_ij = kappa(a_i, b_j).
Eigen::MatrixXd cross_kernel(const KernelSettings& k, const RowMatrix& a, const RowMatrix& b);
/// Row r_j = kappa(q, x_j).
Eigen::VectorXd kernel_row(const KernelSettings& k, const Eigen::Ref<const Eigen::VectorXd>& q,
                           const RowMatrix& x);
/// d kappa(a, b) / d a (a d-vector).
Eigen::VectorXd kernel_grad_first(const KernelSettings& k,
                                  const Eigen::Ref<const Eigen::VectorXd>& a,
                                  const Eigen::Ref<const Eigen::VectorXd>& b);

}  // namespace svattn
