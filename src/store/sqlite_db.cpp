#include "sqlite_db.h"

#include <cerrno>
#include <cstring>

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

Statement::Statement(sqlite3* db, const char* sql) : db_(db), sql_(sql) {
  const int rc = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  if (rc != SQLITE_OK) throw_sqlite(db, rc, "preparing SQL");
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int index, std::int64_t v) {
  const int rc = sqlite3_bind_int64(stmt_, index, v);
  if (rc != SQLITE_OK) throw_sqlite(db_, rc, "binding SQL parameter");
  return *this;
}
Statement& Statement::bind(int index, double v) {
  const int rc = sqlite3_bind_double(stmt_, index, v);
  if (rc != SQLITE_OK) throw_sqlite(db_, rc, "binding SQL parameter");
  return *this;
}
Statement& Statement::bind(int index, const std::string& v) {
  const int rc = sqlite3_bind_text(stmt_, index, v.data(), static_cast<int>(v.size()),
                                   SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) throw_sqlite(db_, rc, "binding SQL parameter");
  return *this;
}
Statement& Statement::bind_blob(int index, const void* data, std::size_t bytes) {
  // A zero-length blob still needs a non-null pointer so that it is stored as a blob, not NULL.
  static const char kEmpty = 0;
  const int rc = sqlite3_bind_blob(stmt_, index, bytes == 0 ? &kEmpty : data,
                                   static_cast<int>(bytes), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) throw_sqlite(db_, rc, "binding SQL parameter");
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw_sqlite(db_, rc, "executing SQL");
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::int64_t Statement::int64(int col) const { return sqlite3_column_int64(stmt_, col); }
double Statement::real(int col) const { return sqlite3_column_double(stmt_, col); }
std::string Statement::text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
  const int n = sqlite3_column_bytes(stmt_, col);
  return p == nullptr ? std::string() : std::string(p, static_cast<std::size_t>(n));
}
std::vector<std::uint8_t> Statement::blob(int col) const {
  const auto* p = static_cast<const std::uint8_t*>(sqlite3_column_blob(stmt_, col));
  const int n = sqlite3_column_bytes(stmt_, col);
  if (p == nullptr || n <= 0) return {};
  return std::vector<std::uint8_t>(p, p + n);
}
const void* Statement::blob_data(int col) const { return sqlite3_column_blob(stmt_, col); }
int Statement::bytes(int col) const { return sqlite3_column_bytes(stmt_, col); }
bool Statement::is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

Database::Database(const std::string& path, int flags) {
  const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = "cannot open store '" + path + "': " +
                      (db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw IoError(msg);
  }
  sqlite3_extended_result_codes(db_, 1);
}

Database::~Database() { close(); }

Database::Database(Database&& o) noexcept : db_(o.db_) { o.db_ = nullptr; }
Database& Database::operator=(Database&& o) noexcept {
  if (this != &o) {
    close();
    db_ = o.db_;
    o.db_ = nullptr;
  }
  return *this;
}

void Database::close() noexcept {
  if (db_ != nullptr) {
    sqlite3_close_v2(db_);
    db_ = nullptr;
  }
}

void Database::exec(const std::string& sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  sqlite3_free(err);
  if (rc != SQLITE_OK) throw_sqlite(db_, rc, "executing SQL");
}

std::int64_t Database::query_int(const std::string& sql) {
  Statement s(db_, sql.c_str());
  if (!s.step()) throw StoreError("query returned no row: " + sql);
  return s.int64(0);
}

std::string Database::query_text(const std::string& sql) {
  Statement s(db_, sql.c_str());
  if (!s.step()) throw StoreError("query returned no row: " + sql);
  return s.text(0);
}

Transaction::Transaction(Database& db, bool immediate, const std::string& store_path,
                         int busy_timeout_ms)
    : db_(db) {
  const int rc = sqlite3_exec(db.handle(), immediate ? "BEGIN IMMEDIATE" : "BEGIN", nullptr,
                              nullptr, nullptr);
  if (rc != SQLITE_OK) {
    if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {
      throw StoreBusy("store '" + store_path + "' is locked by another process (waited " +
                      std::to_string(busy_timeout_ms) + " ms)");
    }
    throw_sqlite(db.handle(), rc, "starting a transaction on '" + store_path + "'");
  }
  open_ = true;
}

Transaction::~Transaction() { rollback(); }

void Transaction::commit() {
  const int rc = sqlite3_exec(db_.handle(), "COMMIT", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    // Build the exception while the connection still holds the error (and errno) of the COMMIT.
    try {
      throw_sqlite(db_.handle(), rc, "committing");
    } catch (...) {
      rollback();
      throw;
    }
  }
  open_ = false;
}

void Transaction::rollback() noexcept {
  if (open_) {
    // After some errors SQLite has already rolled back; ROLLBACK then fails harmlessly.
    if (sqlite3_get_autocommit(db_.handle()) == 0) {
      sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
    }
    open_ = false;
  }
}

}  // namespace svattn::store_detail
