// The SQLite backend of the store's connection (db/sqlite.h): statements prepared once per
// connection and pooled, every result code mapped to a typed exception, the catalog, header
// integers and connection settings in SQLite's own spelling (sqlite_master, pragma_table_info,
// PRAGMAs; db/database.h), and the calls that exist only on SQLite (open flags, busy timeout, WAL
// checkpoint, page counts, online backup, read-only reader).
#include "sqlite.h"
#include "support/clock.h"

#include <sqlite3.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace svattn::store_detail {
namespace {

// Maps an SQLite result code to a typed exception: BUSY/LOCKED -> StoreBusy, FULL (or an I/O
// error with errno ENOSPC/EFBIG/EDQUOT) -> StoreFull, CORRUPT/NOTADB/FORMAT -> FormatError,
// CANTOPEN -> IoError, anything else -> StoreError. `what` names the operation.
[[noreturn]] void throw_sqlite(sqlite3* db, int rc, const std::string& what) {
  // errno of the failed system call: SQLite's own record when it kept one, otherwise errno as the
  // failing call left it (sqlite3_system_errno is not set on every path, e.g. COMMIT).
  const int global_errno = errno;
  const int primary = rc & 0xff;
  int sys_errno = db != nullptr ? sqlite3_system_errno(db) : 0;
  if (sys_errno == 0 && primary == SQLITE_IOERR) sys_errno = global_errno;
  std::string msg = what + ": ";
  msg += db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  if (primary == SQLITE_IOERR && sys_errno != 0) {
    msg += std::string(" (") + std::strerror(sys_errno) + ")";
  }
  switch (primary) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      throw StoreBusy(msg + " (the store is locked by another connection)");
    case SQLITE_FULL:
      throw StoreFull(msg + " (disk or file-size limit full; the operation was rolled back)");
    case SQLITE_IOERR:
      if (sys_errno == ENOSPC || sys_errno == EFBIG
#ifdef EDQUOT
          || sys_errno == EDQUOT
#endif
      ) {
        throw StoreFull(msg + " (disk or file-size limit full; the operation was rolled back)");
      }
      throw StoreError(msg);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_FORMAT:
      throw FormatError(msg + " (not a store, or a corrupted or truncated one)");
    case SQLITE_CANTOPEN:
      throw IoError(msg);
    default:
      throw StoreError(msg);
  }
}

// A connection's prepared statements that no Statement uses now, by their SQL: a statement is
// compiled once per connection instead of once per use (a forget runs some 60; preparing one
// costs 7-10 us). A statement is reset and its bindings cleared before it is kept, so a kept one
// holds no read transaction and blocks no checkpoint, backup or VACUUM. sqlite3_prepare_v2
// statements recompile themselves after a schema change. The pool is finalized with its
// connection; a statement still in use then is finalized when it dies.
class StatementPool {
 public:
  explicit StatementPool(sqlite3* db) : db_(db) {}
  sqlite3_stmt* take(const char* sql) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = idle_.find(sql);
      if (it != idle_.end()) {
        sqlite3_stmt* s = it->second;
        idle_.erase(it);
        return s;
      }
    }
    sqlite3_stmt* s = nullptr;
    const int rc = sqlite3_prepare_v2(db_, sql, -1, &s, nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(s);
      throw_sqlite(db_, rc, "preparing SQL");
    }
    return s;
  }
  void give_back(const std::string& sql, sqlite3_stmt* s) noexcept {
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_ || idle_.size() >= kMaxIdle) {
      sqlite3_finalize(s);
      return;
    }
    try {
      idle_.emplace(sql, s);
    } catch (...) {  // out of memory: not kept
      sqlite3_finalize(s);
    }
  }
  void close() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [sql, s] : idle_) sqlite3_finalize(s);
    idle_.clear();
    closed_ = true;
  }

 private:
  static constexpr std::size_t kMaxIdle = 256;  // the store's SQL is a few dozen distinct texts
  sqlite3* db_;
  std::mutex mutex_;
  std::unordered_multimap<std::string, sqlite3_stmt*> idle_;
  bool closed_ = false;
};

