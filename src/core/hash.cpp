// The canonical state hash (docs/math.md §6): the bucket digests, the top-level layout, and the
// version-1 layout kept for upgrades.
#include "svattn/hash.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "svattn/errors.h"

namespace svattn {
namespace {

bool little_endian() {
  const std::uint16_t one = 1;
  std::uint8_t first;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

// The canonical byte layout (docs/math.md "Canonical state hash") written to a sink: the byte
// vector of canonical_bytes, or a streaming SHA-256 that never holds the whole layout.
template <class Sink>
class CanonicalWriter {
 public:
  explicit CanonicalWriter(Sink& sink) : sink_(sink) {}
  template <typename T>
  void put(T v) {  // little-endian
    std::uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    if (!little_endian()) std::reverse(b, b + sizeof(T));
    sink_.append(b, sizeof(T));
  }
  void raw(const char* s, std::size_t n) {
    sink_.append(reinterpret_cast<const std::uint8_t*>(s), n);
  }
  void doubles(const double* p, std::size_t n) {
    if (little_endian()) {
      sink_.append(reinterpret_cast<const std::uint8_t*>(p), n * sizeof(double));
    } else {
      for (std::size_t k = 0; k < n; ++k) put<double>(p[k]);
    }
  }

  void settings(const ProblemSettings& s) {
    put<std::uint8_t>(static_cast<std::uint8_t>(s.kernel.type));
    switch (s.kernel.type) {
      case KernelType::kRbf:
        put<double>(s.kernel.bandwidth);
        break;
      case KernelType::kLinear:
        break;
      case KernelType::kPoly:
        put<std::int32_t>(s.kernel.degree);
        put<double>(s.kernel.coef0);
        break;
    }
    put<double>(s.C);
    put<double>(s.ridge);
  }
  void sizes(std::uint64_t n, std::size_t d, std::size_t dv) {
    put<std::uint64_t>(n);
    put<std::uint32_t>(static_cast<std::uint32_t>(d));
    put<std::uint32_t>(static_cast<std::uint32_t>(dv));
  }

  // Version 2, top level (docs/math.md §6).
  void top(const ProblemSettings& s, const StateHashParts& p,
           const std::vector<BucketDigest>& buckets) {
    raw("SVATTN-STATE-v2", 16);  // 15 chars + NUL
    settings(s);
    sizes(p.n, static_cast<std::size_t>(p.d), static_cast<std::size_t>(p.dv));
    put<double>(p.b);
    put<std::uint64_t>(p.nonzero_alpha.size());
    for (const auto& [id, a] : p.nonzero_alpha) {
      put<std::int64_t>(id);
      put<double>(a);
    }
    put<std::uint64_t>(buckets.size());
    for (const BucketDigest& bd : buckets) {
      put<std::int64_t>(bd.bucket);
      put<std::uint32_t>(bd.count);
      sink_.append(bd.sha256.data(), bd.sha256.size());
    }
  }

  // Version 2, one bucket.
  template <class RowFn>
  void bucket(std::int64_t bucket, std::size_t count, std::size_t d, std::size_t dv, RowFn&& row) {
    raw("SVATTN-BUCKET-v1", 17);  // 16 chars + NUL
    put<std::int64_t>(bucket);
    put<std::uint32_t>(static_cast<std::uint32_t>(count));
    for (std::size_t t = 0; t < count; ++t) {
      const CanonicalRow r = row(t);
      SVATTN_ASSERT(hash_bucket(r.id) == bucket, "token outside its hash bucket");
      put<std::int64_t>(r.id);
      doubles(r.key, d);
      doubles(r.value, dv);
    }
  }

  // Version 1: one stream over every token (stores of schema <= 3, memory files <= 2).
  template <class RowFn>
  void state_v1(const ProblemSettings& s, std::size_t n, std::size_t d, std::size_t dv, RowFn&& row,
                const std::vector<double>& alpha, double b) {
    raw("SVATTN-STATE-v1", 16);  // 15 chars + NUL
    settings(s);
    sizes(n, d, dv);
    for (std::size_t t = 0; t < n; ++t) {
      const CanonicalRow r = row(t);
      put<std::int64_t>(r.id);
      doubles(r.key, d);
      doubles(r.value, dv);
      put<double>(alpha[t]);
    }
    put<double>(b);
  }

 private:
  Sink& sink_;
};

struct VectorSink {
  std::vector<std::uint8_t>& out;
  void append(const std::uint8_t* p, std::size_t n) {
    const std::size_t old = out.size();
    out.resize(old + n);
    std::memcpy(out.data() + old, p, n);
  }
};

// Streaming SHA-256 through a 64 KiB buffer.
class Sha256Sink {
 public:
  Sha256Sink() : ctx_(EVP_MD_CTX_new()) {
    if (ctx_ == nullptr || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1)
      throw Error("sha256: OpenSSL EVP_DigestInit failed");
    buf_.reserve(kBuffer);
  }
  ~Sha256Sink() { EVP_MD_CTX_free(ctx_); }
  Sha256Sink(const Sha256Sink&) = delete;
  Sha256Sink& operator=(const Sha256Sink&) = delete;
  void append(const std::uint8_t* p, std::size_t n) {
    if (buf_.size() + n > kBuffer) flush();
    if (n >= kBuffer) {
      update(p, n);
    } else {
      buf_.insert(buf_.end(), p, p + n);
    }
  }
  std::array<std::uint8_t, 32> digest() {
    flush();
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx_, md, &len) != 1 || len != 32)
      throw Error("sha256: EVP_DigestFinal failed");
    std::array<std::uint8_t, 32> out{};
    std::memcpy(out.data(), md, 32);
    return out;
  }
  std::string hex() {
    const std::array<std::uint8_t, 32> md = digest();
    return to_hex(md.data(), 32);
  }
  static std::string to_hex(const unsigned char* md, unsigned int len) {
    static const char* hexd = "0123456789abcdef";
    std::string s;
    s.reserve(2 * len);
    for (unsigned int i = 0; i < len; ++i) {
      s.push_back(hexd[md[i] >> 4]);
      s.push_back(hexd[md[i] & 15]);
    }
    return s;
  }

