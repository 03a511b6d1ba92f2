// The store's tables in each backend's own dialect (src/store/schema_ddl.h) on a real connection:
// an SQLite file (unit) and a PostgreSQL schema (label postgres). Both dialects create the same
// tables with the same columns, the audit log refuses UPDATE and DELETE, and the upgrades' added
// columns apply to a table of the older shape.
#include <map>
#include <string>
#include <vector>

#include "db_test_util.h"
#include "store/schema_ddl.h"

namespace svattn {
namespace {

using store_detail::Database;
using store_detail::schema_ddl;
using store_detail::SchemaDdl;

class SchemaDdlBackends : public store_test::StoreOnBackends {
 protected:
  Database open(const std::string& name) { return store_test::open_database(stores(), name); }
};

std::vector<std::string> columns(Database& db, const std::string& table) {
  return db.column_names(table);
}

// Every table of schema version 7 and its columns (sorted), as both dialects define them.
const std::map<std::string, std::vector<std::string>>& expected_tables() {
  static const std::map<std::string, std::vector<std::string>> t{
      {"meta", {"key", "value"}},
      {"memories",
       {"b", "created_utc", "dim", "id", "kkt_box_violation", "kkt_max_violation", "kkt_sum_error",
        "last_audit_seq", "name", "settings", "state_sha256", "status", "value_dim", "warmup"}},
      {"records",
       {"added_utc", "bounds_group", "buckets", "key_id", "memory_id", "record", "suspended"}},
      {"tokens", {"key", "memory_id", "position", "record", "rowid", "token_id", "value"}},
      {"support", {"alpha", "memory_id", "part", "token_id"}},
      {"audit",
       {"certificate", "entry_hash", "memory", "operation", "prev_hash", "record", "seq",
        "state_after", "state_before", "time_utc", "token_count"}},
      {"screening",
       {"bounds", "checksum", "epoch", "memory_id", "state_sha256", "support_sha256", "tokens"}},
      {"pending_shreds", {"key_id", "memory", "record", "rowid"}},
      {"bounds_groups",
       {"bounds", "group_id", "key_id", "member_records", "member_tokens", "memory_id",
        "next_key_id", "rowid"}}};
  return t;
}

void create_store_tables(Database& db) {
  const SchemaDdl& ddl = schema_ddl(db);
  db.exec_ddl(ddl.store_tables);
  db.exec_ddl(ddl.screening);
  db.exec_ddl(ddl.pending_shreds);
  db.exec_ddl(ddl.bounds_groups);
}

TEST_P(SchemaDdlBackends, BothDialectsCreateTheSameTablesAndColumns) {
  Database db = open("ddl");
  create_store_tables(db);
  for (const auto& [table, cols] : expected_tables()) EXPECT_EQ(columns(db, table), cols) << table;
  EXPECT_EQ(db.table_names().size(), expected_tables().size());
  EXPECT_EQ(db.trigger_names().size(), 2u);
}

TEST_P(SchemaDdlBackends, TheAuditLogRefusesUpdateAndDelete) {
  Database db = open("audit");
  create_store_tables(db);
  db.exec(
      "INSERT INTO audit(seq, time_utc, operation, memory, record, token_count, state_before, "
      "state_after, certificate, prev_hash, entry_hash) VALUES (1, 't', 'add', 'm', 1, 2, 'a', "
      "'b', '{}', 'p', 'e')");
  for (const char* sql : {"UPDATE audit SET memory = 'x'", "DELETE FROM audit"}) {
    try {
      db.exec(sql);
      ADD_FAILURE() << sql << " was not refused";
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find("the audit log is append-only"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(db.query_int("SELECT count(*) FROM audit WHERE memory = 'm'"), 1);
}

// The columns the upgrades add (schema 3 to 6) turn tables of the older shape into the current.
TEST_P(SchemaDdlBackends, UpgradeColumnsCompleteTheOlderTables) {
  Database db = open("up");
  const SchemaDdl& ddl = schema_ddl(db);
  db.exec_ddl(pg() ? "CREATE TABLE records(memory_id BIGINT, record BIGINT, suspended BIGINT, "
                     "added_utc TEXT); CREATE TABLE screening(memory_id BIGINT)"
                   : "CREATE TABLE records(memory_id INTEGER, record INTEGER, suspended INTEGER, "
                     "added_utc TEXT); CREATE TABLE screening(memory_id INTEGER)");
  db.exec_ddl(ddl.add_records_key_id);
  db.exec_ddl(ddl.add_records_buckets);
  db.exec_ddl(ddl.add_records_bounds_group);
  db.exec_ddl(ddl.add_screening_epoch);
  EXPECT_EQ(columns(db, "records"), expected_tables().at("records"));
  EXPECT_EQ(columns(db, "screening"), (std::vector<std::string>{"epoch", "memory_id"}));
}

TEST_P(SchemaDdlBackends, KeyStoreTables) {
  Database db = open("keys");
  db.exec_ddl(schema_ddl(db).key_store_tables);
  EXPECT_EQ(columns(db, "data_keys"),
            (std::vector<std::string>{"created_utc", "key_id", "live", "memory_id", "record_id",
                                      "seq", "stored", "wrapped_sha256"}));
  EXPECT_EQ(columns(db, "shredded_keys"),
            (std::vector<std::string>{"created_utc", "destroyed_utc", "key_id", "memory_id",
                                      "record_id", "wrapped_sha256"}));
}

SVATTN_ON_ALL_BACKENDS(SchemaDdlBackends);

}  // namespace
}  // namespace svattn
