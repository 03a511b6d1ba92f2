// The store's connection layer (src/store/db/database.h) on every backend: an SQLite file (unit)
// and a PostgreSQL schema (label postgres) through the same Database/Statement/Transaction:
// deferred statements and streamed scans.
#include <cstdint>
#include <string>
#include <vector>

#include "db_test_util.h"

namespace svattn {
namespace {

class DatabaseBackends : public store_test::StoreOnBackends {};

// Statement::defer (docs/store.md "Round trips"): a deferred write is seen by the transaction's
// next read; a failing one (here a duplicate key) is thrown no later than the commit, nothing of
// its transaction is committed, and the connection serves the next transaction. Outside a
// transaction a deferred statement runs at once.
TEST_P(DatabaseBackends, DeferredStatementsFailByTheCommitAndNothingOfTheirTransactionLands) {
  using store_detail::Database;
  using store_detail::Statement;
  using store_detail::Transaction;
  const auto open = [&] { return store_test::open_database(stores(), "d"); };
  Database db = open();
  db.exec_ddl(pg() ? "CREATE TABLE t(id BIGINT PRIMARY KEY, v TEXT NOT NULL)"
                   : "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL)");
  const auto insert = [&](std::int64_t id) {
    Statement ins(db.handle(), "INSERT INTO t(id, v) VALUES (?1, ?2)");
    ins.bind(1, id).bind(2, "v" + std::to_string(id)).defer();
  };
  {
    Transaction t(db, true, "d", 1000);
    insert(1);
    insert(2);
    EXPECT_EQ(db.query_int("SELECT count(*) FROM t"), 2);  // the read ends the deferred writes
    insert(3);
    t.commit();
  }
  Database other = open();
  EXPECT_EQ(other.query_int("SELECT count(*) FROM t"), 3);
  EXPECT_THROW(
      {
        Transaction t(db, true, "d", 1000);
        insert(4);
        insert(1);  // a duplicate: the statements after it are not run either
        insert(5);
        t.commit();
      },
      StoreError);
  EXPECT_THROW(
      {
        Transaction t(db, true, "d", 1000);
        insert(6);
        insert(2);
        db.query_int("SELECT count(*) FROM t");
      },
      StoreError);
  EXPECT_EQ(other.query_int("SELECT count(*) FROM t"), 3);
  EXPECT_EQ(db.query_int("SELECT count(*) FROM t WHERE id > 3"), 0);
  insert(7);  // no transaction: runs (and commits) at once
  EXPECT_EQ(other.query_int("SELECT count(*) FROM t WHERE id = 7"), 1);
  {
    Transaction t(db, true, "d", 1000);
    insert(8);
    t.commit();
  }
  EXPECT_EQ(other.query_int("SELECT count(*) FROM t"), 5);
}

// Statement::stream (docs/store.md "Round trips"): every row in order, as without it; a scan
// abandoned midway (destroyed, or reset and run again) leaves the connection usable; a failure
// after some rows is a typed error and the connection serves the next statement; behind deferred
// statements (a transaction's writes not yet sent) it sees their effect.
TEST_P(DatabaseBackends, StreamedScansHandOutEveryRowAndLeaveTheConnectionUsable) {
  using store_detail::Database;
  using store_detail::Statement;
  using store_detail::Transaction;
  Database db = store_test::open_database(stores(), "st");
  db.exec_ddl(pg() ? "CREATE TABLE t(id BIGINT PRIMARY KEY, v BYTEA NOT NULL)"
                   : "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB NOT NULL)");
  constexpr int kRows = 300;
  const auto blob_of = [](int id) { return std::vector<std::uint8_t>(100 + id % 7, id % 251); };
  {
    Transaction t(db, true, "st", 1000);
    Statement ins(db.handle(), "INSERT INTO t(id, v) VALUES (?1, ?2)");
    for (int id = 1; id <= kRows; ++id) {
      const auto b = blob_of(id);
      ins.bind(1, static_cast<std::int64_t>(id)).bind_blob(2, b.data(), b.size()).run();
      ins.reset();
    }
    t.commit();
  }
  const char* scan = "SELECT id, v FROM t WHERE id >= ?1 ORDER BY id";
  const auto read = [&](Statement& q, int stop_after) {
    int n = 0;
    while ((stop_after < 0 || n < stop_after) && q.step()) {
      ++n;
      EXPECT_EQ(q.int64(0), n);
      EXPECT_EQ(q.blob(1), blob_of(n)) << n;
    }
    return n;
  };
  {
    Statement q(db.handle(), scan);
    q.bind(1, std::int64_t{1}).stream();
    EXPECT_EQ(read(q, -1), kRows);
  }
  {
    Statement q(db.handle(), scan);
    q.bind(1, std::int64_t{1}).stream();
    EXPECT_EQ(read(q, 5), 5);
  }  // abandoned after five rows
  EXPECT_EQ(db.query_int("SELECT count(*) FROM t"), kRows);
  {
    Statement q(db.handle(), scan);
    q.bind(1, std::int64_t{1}).stream();
    EXPECT_EQ(read(q, 3), 3);
    q.reset();
    q.bind(1, std::int64_t{1}).stream();
    EXPECT_EQ(read(q, -1), kRows);
  }
  if (pg()) {  // a run-time error after rows were handed out (SQLite's 1/0 is NULL, no error)
    Statement bad(db.handle(), "SELECT id, 1 / (150 - id) FROM t ORDER BY id");
    bad.stream();
    int n = 0;
    EXPECT_THROW(
        {
          while (bad.step()) ++n;
        },
        StoreError);
    EXPECT_LE(n, 149);  // the rows before the failing one, or none if the plan computes it first
    EXPECT_EQ(db.query_int("SELECT count(*) FROM t"), kRows);
  }
  {
    Transaction t(db, true, "st", 1000);
    Statement del(db.handle(), "DELETE FROM t WHERE id > ?1");
    del.bind(1, std::int64_t{10}).defer();  // not sent yet on PostgreSQL
    Statement q(db.handle(), scan);
    q.bind(1, std::int64_t{1}).stream();
    EXPECT_EQ(read(q, -1), 10);
  }  // rolled back
  EXPECT_EQ(db.query_int("SELECT count(*) FROM t"), kRows);
}

SVATTN_ON_ALL_BACKENDS(DatabaseBackends);

}  // namespace
}  // namespace svattn
