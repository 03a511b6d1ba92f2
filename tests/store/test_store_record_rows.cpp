// The record rows as a component (src/store/record_rows.h) on a real connection: an SQLite file
// (unit) or a PostgreSQL schema (label postgres). Rows are inserted, read, suspended, keyed,
// placed into groups and deleted; token rows are written, listed, counted, read through the
// cursors and deleted; the checks of verify count orphaned and inconsistent rows.
#include <map>
#include <string>
#include <vector>

#include "db_test_util.h"
#include "store/db/sqlite.h"
#include "store/record_rows.h"
#include "store/schema_ddl.h"

namespace svattn {
namespace {

using store_detail::Database;
using store_detail::record_lo;
using store_detail::RecordRow;
using store_detail::RecordRows;
using store_detail::Transaction;

class RecordRowsBackends : public store_test::StoreOnBackends {
 protected:
  Database open_rows(const std::string& name) {
    Database db = store_test::open_database(stores(), name);
    const store_detail::SchemaDdl& ddl = store_detail::schema_ddl(db);
    db.exec_ddl(ddl.store_tables);
    db.exec_ddl(ddl.bounds_groups);
    db.exec(
        "INSERT INTO memories(id, name, settings, dim, value_dim, b, status, warmup, "
        "kkt_max_violation, kkt_sum_error, kkt_box_violation, state_sha256, last_audit_seq, "
        "created_utc) VALUES (1, 'm', '{}', 1, 1, 0, 'empty', 0, 0, 0, 0, '', 0, '')");
    return db;
  }
  // `n` token rows of `record` in memory 1 (one-number keys and values).
  static void add_tokens(Database& db, std::int64_t record, int n) {
    Statement ins(db.handle(),
                  "INSERT INTO tokens(memory_id, token_id, record, position, key, value) VALUES "
                  "(1, ?1, ?2, ?3, ?4, ?4)");
    const double x = 1.0;
    for (int p = 0; p < n; ++p) {
      ins.bind(1, record_lo(record) + p).bind(2, record).bind(3, static_cast<std::int64_t>(p));
      ins.bind_blob(4, &x, sizeof x).run();
      ins.reset();
    }
  }
  // One token row as written, consistent or not (memory, token id, record and position given).
  static void add_row(Database& db, std::int64_t memory_id, std::int64_t token_id,
                      std::int64_t record, std::int64_t position) {
    const std::uint8_t x = 0;
    Statement ins(db.handle(),
                  "INSERT INTO tokens(memory_id, token_id, record, position, key, value) VALUES "
                  "(?1, ?2, ?3, ?4, ?5, ?5)");
    ins.bind(1, memory_id).bind(2, token_id).bind(3, record).bind(4, position);
    ins.bind_blob(5, &x, 1).run();
  }
  using Statement = store_detail::Statement;
};

TEST_P(RecordRowsBackends, RowsAreInsertedReadChangedAndDeleted) {
  Database db = open_rows("rows");
  RecordRows rows(db);
  Transaction t(db, true, "rows", 1000);
  rows.insert(1, {3, 5, 9}, "2026-01-01T00:00:00Z");
  EXPECT_EQ(rows.count(1), 3);
  EXPECT_EQ(rows.count(2), 0);
  RecordRow r = rows.read(1, 5, {});
  EXPECT_TRUE(r.exists);
  EXPECT_FALSE(r.suspended);
  EXPECT_EQ(r.key_id, "");
  EXPECT_EQ(r.bounds_group, -1);
  EXPECT_FALSE(rows.read(1, 4, {}).exists);
  rows.set_suspended(1, 5, true);
  rows.set_keys(1, {5, 9}, {std::string(32, 'a'), std::string(32, 'b')});
  rows.set_groups(1, {3, 5}, {0, 1});
  r = rows.read(1, 5, {});
  EXPECT_TRUE(r.suspended);
  EXPECT_EQ(r.key_id, std::string(32, 'a'));
  EXPECT_EQ(r.bounds_group, 1);
  const RecordRow old = rows.read(1, 5, {false, false});  // a file without those columns
  EXPECT_EQ(old.key_id, "");
  EXPECT_EQ(old.bounds_group, -1);
  const auto [first_key, first_record] = rows.first_keyed_record();  // either keyed record
  EXPECT_EQ(first_key, std::string(32, first_record == 5 ? 'a' : 'b'));
  EXPECT_TRUE(first_record == 5 || first_record == 9);
  const auto keyed = rows.keyed_records(1);
  ASSERT_EQ(keyed.size(), 2u);
  EXPECT_EQ(rows.record_counts(1), (std::pair<std::int64_t, std::int64_t>{3, 1}));
  EXPECT_EQ(rows.suspension(1), (std::map<std::int64_t, bool>{{3, false}, {5, true}, {9, false}}));
  rows.set_buckets(1, 3, {1, 2, 3});
  EXPECT_EQ(db.query_int("SELECT length(buckets) FROM records WHERE record = 3"), 3);
  rows.delete_row(1, 9);
  EXPECT_EQ(rows.count(1), 2);
  t.commit();
}

TEST_P(RecordRowsBackends, GroupsListOnlyActiveRecordsAndUnplacedCountTheirTokens) {
  Database db = open_rows("groups");
  RecordRows rows(db);
  Transaction t(db, true, "groups", 1000);
  rows.insert(1, {1, 2, 3, 4}, "t");
  add_tokens(db, 4, 3);
  rows.set_groups(1, {1, 2, 3}, {0, 0, 1});
  rows.set_suspended(1, 2, true);
  EXPECT_EQ(rows.group_members(1, 0), (std::vector<std::int64_t>{1}));
  const auto active = rows.active_groups(1);
  ASSERT_EQ(active.size(), 3u);
  EXPECT_EQ(active[2], (std::pair<std::int64_t, std::int64_t>{4, -1}));
  EXPECT_EQ(rows.group_of_active(1).at(3), 1);
  EXPECT_EQ(rows.group_of_active(1).count(2), 0u);
  const auto unplaced = rows.unplaced(1);
  ASSERT_EQ(unplaced.size(), 1u);
  EXPECT_EQ(unplaced[0], (std::pair<std::int64_t, std::int64_t>{4, 3}));
  t.commit();
}

TEST_P(RecordRowsBackends, TokenRowsAreListedCountedAndDeletedByRecord) {
  Database db = open_rows("tokens");
  RecordRows rows(db);
  Transaction t(db, true, "tokens", 1000);
  rows.insert(1, {7, 8}, "t");
  add_tokens(db, 7, 4);
  add_tokens(db, 8, 2);
  EXPECT_EQ(rows.token_rows(1, 7), 4);
  const std::vector<TokenId> ids = rows.token_ids(1, 7);
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(ids.front(), record_lo(7));
  rows.set_suspended(1, 8, true);
  EXPECT_EQ(rows.token_row_counts(1), (std::pair<std::int64_t, std::int64_t>{6, 2}));
  EXPECT_EQ(rows.active_token_ids(1), ids);
  const auto summaries = rows.summaries(1);
  ASSERT_EQ(summaries.size(), 2u);
  EXPECT_EQ(summaries[1].record, 8);
  EXPECT_TRUE(summaries[1].suspended);
  EXPECT_EQ(summaries[1].token_rows, 2);
  EXPECT_EQ(rows.delete_tokens_unless(1, ids, [&](TokenId id) { return id != ids[1]; }), 1);
  EXPECT_EQ(rows.token_rows(1, 7), 3);
  rows.delete_tokens(1, 7);
  EXPECT_EQ(rows.token_rows(1, 7), 0);
  EXPECT_EQ(rows.token_rows(1, 8), 2);
  t.commit();
}

TEST_P(RecordRowsBackends, RecordKeysBucketsAndUnkeyedRecordsAreRead) {
  Database db = open_rows("keys");
  RecordRows rows(db);
  EXPECT_TRUE(rows.key_id_column_exists());
  Transaction t(db, true, "keys", 1000);
  rows.insert(1, {2, 4}, "t");
  rows.set_keys(1, {4}, {std::string(32, 'k')});
  rows.set_suspended(1, 2, true);
  std::map<std::int64_t, RecordRows::RecordKey> keys;
  for (const RecordRows::RecordKey& k : rows.record_keys(1, {})) keys[k.record] = k;
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_TRUE(keys[2].suspended);
  EXPECT_FALSE(keys[2].sealed);
  EXPECT_EQ(keys[2].key_id, "");
  EXPECT_TRUE(keys[4].sealed);
  EXPECT_EQ(keys[4].key_id, std::string(32, 'k'));
  for (const RecordRows::RecordKey& k : rows.record_keys(1, {false, false}))
    EXPECT_FALSE(k.sealed);  // a file without the key_id column
  const std::vector<RecordRows::UnkeyedRecord> plain = rows.unkeyed_records();
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].memory_id, 1);
  EXPECT_EQ(plain[0].record, 2);
  EXPECT_EQ(plain[0].dim, 1);
  EXPECT_EQ(plain[0].value_dim, 1);
  EXPECT_FALSE(rows.buckets(1, 3, {}).exists);
  RecordRows::StoredBuckets b = rows.buckets(1, 4, {});
  EXPECT_TRUE(b.exists);
  EXPECT_FALSE(b.has_buckets);
  rows.set_buckets(1, 4, {7, 8});
  b = rows.buckets(1, 4, {});
  EXPECT_TRUE(b.has_buckets);
  EXPECT_TRUE(b.sealed);
  EXPECT_EQ(b.key_id, std::string(32, 'k'));
  EXPECT_EQ(b.blob, (std::vector<std::uint8_t>{7, 8}));
  EXPECT_FALSE(rows.buckets(1, 4, {false, false}).sealed);
  rows.set_buckets(1, 2, {5});
  rows.insert(1, {6}, "t");
  rows.set_buckets(1, 6, {6});
  Statement blobs = rows.active_record_blobs(1, store_detail::RecordField::kBuckets);
  std::vector<std::int64_t> active;
  while (blobs.step()) {  // record 2 is suspended
    active.push_back(blobs.int64(0));
    EXPECT_EQ(blobs.is_null(1), blobs.int64(0) == 6);
    EXPECT_EQ(blobs.bytes(2), blobs.int64(0) == 4 ? 2 : 1);
  }
  EXPECT_EQ(active, (std::vector<std::int64_t>{4, 6}));
  t.commit();
}

