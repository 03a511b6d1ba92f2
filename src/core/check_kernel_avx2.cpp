// AVX2+FMA copy of the KKT check's kernel block (check_kernel.h). CMakeLists.txt compiles this file
// alone with -mavx2 -mfma on x86-64. Eigen is renamed here so that none of its inline functions
// compiled for AVX2 can stand in for the baseline copies elsewhere in the library (one definition
// rule); check_kernel.cpp runs this copy only where the CPU reports both extensions.
#include "check_kernel.h"

#if defined(__AVX2__) && defined(__FMA__)
#define Eigen svattn_eigen_avx2
#define SVATTN_CHECK_KERNEL_NS check_kernel_avx2
#include "check_kernel.inc"
#undef Eigen

namespace svattn::detail::check_kernel_avx2 {
extern const bool kBuilt = true;
}

#else

namespace svattn::detail::check_kernel_avx2 {
extern const bool kBuilt = false;
void run(const CheckKernelArgs& a, double* ka, double* kdiag) {
  check_kernel_baseline::run(a, ka, kdiag);
}
}  // namespace svattn::detail::check_kernel_avx2

#endif
