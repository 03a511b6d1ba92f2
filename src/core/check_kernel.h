// The kernel-times-coefficients product of the independent KKT check (docs/api.md
// "Certificates"): ka = K(X, XS) aS for a block of rows, with dense algebra (GEMM for the inner
// products, vectorised exp). No bit-determinism: the check has a tolerance. The body
// (check_kernel.inc) is compiled three times, for baseline x86-64, AVX2+FMA and AVX-512 (the widest
// the CPU has is chosen at run time);
// this header is free of Eigen so that the two copies share no Eigen symbol.
#pragma once

namespace svattn::detail {

struct CheckKernelArgs {
  int type = 0;               ///< KernelType as int (0 RBF, 1 linear, 2 poly)
  double bandwidth = 1.0;     ///< RBF sigma
  int degree = 2;             ///< poly degree
  double coef0 = 1.0;         ///< poly offset
  const double* x = nullptr;  ///< m x d rows, row-major
  int m = 0;
  int d = 0;
  const double* xs = nullptr;    ///< s x d support keys, row-major
  const double* sq_s = nullptr;  ///< s squared norms of the support keys
  const double* a_s = nullptr;   ///< s support coefficients
  int s = 0;
};

/// ka[r] = sum_c K(x_r, xs_c) a_c and kdiag[r] = K(x_r, x_r) for r < m.
void check_kernel_block(const CheckKernelArgs& a, double* ka, double* kdiag);

namespace check_kernel_baseline {
void run(const CheckKernelArgs& a, double* ka, double* kdiag);
}
namespace check_kernel_avx512 {
extern const bool kBuilt;  ///< compiled with AVX-512 F+DQ (else it forwards to baseline)
bool cpu_has();            ///< this CPU has AVX-512 F+DQ (a built copy runs only then)
void run(const CheckKernelArgs& a, double* ka, double* kdiag);
}  // namespace check_kernel_avx512
namespace check_kernel_avx2 {
extern const bool kBuilt;  ///< this copy was compiled with AVX2+FMA (else it forwards to baseline)
bool cpu_has();            ///< this CPU has AVX2 and FMA (a built copy runs only then)
void run(const CheckKernelArgs& a, double* ka, double* kdiag);
}  // namespace check_kernel_avx2

}  // namespace svattn::detail