 private:
  static constexpr std::size_t kBuffer = 1 << 16;
  void flush() {
    if (!buf_.empty()) update(buf_.data(), buf_.size());
    buf_.clear();
  }
  void update(const std::uint8_t* p, std::size_t n) {
    if (EVP_DigestUpdate(ctx_, p, n) != 1) throw Error("sha256: EVP_DigestUpdate failed");
  }
  EVP_MD_CTX* ctx_;
  std::vector<std::uint8_t> buf_;
};

bool is_positive_zero(double a) {
  std::uint64_t bits;
  std::memcpy(&bits, &a, sizeof bits);
  return bits == 0;
}

// The parts of the state hash of n rows in ascending id, every bucket digest computed.
void split_rows(std::size_t n, int d, int dv, const std::function<CanonicalRow(std::size_t)>& row,
                const std::vector<double>& alpha, double b, StateHashParts& parts,
                std::vector<BucketDigest>& buckets) {
  SVATTN_ASSERT(n == alpha.size(), "rows and alpha must align");
  parts.n = n;
  parts.d = d;
  parts.dv = dv;
  parts.b = b;
  for (std::size_t t = 0; t < n; ++t)
    if (!is_positive_zero(alpha[t])) parts.nonzero_alpha.emplace_back(row(t).id, alpha[t]);
  buckets = bucket_digests(n, d, dv, row);
}

}  // namespace

BucketDigest bucket_digest(std::int64_t bucket, std::size_t count, int d, int dv,
                           const std::function<CanonicalRow(std::size_t)>& row) {
  Sha256Sink sink;
  CanonicalWriter<Sha256Sink> w(sink);
  w.bucket(bucket, count, static_cast<std::size_t>(d), static_cast<std::size_t>(dv), row);
  BucketDigest out;
  out.bucket = bucket;
  out.count = static_cast<std::uint32_t>(count);
  out.sha256 = sink.digest();
  return out;
}

