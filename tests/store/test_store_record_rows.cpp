// The record rows as a component (src/store/record_rows.h) on a real connection: an SQLite file
// (unit) or a PostgreSQL schema (label postgres). Rows are inserted, read, suspended, keyed,
// placed into groups and deleted; token rows are listed, counted and deleted by record.
#include <map>
#include <string>
#include <vector>

#include "db_test_util.h"
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

SVATTN_ON_ALL_BACKENDS(RecordRowsBackends);

}  // namespace
}  // namespace svattn
