// OpenBLAS kernel selection. Debian's LibTorch does its matrix products in OpenBLAS, which picks
// its kernels from the CPU model at load time. On virtual CPUs that report a generic model name
// ("Intel(R) Xeon(R) Processor") it can fall back to its Prescott (SSE3) kernels although the CPU
// has AVX2/AVX-512: training then runs about 3x slower (measured in docs/lm.md). The kernel choice
// can only be changed before the library loads, through OPENBLAS_CORETYPE: the CLI re-executes
// itself with it (apps/svattn/blas_reexec.h).
#pragma once
#include <string>

namespace svattn::lm {

/// OpenBLAS's kernel name ("Prescott", "SkylakeX", ...) or "" when OpenBLAS is not loaded.
std::string blas_core_name();

/// Sets OpenBLAS's own thread pool to `threads` (no-op when OpenBLAS is not loaded). LibTorch's
/// at::set_num_threads does not reach it: OpenBLAS then runs LAPACK factorizations above ~64 x 64
/// (the hybrid's bordered and interior-point solves) on all cores, and on a shared machine those
/// threads contend -- measured 60-100x slower Cholesky/LU batches (docs/lm.md, Throughput).
void set_blas_threads(int threads);

}  // namespace svattn::lm
