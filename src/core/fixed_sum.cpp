// The 256-bit vector form of the fixed four-lane sums (fixed_sum.h): one __m256d holds lanes 0-3,
// every block is one vector multiply and one vector add (never an FMA: the functions are compiled
// for AVX without FMA, and the core with -ffp-contract=off), the tail goes into lane 0 and the
// lanes are combined as (lane0 + lane1) + (lane2 + lane3) in scalar code. IEEE multiply and add
// round each lane exactly as the scalar code does, so both produce the same bits. The row forms
// run up to eight such sums side by side, each with its own accumulator vector.
#include "fixed_sum.h"

#include "support/cpu_features.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SVATTN_HAVE_AVX_CODE 1
#else
#define SVATTN_HAVE_AVX_CODE 0
#endif

namespace svattn::detail {

bool vector_sums_available() {
#if SVATTN_HAVE_AVX_CODE
  return support::cpu_features().avx;
#else
  return false;
#endif
}

bool g_vector_sums = vector_sums_available();
bool g_row_blocks = true;

bool set_vector_sums(bool on) {
  const bool prev = g_vector_sums;
  g_vector_sums = on && vector_sums_available();
  return prev;
}

namespace {
// Per thread, so the counting costs no atomic operation.
thread_local RowKernelCounts t_row_counts;
}  // namespace

RowKernelCounts row_kernel_counts() { return t_row_counts; }

void dot_fixed_rows_scalar(const double* const* a, int count, const double* b, std::size_t n,
                           double* out) {
  ++t_row_counts.scalar;
  for (int t = 0; t < count; ++t) out[t] = dot_fixed_scalar(a[t], b, n);
}

void gather_dot_fixed_rows_scalar(const double* const* r, int count, const int* idx,
                                  const double* w, std::size_t n, double* out) {
  ++t_row_counts.scalar;
  for (int t = 0; t < count; ++t) out[t] = gather_dot_fixed_scalar(r[t], idx, w, n);
}

#if SVATTN_HAVE_AVX_CODE
namespace {

// Lane l of acc is lane l of the scalar sum; the tail (n - k < 4 terms) goes into lane 0 from left
// to right, then (l0 + l1) + (l2 + l3). The tail is written out: as a loop the compiler vectorised
// it for lengths it can never have.
template <typename Term>
__attribute__((target("avx"))) inline double finish_lanes(__m256d acc, std::size_t k, std::size_t n,
                                                          Term term) {
  alignas(32) double l[4];
  _mm256_store_pd(l, acc);
  double l0 = l[0];
  if (k < n) l0 += term(k);
  if (k + 1 < n) l0 += term(k + 1);
  if (k + 2 < n) l0 += term(k + 2);
  return (l0 + l[1]) + (l[2] + l[3]);
}

template <int C>
__attribute__((target("avx"))) void dot_rows(const double* const* a, const double* b, std::size_t n,
                                             double* out) {
  __m256d acc[C];
  for (int t = 0; t < C; ++t) acc[t] = _mm256_setzero_pd();
  std::size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const __m256d bv = _mm256_loadu_pd(b + k);
    for (int t = 0; t < C; ++t)
      acc[t] = _mm256_add_pd(acc[t], _mm256_mul_pd(_mm256_loadu_pd(a[t] + k), bv));
  }
  for (int t = 0; t < C; ++t)
    out[t] = finish_lanes(acc[t], k, n, [&](std::size_t q) { return a[t][q] * b[q]; });
}

template <int C>
__attribute__((target("avx"))) void gather_rows(const double* const* r, const int* idx,
                                                const double* w, std::size_t n, double* out) {
  __m256d acc[C];
  for (int t = 0; t < C; ++t) acc[t] = _mm256_setzero_pd();
  std::size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const __m256d wv = _mm256_loadu_pd(w + k);
    const int i0 = idx[k], i1 = idx[k + 1], i2 = idx[k + 2], i3 = idx[k + 3];
    for (int t = 0; t < C; ++t) {
      const double* rt = r[t];
      const __m256d g = _mm256_set_pd(rt[i3], rt[i2], rt[i1], rt[i0]);
      acc[t] = _mm256_add_pd(acc[t], _mm256_mul_pd(g, wv));
    }
  }
  for (int t = 0; t < C; ++t)
    out[t] = finish_lanes(acc[t], k, n, [&](std::size_t q) { return r[t][idx[q]] * w[q]; });
}

}  // namespace

