// The persisted screening layouts of schema 2-5 (docs/store.md "Persisted screening", "Schema
// versions and upgrade"): schema 2-4 kept every bound in the memory's screening row, schema 5 each
// record's bounds in records.bounds (sealed under the record's data key). A read-only open reads
// them as they are; the upgrade to schema 6 moves intact bounds into the bounds groups' blobs.
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "store_impl.h"
#include "svattn/hash.h"

namespace svattn {

using namespace store_detail;

namespace {

constexpr std::size_t kEpochBytes = 8;
constexpr std::size_t kDigestBytes = 32;

// SHA-256("svattn-record-bounds-v1\n" MEMORY_ID "\n" RECORD "\n" EPOCH "\n" K "\n" BOUNDS).
std::array<std::uint8_t, kDigestBytes> record_digest(std::int64_t memory_id, std::int64_t record,
                                                     std::int64_t epoch, const double* b,
                                                     std::size_t k) {
  std::string head = "svattn-record-bounds-v1\n" + std::to_string(memory_id) + "\n" +
                     std::to_string(record) + "\n" + std::to_string(epoch) + "\n" +
                     std::to_string(k) + "\n";
  std::vector<std::uint8_t> bytes(head.begin(), head.end());
  const auto* p = reinterpret_cast<const std::uint8_t*>(b);
  bytes.insert(bytes.end(), p, p + k * sizeof(double));
  std::array<std::uint8_t, kDigestBytes> out{};
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), out.data(), &len, EVP_sha256(), nullptr) != 1 ||
      len != kDigestBytes)
    throw StoreError("SHA-256 failed (OpenSSL EVP_Digest)");
  return out;
}

}  // namespace

std::string store_detail::screening_checksum(std::int64_t memory_id,
                                             const std::string& state_sha256, const double* bounds,
                                             std::size_t n) {
  const std::string head = "svattn-screening-v1\n" + std::to_string(memory_id) + "\n" +
                           state_sha256 + "\n" + std::to_string(n) + "\n";
  std::vector<std::uint8_t> bytes(head.begin(), head.end());
  const auto* p = reinterpret_cast<const std::uint8_t*>(bounds);
  bytes.insert(bytes.end(), p, p + n * sizeof(double));
  return sha256_hex(bytes);
}

std::string store_detail::decode_record_bounds(std::int64_t memory_id, std::int64_t record,
                                               std::int64_t epoch, const std::uint8_t* p,
                                               std::size_t n, std::size_t k, double* out) {
  const std::string who = "record " + std::to_string(record) + ": ";
  if (n != kEpochBytes + k * sizeof(double) + kDigestBytes) {
    return who + "its bounds blob has " + std::to_string(n) + " bytes, not the " +
           std::to_string(kEpochBytes + k * sizeof(double) + kDigestBytes) + " of " +
           std::to_string(k) + " tokens";
  }
  std::int64_t e = 0;
  std::memcpy(&e, p, kEpochBytes);
  if (e != epoch) {
    return who + "its bounds are of epoch " + std::to_string(e) + ", not the memory's " +
           std::to_string(epoch);
  }
  if (k > 0) std::memcpy(out, p + kEpochBytes, k * sizeof(double));
  const auto dg = record_digest(memory_id, record, epoch, out, k);
  if (std::memcmp(dg.data(), p + kEpochBytes + k * sizeof(double), kDigestBytes) != 0)
    return "checksum mismatch (" + who.substr(0, who.size() - 2) + ")";
  return {};
}

