// The PostgreSQL backend of the store's connection (db/postgres.h; docs/store.md "Backends"), on
// libpq: statements rewritten for PostgreSQL where the dialects differ (db/dialect.h; the catalog
// and header integers are db/pg_catalog.h's, which this connection derives from), prepared
// once per connection, parameters sent as text (the server infers their types) or, for blobs,
// binary, and results read in binary (db/pg_values.h). Writers serialise on one advisory lock per
// store schema; readers read one REPEATABLE READ snapshot.
#include "postgres.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "dialect.h"
#include "pg_catalog.h"
#include "pg_values.h"
#include "svattn/errors.h"

#ifdef SVATTN_HAVE_LIBPQ
#include <libpq-fe.h>
#endif

namespace svattn::store_detail {

#ifdef SVATTN_HAVE_LIBPQ
namespace {

std::string trimmed(const char* s) {
  std::string m = s != nullptr ? s : "";
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

// SQLSTATE -> typed exception (the same types as throw_sqlite).
[[noreturn]] void throw_pg(PGconn* c, const PGresult* r, const std::string& what) {
  const char* st = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  const std::string state = st != nullptr ? st : "";
  const std::string msg =
      what + ": " + trimmed(r != nullptr ? PQresultErrorMessage(r) : PQerrorMessage(c));
  if (state == "55P03") throw StoreBusy(msg + " (the store is locked by another connection)");
  if (state == "40001" || state == "40P01")
    throw StoreBusy(msg + " (a conflict with another connection; the operation was rolled back)");
  if (state == "57014") {  // query_canceled: not a lock, so not StoreBusy
    throw StoreError(msg +
                     " (the server cancelled the statement: its statement_timeout ran out, "
                     "or an administrator cancelled it; the operation was rolled back)");
  }
  if (state.rfind("53", 0) == 0)
    throw StoreFull(msg + " (disk or resource limit of the server; the operation was rolled back)");
  if (state == "XX001" || state == "XX002")
    throw FormatError(msg + " (the server reports corrupted data)");
  if (state.rfind("08", 0) == 0 || PQstatus(c) == CONNECTION_BAD)
    throw IoError(msg + " (connection to the server lost)");
  throw StoreError(msg);
}

using Result = std::unique_ptr<PGresult, decltype(&PQclear)>;

class PgConnection;

class PgStatement : public StatementBackend {
 public:
  PgStatement(PgConnection& c, std::string name, int nparams)
      : c_(c), name_(std::move(name)), values_(nparams), set_(nparams, 0), formats_(nparams, 0) {}
  ~PgStatement() override { drain(); }
  void bind_int64(int index, std::int64_t v) override { put(index, std::to_string(v), 0); }
  void bind_double(int index, double v) override;
  void bind_text(int index, const std::string& v) override { put(index, v, 0); }
  void bind_blob(int index, const void* data, std::size_t bytes) override {
    put(index, std::string(static_cast<const char*>(data), bytes), 1);
  }
  bool step() override;
  void defer() override;
  void reset() override {
    drain();
    res_.reset();
    executed_ = false;
    std::fill(set_.begin(), set_.end(), 0);
  }
  std::int64_t int64(int col) const override;
  double real(int col) const override;
  std::string text(int col) const override;
  const void* blob_data(int col) const override {
    return is_null(col) ? nullptr : PQgetvalue(res_.get(), row_, col);
  }
  int bytes(int col) const override {
    return is_null(col) ? 0 : PQgetlength(res_.get(), row_, col);
  }
  bool is_null(int col) const override {
    check_col(col);
    return PQgetisnull(res_.get(), row_, col) != 0;
  }
  void stream() override;

 private:
  void put(int index, std::string v, int format) {
    if (index < 1 || index > static_cast<int>(values_.size()))
      throw StoreError("SQL parameter " + std::to_string(index) +
                       " out of range (the statement has " + std::to_string(values_.size()) + ")");
    values_[index - 1] = std::move(v);
    set_[index - 1] = 1;
    formats_[index - 1] = format;
  }
  void check_col(int col) const {
    if (res_ == nullptr || row_ < 0 || row_ >= PQntuples(res_.get()) || col < 0 ||
        col >= PQnfields(res_.get()))
      throw StoreError("SQL column " + std::to_string(col) + " read without a current row");
  }
  const char* raw(int col) const { return PQgetvalue(res_.get(), row_, col); }
  // The bound values as libpq takes them (unset: NULL).
  struct Params {
    std::vector<const char*> values;
    std::vector<int> lengths;
  };
  Params params() const;
  void send_streamed(const Params& p);
  bool next_streamed();
  void drain() noexcept;
  PgConnection& c_;
  std::string name_;  // of the prepared statement; empty: a statement translated to nothing
  std::vector<std::string> values_;
  std::vector<char> set_;
  std::vector<int> formats_;
  Result res_{nullptr, &PQclear};
  int row_ = -1;
  bool executed_ = false;
  bool stream_ = false;     // Statement::stream was called
  bool streaming_ = false;  // a streamed result is being read: more rows (or its end) follow
};

class PgConnection : public PgCatalogBackend {
 public:
  PgConnection(const std::string& conninfo, const std::string& display, int busy_timeout_ms);
  ~PgConnection() override { PQfinish(conn_); }
  Backend kind() const override { return Backend::kPostgres; }
  std::unique_ptr<StatementBackend> prepare(const char* sql) override;
  void exec(const std::string& sql) override;
  void exec_ddl(const std::string& sql) override { run(sql.c_str(), "creating tables"); }
  void begin(bool immediate, const std::string& store, int busy_timeout_ms) override;
  void commit() override;
  void rollback() noexcept override {
    relaxed_commit_ = false;
    in_transaction_ = false;
    if (pipelined()) {
      try {
        end_pipeline("rolling back");
      } catch (...) {  // the statements' failure is why it rolls back
      }
    }
    if (PQtransactionStatus(conn_) != PQTRANS_IDLE) Result(PQexec(conn_, "ROLLBACK"), &PQclear);
    if (pragma_table_created_) pragma_table_ready_ = pragma_table_created_ = false;
  }
  void relax_commit() override { relaxed_commit_ = true; }
  std::int64_t changes() override { return changes_; }
  PGconn* conn() const { return conn_; }
  void set_changes(const PGresult* r) {
    const char* n = PQcmdTuples(const_cast<PGresult*>(r));
    changes_ = n != nullptr && *n != '\0' ? std::strtoll(n, nullptr, 10) : 0;
  }
  // Deferred statements (Statement::defer): queued in libpq's pipeline mode inside a
  // transaction, their results read by end_pipeline.
  bool can_defer() const { return kPipelining && in_transaction_; }
  bool pipelined() const;
  void send_prepared(const std::string& name, int n, const char* const* values, const int* lengths,
                     const int* formats);
  /// Sends a sync, reads every queued result in order, leaves pipeline mode and returns the last
  /// result; throws the first failure once all were read.
  Result end_pipeline(const std::string& what);

 private:
  Result run(const char* sql, const std::string& what);
  std::vector<std::string> primary_key(const std::string& table);
  PGconn* conn_ = nullptr;
  std::string display_;
  std::unordered_map<std::string, std::pair<std::string, int>> prepared_;  // sql -> name, params
  std::int64_t changes_ = 0;
  bool pragma_table_ready_ = false;    // svattn_pragma exists (checked once per connection)
  bool pragma_table_created_ = false;  // ... created by the open transaction
  bool relaxed_commit_ = false;        // the open transaction's COMMIT does not wait for the disk
  bool in_transaction_ = false;        // begin() succeeded; no commit or rollback since
#ifdef LIBPQ_HAS_PIPELINING
  static constexpr bool kPipelining = true;
#else
  static constexpr bool kPipelining = false;  // libpq before 14: defer() runs at once
#endif
  void enter_pipeline();
  void send_sql(const char* sql);
  int prepare_and_describe(const std::string& name, const std::string& sql);
};

void PgStatement::bind_double(int index, double v) {
  if (v != v) return put(index, "NaN", 0);
  if (v == __builtin_inf()) return put(index, "Infinity", 0);
  if (v == -__builtin_inf()) return put(index, "-Infinity", 0);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);  // 17 digits: strtod on the server round-trips
  put(index, buf, 0);
}

PgStatement::Params PgStatement::params() const {
  const std::size_t n = values_.size();
  Params p{std::vector<const char*>(n), std::vector<int>(n)};
  for (std::size_t i = 0; i < n; ++i) {
    p.values[i] = set_[i] ? values_[i].data() : nullptr;
    p.lengths[i] = static_cast<int>(values_[i].size());
  }
  return p;
}

bool PgStatement::step() {
  if (streaming_) return next_streamed();
  if (!executed_) {
    executed_ = true;
    row_ = -1;
    if (name_.empty()) return false;
    const int n = static_cast<int>(values_.size());
    const Params p = params();
    if (c_.pipelined()) {  // deferred statements are waiting: this one ends their round trip
      c_.send_prepared(name_, n, p.values.data(), p.lengths.data(), formats_.data());
      res_ = c_.end_pipeline("executing SQL");
    } else if (stream_) {
      send_streamed(p);
      return next_streamed();
    } else {
      res_.reset(PQexecPrepared(c_.conn(), name_.c_str(), n, p.values.data(), p.lengths.data(),
                                formats_.data(), 1));
      const ExecStatusType st = PQresultStatus(res_.get());
      if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
        throw_pg(c_.conn(), res_.get(), "executing SQL");
    }
    c_.set_changes(res_.get());
  }
  if (res_ == nullptr) return false;
  return ++row_ < PQntuples(res_.get());
}

// Sends the statement for single-row mode; its rows are read by next_streamed().
void PgStatement::send_streamed(const Params& p) {
  executed_ = true;
  row_ = -1;
  if (PQsendQueryPrepared(c_.conn(), name_.c_str(), static_cast<int>(values_.size()),
                          p.values.data(), p.lengths.data(), formats_.data(), 1) != 1)
    throw_pg(c_.conn(), nullptr, "executing SQL");
  streaming_ = true;
  if (PQsetSingleRowMode(c_.conn()) != 1) {
    drain();
    throw StoreError("executing SQL: libpq refused single-row mode");
  }
}

void PgStatement::stream() {
  stream_ = true;
  // Sent now, so that the server works on it while the caller prepares for its rows; with
  // deferred statements waiting it runs (whole) at the first step instead.
  if (!executed_ && !name_.empty() && !c_.pipelined()) send_streamed(params());
}

// One row of a streamed result per call; its end (a final result without rows) or its failure
// (after the rows before it) ends the stream, and libpq's closing null is read then.
bool PgStatement::next_streamed() {
  res_.reset(PQgetResult(c_.conn()));
  const ExecStatusType st = res_ == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(res_.get());
  if (st == PGRES_SINGLE_TUPLE) {
    row_ = 0;
    return true;
  }
  Result last = std::move(res_);
  res_.reset();
  drain();
  if (st != PGRES_TUPLES_OK) throw_pg(c_.conn(), last.get(), "executing SQL");
  return false;
}

// Reads what is left of a streamed result (a scan abandoned midway, or after its end), so that the
// connection can run the next statement.
void PgStatement::drain() noexcept {
  if (!streaming_) return;
  streaming_ = false;
  while (PGresult* r = PQgetResult(c_.conn())) PQclear(r);
}

void PgStatement::defer() {
  if (!c_.can_defer()) return StatementBackend::defer();  // runs now
  executed_ = true;
  res_.reset();
  row_ = -1;
  if (name_.empty()) return;
  const Params p = params();
  c_.send_prepared(name_, static_cast<int>(values_.size()), p.values.data(), p.lengths.data(),
                   formats_.data());
}

std::int64_t PgStatement::int64(int col) const {
  return is_null(col) ? 0 : pg_int64(PQftype(res_.get(), col), raw(col), bytes(col));
}

double PgStatement::real(int col) const {
  return is_null(col) ? 0 : pg_real(PQftype(res_.get(), col), raw(col), bytes(col));
}

std::string PgStatement::text(int col) const {
  return is_null(col) ? "" : pg_text(PQftype(res_.get(), col), raw(col), bytes(col));
}

PgConnection::PgConnection(const std::string& conninfo, const std::string& display,
                           int busy_timeout_ms)
    : display_(display) {
  conn_ = PQconnectdb(conninfo.c_str());
  if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
    const std::string msg = trimmed(conn_ != nullptr ? PQerrorMessage(conn_) : "out of memory");
    PQfinish(conn_);
    conn_ = nullptr;
    throw IoError("cannot connect to store '" + display + "': " + msg);
  }
  PQsetNoticeProcessor(
      conn_, [](void*, const char*) {}, nullptr);
  if (PQserverVersion(conn_) < 110000) {
    const int v = PQserverVersion(conn_);
    PQfinish(conn_);
    conn_ = nullptr;
    throw IoError("store '" + display + "': PostgreSQL " + std::to_string(v / 10000) +
                  " is too old (the store needs 11 or newer)");
  }
  // lock_timeout bounds the wait for the store's write lock (0 = try once, see begin).
  // random_page_cost: the server's default 4 models a spinning disk; with it the planner read a
  // memory's tokens by a sequential scan and an on-disk sort (140-200 ms at 20k) instead of in
  // order from the (memory_id, token_id) index (3-6 ms). 1.1 is used unless the server, the
  // database, the role or the URI (options=-crandom_page_cost=…) set a value of their own
  // (docs/store.md "Round trips and plans").
  run(("SET lock_timeout = " + std::to_string(busy_timeout_ms) +
       "; SELECT set_config('random_page_cost', '1.1', false) FROM pg_settings WHERE name = "
       "'random_page_cost' AND source = 'default'")
          .c_str(),
      "configuring");
}

#ifdef LIBPQ_HAS_PIPELINING
bool PgConnection::pipelined() const { return PQpipelineStatus(conn_) != PQ_PIPELINE_OFF; }

void PgConnection::enter_pipeline() {
  if (!pipelined() && PQenterPipelineMode(conn_) != 1)
    throw_pg(conn_, nullptr, "entering pipeline mode");
}

void PgConnection::send_prepared(const std::string& name, int n, const char* const* values,
                                 const int* lengths, const int* formats) {
  enter_pipeline();
  if (PQsendQueryPrepared(conn_, name.c_str(), n, values, lengths, formats, 1) != 1)
    throw_pg(conn_, nullptr, "sending SQL");
}

void PgConnection::send_sql(const char* sql) {
  enter_pipeline();
  if (PQsendQueryParams(conn_, sql, 0, nullptr, nullptr, nullptr, nullptr, 0) != 1)
    throw_pg(conn_, nullptr, "sending SQL");
}

// Each statement's result is followed by a null; the sync's result ends the pipeline. Statements
// after a failed one are answered PIPELINE_ABORTED. Two nulls in a row: the connection is gone.
Result PgConnection::end_pipeline(const std::string& what) {
  Result failed(nullptr, &PQclear), last(nullptr, &PQclear);
  bool synced = PQpipelineSync(conn_) == 1;
  bool was_null = false;
  while (synced) {
    Result r(PQgetResult(conn_), &PQclear);
    if (r == nullptr) {
      if (was_null) synced = false;
      was_null = true;
      continue;
    }
    was_null = false;
    const ExecStatusType st = PQresultStatus(r.get());
    if (st == PGRES_PIPELINE_SYNC) break;
    if (st == PGRES_PIPELINE_ABORTED) continue;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      if (failed == nullptr) failed = std::move(r);
    } else {
      last = std::move(r);
    }
  }
  if (synced) PQexitPipelineMode(conn_);
  if (failed != nullptr) throw_pg(conn_, failed.get(), what);
  if (!synced) throw_pg(conn_, nullptr, what + " (the pipeline did not complete)");
  return last;
}
#else
bool PgConnection::pipelined() const { return false; }
void PgConnection::send_prepared(const std::string&, int, const char* const*, const int*,
                                 const int*) {}
