// Canonical byte layout and SHA-256 of a state (documented in docs/math.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "svattn/types.h"

namespace svattn {

/// Bytes hashed: see docs/math.md "Canonical state hash". `order` lists row indices of `tokens` in
/// ascending id order; alpha aligned with order.
std::vector<std::uint8_t> canonical_bytes(const ProblemSettings& settings, const TokenSet& tokens,
                                          const std::vector<int>& order,
                                          const std::vector<double>& alpha, double b);
std::string sha256_hex(const std::uint8_t* data, std::size_t n);
inline std::string sha256_hex(const std::vector<std::uint8_t>& v) {
  return sha256_hex(v.data(), v.size());
}

}  // namespace svattn
