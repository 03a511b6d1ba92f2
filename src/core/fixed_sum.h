// Fixed-order fp64 reductions for the exact path. Internal.
//
// Every sum here has one evaluation order, written out in the source: four lanes, lane l adds the
// terms k = l, l + 4, l + 8, ... of the full blocks from left to right, the tail (n mod 4 terms)
// goes into lane 0 from left to right, and the result is (lane0 + lane1) + (lane2 + lane3). The
// core is compiled with -ffp-contract=off and without fast-math, so the compiler may vectorise the
// lanes (they are independent) but may not reorder any addition: the same inputs give the same bits
// on every build, and four lanes hide the add latency that made the old one-accumulator loops slow.
// Every routine that feeds the canonical state (kernel values, Cholesky rows, gradient sums) uses
// these, so any two paths that reach the same partition still compute identical bits.
//
// The four lanes map exactly onto one 256-bit vector of doubles: on x86-64 CPUs with AVX the sums
// run as vector multiplies and adds (fixed_sum.cpp; no FMA, lane l of the vector is lane l above,
// the tail and the final (lane0 + lane1) + (lane2 + lane3) stay scalar), which rounds every
// operation exactly as the scalar lanes do: the same bits with or without the vector code
// (docs/math.md §3). set_vector_sums(false) forces the scalar lanes (tests compare the two).
//
// The row forms (dot_fixed_rows, gather_dot_fixed_rows) evaluate up to kRowBlock = 8 such sums that
// share one operand side by side: one accumulator vector per sum, so up to eight chains of four
// lanes are in flight instead of one (the single sum is bound by the add latency). Each sum keeps
// its own lanes, tail and final combine, so every result has the bits of the single-sum form. They
// serve the canonical refinement: blocks of Cholesky rows, two right-hand sides of a triangular
// solve, and the gradient sums of eight tokens at a time (docs/math.md §3 "Row forms").
#pragma once
#include <cstddef>
#include <cstdint>

namespace svattn::detail {

/// Whether the sums below run on 256-bit vectors (AVX found at start-up and not switched off).
extern bool g_vector_sums;
/// True when the CPU and OS support AVX (the vector code can run at all).
bool vector_sums_available();
/// Turns the vector code on (if available) or off; returns the previous setting. For tests.
bool set_vector_sums(bool on);

/// Calls of the row forms on this thread, by path (tests assert which path ran).
struct RowKernelCounts {
  std::uint64_t vector = 0, scalar = 0;
};
RowKernelCounts row_kernel_counts();

double dot_fixed_avx(const double* a, const double* b, std::size_t n);
double sq_dist_fixed_avx(const double* a, const double* b, std::size_t n);
double gather_dot_fixed_avx(const double* r, const int* idx, const double* w, std::size_t n);

/// sum_k a[k] * b[k], four scalar lanes.
inline double dot_fixed_scalar(const double* a, const double* b, std::size_t n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  std::size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    s0 += a[k] * b[k];
    s1 += a[k + 1] * b[k + 1];
    s2 += a[k + 2] * b[k + 2];
    s3 += a[k + 3] * b[k + 3];
  }
  for (; k < n; ++k) s0 += a[k] * b[k];
  return (s0 + s1) + (s2 + s3);
}

/// sum_k (a[k] - b[k])^2; symmetric in (a, b) bit for bit. Four scalar lanes.
inline double sq_dist_fixed_scalar(const double* a, const double* b, std::size_t n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  std::size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const double t0 = a[k] - b[k], t1 = a[k + 1] - b[k + 1];
    const double t2 = a[k + 2] - b[k + 2], t3 = a[k + 3] - b[k + 3];
    s0 += t0 * t0;
    s1 += t1 * t1;
    s2 += t2 * t2;
    s3 += t3 * t3;
  }
  for (; k < n; ++k) {
    const double t = a[k] - b[k];
    s0 += t * t;
  }
  return (s0 + s1) + (s2 + s3);
}

/// sum_k r[idx[k]] * w[k] (a gathered dot product). Four scalar lanes.
inline double gather_dot_fixed_scalar(const double* r, const int* idx, const double* w,
                                      std::size_t n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  std::size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    s0 += r[idx[k]] * w[k];
    s1 += r[idx[k + 1]] * w[k + 1];
    s2 += r[idx[k + 2]] * w[k + 2];
    s3 += r[idx[k + 3]] * w[k + 3];
  }
  for (; k < n; ++k) s0 += r[idx[k]] * w[k];
  return (s0 + s1) + (s2 + s3);
}

// Short sums stay scalar (below one vector block the two codes are the same operations anyway).
inline double dot_fixed(const double* a, const double* b, std::size_t n) {
  return g_vector_sums && n >= 8 ? dot_fixed_avx(a, b, n) : dot_fixed_scalar(a, b, n);
}
inline double sq_dist_fixed(const double* a, const double* b, std::size_t n) {
  return g_vector_sums && n >= 8 ? sq_dist_fixed_avx(a, b, n) : sq_dist_fixed_scalar(a, b, n);
}
inline double gather_dot_fixed(const double* r, const int* idx, const double* w, std::size_t n) {
  return g_vector_sums && n >= 8 ? gather_dot_fixed_avx(r, idx, w, n)
                                 : gather_dot_fixed_scalar(r, idx, w, n);
}

/// Up to this many sums per call of the row forms.
inline constexpr int kRowBlock = 8;

void dot_fixed_rows_scalar(const double* const* a, int count, const double* b, std::size_t n,
                           double* out);
void dot_fixed_rows_avx(const double* const* a, int count, const double* b, std::size_t n,
                        double* out);
void gather_dot_fixed_rows_scalar(const double* const* r, int count, const int* idx,
                                  const double* w, std::size_t n, double* out);
void gather_dot_fixed_rows_avx(const double* const* r, int count, const int* idx, const double* w,
                               std::size_t n, double* out);

/// True (default): with the vector sums on, the row forms run their sums side by side. False:
/// one at a time through the single-sum forms above (the code before the row forms; same bits,
/// the benchmark's A/B). No effect on the scalar path.
extern bool g_row_blocks;

/// out[t] = dot_fixed(a[t], b, n) for t < count (1 <= count <= kRowBlock), bit for bit.
inline void dot_fixed_rows(const double* const* a, int count, const double* b, std::size_t n,
                           double* out) {
  if (!g_vector_sums) {
    dot_fixed_rows_scalar(a, count, b, n, out);
  } else if (g_row_blocks) {
    dot_fixed_rows_avx(a, count, b, n, out);
  } else {
    for (int t = 0; t < count; ++t) out[t] = dot_fixed(a[t], b, n);
  }
}
/// out[t] = gather_dot_fixed(r[t], idx, w, n) for t < count (1 <= count <= kRowBlock).
inline void gather_dot_fixed_rows(const double* const* r, int count, const int* idx,
                                  const double* w, std::size_t n, double* out) {
  if (!g_vector_sums) {
    gather_dot_fixed_rows_scalar(r, count, idx, w, n, out);
  } else if (g_row_blocks) {
    gather_dot_fixed_rows_avx(r, count, idx, w, n, out);
  } else {
    for (int t = 0; t < count; ++t) out[t] = gather_dot_fixed(r[t], idx, w, n);
  }
}

}  // namespace svattn::detail
