// AVX-512 (F, DQ) copy of the KKT check's kernel block (check_kernel.h). CMakeLists.txt compiles
// this file alone with -mavx512f -mavx512dq -mavx2 -mfma on x86-64. Eigen is renamed here so that
// none of its inline functions compiled for AVX-512 can stand in for the baseline copies elsewhere
// in the library (one definition rule); check_kernel.cpp runs this copy only where the CPU reports
// AVX-512 F and DQ.
#include "check_kernel.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__)
#define Eigen svattn_eigen_avx512
#define SVATTN_CHECK_KERNEL_NS check_kernel_avx512
#include "check_kernel.inc"
#undef Eigen

namespace svattn::detail::check_kernel_avx512 {
extern const bool kBuilt = true;
}

#else

namespace svattn::detail::check_kernel_avx512 {
extern const bool kBuilt = false;
void run(const CheckKernelArgs& a, double* ka, double* kdiag) {
  check_kernel_baseline::run(a, ka, kdiag);
}
}  // namespace svattn::detail::check_kernel_avx512

#endif
