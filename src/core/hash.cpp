#include "svattn/hash.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstring>

#include "svattn/errors.h"

namespace svattn {
namespace {

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<std::uint8_t>& out) : out_(out) {}
  template <typename T>
  void put(T v) {  // little-endian
    std::uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    if (!little_endian()) std::reverse(b, b + sizeof(T));
    const std::size_t old = out_.size();
    out_.resize(old + sizeof(T));
    std::memcpy(out_.data() + old, b, sizeof(T));
  }
  void raw(const char* s, std::size_t n) {
    const std::size_t old = out_.size();
    out_.resize(old + n);
    std::memcpy(out_.data() + old, s, n);
  }

 private:
  static bool little_endian() {
    const std::uint16_t one = 1;
    std::uint8_t first;
    std::memcpy(&first, &one, 1);
    return first == 1;
  }
  std::vector<std::uint8_t>& out_;
};

}  // namespace

std::vector<std::uint8_t> canonical_bytes(const ProblemSettings& s, const TokenSet& tokens,
                                          const std::vector<int>& order,
                                          const std::vector<double>& alpha, double b) {
  SVATTN_ASSERT(order.size() == alpha.size(), "order and alpha must align");
  std::vector<std::uint8_t> out;
  const std::size_t d = tokens.keys.cols(), dv = tokens.values.cols();
  out.reserve(64 + order.size() * (8 * (d + dv + 2)));
  ByteWriter w(out);
  w.raw("SVATTN-STATE-v1", 16);  // 15 chars + NUL
  w.put<std::uint8_t>(static_cast<std::uint8_t>(s.kernel.type));
  switch (s.kernel.type) {
    case KernelType::kRbf: w.put<double>(s.kernel.bandwidth); break;
    case KernelType::kLinear: break;
    case KernelType::kPoly:
      w.put<std::int32_t>(s.kernel.degree);
      w.put<double>(s.kernel.coef0);
      break;
  }
  w.put<double>(s.C);
  w.put<double>(s.ridge);
  w.put<std::uint64_t>(order.size());
  w.put<std::uint32_t>(static_cast<std::uint32_t>(d));
  w.put<std::uint32_t>(static_cast<std::uint32_t>(dv));
  for (std::size_t t = 0; t < order.size(); ++t) {
    const int r = order[t];
    w.put<std::int64_t>(tokens.ids[r]);
    for (std::size_t k = 0; k < d; ++k) w.put<double>(tokens.keys(r, k));
    for (std::size_t k = 0; k < dv; ++k) w.put<double>(tokens.values(r, k));
    w.put<double>(alpha[t]);
  }
  w.put<double>(b);
  return out;
}

std::string sha256_hex(const std::uint8_t* data, std::size_t n) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data, n, md, &len, EVP_sha256(), nullptr) != 1)
    throw Error("sha256: OpenSSL EVP_Digest failed");
  static const char* hex = "0123456789abcdef";
  std::string s;
  s.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    s.push_back(hex[md[i] >> 4]);
    s.push_back(hex[md[i] & 15]);
  }
  return s;
}

}  // namespace svattn