TEST_P(RecordRowsBackends, KeyedRecordsAreLookedUpByPairWithTheirTokenRows) {
  Database db = open_rows("lookup");
  RecordRows rows(db);
  Transaction t(db, true, "lookup", 1000);
  rows.insert(1, {1, 2, 3}, "t");
  rows.set_keys(1, {1, 3}, {std::string(32, 'a'), std::string(32, 'c')});
  rows.set_suspended(1, 3, true);
  add_tokens(db, 3, 5);
  EXPECT_TRUE(rows.lookup_keyed({}).empty());
  const auto found = rows.lookup_keyed({{1, 3}, {1, 2}, {1, 9}, {1, 1}});  // 2: no key, 9: no row
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].record, 1);
  EXPECT_EQ(found[0].key_id, std::string(32, 'a'));
  EXPECT_EQ(found[0].memory, "m");
  EXPECT_FALSE(found[0].suspended);
  EXPECT_EQ(found[0].token_rows, 0);
  EXPECT_EQ(found[1].memory_id, 1);
  EXPECT_EQ(found[1].record, 3);
  EXPECT_TRUE(found[1].suspended);
  EXPECT_EQ(found[1].token_rows, 5);
  t.commit();
  if (pg()) return;  // a backup is an SQLite file (docs/store.md "Backups")
  db.close();
  store_detail::ReadOnlyDb backup(stores().at_without_keys("lookup"));
  std::string key_id = "unchanged";
  EXPECT_FALSE(RecordRows::backup_record_key(backup, "m", 9, key_id));
  EXPECT_EQ(key_id, "unchanged");
  EXPECT_TRUE(RecordRows::backup_record_key(backup, "m", 2, key_id));
  EXPECT_EQ(key_id, "");
  EXPECT_TRUE(RecordRows::backup_record_key(backup, "m", 3, key_id));
  EXPECT_EQ(key_id, std::string(32, 'c'));
}

