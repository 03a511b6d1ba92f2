// The screening-bounds codecs (bounds_codec.h; docs/store.md "Persisted screening", "Bounds
// groups"): the group blob's bytes and checksum, the head row's checksum, the records' token
// ranges.
#include "bounds_codec.h"

#include <openssl/evp.h>

#include <array>
#include <cstring>

#include "svattn/hash.h"
#include "svattn/store.h"
#include "svattn/store_errors.h"

namespace svattn {

using namespace store_detail;

namespace {

std::vector<std::uint8_t> head_bytes(std::int64_t memory_id, const std::string& state_sha256,
                                     std::int64_t tokens, std::int64_t epoch) {
  const std::string head = "svattn-screening-v2\n" + std::to_string(memory_id) + "\n" +
                           state_sha256 + "\n" + std::to_string(tokens) + "\n" +
                           std::to_string(epoch) + "\n";
  return {head.begin(), head.end()};
}

constexpr std::size_t kDigestBytes = 32;
constexpr std::size_t kHeadBytes = 16;   // epoch, entry count
constexpr std::size_t kEntryBytes = 16;  // record, count

// SHA-256("svattn-group-bounds-v1\n" MEMORY "\n" GROUP "\n" EPOCH "\n" M "\n" ENTRIES BOUNDS).
std::array<std::uint8_t, kDigestBytes> group_digest(std::int64_t memory_id, std::int64_t group,
                                                    std::int64_t epoch, std::size_t m,
                                                    const std::uint8_t* body, std::size_t n) {
  const std::string head = "svattn-group-bounds-v1\n" + std::to_string(memory_id) + "\n" +
                           std::to_string(group) + "\n" + std::to_string(epoch) + "\n" +
                           std::to_string(m) + "\n";
  std::array<std::uint8_t, kDigestBytes> out{};
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned int len = 0;
  const bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx, head.data(), head.size()) == 1 &&
                  EVP_DigestUpdate(ctx, body, n) == 1 &&
                  EVP_DigestFinal_ex(ctx, out.data(), &len) == 1 && len == kDigestBytes;
  EVP_MD_CTX_free(ctx);
  if (!ok) throw StoreError("SHA-256 failed (OpenSSL EVP_Digest)");
  return out;
}

void put_i64(std::uint8_t* p, std::int64_t v) { std::memcpy(p, &v, 8); }  // little-endian host
std::int64_t get_i64(const std::uint8_t* p) {
  std::int64_t v = 0;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

std::vector<std::uint8_t> store_detail::encode_group_bounds(std::int64_t memory_id,
                                                            std::int64_t group,
                                                            const GroupBounds& g) {
  const std::size_t m = g.entries.size();
  const std::size_t body = m * kEntryBytes + g.bounds.size() * sizeof(double);
  std::vector<std::uint8_t> out(kHeadBytes + body + kDigestBytes);
  put_i64(out.data(), g.epoch);
  put_i64(out.data() + 8, static_cast<std::int64_t>(m));
  std::uint8_t* p = out.data() + kHeadBytes;
  for (const GroupEntry& e : g.entries) {
    put_i64(p, e.record);
    put_i64(p + 8, e.count);
    p += kEntryBytes;
  }
  if (!g.bounds.empty()) std::memcpy(p, g.bounds.data(), g.bounds.size() * sizeof(double));
  const auto dg = group_digest(memory_id, group, g.epoch, m, out.data() + kHeadBytes, body);
  std::memcpy(out.data() + kHeadBytes + body, dg.data(), kDigestBytes);
  return out;
}

std::string store_detail::decode_group_bounds(std::int64_t memory_id, std::int64_t group,
                                              const std::uint8_t* p, std::size_t n,
                                              GroupBounds* out) {
  const std::string who = "bounds group " + std::to_string(group) + ": ";
  if (n < kHeadBytes + kDigestBytes) return who + "its blob is truncated";
  const std::int64_t m = get_i64(p + 8);
  const std::size_t room = n - kHeadBytes - kDigestBytes;
  if (m < 0 || static_cast<std::uint64_t>(m) > room / kEntryBytes)
    return who + "its blob lists " + std::to_string(m) + " records";
  GroupBounds g;
  g.epoch = get_i64(p);
  std::size_t total = 0;
  const std::uint8_t* e = p + kHeadBytes;
  for (std::int64_t k = 0; k < m; ++k, e += kEntryBytes) {
    const GroupEntry entry{get_i64(e), get_i64(e + 8)};
    if (entry.count < 1 || static_cast<std::uint64_t>(entry.count) > room / sizeof(double) ||
        (!g.entries.empty() && entry.record <= g.entries.back().record))
      return who + "its blob has a malformed entry (record " + std::to_string(entry.record) + ")";
    total += static_cast<std::size_t>(entry.count);
    g.entries.push_back(entry);
  }
  const std::size_t body = static_cast<std::size_t>(m) * kEntryBytes + total * sizeof(double);
  if (total > room / sizeof(double) || body != room) {
    return who + "its blob has " + std::to_string(n) + " bytes, not the " +
           std::to_string(kHeadBytes + body + kDigestBytes) + " of its " + std::to_string(m) +
           " records";
  }
  g.bounds.resize(total);
  if (total > 0) std::memcpy(g.bounds.data(), e, total * sizeof(double));
  const auto dg =
      group_digest(memory_id, group, g.epoch, static_cast<std::size_t>(m), p + kHeadBytes, body);
  if (std::memcmp(dg.data(), p + kHeadBytes + body, kDigestBytes) != 0)
    return "checksum mismatch (bounds group " + std::to_string(group) + ")";
  *out = std::move(g);
  return {};
}

std::vector<RecordRange> store_detail::record_ranges(const std::vector<TokenId>& ids) {
  std::vector<RecordRange> out;
  for (std::size_t t = 0; t < ids.size(); ++t) {
    const std::int64_t r = record_of(ids[t]);
    if (out.empty() || out.back().record != r) out.push_back({r, t, 0});
    ++out.back().count;
  }
  return out;
}

std::string store_detail::screening_head_checksum(std::int64_t memory_id,
                                                  const std::string& state_sha256,
                                                  std::int64_t tokens, std::int64_t epoch) {
  return sha256_hex(head_bytes(memory_id, state_sha256, tokens, epoch));
}

}  // namespace svattn