class SqliteStatement : public StatementBackend {
 public:
  SqliteStatement(std::shared_ptr<StatementPool> pool, sqlite3* db, const char* sql)
      : pool_(std::move(pool)), sql_(sql), db_(db), stmt_(pool_->take(sql)) {}
  ~SqliteStatement() override { pool_->give_back(sql_, stmt_); }
  void bind_int64(int index, std::int64_t v) override {
    check(sqlite3_bind_int64(stmt_, index, v));
  }
  void bind_double(int index, double v) override { check(sqlite3_bind_double(stmt_, index, v)); }
  void bind_text(int index, const std::string& v) override {
    check(sqlite3_bind_text(stmt_, index, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
  }
  void bind_blob(int index, const void* data, std::size_t bytes) override {
    // A zero-length blob still needs a non-null pointer so that it is stored as a blob, not NULL.
    static const char kEmpty = 0;
    check(sqlite3_bind_blob(stmt_, index, bytes == 0 ? &kEmpty : data, static_cast<int>(bytes),
                            SQLITE_TRANSIENT));
  }
  bool step() override {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw_sqlite(db_, rc, "executing SQL");
  }
  void reset() override {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  std::int64_t int64(int col) const override { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const override { return sqlite3_column_double(stmt_, col); }
  std::string text(int col) const override {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    const int n = sqlite3_column_bytes(stmt_, col);
    return p == nullptr ? std::string() : std::string(p, static_cast<std::size_t>(n));
  }
  const void* blob_data(int col) const override { return sqlite3_column_blob(stmt_, col); }
  int bytes(int col) const override { return sqlite3_column_bytes(stmt_, col); }
  bool is_null(int col) const override { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) throw_sqlite(db_, rc, "binding SQL parameter");
  }
  std::shared_ptr<StatementPool> pool_;
  std::string sql_;
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

class SqliteDatabase : public DatabaseBackend {
 public:
  SqliteDatabase(const std::string& path, int flags) {
    const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
    if (rc != SQLITE_OK) {
      std::string msg = "cannot open store '" + path +
                        "': " + (db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
      sqlite3_close_v2(db_);
      db_ = nullptr;
      throw IoError(msg);
    }
    sqlite3_extended_result_codes(db_, 1);
    pool_ = std::make_shared<StatementPool>(db_);
  }
  ~SqliteDatabase() override {
    if (pool_ != nullptr) pool_->close();
    sqlite3_close_v2(db_);
  }
  Backend kind() const override { return Backend::kSqlite; }
  std::unique_ptr<StatementBackend> prepare(const char* sql) override {
    return std::make_unique<SqliteStatement>(pool_, db_, sql);
  }
  void exec(const std::string& sql) override {
    char* err = nullptr;
    const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    sqlite3_free(err);
    if (rc != SQLITE_OK) throw_sqlite(db_, rc, "executing SQL");
  }
  void begin(bool immediate, const std::string& store, int busy_timeout_ms) override {
    const int rc =
        sqlite3_exec(db_, immediate ? "BEGIN IMMEDIATE" : "BEGIN", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) return;
    if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {
      throw StoreBusy("store '" + store + "' is locked by another process (waited " +
                      std::to_string(busy_timeout_ms) + " ms)");
    }
    throw_sqlite(db_, rc, "starting a transaction on '" + store + "'");
  }
  void commit() override {
    const int rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
    // The exception is built while the connection still holds the error (and errno) of COMMIT.
    if (rc != SQLITE_OK) throw_sqlite(db_, rc, "committing");
  }
  void rollback() noexcept override {
    // After some errors SQLite has already rolled back; ROLLBACK then fails harmlessly.
    if (sqlite3_get_autocommit(db_) == 0) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  std::int64_t changes() override { return sqlite3_changes64(db_); }
  void relax_connection(bool unsynced) override {
    exec(unsynced ? "PRAGMA synchronous=OFF; PRAGMA wal_autocheckpoint=0"
                  : "PRAGMA synchronous=NORMAL");
  }
  void restore_connection() override {
    exec("PRAGMA synchronous=FULL; PRAGMA wal_autocheckpoint=1000");  // SQLite's default
  }
  sqlite3* handle() const { return db_; }

  bool has_table(const std::string& name) override {
    return !query_column(*this, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                         {name})
                .empty();
  }
  bool has_trigger(const std::string& name) override {
    return !query_column(*this, "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?1",
                         {name})
                .empty();
  }
  bool has_column(const std::string& table, const std::string& column) override {
    return !query_column(*this, "SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2",
                         {table, column})
                .empty();
  }
  std::vector<std::string> table_names() override {
    return query_column(*this, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  }
  std::vector<std::string> trigger_names() override {
    return query_column(*this,
                        "SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name");
  }
  std::vector<std::string> column_names(const std::string& table) override {
    return query_column(*this, "SELECT name FROM pragma_table_info(?1) ORDER BY name", {table});
  }
  bool is_empty() override { return query_column(*this, "SELECT 1 FROM sqlite_master").empty(); }
  std::int64_t user_version() override { return pragma_int("PRAGMA user_version"); }
  void set_user_version(std::int64_t v) override {
    exec("PRAGMA user_version=" + std::to_string(v));
  }
  std::int64_t application_id() override { return pragma_int("PRAGMA application_id"); }
  void set_application_id(std::int64_t v) override {
    exec("PRAGMA application_id=" + std::to_string(v));
  }
  std::string enable_wal() override {
    const std::vector<std::string> mode = query_column(*this, "PRAGMA journal_mode=WAL");
    return mode.empty() ? "" : mode[0];
  }
  void harden_writes() override { exec("PRAGMA secure_delete=ON; PRAGMA synchronous=FULL"); }
  std::string integrity_check(bool quick) override {
    const std::unique_ptr<StatementBackend> q =
        prepare(quick ? "PRAGMA quick_check" : "PRAGMA integrity_check");
    return q->step() ? q->text(0) : "";
  }

 private:
  std::int64_t pragma_int(const char* sql) {
    const std::unique_ptr<StatementBackend> q = prepare(sql);
    if (!q->step()) throw StoreError(std::string("query returned no row: ") + sql);
    return q->int64(0);
  }
  sqlite3* db_ = nullptr;
  std::shared_ptr<StatementPool> pool_;
};

// The SQLite connection of `db`; StoreError on a PostgreSQL one.
sqlite3* native(Database& db) {
  auto* s = dynamic_cast<SqliteDatabase*>(&db.impl());
  if (s == nullptr) throw StoreError("an SQLite-only call on a PostgreSQL store");
  return s->handle();
}

}  // namespace

Database open_sqlite(const std::string& path, const SqliteOpen& how) {
  int flags = how.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
  if (how.create) flags |= SQLITE_OPEN_CREATE;
  if (how.uri) flags |= SQLITE_OPEN_URI;
  flags |= how.full_mutex ? SQLITE_OPEN_FULLMUTEX : SQLITE_OPEN_NOMUTEX;
  Database db(std::make_unique<SqliteDatabase>(path, flags));
  if (how.busy_timeout_ms >= 0) sqlite3_busy_timeout(native(db), how.busy_timeout_ms);
  return db;
}

std::string sqlite_immutable_uri(const std::string& path) {
  std::string u = "file:";
  for (char ch : path) {
    if (ch == '%' || ch == '?' || ch == '#') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(ch));
      u += buf;
    } else {
      u += ch;
    }
  }
  return u + "?immutable=1";
}

WalCheckpoint sqlite_checkpoint_truncate(Database& db, bool main_only, const char* throw_what) {
  sqlite3* s = native(db);
  WalCheckpoint r;
  int done = -1;
  const int rc = sqlite3_wal_checkpoint_v2(s, main_only ? "main" : nullptr,
                                           SQLITE_CHECKPOINT_TRUNCATE, &r.log_frames, &done);
  r.ok = rc == SQLITE_OK;
  r.busy = rc == SQLITE_BUSY || rc == SQLITE_LOCKED;
  if (!r.ok && !r.busy && throw_what != nullptr) throw_sqlite(s, rc, throw_what);
  return r;
}

SqlitePages sqlite_pages(Database& db) {
  SqlitePages p;
  p.count = db.query_int("PRAGMA page_count");
  p.size = db.query_int("PRAGMA page_size");
  return p;
}

bool sqlite_read_only(Database& db) { return sqlite3_db_readonly(native(db), "main") != 0; }

int sqlite_backup(Database& src_db, Database& dst_db, int pages_per_step, int busy_timeout_ms,
                  const std::string& source) {
  sqlite3* src = native(src_db);
  sqlite3* dst = native(dst_db);
  sqlite3_backup* b = sqlite3_backup_init(dst, "main", src, "main");
  if (b == nullptr) throw_sqlite(dst, sqlite3_errcode(dst), "backup of '" + source + "'");
  const support::Stopwatch waited;
  int steps = 0;
  int rc = SQLITE_OK;
  while (true) {
    rc = sqlite3_backup_step(b, pages_per_step);
    if (rc == SQLITE_OK || rc == SQLITE_DONE) ++steps;
    if (rc == SQLITE_DONE) break;
    if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
      if (waited.milliseconds() > busy_timeout_ms) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    if (rc != SQLITE_OK) break;
  }
  sqlite3_backup_finish(b);
  if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
    throw StoreBusy("backup: source '" + source + "' stayed locked for " +
                    std::to_string(busy_timeout_ms) + " ms");
  }
  if (rc != SQLITE_DONE) throw_sqlite(dst, rc, "backup of '" + source + "'");
  return steps;
}

ReadOnlyDb::ReadOnlyDb(const std::string& path) {
  const std::string uri = "file:" + path + "?mode=ro";
  if (sqlite3_open_v2(uri.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr) !=
      SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw IoError("receipt: cannot open '" + path + "': " + msg);
  }
  sqlite3_busy_timeout(db_, 5000);
}

ReadOnlyDb::~ReadOnlyDb() { sqlite3_close(db_); }

std::vector<std::vector<std::string>> ReadOnlyDb::rows(const std::string& sql,
                                                       const std::vector<std::string>& params) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    throw FormatError(std::string("receipt: not a store (") + sqlite3_errmsg(db_) + ")");
  }
  for (std::size_t k = 0; k < params.size(); ++k)
    sqlite3_bind_text(st, static_cast<int>(k + 1), params[k].c_str(), -1, SQLITE_TRANSIENT);
  std::vector<std::vector<std::string>> out;
  int rc = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int c = 0; c < sqlite3_column_count(st); ++c) {
      const unsigned char* t = sqlite3_column_text(st, c);
      row.emplace_back(t ? reinterpret_cast<const char*>(t) : "");
    }
    out.push_back(std::move(row));
  }
  const std::string msg = sqlite3_errmsg(db_);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) throw FormatError("receipt: " + msg);
  return out;
}

}  // namespace svattn::store_detail
