// Baseline-ISA copy of the KKT check's kernel block and the run-time choice between the copies
// (check_kernel.h).
#include "check_kernel.h"

#define SVATTN_CHECK_KERNEL_NS check_kernel_baseline
#include "check_kernel.inc"

namespace svattn::detail {

namespace {
bool use_avx2() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  return check_kernel_avx2::kBuilt && __builtin_cpu_supports("avx2") &&
         __builtin_cpu_supports("fma");
#else
  return false;
#endif
}
}  // namespace

void check_kernel_block(const CheckKernelArgs& a, double* ka, double* kdiag) {
  static const bool avx2 = use_avx2();
  if (avx2)
    check_kernel_avx2::run(a, ka, kdiag);
  else
    check_kernel_baseline::run(a, ka, kdiag);
}

}  // namespace svattn::detail