// Schema 5: each record's blob in records.bounds, of the head's epoch.
std::vector<double> Store::Impl::read_screening_v5(const MemoryRow& row,
                                                   const std::vector<TokenId>& ids,
                                                   std::string* problem, PayloadReader* reader) {
  ScreeningHead h;
  if (!screening_bounds.usable_head(row.id, row.state_sha256, ids.size(), &h, problem)) return {};
  const std::vector<RecordRange> ranges = record_ranges(ids);
  std::vector<double> bounds(ids.size());
  std::size_t at = 0;         // the next range; records without tokens in the memory are skipped
  std::int64_t missing = -1;  // the first record with tokens but no records row
  const auto wanted = [&](std::int64_t r) {
    for (; at < ranges.size() && ranges[at].record < r; ++at)
      if (missing < 0) missing = ranges[at].record;
    return at < ranges.size() && ranges[at].record == r;
  };
  *problem = read_record_blobs(
      row, RecordField::kBounds, wanted,
      [&](std::int64_t r, const std::uint8_t* p, std::size_t n, std::string& why) {
        const RecordRange& rg = ranges[at++];
        why = decode_record_bounds(row.id, r, h.epoch, p, n, rg.count, &bounds[rg.first]);
        return why.empty();
      },
      reader);
  if (!problem->empty()) return {};
  if (missing < 0 && at < ranges.size()) missing = ranges[at].record;
  if (missing >= 0) {
    *problem = "record " + std::to_string(missing) + " has no bounds";
    return {};
  }
  return bounds;
}

// Schema 2-4: every bound in the head row, bound to the state hash and the token count.
std::vector<double> Store::Impl::read_screening_v1(const MemoryRow& row, std::size_t n,
                                                   std::string* problem) {
  const ScreeningBounds::LegacyHead head = screening_bounds.read_legacy_head(row.id);
  if (!head.present) return {};
  const std::string& sha = head.state_sha256;
  const std::int64_t count = head.tokens;
  if (count == 0 && head.bounds.empty() && sha == row.state_sha256 &&
      screening_checksum(row.id, sha, nullptr, 0) == head.checksum) {
    return {};  // the memory had no bounds (empty or in warm-up)
  }
  const std::size_t bytes = head.bounds.size();
  if (sha != row.state_sha256) {
    *problem = "they belong to state " + sha.substr(0, 16) + "…, not the stored state";
    return {};
  }
  if (count < 0 || static_cast<std::size_t>(count) != n || bytes != n * sizeof(double)) {
    *problem = "they hold " + std::to_string(bytes / sizeof(double)) + " bounds for " +
               std::to_string(n) + " active tokens";
    return {};
  }
  std::vector<double> bounds(n);
  if (n > 0) std::memcpy(bounds.data(), head.bounds.data(), bytes);
  if (screening_checksum(row.id, sha, bounds.data(), n) != head.checksum) {
    *problem = "checksum mismatch";
    return {};
  }
  return bounds;
}

// Upgrade to schema 6 (inside its transaction; the memory's records already placed into groups):
// intact bounds of the old layout into the groups' blobs, the epoch kept (schema 5) or 1 (2-4,
// whose head row had none); otherwise the memory keeps none and the next restore re-derives.
void Store::Impl::regroup_screening(const MemoryRow& row, std::int64_t from) {
  // The active token ids including shredded records' (the ids of the stored state).
  const std::vector<TokenId> ids = record_rows.active_token_ids(row.id);
  std::string problem;
  const ScreeningHead h = screening_bounds.read_head(row.id);
  if (!h.present) return;  // no row: the next restore re-derives, the next operation writes one
  const std::vector<double> bounds = from < kFirstSchemaWithRecordBounds
                                         ? read_screening_v1(row, ids.size(), &problem)
                                         : read_screening_v5(row, ids, &problem, nullptr);
  const std::string support = screening_bounds.read_legacy_head(row.id).support_sha256;
  const std::int64_t epoch =
      from < kFirstSchemaWithRecordBounds ? 1 : h.epoch + (bounds.empty() ? 1 : 0);
  screening_bounds.write_head(row.id, row.state_sha256,
                              bounds.empty() ? 0 : static_cast<std::int64_t>(ids.size()), epoch,
                              support);
  if (bounds.empty()) return;
  screening_bounds.write_groups(
      row.id, ids, epoch, all_group_members(row.id),
      [&](std::size_t first, std::size_t count, std::vector<double>& out) {
        out.insert(out.end(), bounds.begin() + static_cast<std::ptrdiff_t>(first),
                   bounds.begin() + static_cast<std::ptrdiff_t>(first + count));
      });
}

}  // namespace svattn
