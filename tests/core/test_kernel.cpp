#include <gtest/gtest.h>

#include <cmath>

#include "support/random_libstdcxx.h"
#include "svattn/errors.h"
#include "svattn/kernel.h"

using namespace svattn;

TEST(Kernel, RbfValueAndBitwiseSymmetry) {
  KernelSettings k;
  k.bandwidth = 2.0;
  svattn::support::Rng rng(3);
  svattn::support::libstdcxx::Normal normal;
  auto N = [&normal](svattn::support::Rng& r) { return normal(r); };
  for (int t = 0; t < 100; ++t) {
    Eigen::VectorXd a(7), b(7);
    for (int j = 0; j < 7; ++j) {
      a[j] = N(rng);
      b[j] = N(rng);
    }
    const double v = kernel(k, a, b);
    EXPECT_EQ(v, kernel(k, b, a));  // bit for bit
    EXPECT_NEAR(v, std::exp(-(a - b).squaredNorm() / 4.0), 1e-15);
    EXPECT_EQ(kernel(k, a, a), 1.0);
  }
}

TEST(Kernel, LinearAndPoly) {
  Eigen::VectorXd a(2), b(2);
  a << 1, 2;
  b << 3, -1;
  KernelSettings lin;
  lin.type = KernelType::kLinear;
  EXPECT_DOUBLE_EQ(kernel(lin, a, b), 1.0);
  KernelSettings poly;
  poly.type = KernelType::kPoly;
  poly.degree = 3;
  poly.coef0 = 1.0;
  EXPECT_DOUBLE_EQ(kernel(poly, a, b), 8.0);
}

TEST(Kernel, GradientMatchesFiniteDifferences) {
  svattn::support::Rng rng(5);
  svattn::support::libstdcxx::Normal normal;
  auto N = [&normal](svattn::support::Rng& r) { return normal(r); };
  for (KernelType type : {KernelType::kRbf, KernelType::kLinear, KernelType::kPoly}) {
    KernelSettings k;
    k.type = type;
    k.bandwidth = 1.5;
    k.degree = 3;
    Eigen::VectorXd a(4), b(4);
    for (int j = 0; j < 4; ++j) {
      a[j] = 0.5 * N(rng);
      b[j] = 0.5 * N(rng);
    }
    const Eigen::VectorXd g = kernel_grad_first(k, a, b);
    for (int j = 0; j < 4; ++j) {
      const double h = 1e-6;
      Eigen::VectorXd ap = a, am = a;
      ap[j] += h;
      am[j] -= h;
      const double fd = (kernel(k, ap, b) - kernel(k, am, b)) / (2 * h);
      EXPECT_NEAR(g[j], fd, 1e-8 * std::max(1.0, std::abs(fd))) << to_string(type) << " dim " << j;
    }
  }
}

TEST(Kernel, GramIsSymmetricAndMatchesCross) {
  RowMatrix x(5, 3);
  x.setRandom();
  KernelSettings k;
  const Eigen::MatrixXd G = gram(k, x);
  const Eigen::MatrixXd X = cross_kernel(k, x, x);
  EXPECT_TRUE((G - G.transpose()).cwiseAbs().maxCoeff() == 0.0);
  EXPECT_TRUE((G - X).cwiseAbs().maxCoeff() == 0.0);
  const Eigen::VectorXd r = kernel_row(k, x.row(2).transpose(), x);
  EXPECT_TRUE((r - G.col(2)).cwiseAbs().maxCoeff() == 0.0);
}

TEST(Kernel, ValidateNamesTheField) {
  KernelSettings k;
  k.bandwidth = 0;
  try {
    k.validate();
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("bandwidth"), std::string::npos);
  }
  k.bandwidth = 1;
  k.type = KernelType::kPoly;
  k.degree = 0;
  EXPECT_THROW(k.validate(), InvalidArgument);
  EXPECT_THROW(kernel_type_from_string("gauss"), InvalidArgument);
  EXPECT_EQ(kernel_type_from_string("poly"), KernelType::kPoly);
}