void PgConnection::send_sql(const char*) {}
Result PgConnection::end_pipeline(const std::string&) { return Result(nullptr, &PQclear); }
#endif

Result PgConnection::run(const char* sql, const std::string& what) {
  if (pipelined()) end_pipeline(what);  // deferred statements first (a round trip of their own)
  Result r(PQexec(conn_, sql), &PQclear);
  const ExecStatusType st = PQresultStatus(r.get());
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) throw_pg(conn_, r.get(), what);
  set_changes(r.get());
  return r;
}

std::vector<std::string> PgConnection::primary_key(const std::string& table) {
  const char* sql =
      "SELECT a.attname::text FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND "
      "a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass($1) AND i.indisprimary ORDER BY "
      "array_position(i.indkey::int2[], a.attnum)";
  const char* v[1] = {table.c_str()};
  if (pipelined()) end_pipeline("reading a primary key");  // deferred statements first
  Result r(PQexecParams(conn_, sql, 1, nullptr, v, nullptr, nullptr, 0), &PQclear);
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) throw_pg(conn_, r.get(), "reading a primary key");
  std::vector<std::string> key;
  for (int i = 0; i < PQntuples(r.get()); ++i) key.emplace_back(PQgetvalue(r.get(), i, 0));
  return key;
}

