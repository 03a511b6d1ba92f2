// The catalog, header integers and connection settings of the store's connection
// (src/store/db/database.h's Database methods; docs/store.md "Backends") on every backend: an
// SQLite file (unit) and a PostgreSQL schema (label postgres), each answering in its own dialect.
#include <cstdint>
#include <string>
#include <vector>

#include "db_test_util.h"
#include "store/schema_ddl.h"

namespace svattn {
namespace {

using store_detail::Database;
using store_detail::Transaction;

class CatalogBackends : public store_test::StoreOnBackends {
 protected:
  Database open(const std::string& name) { return store_test::open_database(stores(), name); }
};

TEST_P(CatalogBackends, TablesTriggersAndColumnsOfTheStore) {
  Database db = open("cat");
  EXPECT_TRUE(db.is_empty());
  EXPECT_TRUE(db.table_names().empty());
  EXPECT_FALSE(db.has_table("meta"));
  db.exec_ddl(store_detail::schema_ddl(db).store_tables);
  EXPECT_FALSE(db.is_empty());
  EXPECT_EQ(db.table_names(), (std::vector<std::string>{"audit", "memories", "meta", "records",
                                                        "support", "tokens"}));
  EXPECT_TRUE(db.has_table("meta"));
  EXPECT_FALSE(db.has_table("screening"));
  EXPECT_FALSE(db.has_table("audit_no_update"));  // a trigger, not a table
  EXPECT_EQ(db.trigger_names(), (std::vector<std::string>{"audit_no_delete", "audit_no_update"}));
  EXPECT_TRUE(db.has_trigger("audit_no_update"));
  EXPECT_FALSE(db.has_trigger("audit_no_insert"));
  EXPECT_FALSE(db.has_trigger("meta"));
  EXPECT_EQ(db.column_names("meta"), (std::vector<std::string>{"key", "value"}));
  EXPECT_TRUE(db.column_names("nope").empty());
  EXPECT_TRUE(db.has_column("records", "suspended"));
  EXPECT_TRUE(db.has_column("records", "key_id"));
  EXPECT_FALSE(db.has_column("records", "bounds"));  // a schema-5 column, gone since version 6
  EXPECT_FALSE(db.has_column("nope", "key"));
  EXPECT_FALSE(db.has_column("meta", "'key'"));  // names are compared, never spliced into SQL
}

// The header integers: 0 until set, kept by a commit and read by the next connection. On
// PostgreSQL they are the rows of svattn_pragma that existing stores hold, which the catalog
// does not list.
TEST_P(CatalogBackends, HeaderIntegersPersistAndStayOutOfTheCatalog) {
  Database db = open("hdr");
  {
    Transaction t(db, true, "hdr", 1000);
    EXPECT_EQ(db.user_version(), 0);
    EXPECT_EQ(db.application_id(), 0);
    db.set_user_version(7);
    db.set_application_id(0x53564154);
    db.set_user_version(8);  // set again: replaced
    t.commit();
  }
  EXPECT_TRUE(db.is_empty());
  EXPECT_TRUE(db.table_names().empty());
  Database other = open("hdr");
  EXPECT_EQ(other.user_version(), 8);
  EXPECT_EQ(other.application_id(), 0x53564154);
  if (pg()) {
    EXPECT_EQ(other.query_int("SELECT value FROM svattn_pragma WHERE name = 'user_version'"), 8);
    EXPECT_EQ(other.query_int("SELECT value FROM svattn_pragma WHERE name = 'application_id'"),
              0x53564154);
  }
  {
    Transaction t(db, true, "hdr", 1000);
    db.set_user_version(9);
  }  // rolled back
  EXPECT_EQ(other.user_version(), 8);
}

TEST_P(CatalogBackends, ConnectionSettingsAndIntegrityCheck) {
  Database db = open("set");
  EXPECT_EQ(db.enable_wal(), "wal");
  db.harden_writes();
  db.exec_ddl(store_detail::schema_ddl(db).store_tables);
  if (pg()) {  // page integrity is the server's
    EXPECT_THROW(db.integrity_check(true), StoreError);
    EXPECT_THROW(db.integrity_check(false), StoreError);
    return;
  }
  EXPECT_EQ(db.integrity_check(true), "ok");
  EXPECT_EQ(db.integrity_check(false), "ok");
  const store_detail::SqlitePages pages = store_detail::sqlite_pages(db);
  EXPECT_GT(pages.count, 1);
  EXPECT_GE(pages.size, 512);
}

SVATTN_ON_ALL_BACKENDS(CatalogBackends);

}  // namespace
}  // namespace svattn
