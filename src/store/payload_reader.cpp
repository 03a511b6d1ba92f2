// The payload codec (payload_reader.h): token payloads opened at the row-I/O boundary, plaintext
// or sealed under their record's data key (one token message, or two messages before schema 7),
// and the records' bucket-digest blobs.
#include "payload_reader.h"

#include <cstring>

namespace svattn::store_detail {

void PayloadReader::prefetch_keys() {
  if (keys_ == nullptr || prefetch_done_) return;
  prefetch_done_ = true;
  for (KeyLookup& k : keys_->live_keys_of(memory_id_))
    prefetched_[k.key_id] = {k.owner.record_id, std::move(k.key)};
}

Opener& PayloadReader::opener(const std::string& key_id, std::int64_t record) {
  if (last_ != nullptr && key_id == last_key_id_) return *last_;
  auto it = openers_.find(key_id);
  if (it == openers_.end()) it = openers_.emplace(key_id, open_key(key_id, record)).first;
  last_key_id_ = key_id;
  last_ = it->second.get();
  return *last_;
}

std::unique_ptr<Opener> PayloadReader::open_key(const std::string& key_id, std::int64_t record) {
  const auto pre = prefetched_.find(key_id);
  if (pre != prefetched_.end()) {
    if (pre->second.record != record)
      throw_foreign_key(key_id, record, {memory_id_, pre->second.record});
    auto op = std::make_unique<Opener>(pre->second.key);
    prefetched_.erase(pre);  // the key now lives only in the opener's schedule
    return op;
  }
  if (keys_ == nullptr) {
    throw FormatError("store '" + path_ + "': record " + std::to_string(record) +
                      " is encrypted but the store has no key store (meta says plaintext)");
  }
  KeyLookup k = keys_->get(key_id);
  if (k.shredded()) {
    throw RecordShredded("store '" + path_ + "': record " + std::to_string(record) + " of memory " +
                             std::to_string(memory_id_) + " is shredded: its data key " + key_id +
                             " was destroyed at " + k.destroyed_utc,
                         record);
  }
  if (k.owner.memory_id != memory_id_ || k.owner.record_id != record)
    throw_foreign_key(key_id, record, k.owner);
  return std::make_unique<Opener>(k.key);
}

void PayloadReader::throw_foreign_key(const std::string& key_id, std::int64_t record,
                                      const KeyOwner& owner) const {
  throw FormatError("store '" + path_ + "': record " + std::to_string(record) + " names data key " +
                    key_id + ", which belongs to memory " + std::to_string(owner.memory_id) +
                    " record " + std::to_string(owner.record_id));
}

PayloadReader::TokenRow PayloadReader::checked_row(const Statement& q, const PayloadColumns& c,
                                                   bool sealed, TokenId id) const {
  TokenRow t;
  t.key = static_cast<const std::uint8_t*>(q.blob_data(c.key));
  t.value = static_cast<const std::uint8_t*>(q.blob_data(c.value));
  t.kn = static_cast<std::size_t>(c.dim) * sizeof(double);
  t.vn = static_cast<std::size_t>(c.value_dim) * sizeof(double);
  std::size_t key_extra = 0;
  std::size_t value_extra = 0;
  if (sealed) {
    const bool token_message = q.bytes(c.key) > 0 && t.key[0] == kTokenSealVersion;
    t.layout = token_message ? Layout::kTokenMessage : Layout::kTwoMessages;
    key_extra = token_message ? kTokenKeyOverhead : kSealOverhead;
    value_extra = token_message ? kTokenValueOverhead : kSealOverhead;
  }
  const char* what = t.layout == Layout::kPlain          ? ""
                     : t.layout == Layout::kTokenMessage ? " (sealed token message)"
                                                         : " (sealed)";
  const auto check = [&](int col, std::size_t want, const char* field) {
    const auto have = static_cast<std::size_t>(q.bytes(col));
    if (have != want) {
      throw FormatError("store '" + path_ + "': token " + std::to_string(id) + " has a " + field +
                        " blob of " + std::to_string(have) + " bytes, expected " +
                        std::to_string(want) + what);
    }
  };
  check(c.key, t.kn + key_extra, "key");
  check(c.value, t.vn + value_extra, "value");
  return t;
}

void PayloadReader::read_token(const Statement& q, const PayloadColumns& c, int key_id_col,
                               double* key, double* value, TokenId id) {
  Opener* op = nullptr;
  if (!q.is_null(key_id_col)) op = &opener(q.text(key_id_col), record_of(id));
  const TokenRow t = checked_row(q, c, op != nullptr, id);
  const RecordAad at{memory_id_, record_of(id), position_of(id), RecordField::kToken};
  switch (t.layout) {
    case Layout::kPlain:
      copy_token_parts(t.key, t.kn, t.value, t.vn, key, value);
      return;
    case Layout::kTwoMessages:
      op->open_into({at.memory_id, at.record_id, at.position, RecordField::kKey}, t.key,
                    t.kn + kSealOverhead, key, t.kn);
      op->open_into({at.memory_id, at.record_id, at.position, RecordField::kValue}, t.value,
                    t.vn + kSealOverhead, value, t.vn);
      return;
    case Layout::kTokenMessage:  // straight from the row into the destinations
      op->open_token(at, t.key, t.value + t.vn,
                     {t.key + kTokenKeyOverhead, reinterpret_cast<std::uint8_t*>(key), t.kn},
                     {t.value, reinterpret_cast<std::uint8_t*>(value), t.vn});
      return;
  }
}

void PayloadReader::read_token_queued(PipelinedOpen& pipe, const Statement& q,
                                      const PayloadColumns& c, Opener* op, double* key,
                                      double* value, TokenId id) {
  const TokenRow t = checked_row(q, c, op != nullptr, id);
  const RecordAad at{memory_id_, record_of(id), position_of(id), RecordField::kToken};
  switch (t.layout) {
    case Layout::kPlain:
      copy_token_parts(t.key, t.kn, t.value, t.vn, key, value);
      return;
    case Layout::kTwoMessages:
      pipe.add(*op, {at.memory_id, at.record_id, at.position, RecordField::kKey}, t.key,
               t.kn + kSealOverhead, key, t.kn);
      pipe.add(*op, {at.memory_id, at.record_id, at.position, RecordField::kValue}, t.value,
               t.vn + kSealOverhead, value, t.vn);
      return;
    case Layout::kTokenMessage:
      pipe.add_token(*op, at, t.key, t.value, key, t.kn, value, t.vn);
      return;
  }
}

std::vector<std::uint8_t> encode_buckets(const std::vector<BucketDigest>& b) {
  std::vector<std::uint8_t> out(b.size() * kBucketEntryBytes);
  std::uint8_t* p = out.data();
  for (const BucketDigest& d : b) {  // little-endian host (x86-64; docs/store.md)
    std::memcpy(p, &d.bucket, 8);
    std::memcpy(p + 8, &d.count, 4);
    std::memcpy(p + 12, d.sha256.data(), 32);
    p += kBucketEntryBytes;
  }
  return out;
}

bool decode_buckets(const std::uint8_t* p, std::size_t n, std::vector<BucketDigest>& out) {
  if (n % kBucketEntryBytes != 0) return false;
  for (std::size_t k = 0; k < n / kBucketEntryBytes; ++k, p += kBucketEntryBytes) {
    BucketDigest d;
    std::memcpy(&d.bucket, p, 8);
    std::memcpy(&d.count, p + 8, 4);
    std::memcpy(d.sha256.data(), p + 12, 32);
    out.push_back(d);
  }
  return true;
}

std::vector<BucketDigest> record_buckets(const TokenSet& ts) {
  return bucket_digests(
      ts.ids.size(), static_cast<int>(ts.keys.cols()), static_cast<int>(ts.values.cols()),
      [&](std::size_t r) {
        const auto i = static_cast<Eigen::Index>(r);
        return CanonicalRow{ts.ids[r], ts.keys.row(i).data(), ts.values.row(i).data()};
      });
}

}  // namespace svattn::store_detail
