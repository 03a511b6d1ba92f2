// Thin RAII wrapper over the SQLite C API used by the store. Every SQLite failure becomes a typed
// svattn exception (see throw_sqlite).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <sqlite3.h>

namespace svattn::store_detail {

/// Maps an SQLite result code to a typed exception: BUSY/LOCKED -> StoreBusy, FULL (or an I/O
/// error with errno ENOSPC/EFBIG/EDQUOT) -> StoreFull, CORRUPT/NOTADB/FORMAT -> FormatError,
/// CANTOPEN -> IoError, anything else -> StoreError. `what` names the operation.
[[noreturn]] void throw_sqlite(sqlite3* db, int rc, const std::string& what);

class Statement {
 public:
  Statement(sqlite3* db, const char* sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, std::int64_t v);
  Statement& bind(int index, double v);
  Statement& bind(int index, const std::string& v);
  Statement& bind_blob(int index, const void* data, std::size_t bytes);
  /// Returns true while a row is available, false when done; throws on error.
  bool step();
  /// Steps a statement that returns no rows.
  void run();
  void reset();

  std::int64_t int64(int col) const;
  double real(int col) const;
  std::string text(int col) const;
  std::vector<std::uint8_t> blob(int col) const;
  const void* blob_data(int col) const;
  int bytes(int col) const;
  bool is_null(int col) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
};

class Database {
 public:
  Database() = default;
  Database(const std::string& path, int flags);
  ~Database();
  Database(Database&& o) noexcept;
  Database& operator=(Database&& o) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  sqlite3* handle() const { return db_; }
  void exec(const std::string& sql);
  /// Single-value query helpers.
  std::int64_t query_int(const std::string& sql);
  std::string query_text(const std::string& sql);
  void close() noexcept;

 private:
  sqlite3* db_ = nullptr;
};

/// A transaction: BEGIN IMMEDIATE (writers) or BEGIN (readers); rolled back unless committed.
class Transaction {
 public:
  Transaction(Database& db, bool immediate, const std::string& store_path, int busy_timeout_ms);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();
  void rollback() noexcept;

 private:
  Database& db_;
  bool open_ = false;
};

}  // namespace svattn::store_detail
