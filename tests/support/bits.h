// FNV-1a fingerprints of number sequences for the support tests' recorded-bits checks.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

namespace svattn::support_test {

/// FNV-1a 64 over the bytes of `n` objects at `p`.
inline std::uint64_t fnv1a(const void* p, std::size_t bytes) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= b[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

template <typename T>
std::uint64_t fingerprint(const std::vector<T>& v) {
  return fnv1a(v.data(), v.size() * sizeof(T));
}

/// The bit pattern of a double.
inline std::uint64_t bits_of(double x) {
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

}  // namespace svattn::support_test