// Prepares `sql` as `name` and returns its number of parameters: with pipelining the prepare and
// its description go in one round trip, without it in two.
int PgConnection::prepare_and_describe(const std::string& name, const std::string& sql) {
#ifdef LIBPQ_HAS_PIPELINING
  enter_pipeline();
  if (PQsendPrepare(conn_, name.c_str(), sql.c_str(), 0, nullptr) != 1 ||
      PQsendDescribePrepared(conn_, name.c_str()) != 1)
    throw_pg(conn_, nullptr, "preparing SQL");
  const Result d = end_pipeline("preparing SQL");  // the description, after the prepare's result
#else
  Result r(PQprepare(conn_, name.c_str(), sql.c_str(), 0, nullptr), &PQclear);
  if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) throw_pg(conn_, r.get(), "preparing SQL");
  Result d(PQdescribePrepared(conn_, name.c_str()), &PQclear);
  if (PQresultStatus(d.get()) != PGRES_COMMAND_OK) throw_pg(conn_, d.get(), "preparing SQL");
#endif
  return PQnparams(d.get());
}

std::unique_ptr<StatementBackend> PgConnection::prepare(const char* sql) {
  auto it = prepared_.find(sql);
  if (it == prepared_.end()) {
    if (pipelined()) end_pipeline("executing SQL");  // PQprepare waits for its answer
    std::vector<std::string> parts =
        sqlite_to_postgres(sql, [this](const std::string& t) { return primary_key(t); });
    std::string pg;
    for (const std::string& p : parts) {
      if (p.empty()) continue;
      if (!pg.empty()) throw StoreError(std::string("one SQL statement expected: ") + sql);
      pg = p;
    }
    std::string name;
    int nparams = 0;
    if (!pg.empty()) {
      name = "svattn_" + std::to_string(prepared_.size() + 1);
      nparams = prepare_and_describe(name, pg);
    }
    it = prepared_.emplace(sql, std::make_pair(name, nparams)).first;
  }
  return std::make_unique<PgStatement>(*this, it->second.first, it->second.second);
}

