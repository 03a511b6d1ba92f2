// The record rows (record_rows.cpp; docs/store.md "Components"): the `records` table (one row per
// record of a memory: suspended, data key, bucket digests, bounds group) and the row-level writes
// and lookups of the `tokens` table by record. Payload bytes are sealed and opened by the payload
// codec (payload_reader.h), and the restore that reads every active token is Store::Impl's
// (store_rows.cpp); this component says which rows exist and moves them. Private to the store.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "db/database.h"
#include "store_rows.h"
#include "svattn/types.h"

namespace svattn::store_detail {

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
  /// Deletes the token rows of `ids` whose `keep(id)` is false; returns how many.
  template <class Keep>
  std::int64_t delete_tokens_unless(std::int64_t memory_id, const std::vector<TokenId>& ids,
                                    const Keep& keep) {
    Statement del(db_.handle(), "DELETE FROM tokens WHERE memory_id = ?1 AND token_id = ?2");
    std::int64_t n = 0;
    for (TokenId id : ids) {
      if (keep(id)) continue;
      del.bind(1, memory_id).bind(2, static_cast<std::int64_t>(id)).run();
      del.reset();
      ++n;
    }
    return n;
  }

 private:
  Database& db_;
};

}  // namespace svattn::store_detail
