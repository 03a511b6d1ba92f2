// The SQLite backend of the store's SQL connection (sqlite_db.h) and the backend-independent
// Database/Statement/Transaction front end.
#include "sqlite_db.h"

#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "svattn/errors.h"
#include "svattn/store.h"

namespace svattn::store_detail {

void throw_sqlite(sqlite3* db, int rc, const std::string& what) {
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

namespace {

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
  sqlite3* sqlite() const override { return db_; }
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

 private:
  sqlite3* db_ = nullptr;
  std::shared_ptr<StatementPool> pool_;
};

}  // namespace

DbHandle::operator sqlite3*() const {
  sqlite3* s = db_->impl().sqlite();
  if (s == nullptr) throw StoreError("an SQLite-only call on a PostgreSQL store");
  return s;
}

Statement::Statement(DbHandle db, const char* sql) : s_(db.database().impl().prepare(sql)) {}

Statement& Statement::bind(int index, std::int64_t v) {
  s_->bind_int64(index, v);
  return *this;
}
Statement& Statement::bind(int index, double v) {
  s_->bind_double(index, v);
  return *this;
}
Statement& Statement::bind(int index, const std::string& v) {
  s_->bind_text(index, v);
  return *this;
}
Statement& Statement::bind_blob(int index, const void* data, std::size_t bytes) {
  s_->bind_blob(index, data, bytes);
  return *this;
}

void Statement::run() {
  while (step()) {
  }
}

std::vector<std::uint8_t> Statement::blob(int col) const {
  const auto* p = static_cast<const std::uint8_t*>(blob_data(col));
  const int n = bytes(col);
  if (p == nullptr || n <= 0) return {};
  return std::vector<std::uint8_t>(p, p + n);
}

Database::Database(const std::string& path, int flags)
    : impl_(std::make_unique<SqliteDatabase>(path, flags)) {}

Backend Database::backend() const { return impl().kind(); }

DatabaseBackend& Database::impl() const {
  if (impl_ == nullptr) throw StoreError("the store's connection is closed");
  return *impl_;
}

void Database::exec(const std::string& sql) { impl().exec(sql); }

std::int64_t Database::query_int(const std::string& sql) {
  Statement s(handle(), sql.c_str());
  if (!s.step()) throw StoreError("query returned no row: " + sql);
  return s.int64(0);
}

std::string Database::query_text(const std::string& sql) {
  Statement s(handle(), sql.c_str());
  if (!s.step()) throw StoreError("query returned no row: " + sql);
  return s.text(0);
}

RelaxedCommit::RelaxedCommit(Database& db, bool unsynced) : db_(db) {
  if (db_.postgres()) return;
  db_.exec(unsynced ? "PRAGMA synchronous=OFF; PRAGMA wal_autocheckpoint=0"
                    : "PRAGMA synchronous=NORMAL");
}

RelaxedCommit::~RelaxedCommit() {
  if (db_.postgres() || !db_.is_open()) return;
  try {
    db_.exec("PRAGMA synchronous=FULL; PRAGMA wal_autocheckpoint=1000");  // SQLite's default
  } catch (...) {  // the connection's next commits would still be written, only synced later
  }
}

void RelaxedCommit::in_transaction() {
  if (db_.postgres()) db_.impl().relax_commit();
}

Transaction::Transaction(Database& db, bool immediate, const std::string& store_path,
                         int busy_timeout_ms)
    : db_(db) {
  db.impl().begin(immediate, store_path, busy_timeout_ms);
  open_ = true;
}

Transaction::~Transaction() { rollback(); }

void Transaction::commit() {
  try {
    db_.impl().commit();
  } catch (...) {
    rollback();
    throw;
  }
  open_ = false;
}

void Transaction::rollback() noexcept {
  if (open_) {
    if (db_.is_open()) db_.impl().rollback();
    open_ = false;
  }
}

}  // namespace svattn::store_detail
