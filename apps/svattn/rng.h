// Random test data of the CLI, its tests and the benchmarks, drawn from the one generator
// (svattn/random.h, deterministic on every platform).
#pragma once
#include <cmath>
#include <cstdint>

#include "svattn/kernel.h"
#include "svattn/random.h"

namespace svattn::cli {

using svattn::Rng;  // the one generator (svattn/random.h)

/// n x d standard-normal matrix, filled row by row.
inline RowMatrix gaussian_matrix(int n, int d, Rng& rng) {
  RowMatrix m(n, d);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) m(i, j) = rng.normal();
  }
  return m;
}

/// Fisher-Yates shuffle with Rng::below (deterministic across standard libraries).
template <typename T>
void shuffle(T& v, Rng& rng) {
  shuffle_in_place(v, rng);
}

}  // namespace svattn::cli
