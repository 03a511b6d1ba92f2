// The persisted screening bounds (docs/store.md "Persisted screening"): one head row per memory
// (the state it belongs to, how many tokens, the epoch, a checksum, the support digest) and, from
// schema 5, each record's bounds in its own records.bounds blob (sealed under the record's data key
// in an encrypted store). An operation that moves no coefficient and not b rewrites only the
// records it touched and the head; one that does starts a new epoch and rewrites every record.
// Schema 2-4 kept every bound in the head row; that layout is still read (read-only opens, the
// upgrade).
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <map>
#include <set>

#include "sql_dialect.h"
#include "store_impl.h"
#include "svattn/hash.h"

namespace svattn {

using namespace store_detail;

namespace {

constexpr std::size_t kEpochBytes = 8;
constexpr std::size_t kDigestBytes = 32;

std::vector<std::uint8_t> head_bytes(const char* label, std::int64_t memory_id,
                                     const std::string& state_sha256, std::int64_t tokens,
                                     const std::int64_t* epoch) {
  std::string head = std::string(label) + "\n" + std::to_string(memory_id) + "\n" + state_sha256 +
                     "\n" + std::to_string(tokens) + "\n";
  if (epoch != nullptr) head += std::to_string(*epoch) + "\n";
  return {head.begin(), head.end()};
}

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

// The records of ascending `ids` with the range [first, first + count) of each.
struct RecordRange {
  std::int64_t record;
  std::size_t first, count;
};
std::vector<RecordRange> record_ranges(const std::vector<TokenId>& ids) {
  std::vector<RecordRange> out;
  for (std::size_t t = 0; t < ids.size(); ++t) {
    const std::int64_t r = record_of(ids[t]);
    if (out.empty() || out.back().record != r) out.push_back({r, t, 0});
    ++out.back().count;
  }
  return out;
}

}  // namespace

std::string store_detail::screening_checksum(std::int64_t memory_id,
                                             const std::string& state_sha256, const double* bounds,
                                             std::size_t n) {
  std::vector<std::uint8_t> bytes = head_bytes("svattn-screening-v1", memory_id, state_sha256,
                                               static_cast<std::int64_t>(n), nullptr);
  const auto* p = reinterpret_cast<const std::uint8_t*>(bounds);
  bytes.insert(bytes.end(), p, p + n * sizeof(double));
  return sha256_hex(bytes);
}

std::string store_detail::screening_head_checksum(std::int64_t memory_id,
                                                  const std::string& state_sha256,
                                                  std::int64_t tokens, std::int64_t epoch) {
  return sha256_hex(head_bytes("svattn-screening-v2", memory_id, state_sha256, tokens, &epoch));
}

std::vector<std::uint8_t> store_detail::encode_record_bounds(std::int64_t memory_id,
                                                             std::int64_t record,
                                                             std::int64_t epoch, const double* b,
                                                             std::size_t k) {
  std::vector<std::uint8_t> out(kEpochBytes + k * sizeof(double) + kDigestBytes);
  std::memcpy(out.data(), &epoch, kEpochBytes);  // little-endian host (x86-64; docs/store.md)
  if (k > 0) std::memcpy(out.data() + kEpochBytes, b, k * sizeof(double));
  const auto dg = record_digest(memory_id, record, epoch, b, k);
  std::memcpy(out.data() + kEpochBytes + k * sizeof(double), dg.data(), kDigestBytes);
  return out;
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

// ----------------------------------------------------------------------------------- the head

ScreeningHead Store::Impl::read_screening_head(std::int64_t memory_id) {
  ScreeningHead h;
  Statement q(db.handle(),
              "SELECT state_sha256, tokens, checksum, epoch FROM screening WHERE memory_id = ?1");
  q.bind(1, memory_id);
  if (!q.step()) return h;
  h.present = true;
  h.state_sha256 = q.text(0);
  h.tokens = q.int64(1);
  h.checksum = q.text(2);
  h.epoch = q.int64(3);
  return h;
}

bool Store::Impl::head_intact(const MemoryRow& row, const ScreeningHead& h) const {
  return h.present && h.state_sha256 == row.state_sha256 &&
         h.checksum == screening_head_checksum(row.id, h.state_sha256, h.tokens, h.epoch);
}

void Store::Impl::write_screening_head(std::int64_t memory_id, const std::string& state_sha256,
                                       std::int64_t tokens, std::int64_t epoch,
                                       const std::string& support_sha256) {
  Statement put(db.handle(),
                "INSERT INTO screening(memory_id, state_sha256, tokens, bounds, checksum, "
                "support_sha256, epoch) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(memory_id) "
                "DO UPDATE SET state_sha256 = excluded.state_sha256, tokens = excluded.tokens, "
                "bounds = excluded.bounds, checksum = excluded.checksum, support_sha256 = "
                "excluded.support_sha256, epoch = excluded.epoch");
  put.bind(1, memory_id)
      .bind(2, state_sha256)
      .bind(3, tokens)
      .bind_blob(4, nullptr, 0)
      .bind(5, screening_head_checksum(memory_id, state_sha256, tokens, epoch))
      .bind(6, support_sha256)
      .bind(7, epoch)
      .run();
}

std::int64_t Store::Impl::update_screening_head(const MemoryRow& row,
                                                const std::string& state_sha256,
                                                std::int64_t tokens_before,
                                                std::int64_t tokens_after) {
  const ScreeningHead h = read_screening_head(row.id);
  const bool keep = head_intact(row, h) && h.tokens > 0 && h.tokens == tokens_before;
  const std::int64_t epoch = h.present ? h.epoch + (keep ? 0 : 1) : 1;
  const std::string support =
      support_digest(row.id, row.dim, row.value_dim, state_sha256, row.b, nullptr);
  write_screening_head(row.id, state_sha256, keep ? tokens_after : 0, epoch, support);
  return keep ? epoch : -1;
}

// ----------------------------------------------------------------------------- record blobs

// PostgreSQL only (the SQLite dialect has no arrays): the batch's records, 1-based offsets and
// lengths into one bytea of every blob back to back; one statement whatever the batch's size.
Store::Impl::BoundsWriter::BoundsWriter(Impl& impl, std::int64_t memory_id)
    : impl_(impl),
      memory_id_(memory_id),
      batched_(impl.db.postgres()),
      update_(impl.db.handle(),
              batched_ ? "UPDATE records SET bounds = substring(?2::bytea FROM u.off FOR u.len) "
                         "FROM unnest(?3::bigint[], ?4::int[], ?5::int[]) AS u(record, off, len) "
                         "WHERE records.memory_id = ?1 AND records.record = u.record"
                       : "UPDATE records SET bounds = ?3 WHERE memory_id = ?1 AND record = ?2") {}

Store::Impl::BoundsWriter::~BoundsWriter() noexcept(false) {
  if (std::uncaught_exceptions() == 0)
    SVATTN_ASSERT(records_.empty(), "BoundsWriter destroyed with blobs not flushed");
}

void Store::Impl::BoundsWriter::write(std::int64_t record, const std::string& key_id,
                                      std::int64_t epoch, const double* b, std::size_t k,
                                      const SecretKey* key) {
  const std::vector<std::uint8_t> plain = encode_record_bounds(memory_id_, record, epoch, b, k);
  if (!key_id.empty()) {
    KeyLookup looked;
    if (key == nullptr) {
      looked = impl_.key_store->get(key_id);
      if (looked.shredded()) return;  // its rows cannot be read; it never enters a memory
      key = &looked.key;
    }
    if (sealer_ == nullptr)
      sealer_ = std::make_unique<Sealer>(*key);
    else
      sealer_->rekey(*key);
    sealer_->seal_into({memory_id_, record, -1, RecordField::kBounds}, plain.data(), plain.size(),
                       sealed_);
  }
  put(record, key_id.empty() ? plain : sealed_);
}

void Store::Impl::BoundsWriter::put(std::int64_t record, const std::vector<std::uint8_t>& blob) {
  if (!batched_) {
    update_.bind(1, memory_id_).bind(2, record).bind_blob(3, blob.data(), blob.size()).run();
    update_.reset();
    return;
  }
  records_.push_back(record);
  offsets_.push_back(static_cast<std::int64_t>(blobs_.size()) + 1);
  lengths_.push_back(static_cast<std::int64_t>(blob.size()));
  blobs_.insert(blobs_.end(), blob.begin(), blob.end());
  if (records_.size() == kBatch) flush();
}

void Store::Impl::BoundsWriter::flush() {
  if (records_.empty()) return;
  update_.bind(1, memory_id_).bind_blob(2, blobs_.data(), blobs_.size());
  update_.bind(3, pg_array(records_)).bind(4, pg_array(offsets_)).bind(5, pg_array(lengths_));
  update_.run();
  update_.reset();
  SVATTN_ASSERT(impl_.db.changes() == static_cast<std::int64_t>(records_.size()),
                "the batched bounds UPDATE matched one row per record");
  records_.clear();
  offsets_.clear();
  lengths_.clear();
  blobs_.clear();
}

void Store::Impl::write_record_bounds(std::int64_t memory_id, std::int64_t record,
                                      const std::string& key_id, std::int64_t epoch,
                                      const double* b, std::size_t k, const SecretKey* key) {
  BoundsWriter w(*this, memory_id);
  w.write(record, key_id, epoch, b, k, key);
  w.flush();
}

void Store::Impl::write_screening(const MemoryRow& row, const Memory& mem, bool moved,
                                  const std::vector<std::int64_t>& touched, bool defer) {
  const State& st = mem.state();
  const std::string support = memory_support_digest(row.id, mem, st);
  const auto n = static_cast<std::int64_t>(st.ids.size());
  const ScreeningHead h = read_screening_head(row.id);
  // Memory::gradient_lower_bounds() is empty exactly then; it is O(n), so it is only called when a
  // blob is written (a forget that moved nothing writes none).
  const bool optimal = n > 0 && st.status == Status::kOptimal && !st.warmup;
  const bool same_epoch = !moved && optimal && head_intact(row, h) && h.tokens > 0;
  const bool has_bounds = optimal && (same_epoch || !defer);
  const std::int64_t epoch = h.present ? h.epoch + (same_epoch ? 0 : 1) : 1;
  write_screening_head(row.id, st.state_sha256, has_bounds ? n : 0, epoch, support);
  if (!has_bounds) return;  // stale record blobs fail the epoch check
  std::vector<double> bounds;
  Statement q(db.handle(),
              same_epoch ? "SELECT record, key_id FROM records WHERE memory_id = ?1 AND record = "
                           "?2 AND suspended = 0"
                         : "SELECT record, key_id FROM records WHERE memory_id = ?1 AND "
                           "suspended = 0 ORDER BY record");
  // A full rewrite reads every record's key in one scan (a shredded key is not listed: its
  // record is looked up alone, and skipped).
  std::unordered_map<std::string, SecretKey> keys;
  BoundsWriter writer(*this, row.id);
  auto write_range = [&](std::int64_t record, const std::string& key_id) {
    const auto lo = std::lower_bound(st.ids.begin(), st.ids.end(), record_lo(record));
    const auto hi = std::upper_bound(lo, st.ids.end(), record_hi(record));
    const auto first = static_cast<std::size_t>(lo - st.ids.begin());
    if (bounds.empty()) bounds = mem.gradient_lower_bounds();
    SVATTN_ASSERT(bounds.size() == st.ids.size(), "one screening bound per token");
    const auto key = key_id.empty() ? keys.end() : keys.find(key_id);
    writer.write(record, key_id, epoch, bounds.data() + first, static_cast<std::size_t>(hi - lo),
                 key == keys.end() ? nullptr : &key->second);
  };
  if (same_epoch) {
    for (std::int64_t r : std::set<std::int64_t>(touched.begin(), touched.end())) {  // once each
      q.bind(1, row.id).bind(2, r);
      if (q.step()) write_range(r, q.is_null(1) ? std::string() : q.text(1));
      q.reset();
    }
    writer.flush();
    return;
  }
  q.bind(1, row.id);
  const KeyStore::ReadScope keys_read(key_store.get());
  if (key_store != nullptr)
    for (KeyLookup& k : key_store->live_keys_of(row.id)) keys.emplace(k.key_id, std::move(k.key));
  std::vector<std::pair<std::int64_t, std::string>> recs;
  while (q.step()) recs.emplace_back(q.int64(0), q.is_null(1) ? std::string() : q.text(1));
  q.reset();
  for (const auto& [r, key_id] : recs) write_range(r, key_id);
  writer.flush();
}

// ---------------------------------------------------------------------------------- reading

std::vector<double> Store::Impl::read_screening(const MemoryRow& row,
                                                const std::vector<TokenId>& ids,
                                                std::string* problem, PayloadReader* reader) {
  problem->clear();
  if (schema_version < 2) return {};
  if (schema_version < kFirstSchemaWithRecordBounds)
    return read_screening_v1(row, ids.size(), problem);
  const ScreeningHead h = read_screening_head(row.id);
  if (!h.present) return {};
  if (h.state_sha256 != row.state_sha256) {
    *problem = "they belong to state " + h.state_sha256.substr(0, 16) + "…, not the stored state";
    return {};
  }
  if (h.checksum != screening_head_checksum(row.id, h.state_sha256, h.tokens, h.epoch)) {
    *problem = "checksum mismatch (the screening row)";
    return {};
  }
  if (h.tokens == 0) return {};  // the memory had no bounds (empty or in warm-up)
  if (static_cast<std::size_t>(h.tokens) != ids.size()) {
    *problem = "they hold " + std::to_string(h.tokens) + " bounds for " +
               std::to_string(ids.size()) + " active tokens";
    return {};
  }
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
  Statement q(db.handle(),
              "SELECT state_sha256, tokens, bounds, checksum FROM screening WHERE memory_id = ?1");
  q.bind(1, row.id);
  if (!q.step()) return {};
  const std::string sha = q.text(0);
  const std::int64_t count = q.int64(1);
  if (count == 0 && q.bytes(2) == 0 && sha == row.state_sha256 &&
      screening_checksum(row.id, sha, nullptr, 0) == q.text(3)) {
    return {};  // the memory had no bounds (empty or in warm-up)
  }
  const std::size_t bytes = static_cast<std::size_t>(q.bytes(2));
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
  if (n > 0) std::memcpy(bounds.data(), q.blob_data(2), bytes);
  if (screening_checksum(row.id, sha, bounds.data(), n) != q.text(3)) {
    *problem = "checksum mismatch";
    return {};
  }
  return bounds;
}

// Upgrade to schema 5 (inside its transaction): the head row's bounds, when intact, split into
// the records' blobs (epoch 1); otherwise the memory keeps none and the next restore re-derives.
void Store::Impl::split_screening(const MemoryRow& row) {
  std::vector<TokenId> ids;
  {
    Statement q(db.handle(),
                "SELECT t.token_id FROM tokens t JOIN records r ON r.memory_id = t.memory_id AND "
                "r.record = t.record WHERE t.memory_id = ?1 AND r.suspended = 0 ORDER BY "
                "t.token_id");
    q.bind(1, row.id);
    while (q.step()) ids.push_back(q.int64(0));
  }
  std::string problem;
  const std::vector<double> bounds = read_screening_v1(row, ids.size(), &problem);
  Statement s(db.handle(), "SELECT support_sha256 FROM screening WHERE memory_id = ?1");
  s.bind(1, row.id);
  if (!s.step()) return;  // no row: the next restore re-derives, the next operation writes one
  const std::string support = s.text(0);
  s.reset();
  const std::int64_t epoch = 1;
  write_screening_head(row.id, row.state_sha256,
                       bounds.empty() ? 0 : static_cast<std::int64_t>(ids.size()), epoch, support);
  if (bounds.empty()) return;
  std::map<std::int64_t, std::string> keys;
  {
    Statement q(db.handle(), "SELECT record, key_id FROM records WHERE memory_id = ?1");
    q.bind(1, row.id);
    while (q.step()) keys[q.int64(0)] = q.is_null(1) ? std::string() : q.text(1);
  }
  BoundsWriter writer(*this, row.id);
  for (const RecordRange& rg : record_ranges(ids))
    writer.write(rg.record, keys[rg.record], epoch, bounds.data() + rg.first, rg.count);
  writer.flush();
}

}  // namespace svattn