void PgConnection::exec(const std::string& sql) {
  std::string pg;
  for (const std::string& p :
       sqlite_to_postgres(sql, [this](const std::string& t) { return primary_key(t); })) {
    if (!p.empty()) pg += (pg.empty() ? "" : ";\n") + p;
  }
  if (!pg.empty()) run(pg.c_str(), "executing SQL");
}

void PgConnection::begin(bool immediate, const std::string& store, int busy_timeout_ms) {
  relaxed_commit_ = false;
  if (pipelined()) end_pipeline("starting a transaction on '" + store + "'");
  if (!immediate) {
    run("BEGIN ISOLATION LEVEL REPEATABLE READ", "starting a transaction on '" + store + "'");
    in_transaction_ = true;
    return;
  }
  // One write lock per store (its schema), held to the end of the transaction: writers are
  // serialised as SQLite's BEGIN IMMEDIATE serialises them, and each sees the last commit. BEGIN
  // and the lock go in one round trip; the result is the lock's (a failed BEGIN would be
  // reported by it as well: the lock then does not run).
  const char* lock = busy_timeout_ms == 0
                         ? "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT "
                           "pg_try_advisory_xact_lock(hashtextextended('svattn-store:' || "
                           "current_schema(), 0))"
                         : "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT "
                           "pg_advisory_xact_lock(hashtextextended('svattn-store:' || "
                           "current_schema(), 0))";
  Result r(PQexec(conn_, lock), &PQclear);
  const bool ok = PQresultStatus(r.get()) == PGRES_TUPLES_OK;
  const char* state = ok ? nullptr : PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
  const bool timed_out = state != nullptr && std::strcmp(state, "55P03") == 0;
  if (ok && busy_timeout_ms == 0 && std::strcmp(PQgetvalue(r.get(), 0, 0), "t") != 0) {
    rollback();
    throw StoreBusy("store '" + store + "' is locked by another process (waited 0 ms)");
  }
  if (timed_out) {
    rollback();
    throw StoreBusy("store '" + store + "' is locked by another process (waited " +
                    std::to_string(busy_timeout_ms) + " ms)");
  }
  if (!ok) {
    Result keep = std::move(r);
    rollback();
    throw_pg(conn_, keep.get(), "locking store '" + store + "'");
  }
  if (!pragma_table_ready_) {
    Result e = run("SELECT to_regclass('svattn_pragma') IS NULL", "reading the catalog");
    if (std::strcmp(PQgetvalue(e.get(), 0, 0), "t") == 0) {
      run("CREATE TABLE svattn_pragma(name TEXT PRIMARY KEY, value BIGINT NOT NULL)",
          "creating svattn_pragma");
      pragma_table_created_ = true;
    }
    pragma_table_ready_ = true;
  }
  in_transaction_ = true;
}

