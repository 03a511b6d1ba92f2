// The record rows (record_rows.cpp: the `records` table; token_rows.cpp: the `tokens` table;
// docs/store.md "Components"): every statement on those two tables outside the schema's DDL and
// its upgrades (migrate/). Payload bytes are sealed and opened by the payload codec
// (payload_reader.h); this component says which rows exist and moves them, handing a long scan
// to its caller as a cursor (a bound Statement whose columns the method names). Private to the
// store.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "crypto.h"
#include "db/database.h"
#include "store_rows.h"
#include "svattn/types.h"

namespace svattn::store_detail {

class ReadOnlyDb;

class RecordRows {
 public:
  explicit RecordRows(Database& db) : db_(db) {}
  RecordRows(const RecordRows&) = delete;
  RecordRows& operator=(const RecordRows&) = delete;

  // ------------------------------------------------------------------------------ records
  /// The optional columns of the open file: records.key_id (schema 3) and records.bounds_group
  /// (schema 6); a file without them answers no key and no group.
  struct Columns {
    bool key_id = true;
    bool bounds_group = true;
  };
  /// The record's row (exists false when it has none).
  RecordRow read(std::int64_t memory_id, std::int64_t record, const Columns& columns);
  /// How many records (active and suspended) the memory has.
  std::int64_t count(std::int64_t memory_id);
  /// New active rows for `records`, added at `added_utc`.
  void insert(std::int64_t memory_id, const std::vector<std::int64_t>& records,
              const std::string& added_utc);
  void set_suspended(std::int64_t memory_id, std::int64_t record, bool suspended);
  /// records.key_id of `records[i]` set to `key_ids[i]`.
  void set_keys(std::int64_t memory_id, const std::vector<std::int64_t>& records,
                const std::vector<std::string>& key_ids);
  /// records.bounds_group of `records[i]` set to `groups[i]`.
  void set_groups(std::int64_t memory_id, const std::vector<std::int64_t>& records,
                  const std::vector<std::int64_t>& groups);
  /// records.buckets of `record` (the bucket digests' blob, sealed or not).
  void set_buckets(std::int64_t memory_id, std::int64_t record,
                   const std::vector<std::uint8_t>& blob);
  /// The first record row that names a data key, as (key id, record); empty key id when none.
  std::pair<std::string, std::int64_t> first_keyed_record();
  /// Each record of the memory (ascending) with its suspension and token rows.
  struct Summary {
    std::int64_t record = 0;
    bool suspended = false;
    std::int64_t token_rows = 0;
  };
  std::vector<Summary> summaries(std::int64_t memory_id);
  /// Each record of the memory with its suspension flag (record -> suspended).
  std::map<std::int64_t, bool> suspension(std::int64_t memory_id);
  /// How many records and suspended records the memory has.
  std::pair<std::int64_t, std::int64_t> record_counts(std::int64_t memory_id);
  /// The key id each of the memory's records names (key id -> record), records without one left.
  std::vector<std::pair<std::string, std::int64_t>> keyed_records(std::int64_t memory_id);
  /// Deletes the record's row (its token rows are delete_tokens').
  void delete_row(std::int64_t memory_id, std::int64_t record);
  /// Whether the open file's records table has the key_id column (schema 3).
  bool key_id_column_exists();
  /// A record's suspension and data key (sealed false: key_id NULL, or no such column).
  struct RecordKey {
    std::int64_t record = 0;
    bool suspended = false;
    bool sealed = false;
    std::string key_id;
  };
  /// Every record of the memory with its suspension and data key, in no particular order.
  std::vector<RecordKey> record_keys(std::int64_t memory_id, const Columns& columns);
  /// A record without a data key with its memory's dimensions (store-wide, ascending).
  struct UnkeyedRecord {
    std::int64_t memory_id = 0;
    std::int64_t record = 0;
    int dim = 0;
    int value_dim = 0;
  };
  /// Every record of the store whose key_id is NULL, ascending (memory, record).
  std::vector<UnkeyedRecord> unkeyed_records();
  /// A record's bucket digests as stored (exists false: no row; has_buckets false: NULL).
  struct StoredBuckets {
    bool exists = false;
    bool has_buckets = false;
    bool sealed = false;  // key_id not NULL (false without the key_id column)
    std::string key_id;
    std::vector<std::uint8_t> blob;
  };
  /// records.buckets of the record with its key id.
  StoredBuckets buckets(std::int64_t memory_id, std::int64_t record, const Columns& columns);
  /// Cursor over the memory's active records, ascending: columns record, key_id and the blob of
  /// `field` (buckets; any other field names the bounds column).
  Statement active_record_blobs(std::int64_t memory_id, RecordField field);
  /// One record found by (memory, record) for the shredded lookup, with its memory's name.
  struct KeyedRecord {
    std::int64_t memory_id = 0;
    std::int64_t record = 0;
    std::string key_id;  // the rows with a NULL key_id are left out
    std::string memory;
    bool suspended = false;
    std::int64_t token_rows = 0;
  };
  /// The rows of `pairs` (memory, record) that name a key, ascending, with their token rows; one
  /// statement (one round trip) for all pairs.
  std::vector<KeyedRecord> lookup_keyed(
      const std::vector<std::pair<std::int64_t, std::int64_t>>& pairs);
  /// The key id a backup file's record names (empty: plaintext), false when it has no row.
  static bool backup_record_key(ReadOnlyDb& db, const std::string& memory, std::int64_t record,
                                std::string& key_id);
  /// Rows of `records` and of `tokens` whose memory_id names no memories row.
  std::pair<std::int64_t, std::int64_t> orphan_rows();
  /// Records without a bounds group or naming one that does not exist (store-wide).
  std::int64_t records_without_group();
  /// Bounds groups that no record names (store-wide).
  std::int64_t groups_without_record();