TEST_P(RecordRowsBackends, VerifyCountsOrphanedUngroupedAndInconsistentRows) {
  Database db = open_rows("verify");
  RecordRows rows(db);
  Transaction t(db, true, "verify", 1000);
  rows.insert(1, {1, 2}, "t");
  add_tokens(db, 1, 2);
  EXPECT_EQ(rows.orphan_rows(), (std::pair<std::int64_t, std::int64_t>{0, 0}));
  EXPECT_EQ(rows.inconsistent_token_rows(1), 0);
  EXPECT_EQ(rows.records_without_group(), 2);
  db.exec(
      "INSERT INTO bounds_groups(memory_id, group_id, member_records, member_tokens) VALUES (1, "
      "0, 1, 2), (1, 5, 0, 0)");
  rows.set_groups(1, {1, 2}, {0, 7});  // 7 does not exist, 5 has no record
  EXPECT_EQ(rows.records_without_group(), 1);
  EXPECT_EQ(rows.groups_without_record(), 1);
  rows.insert(3, {4}, "t");  // memory 3 does not exist
  add_row(db, 3, 1, 0, 1);
  add_row(db, 1, record_lo(2), 2, 5);  // position 0 in its id
  add_row(db, 1, record_lo(3), 3, 0);  // record 3 has no row
  EXPECT_EQ(rows.orphan_rows(), (std::pair<std::int64_t, std::int64_t>{1, 1}));
  EXPECT_EQ(rows.inconsistent_token_rows(1), 2);  // a wrong position, a record without a row
  t.commit();
}