void dot_fixed_rows_avx(const double* const* a, int count, const double* b, std::size_t n,
                        double* out) {
  ++t_row_counts.vector;
  switch (count) {
    case 1:
      dot_rows<1>(a, b, n, out);
      break;
    case 2:
      dot_rows<2>(a, b, n, out);
      break;
    case 3:
      dot_rows<3>(a, b, n, out);
      break;
    case 4:
      dot_rows<4>(a, b, n, out);
      break;
    case 5:
      dot_rows<5>(a, b, n, out);
      break;
    case 6:
      dot_rows<6>(a, b, n, out);
      break;
    case 7:
      dot_rows<7>(a, b, n, out);
      break;
    default:
      dot_rows<8>(a, b, n, out);
      break;
  }
}

void gather_dot_fixed_rows_avx(const double* const* r, int count, const int* idx, const double* w,
                               std::size_t n, double* out) {
  ++t_row_counts.vector;
  switch (count) {
    case 1:
      gather_rows<1>(r, idx, w, n, out);
      break;
    case 2:
      gather_rows<2>(r, idx, w, n, out);
      break;
    case 3:
      gather_rows<3>(r, idx, w, n, out);
      break;
    case 4:
      gather_rows<4>(r, idx, w, n, out);
      break;
    case 5:
      gather_rows<5>(r, idx, w, n, out);
      break;
    case 6:
      gather_rows<6>(r, idx, w, n, out);
      break;
    case 7:
      gather_rows<7>(r, idx, w, n, out);
      break;
    default:
      gather_rows<8>(r, idx, w, n, out);
      break;
  }
}

__attribute__((target("avx"))) double dot_fixed_avx(const double* a, const double* b,
                                                    std::size_t n) {
  __m256d acc = _mm256_setzero_pd();
  std::size_t k = 0;
  for (; k + 4 <= n; k += 4)
    acc = _mm256_add_pd(acc, _mm256_mul_pd(_mm256_loadu_pd(a + k), _mm256_loadu_pd(b + k)));
  return finish_lanes(acc, k, n, [&](std::size_t q) { return a[q] * b[q]; });
}

__attribute__((target("avx"))) double sq_dist_fixed_avx(const double* a, const double* b,
                                                        std::size_t n) {
  __m256d acc = _mm256_setzero_pd();
  std::size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const __m256d t = _mm256_sub_pd(_mm256_loadu_pd(a + k), _mm256_loadu_pd(b + k));
    acc = _mm256_add_pd(acc, _mm256_mul_pd(t, t));
  }
  return finish_lanes(acc, k, n, [&](std::size_t q) {
    const double t = a[q] - b[q];
    return t * t;
  });
}

__attribute__((target("avx"))) double gather_dot_fixed_avx(const double* r, const int* idx,
                                                           const double* w, std::size_t n) {
  __m256d acc = _mm256_setzero_pd();
  std::size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const __m256d g = _mm256_set_pd(r[idx[k + 3]], r[idx[k + 2]], r[idx[k + 1]], r[idx[k]]);
    acc = _mm256_add_pd(acc, _mm256_mul_pd(g, _mm256_loadu_pd(w + k)));
  }
  return finish_lanes(acc, k, n, [&](std::size_t q) { return r[idx[q]] * w[q]; });
}
#else
void dot_fixed_rows_avx(const double* const* a, int count, const double* b, std::size_t n,
                        double* out) {
  dot_fixed_rows_scalar(a, count, b, n, out);
}
void gather_dot_fixed_rows_avx(const double* const* r, int count, const int* idx, const double* w,
                               std::size_t n, double* out) {
  gather_dot_fixed_rows_scalar(r, count, idx, w, n, out);
}
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
