// The rewrite of the statements both backends run (src/store/db/dialect.h), without a server:
// placeholders and conflict clauses; table definitions, catalog reads and PRAGMAs are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "store/db/dialect.h"
#include "svattn/errors.h"
#include "svattn/store.h"

namespace svattn::store_detail {
namespace {

std::string one(const std::string& sql) {
  const auto v = sqlite_to_postgres(sql, [](const std::string& t) {
    return t == "meta" ? std::vector<std::string>{"key"} : std::vector<std::string>{};
  });
  EXPECT_EQ(v.size(), 1u) << sql;
  return v.empty() ? "" : v[0];
}

TEST(SqlDialect, PlaceholdersAndLiterals) {
  EXPECT_EQ(one("SELECT a FROM t WHERE x = ?1 AND y = ?12"),
            "SELECT a FROM t WHERE x = $1 AND y = $12");
  EXPECT_EQ(one("SELECT ? , ?"), "SELECT $1 , $2");
  // Nothing inside literals is rewritten.
  EXPECT_EQ(one("SELECT '?1 INTEGER ''x''' FROM t"), "SELECT '?1 INTEGER ''x''' FROM t");
}

// Table definitions are written in each backend's dialect (schema_ddl.h): the rewrite refuses
// them instead of translating them.
TEST(SqlDialect, TableDefinitionsAreNotRewritten) {
  EXPECT_THROW(one("CREATE TABLE t(rowid INTEGER PRIMARY KEY, b BLOB NOT NULL)"), StoreError);
  EXPECT_THROW(one("ALTER TABLE records ADD COLUMN key_id TEXT"), StoreError);
  EXPECT_THROW(one("CREATE TRIGGER t AFTER INSERT ON a BEGIN SELECT RAISE(ABORT, 'x'); END"),
               StoreError);
}

TEST(SqlDialect, ConflictClauses) {
  EXPECT_EQ(one("INSERT OR IGNORE INTO meta(key, value) VALUES ('a', 'b')"),
            "INSERT INTO meta(key, value) VALUES ('a', 'b') ON CONFLICT DO NOTHING");
  EXPECT_EQ(one("INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)"),
            "INSERT INTO meta(key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = "
            "excluded.value");
  EXPECT_THROW(one("INSERT OR REPLACE INTO nokey(a) VALUES (1)"), StoreError);
  EXPECT_THROW(one("INSERT OR ROLLBACK INTO t(a) VALUES (1)"), StoreError);
}

TEST(SqlDialect, ScriptsSplitAtSemicolonsOutsideLiterals) {
  const auto v = sqlite_to_postgres(
      "DELETE FROM a WHERE x = ?1;\nUPDATE b SET y = 'p; q' WHERE z = ?2;", nullptr);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0], "DELETE FROM a WHERE x = $1");
  EXPECT_EQ(v[1], "UPDATE b SET y = 'p; q' WHERE z = $2");
}

// The catalog and SQLite's header integers are Database methods each backend implements
// (db/database.h): the rewrite refuses them instead of translating them.
TEST(SqlDialect, CatalogReadsAndPragmasAreNotRewritten) {
  EXPECT_THROW(one("SELECT count(*) FROM sqlite_master"), StoreError);
  EXPECT_THROW(one("SELECT count(*) FROM pragma_table_info('records') WHERE name = 'key_id'"),
               StoreError);
  EXPECT_THROW(one("PRAGMA user_version"), StoreError);
  EXPECT_THROW(one("PRAGMA journal_mode=WAL"), StoreError);
  EXPECT_EQ(one("SELECT value FROM meta WHERE key = 'sqlite_master'"),
            "SELECT value FROM meta WHERE key = 'sqlite_master'");  // a literal is data
}

// The array literals of the batched statements: integers as written, doubles with 17 significant
// digits so that strtod (the server's float8 input) gives back the same bits, non-finite refused;
// the batched statements' casts pass the translation unchanged.
TEST(SqlDialect, ArrayLiteralsRoundTripAndBatchedStatementsTranslate) {
  EXPECT_EQ(pg_array(std::vector<std::int64_t>{}), "{}");
  EXPECT_EQ(pg_array(std::vector<std::int64_t>{-3, 0, 9007199254740993}), "{-3,0,9007199254740993}");
  const std::vector<double> v = {0.1, -0.0, 1.0 / 3.0, 5e-324, 1.7976931348623157e308,
                                 0.009999999999999998};
  const std::string lit = pg_array(v);
  ASSERT_EQ(lit.front(), '{');
  std::size_t at = 1;
  for (double x : v) {
    char* end = nullptr;
    const double y = std::strtod(lit.c_str() + at, &end);
    EXPECT_EQ(std::memcmp(&x, &y, sizeof x), 0) << lit;
    at = static_cast<std::size_t>(end - lit.c_str()) + 1;
  }
  EXPECT_EQ(at, lit.size());
  EXPECT_THROW(pg_array(std::vector<double>{1.0, std::nan("")}), InvalidArgument);
  EXPECT_THROW(pg_array(std::vector<double>{HUGE_VAL}), InvalidArgument);
  EXPECT_EQ(one("DELETE FROM support WHERE memory_id = ?1 AND token_id = ANY(?2::bigint[])"),
            "DELETE FROM support WHERE memory_id = $1 AND token_id = ANY($2::bigint[])");
}

}  // namespace
}  // namespace svattn::store_detail
