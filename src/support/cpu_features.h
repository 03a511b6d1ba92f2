// The one probe of the CPU's vector instruction sets, for the run-time choice between the ISA
// copies of the core's kernels: the AVX fixed four-lane sums, which give the scalar bits
// (docs/math.md §3), and the AVX2/AVX-512 copies of the certificate check's kernel block
// (docs/api.md "Certificates and the verifier"). Header-only.
#pragma once

namespace svattn::support {

/// The instruction sets svattn has kernel copies for.
struct CpuFeatures {
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512dq = false;
  /// The AVX2 + FMA kernel copies can run.
  bool avx2_fma() const { return avx2 && fma; }
  /// The AVX-512 (F + DQ) kernel copies can run.
  bool avx512() const { return avx512f && avx512dq; }
};

/// The running CPU's features (all false off x86-64 or without a GCC-compatible compiler).
inline CpuFeatures probe_cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  f.avx = __builtin_cpu_supports("avx");
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
#endif
  return f;
}

/// The running CPU's features, probed once.
inline const CpuFeatures& cpu_features() {
  static const CpuFeatures f = probe_cpu_features();
  return f;
}

}  // namespace svattn::support