  // ------------------------------------------------------------------------ bounds groups
  /// The memory's records without a bounds group, ascending, with their token rows counted.
  std::vector<std::pair<std::int64_t, std::int64_t>> unplaced(std::int64_t memory_id);
  /// The active records of `group`, ascending.
  std::vector<std::int64_t> group_members(std::int64_t memory_id, std::int64_t group);
  /// Every active record, ascending, with its group (-1: none).
  std::vector<std::pair<std::int64_t, std::int64_t>> active_groups(std::int64_t memory_id);
  /// The same as a map (record -> group).
  std::unordered_map<std::int64_t, std::int64_t> group_of_active(std::int64_t memory_id);

  // ------------------------------------------------------------------------------- tokens
  /// Token ids of a record (ascending), no key/value bytes read.
  std::vector<TokenId> token_ids(std::int64_t memory_id, std::int64_t record);
  /// The token ids of the memory's active (not suspended) records, ascending.
  std::vector<TokenId> active_token_ids(std::int64_t memory_id);
  /// How many token rows the memory has, and how many of them are suspended records'.
  std::pair<std::int64_t, std::int64_t> token_row_counts(std::int64_t memory_id);
  /// How many token rows the record has.
  std::int64_t token_rows(std::int64_t memory_id, std::int64_t record);
  /// Deletes every token row of the record.
  void delete_tokens(std::int64_t memory_id, std::int64_t record);
  /// How many token rows the memory has (suspended records' included).
  std::int64_t token_count(std::int64_t memory_id);
  /// Cursor over every token row of the memory in token-id order, already sent and read as the
  /// rows arrive (Statement::stream): columns token_id, key, value.
  Statement stream_tokens(std::int64_t memory_id);
  /// Cursor over the record's token rows in token-id order: columns token_id, key, value and the
  /// record's key_id.
  Statement record_token_payloads(std::int64_t memory_id, std::int64_t record,
                                  const Columns& columns);
  /// Cursor over the memory's support rows in token-id order with their token rows: columns
  /// token_id, alpha, key, value and the record's key_id.
  Statement support_token_payloads(std::int64_t memory_id, const Columns& columns);
  /// Token rows whose record or position disagree with their id or whose record has no row.
  std::int64_t inconsistent_token_rows(std::int64_t memory_id);
  /// A token row's identity and its payload blobs as stored.
  struct TokenBlobs {
    std::int64_t rowid = 0;
    TokenId id = 0;
    std::vector<std::uint8_t> key, value;
  };
  /// The record's token rows in token-id order, blobs as stored.
  std::vector<TokenBlobs> token_blobs(std::int64_t memory_id, std::int64_t record);
  /// Each row's key and value blobs replaced by `rows[i]`'s (found by rowid).
  void set_token_blobs(const std::vector<TokenBlobs>& rows);
  /// Appends token rows of one memory through one prepared statement (store_payload.cpp).
  class TokenWriter {
   public:
    TokenWriter(Database& db, std::int64_t memory_id);
    /// The row of `id` (record and position from its bits) with its payload blobs.
    void add(TokenId id, const void* key, std::size_t key_bytes, const void* value,
             std::size_t value_bytes);

   private:
    Statement ins_;
    std::int64_t memory_id_;
  };
  TokenWriter token_writer(std::int64_t memory_id) { return TokenWriter(db_, memory_id); }
  /// PostgreSQL: the planner statistics of the token, record and support tables' key columns.
  void analyze_key_columns();
  /// Deletes the token rows of `ids` whose `keep(id)` is false; returns how many.
  std::int64_t delete_tokens_unless(std::int64_t memory_id, const std::vector<TokenId>& ids,
                                    const std::function<bool(TokenId)>& keep);

 private:
  Database& db_;
};

}  // namespace svattn::store_detail
