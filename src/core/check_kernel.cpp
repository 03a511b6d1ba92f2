// Baseline-ISA copy of the KKT check's kernel block and the run-time choice between the copies
// (check_kernel.h).
#include "check_kernel.h"

#include "support/cpu_features.h"

#define SVATTN_CHECK_KERNEL_NS check_kernel_baseline
#include "check_kernel.inc"

namespace svattn::detail {

bool check_kernel_avx512::cpu_has() { return support::cpu_features().avx512(); }
bool check_kernel_avx2::cpu_has() { return support::cpu_features().avx2_fma(); }

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