TEST_P(RecordRowsBackends, TokenRowsAreWrittenStreamedAndRewritten) {
  Database db = open_rows("write");
  RecordRows rows(db);
  Transaction t(db, true, "write", 1000);
  rows.insert(1, {1, 2}, "t");
  rows.set_keys(1, {2}, {std::string(32, 'b')});
  {
    RecordRows::TokenWriter w = rows.token_writer(1);
    const double k[2] = {1.5, 2.5};
    const std::uint8_t v[3] = {1, 2, 3};
    for (TokenId id : {record_lo(1), record_lo(1) + 3, record_lo(2) + 1})
      w.add(id, k, sizeof k, v, id == record_lo(1) ? 3 : 2);
  }
  EXPECT_EQ(rows.token_count(1), 3);
  EXPECT_EQ(rows.token_count(2), 0);
  EXPECT_EQ(db.query_int("SELECT position FROM tokens WHERE token_id = " +
                         std::to_string(record_lo(1) + 3)),
            3);
  std::vector<TokenId> streamed;
  {
    Statement q = rows.stream_tokens(1);
    while (q.step()) {
      streamed.push_back(q.int64(0));
      EXPECT_EQ(q.bytes(1), 16);
      EXPECT_EQ(q.bytes(2), q.int64(0) == record_lo(1) ? 3 : 2);
    }
  }
  EXPECT_EQ(streamed, (std::vector<TokenId>{record_lo(1), record_lo(1) + 3, record_lo(2) + 1}));
  {
    Statement q = rows.record_token_payloads(1, 2, {});
    ASSERT_TRUE(q.step());
    EXPECT_EQ(q.int64(0), record_lo(2) + 1);
    EXPECT_EQ(q.text(3), std::string(32, 'b'));
    EXPECT_FALSE(q.step());
  }
  {
    Statement q = rows.record_token_payloads(1, 2, {false, false});
    ASSERT_TRUE(q.step());
    EXPECT_TRUE(q.is_null(3));
  }
  std::vector<RecordRows::TokenBlobs> blobs = rows.token_blobs(1, 1);
  ASSERT_EQ(blobs.size(), 2u);
  EXPECT_EQ(blobs[1].id, record_lo(1) + 3);
  EXPECT_EQ(blobs[0].value, (std::vector<std::uint8_t>{1, 2, 3}));
  blobs[0].key = {9};
  blobs[0].value = {8, 8};
  rows.set_token_blobs(blobs);
  blobs = rows.token_blobs(1, 1);
  EXPECT_EQ(blobs[0].key, (std::vector<std::uint8_t>{9}));
  EXPECT_EQ(blobs[0].value, (std::vector<std::uint8_t>{8, 8}));
  EXPECT_EQ(blobs[1].key.size(), 16u);
  t.commit();
}

TEST_P(RecordRowsBackends, SupportRowsAreReadWithTheirTokensAndKeys) {
  Database db = open_rows("support");
  RecordRows rows(db);
  Transaction t(db, true, "support", 1000);
  rows.insert(1, {1, 2}, "t");
  rows.set_keys(1, {2}, {std::string(32, 's')});
  add_tokens(db, 1, 2);
  add_tokens(db, 2, 1);
  db.exec("INSERT INTO support(memory_id, token_id, part, alpha) VALUES (1, " +
          std::to_string(record_lo(2)) + ", 1, 0.25), (1, " + std::to_string(record_lo(1) + 1) +
          ", 2, 0.5)");
  Statement q = rows.support_token_payloads(1, {});
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.int64(0), record_lo(1) + 1);
  EXPECT_EQ(q.real(1), 0.5);
  EXPECT_EQ(q.bytes(2), 8);
  EXPECT_TRUE(q.is_null(4));
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.int64(0), record_lo(2));
  EXPECT_EQ(q.text(4), std::string(32, 's'));
  EXPECT_FALSE(q.step());
  t.commit();
  if (pg()) rows.analyze_key_columns();  // PostgreSQL's planner statistics; no rows change
  EXPECT_EQ(rows.token_count(1), 3);
}

SVATTN_ON_ALL_BACKENDS(RecordRowsBackends);

}  // namespace
}  // namespace svattn
