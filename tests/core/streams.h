// Synthetic key streams for the core tests (fixed seeds), drawn from the one generator with the
// transforms they were first recorded with (support/random_libstdcxx.h), so their bits never
// change.
#pragma once
#include <algorithm>
#include <cmath>
#include <string>

#include "support/random_libstdcxx.h"
#include "svattn/types.h"

namespace svattn::testing {

enum class Stream { kGaussian, kClustered, kNearDuplicate, kDuplicate, kHeavyTailed };

inline const char* stream_name(Stream s) {
  switch (s) {
    case Stream::kGaussian: return "gaussian";
    case Stream::kClustered: return "clustered";
    case Stream::kNearDuplicate: return "near_duplicate";
    case Stream::kDuplicate: return "duplicate";
    case Stream::kHeavyTailed: return "heavy_tailed";
  }
  return "?";
}

inline RowMatrix make_keys(Stream kind, int n, int d, std::uint64_t seed) {
  support::Rng rng(seed);
  support::libstdcxx::Normal normal;
  auto N = [&normal](support::Rng& r) { return normal(r); };
  auto U = [](support::Rng& r) { return support::libstdcxx::uniform(r); };
  RowMatrix x(n, d);
  switch (kind) {
    case Stream::kGaussian:
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < d; ++j) x(i, j) = N(rng);
      break;
    case Stream::kClustered: {
      const int k = 5;
      RowMatrix c(k, d);
      for (int i = 0; i < k; ++i)
        for (int j = 0; j < d; ++j) c(i, j) = 4.0 * N(rng);
      for (int i = 0; i < n; ++i) {
        const int which = static_cast<int>(rng.next() % k);
        for (int j = 0; j < d; ++j) x(i, j) = c(which, j) + 0.3 * N(rng);
      }
      break;
    }
    case Stream::kNearDuplicate:
      // Every other token is a twin of an earlier one, 1e-9 ... 1e-6 away.
      for (int i = 0; i < n; ++i) {
        if (i > 0 && i % 2 == 1) {
          const int src = static_cast<int>(rng.next() % i);
          const double eps = std::pow(10.0, -9.0 + 3.0 * U(rng));
          for (int j = 0; j < d; ++j) x(i, j) = x(src, j) + eps * N(rng);
        } else {
          for (int j = 0; j < d; ++j) x(i, j) = N(rng);
        }
      }
      break;
    case Stream::kDuplicate:
      for (int i = 0; i < n; ++i) {
        if (i > 0 && i % 3 == 0) {
          const int src = static_cast<int>(rng.next() % i);
          x.row(i) = x.row(src);
        } else {
          for (int j = 0; j < d; ++j) x(i, j) = N(rng);
        }
      }
      break;
    case Stream::kHeavyTailed: {
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < d; ++j)
          x(i, j) = std::max(-50.0, std::min(50.0, support::libstdcxx::cauchy(rng)));
      break;
    }
  }
  return x;
}

}  // namespace svattn::testing
