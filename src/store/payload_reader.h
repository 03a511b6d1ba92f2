// The payload codec at the row-I/O boundary (payload_reader.cpp, docs/store.md "Encryption at
// rest", "Token messages"): opening the key and value payloads of token rows, plaintext or sealed
// under their record's data key, and the bucket-digest blobs of records (records.buckets).
// Private to the store.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "crypto.h"
#include "db/database.h"
#include "key_store.h"
#include "pipelined_open.h"
#include "svattn/hash.h"
#include "svattn/store.h"

namespace svattn::store_detail {

/// A record's data key was destroyed (crypto-shredded) but its ciphertext is still in the file.
class RecordShredded : public FormatError {
 public:
  RecordShredded(const std::string& msg, std::int64_t record) : FormatError(msg), record_(record) {}
  std::int64_t record() const { return record_; }

 private:
  std::int64_t record_;
};

/// Where a token row's payload is in a result row: its key and value blob columns, and how many
/// doubles a key and a value hold.
struct PayloadColumns {
  int key = 1;
  int value = 2;
  int dim = 0;
  int value_dim = 0;
};

/// Opens the payloads (key and value blobs) of token rows at the row-I/O boundary (docs/store.md
/// "Encryption at rest"): a row whose record has no key id is plaintext (dim doubles in each
/// column); otherwise it is sealed under the record's data key, looked up in the key store once
/// per record and kept only as long as this reader. A sealed row holds one token message (seal
/// version 2, written since schema 7) or two messages, one per column (seal version 1, written up
/// to schema 6); the key column's first byte says which (docs/store.md "Token messages").
class PayloadReader {
 public:
  PayloadReader(KeyStore* keys, const std::string& store_path, std::int64_t memory_id)
      : keys_(keys), path_(store_path), memory_id_(memory_id) {}
  /// Decodes the key and value of token `id` (columns `c` of `q`) into `key` (c.dim doubles) and
  /// `value` (c.value_dim); the record's key id is column `key_id_col` (NULL: plaintext).
  /// FormatError naming the token on a wrong size, RecordTampered on failed authentication,
  /// RecordShredded when the record's key was destroyed.
  void read_token(const Statement& q, const PayloadColumns& c, int key_id_col, double* key,
                  double* value, TokenId id);
  /// As read_token with the record's opener given (from opener(), once per record; nullptr:
  /// plaintext), but sealed payloads are queued on `pipe` instead of opened now (`key` and
  /// `value` must stay valid until pipe.finish()); plaintext ones are copied now.
  void read_token_queued(PipelinedOpen& pipe, const Statement& q, const PayloadColumns& c,
                         Opener* op, double* key, double* value, TokenId id);
  /// The opener of a record's data key (looked up once; RecordShredded when destroyed).
  Opener& opener(const std::string& key_id, std::int64_t record);
  /// Reads every live key of the memory in one scan of the key store (a pass over all records,
  /// such as a restore); opener() then looks up only keys the scan did not list (shredded ones).
  /// Once per reader; later calls do nothing.
  void prefetch_keys();

 private:
  std::unique_ptr<Opener> open_key(const std::string& key_id, std::int64_t record);
  enum class Layout { kPlain, kTwoMessages, kTokenMessage };
  /// A token row's payload: its layout, the key and value columns' bytes, and the plaintext sizes.
  struct TokenRow {
    Layout layout = Layout::kPlain;
    const std::uint8_t* key = nullptr;
    const std::uint8_t* value = nullptr;
    std::size_t kn = 0;
    std::size_t vn = 0;
  };
  /// The row's payload after its size checks (FormatError naming the token).
  TokenRow checked_row(const Statement& q, const PayloadColumns& c, bool sealed, TokenId id) const;
  [[noreturn]] void throw_foreign_key(const std::string& key_id, std::int64_t record,
                                      const KeyOwner& owner) const;
  struct PrefetchedKey {
    std::int64_t record = 0;
    SecretKey key;
  };
  KeyStore* keys_;
  const std::string& path_;
  std::int64_t memory_id_;
  std::unordered_map<std::string, std::unique_ptr<Opener>> openers_;
  std::unordered_map<std::string, PrefetchedKey> prefetched_;
  bool prefetch_done_ = false;
  // The last opener returned: consecutive tokens belong to one record.
  std::string last_key_id_;
  Opener* last_ = nullptr;
};

/// A record's persisted bucket digests (records.buckets, docs/store.md "Forget without a
/// restore"): 44 bytes per bucket, bucket (i64) | count (u32) | SHA-256 (32), little-endian,
/// ascending bucket; sealed under the record's data key in an encrypted store.
constexpr std::size_t kBucketEntryBytes = 44;
std::vector<std::uint8_t> encode_buckets(const std::vector<BucketDigest>& buckets);
/// Appends the entries of `n` bytes at `p` to `out`; false when n is not a whole number of entries.
bool decode_buckets(const std::uint8_t* p, std::size_t n, std::vector<BucketDigest>& out);
/// The bucket digests (docs/math.md §6) of one record's tokens, given in ascending id.
std::vector<BucketDigest> record_buckets(const TokenSet& record_tokens);

}  // namespace svattn::store_detail
