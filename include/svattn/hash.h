// Canonical byte layout and SHA-256 of a state (documented in docs/math.md).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "svattn/types.h"

namespace svattn {

/// Bytes hashed: see docs/math.md "Canonical state hash". `order` lists row indices of `tokens` in
/// ascending id order; alpha aligned with order.
std::vector<std::uint8_t> canonical_bytes(const ProblemSettings& settings, const TokenSet& tokens,
                                          const std::vector<int>& order,
                                          const std::vector<double>& alpha, double b);
/// sha256_hex(canonical_bytes(...)) computed as a stream: the same digest without holding the
/// byte layout (O(1) extra memory instead of O(n (d + dv))).
std::string canonical_sha256(const ProblemSettings& settings, const TokenSet& tokens,
                             const std::vector<int>& order, const std::vector<double>& alpha,
                             double b);
/// One token of the canonical layout: its id and its key (d) and value (dv) entries.
struct CanonicalRow {
  TokenId id;
  const double* key;
  const double* value;
};
/// The same digest over n tokens given row by row in ascending id order (alpha aligned), for
/// holders whose tokens are not a TokenSet (the memory's slots).
std::string canonical_sha256_rows(const ProblemSettings& settings, std::size_t n, int d, int dv,
                                  const std::function<CanonicalRow(std::size_t)>& row,
                                  const std::vector<double>& alpha, double b);
std::string sha256_hex(const std::uint8_t* data, std::size_t n);
inline std::string sha256_hex(const std::vector<std::uint8_t>& v) {
  return sha256_hex(v.data(), v.size());
}

}  // namespace svattn
