// Test access to the PostgreSQL server the store's PostgreSQL tests run against (docs/store.md
// "PostgreSQL test cluster"): found through the libpq environment (PGHOST, PGPORT, PGUSER,
// PGDATABASE as scripts/pg-cluster.sh exports them); one throw-away schema per test; raw SQL for
// checks and tampering. With SVATTN_PG_REQUIRED=1 (make test) an unreachable server fails the
// tests; otherwise they are skipped.
#pragma once
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

namespace svattn::store_test {

/// Raw libpq connection (the environment's server), optionally with search_path = `schema`.
class RawPg {
 public:
  /// `dbname` empty: the environment's database (PGDATABASE).
  explicit RawPg(const std::string& schema = "", const std::string& dbname = "") {
    conn_ = PQconnectdb(dbname.empty() ? "" : ("dbname=" + dbname).c_str());
    if (PQstatus(conn_) != CONNECTION_OK) {
      error_ = PQerrorMessage(conn_);
      return;
    }
    PQsetNoticeProcessor(
        conn_, [](void*, const char*) {}, nullptr);
    if (!schema.empty()) exec("SET search_path = " + schema);
  }
  ~RawPg() { PQfinish(conn_); }
  RawPg(const RawPg&) = delete;
  RawPg& operator=(const RawPg&) = delete;
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  /// Runs `sql`; returns the error message ("" on success).
  std::string exec(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    const ExecStatusType st = PQresultStatus(r);
    std::string err =
        (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) ? "" : PQresultErrorMessage(r);
    PQclear(r);
    return err;
  }
  /// First column of the first row as text ("" when none); throws on an error.
  std::string query(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
      const std::string e = PQresultErrorMessage(r);
      PQclear(r);
      throw std::runtime_error(sql + ": " + e);
    }
    std::string v = PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
    PQclear(r);
    return v;
  }
  std::int64_t query_int(const std::string& sql) { return std::stoll(query(sql)); }

 private:
  PGconn* conn_ = nullptr;
  std::string error_;
};

/// Whether the PostgreSQL tests can run; fails (SVATTN_PG_REQUIRED=1) or skips otherwise.
#define SVATTN_REQUIRE_PG()                                                              \
  do {                                                                                   \
    ::svattn::store_test::RawPg probe_;                                                  \
    if (!probe_.ok()) {                                                                  \
      const char* req_ = std::getenv("SVATTN_PG_REQUIRED");                              \
      if (req_ != nullptr && std::string(req_) == "1") {                                 \
        FAIL() << "no PostgreSQL server (SVATTN_PG_REQUIRED=1): " << probe_.error();     \
      }                                                                                  \
      GTEST_SKIP() << "no PostgreSQL server (start one: eval \"$(scripts/pg-cluster.sh " \
                      "start)\"): "                                                      \
                   << probe_.error();                                                    \
    }                                                                                    \
  } while (0)

/// The database that holds the key schemas of the tests' key databases ("keys in a separate
/// PostgreSQL database"), created on first use (a concurrent creation by another test process is
/// fine).
inline const char* key_database() {
  static const char* const kName = [] {
    RawPg raw;
    raw.exec("CREATE DATABASE svattn_keys");  // fails harmlessly when it exists
    return "svattn_keys";
  }();
  return kName;
}

/// Percent-encodes everything but unreserved characters (a URI inside a URI's parameter).
inline std::string percent_encode(const std::string& s) {
  static const char* const kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

/// A fresh schema on the server for one store (in the environment's database, or in `dbname`),
/// dropped when the object dies; uri() names the store in it, with its key store `keys` (a file
/// path or a postgresql:// URI, percent-encoded into the parameter; empty: none).
class PgSchema {
 public:
  explicit PgSchema(std::string dbname = "") : dbname_(std::move(dbname)) {
    static std::atomic<int> counter{0};
    name_ = "svattn_t" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    RawPg raw("", dbname_);
    const std::string e =
        raw.exec("DROP SCHEMA IF EXISTS " + name_ + " CASCADE; CREATE SCHEMA " + name_);
    if (!e.empty()) throw std::runtime_error("cannot create schema " + name_ + ": " + e);
  }
  ~PgSchema() {
    RawPg raw("", dbname_);
    raw.exec("DROP SCHEMA IF EXISTS " + name_ + " CASCADE");
  }
  PgSchema(const PgSchema&) = delete;
  PgSchema& operator=(const PgSchema&) = delete;
  const std::string& name() const { return name_; }
  const std::string& dbname() const { return dbname_; }
  /// postgresql:// URI of the store (server from the environment, search_path = this schema).
  std::string uri(const std::string& keys) const {
    std::string u = (dbname_.empty() ? "postgresql://" : "postgresql:///" + dbname_) +
                    "?options=-csearch_path%3D" + name_;
    if (!keys.empty()) u += "&keys=" + percent_encode(keys);
    return u;
  }

 private:
  std::string dbname_;
  std::string name_;
};

}  // namespace svattn::store_test
