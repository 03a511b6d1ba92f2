// The 256-bit vector form of the fixed four-lane sums (fixed_sum.h): one __m256d holds lanes 0-3,
// every block is one vector multiply and one vector add (never an FMA: the functions are compiled
// for AVX without FMA, and the core with -ffp-contract=off), the tail goes into lane 0 and the
// lanes are combined as (lane0 + lane1) + (lane2 + lane3) in scalar code. IEEE multiply and add
// round each lane exactly as the scalar code does, so both produce the same bits.
#include "fixed_sum.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SVATTN_HAVE_AVX_CODE 1
#else
#define SVATTN_HAVE_AVX_CODE 0
#endif

namespace svattn::detail {

bool vector_sums_available() {
#if SVATTN_HAVE_AVX_CODE
  return __builtin_cpu_supports("avx");
#else
  return false;
#endif
}

bool g_vector_sums = vector_sums_available();

bool set_vector_sums(bool on) {
  const bool prev = g_vector_sums;
  g_vector_sums = on && vector_sums_available();
  return prev;
}

#if SVATTN_HAVE_AVX_CODE
__attribute__((target("avx"))) double dot_fixed_avx(const double* a, const double* b,
                                                    std::size_t n) {
  __m256d acc = _mm256_setzero_pd();
  std::size_t k = 0;
  for (; k + 4 <= n; k += 4)
    acc = _mm256_add_pd(acc, _mm256_mul_pd(_mm256_loadu_pd(a + k), _mm256_loadu_pd(b + k)));
  alignas(32) double l[4];
  _mm256_store_pd(l, acc);
  for (; k < n; ++k) l[0] += a[k] * b[k];
  return (l[0] + l[1]) + (l[2] + l[3]);
}

__attribute__((target("avx"))) double sq_dist_fixed_avx(const double* a, const double* b,
                                                        std::size_t n) {
  __m256d acc = _mm256_setzero_pd();
  std::size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const __m256d t = _mm256_sub_pd(_mm256_loadu_pd(a + k), _mm256_loadu_pd(b + k));
    acc = _mm256_add_pd(acc, _mm256_mul_pd(t, t));
  }
  alignas(32) double l[4];
  _mm256_store_pd(l, acc);
  for (; k < n; ++k) {
    const double t = a[k] - b[k];
    l[0] += t * t;
  }
  return (l[0] + l[1]) + (l[2] + l[3]);
}

__attribute__((target("avx"))) double gather_dot_fixed_avx(const double* r, const int* idx,
                                                           const double* w, std::size_t n) {
  __m256d acc = _mm256_setzero_pd();
  std::size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const __m256d g = _mm256_set_pd(r[idx[k + 3]], r[idx[k + 2]], r[idx[k + 1]], r[idx[k]]);
    acc = _mm256_add_pd(acc, _mm256_mul_pd(g, _mm256_loadu_pd(w + k)));
  }
  alignas(32) double l[4];
  _mm256_store_pd(l, acc);
  for (; k < n; ++k) l[0] += r[idx[k]] * w[k];
  return (l[0] + l[1]) + (l[2] + l[3]);
}
#else
double dot_fixed_avx(const double* a, const double* b, std::size_t n) {
  return dot_fixed_scalar(a, b, n);
}
double sq_dist_fixed_avx(const double* a, const double* b, std::size_t n) {
  return sq_dist_fixed_scalar(a, b, n);
}
double gather_dot_fixed_avx(const double* r, const int* idx, const double* w, std::size_t n) {
  return gather_dot_fixed_scalar(r, idx, w, n);
}
#endif

}  // namespace svattn::detail
