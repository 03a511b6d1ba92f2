// Baseline-ISA copy of the KKT check's kernel block and the run-time choice between the copies
// (check_kernel.h).
#include "check_kernel.h"

#define SVATTN_CHECK_KERNEL_NS check_kernel_baseline
#include "check_kernel.inc"

namespace svattn::detail {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
bool check_kernel_avx512::cpu_has() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
}
bool check_kernel_avx2::cpu_has() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#else
bool check_kernel_avx512::cpu_has() { return false; }
bool check_kernel_avx2::cpu_has() { return false; }
#endif

namespace {
using Run = void (*)(const CheckKernelArgs&, double*, double*);
Run choose() {
  if (check_kernel_avx512::kBuilt && check_kernel_avx512::cpu_has())
    return check_kernel_avx512::run;
  if (check_kernel_avx2::kBuilt && check_kernel_avx2::cpu_has()) return check_kernel_avx2::run;
  return check_kernel_baseline::run;
}
}  // namespace

void check_kernel_block(const CheckKernelArgs& a, double* ka, double* kdiag) {
  static const Run run = choose();
  run(a, ka, kdiag);
}

}  // namespace svattn::detail
