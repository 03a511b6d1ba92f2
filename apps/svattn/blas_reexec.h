// Process-level fix of OpenBLAS's kernel choice for the LibTorch commands (train, eval,
// dump-keys): re-executes the process with OPENBLAS_CORETYPE when OpenBLAS misdetected the CPU
// (svattn/lm/blas.h says why; docs/lm.md measures it).
#pragma once

namespace svattn::cli {

/// When OpenBLAS runs its Prescott kernels on a CPU with AVX2 (AVX-512), OPENBLAS_CORETYPE is
/// unset and SVATTN_NO_BLAS_FIX is unset: re-executes the current process (same pid, same
/// arguments) with OPENBLAS_CORETYPE=Haswell (SkylakeX), silently (`train` prints the kernels in
/// use in its header). Returns only when nothing is to be done or the re-execution failed.
void reexec_with_fast_blas_if_misdetected();

}  // namespace svattn::cli
