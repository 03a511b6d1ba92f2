// Random key matrices drawn from the one generator (support/random.h), for the CLI's demo, the
// tests and the benchmarks. Header-only.
#pragma once
#include "support/random.h"
#include "svattn/types.h"

namespace svattn::support {

/// n x d standard-normal matrix (Rng::normal), filled row by row.
inline RowMatrix gaussian_matrix(int n, int d, Rng& rng) {
  RowMatrix m(n, d);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) m(i, j) = rng.normal();
  }
  return m;
}

/// n x d standard-normal matrix (Rng::normal_open), filled row by row: the store benchmarks' keys.
inline RowMatrix gaussian_matrix_open(int n, int d, Rng& rng) {
  RowMatrix m(n, d);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) m(i, j) = rng.normal_open();
  }
  return m;
}

/// n x d matrix uniform in [-1, 1) (Rng::uniform_signed), filled row by row.
inline RowMatrix uniform_signed_matrix(int n, int d, Rng& rng) {
  RowMatrix m(n, d);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) m(i, j) = rng.uniform_signed();
  }
  return m;
}

}  // namespace svattn::support