void PgConnection::commit() {
  const bool relaxed = relaxed_commit_;
  relaxed_commit_ = false;
  in_transaction_ = false;
  // SET LOCAL holds for this transaction only; it and COMMIT go in one round trip, with the
  // deferred statements if there are any (a pipeline takes one statement per query).
  Result r(nullptr, &PQclear);
  if (pipelined()) {
    if (relaxed) send_sql("SET LOCAL synchronous_commit TO OFF");
    send_sql("COMMIT");
    r = end_pipeline("committing");
  } else {
    r = run(relaxed ? "SET LOCAL synchronous_commit TO OFF; COMMIT" : "COMMIT", "committing");
  }
  pragma_table_created_ = false;
  // COMMIT of a transaction that an error aborted answers ROLLBACK.
  if (std::strcmp(PQcmdStatus(r.get()), "COMMIT") != 0)
    throw StoreError("committing on '" + display_ +
                     "': the transaction had failed and was rolled back");
}

}  // namespace

Database open_postgres(const std::string& conninfo, const std::string& display,
                       int busy_timeout_ms) {
  return Database(std::make_unique<PgConnection>(conninfo, display, busy_timeout_ms));
}

#else

Database open_postgres(const std::string&, const std::string& display, int) {
  throw InvalidArgument("store '" + display +
                        "': this svattn was built without PostgreSQL support (libpq was not found "
                        "at build time; install libpq-dev and rebuild)");
}

#endif

}  // namespace svattn::store_detail
