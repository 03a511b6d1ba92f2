// Batch reference solver (docs/math.md §9): SMO with second-order working-set selection driven to a
// tight tolerance, then the canonical refinement of docs/math.md §4. It shares no code with the
// incremental path except the canonical refinement, which by design defines the state.
#pragma once
#include <cstddef>

#include "svattn/types.h"

namespace svattn {

struct BatchSettings {
  ProblemSettings problem;
  Tolerances tolerances;
  /// SMO stops when the maximal violating pair gap (m(a) - M(a) in LIBSVM's notation, half-gradient
  /// scale) is <= smo_tol * max(1, max K_ii). In (0, 1e-2).
  double smo_tol = 1e-11;
  /// SMO iteration cap; 0 means max(10^7, 100 n). On reaching it the status is kIterationLimit.
  long max_smo_iterations = 0;
  /// Kernel row cache in MiB (LRU). >= 1.
  std::size_t cache_mib = 1024;

  void validate() const;
};

struct BatchDiagnostics {
  long smo_iterations = 0;
  int refine_iterations = 0;     ///< partition repairs done by the canonical refinement
  double smo_seconds = 0;
  double refine_seconds = 0;
  long kernel_rows_computed = 0;
};

struct BatchResult {
  State state;
  BatchDiagnostics diagnostics;
};

/// Solves the problem on `tokens` (any order; the state is ordered by id).
BatchResult solve_batch(const TokenSet& tokens, const BatchSettings& settings);

}  // namespace svattn