std::vector<BucketDigest> bucket_digests(std::size_t n, int d, int dv,
                                         const std::function<CanonicalRow(std::size_t)>& row) {
  std::vector<BucketDigest> out;
  std::size_t t0 = 0;
  TokenId prev = 0;
  while (t0 < n) {
    const std::int64_t bucket = hash_bucket(row(t0).id);
    std::size_t t1 = t0;
    for (; t1 < n; ++t1) {
      const TokenId id = row(t1).id;
      if (hash_bucket(id) != bucket) break;
      SVATTN_ASSERT(t1 == 0 || id > prev, "rows must be in ascending id order");
      prev = id;
    }
    out.push_back(
        bucket_digest(bucket, t1 - t0, d, dv, [&](std::size_t k) { return row(t0 + k); }));
    t0 = t1;
  }
  return out;
}

std::vector<std::uint8_t> state_hash_bytes(const ProblemSettings& s, const StateHashParts& parts,
                                           const std::vector<BucketDigest>& buckets) {
  std::vector<std::uint8_t> out;
  out.reserve(96 + 16 * parts.nonzero_alpha.size() + 44 * buckets.size());
  VectorSink sink{out};
  CanonicalWriter<VectorSink> w(sink);
  w.top(s, parts, buckets);
  return out;
}

std::string state_sha256_from_parts(const ProblemSettings& s, const StateHashParts& parts,
                                    const std::vector<BucketDigest>& buckets) {
  Sha256Sink sink;
  CanonicalWriter<Sha256Sink> w(sink);
  w.top(s, parts, buckets);
  return sink.hex();
}

std::vector<std::uint8_t> canonical_bytes(const ProblemSettings& s, const TokenSet& tokens,
                                          const std::vector<int>& order,
                                          const std::vector<double>& alpha, double b) {
  SVATTN_ASSERT(order.size() == alpha.size(), "order and alpha must align");
  StateHashParts parts;
  std::vector<BucketDigest> buckets;
  split_rows(
      order.size(), static_cast<int>(tokens.keys.cols()), static_cast<int>(tokens.values.cols()),
      [&](std::size_t t) {
        const int r = order[t];
        return CanonicalRow{tokens.ids[r], tokens.keys.row(r).data(), tokens.values.row(r).data()};
      },
      alpha, b, parts, buckets);
  return state_hash_bytes(s, parts, buckets);
}

std::string canonical_sha256(const ProblemSettings& s, const TokenSet& tokens,
                             const std::vector<int>& order, const std::vector<double>& alpha,
                             double b) {
  SVATTN_ASSERT(order.size() == alpha.size(), "order and alpha must align");
  return canonical_sha256_rows(
      s, order.size(), static_cast<int>(tokens.keys.cols()), static_cast<int>(tokens.values.cols()),
      [&](std::size_t t) {
        const int r = order[t];
        return CanonicalRow{tokens.ids[r], tokens.keys.row(r).data(), tokens.values.row(r).data()};
      },
      alpha, b);
}

std::string canonical_sha256_rows(const ProblemSettings& s, std::size_t n, int d, int dv,
                                  const std::function<CanonicalRow(std::size_t)>& row,
                                  const std::vector<double>& alpha, double b) {
  StateHashParts parts;
  std::vector<BucketDigest> buckets;
  split_rows(n, d, dv, row, alpha, b, parts, buckets);
  return state_sha256_from_parts(s, parts, buckets);
}

std::string canonical_sha256_v1(const ProblemSettings& s, std::size_t n, int d, int dv,
                                const std::function<CanonicalRow(std::size_t)>& row,
                                const std::vector<double>& alpha, double b) {
  SVATTN_ASSERT(n == alpha.size(), "rows and alpha must align");
  Sha256Sink sink;
  CanonicalWriter<Sha256Sink> w(sink);
  w.state_v1(s, n, static_cast<std::size_t>(d), static_cast<std::size_t>(dv), row, alpha, b);
  return sink.hex();
}

std::string sha256_hex(const std::uint8_t* data, std::size_t n) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data, n, md, &len, EVP_sha256(), nullptr) != 1)
    throw Error("sha256: OpenSSL EVP_Digest failed");
  return Sha256Sink::to_hex(md, len);
}

}  // namespace svattn
