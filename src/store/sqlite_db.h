// The store's SQL connection: Database, Statement and Transaction over one of two backends, the
// embedded SQLite file (sqlite_db.cpp) and PostgreSQL through libpq (pg_db.cpp). SQL is written in
// SQLite's dialect everywhere; the PostgreSQL backend translates it in one place (sql_dialect.h;
// docs/store.md "PostgreSQL"). Every failure becomes a typed svattn exception.
#pragma once
#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace svattn::store_detail {

/// Maps an SQLite result code to a typed exception: BUSY/LOCKED -> StoreBusy, FULL (or an I/O
/// error with errno ENOSPC/EFBIG/EDQUOT) -> StoreFull, CORRUPT/NOTADB/FORMAT -> FormatError,
/// CANTOPEN -> IoError, anything else -> StoreError. `what` names the operation.
[[noreturn]] void throw_sqlite(sqlite3* db, int rc, const std::string& what);

enum class Backend { kSqlite, kPostgres };

/// One prepared statement of a backend. Parameters are 1-based, columns 0-based.
class StatementBackend {
 public:
  virtual ~StatementBackend() = default;
  virtual void bind_int64(int index, std::int64_t v) = 0;
  virtual void bind_double(int index, double v) = 0;
  virtual void bind_text(int index, const std::string& v) = 0;
  virtual void bind_blob(int index, const void* data, std::size_t bytes) = 0;
  virtual bool step() = 0;
  /// Statement::defer: by default the statement runs now.
  virtual void defer() {
    while (step()) {
    }
  }
  virtual void reset() = 0;
  virtual std::int64_t int64(int col) const = 0;
  virtual double real(int col) const = 0;
  virtual std::string text(int col) const = 0;
  virtual const void* blob_data(int col) const = 0;
  virtual int bytes(int col) const = 0;
  virtual bool is_null(int col) const = 0;
  /// Statement::stream: by default rows are read as the backend reads them.
  virtual void stream() {}
};

/// One connection of a backend.
class DatabaseBackend {
 public:
  virtual ~DatabaseBackend() = default;
  virtual Backend kind() const = 0;
  virtual std::unique_ptr<StatementBackend> prepare(const char* sql) = 0;
  virtual void exec(const std::string& sql) = 0;
  /// Starts a transaction: a writer (`immediate`) holds the store's one write lock, waiting at
  /// most `busy_timeout_ms` before StoreBusy; a reader reads one snapshot.
  virtual void begin(bool immediate, const std::string& store, int busy_timeout_ms) = 0;
  virtual void commit() = 0;
  virtual void rollback() noexcept = 0;
  /// The open transaction's COMMIT need not wait for the disk (PostgreSQL: synchronous_commit
  /// off for it alone; SQLite sets this per connection, see RelaxedCommit).
  virtual void relax_commit() {}
  /// Rows changed by the last INSERT/UPDATE/DELETE.
  virtual std::int64_t changes() = 0;
  /// The SQLite connection; nullptr on PostgreSQL.
  virtual sqlite3* sqlite() const { return nullptr; }
};

class Database;

/// What Database::handle() returns: statements are prepared on it, and it converts to the
/// sqlite3* of an SQLite connection for the calls that exist only there (busy timeout, backup,
/// WAL checkpoints); on a PostgreSQL connection that conversion throws StoreError.
class DbHandle {
 public:
  explicit DbHandle(Database* db) : db_(db) {}
  operator sqlite3*() const;  // NOLINT(google-explicit-constructor): SQLite C API calls
  Database& database() const { return *db_; }

 private:
  Database* db_;
};

class Statement {
 public:
  Statement(DbHandle db, const char* sql);
  Statement(DbHandle db, const std::string& sql) : Statement(db, sql.c_str()) {}
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, std::int64_t v);
  Statement& bind(int index, double v);
  Statement& bind(int index, const std::string& v);
  Statement& bind_blob(int index, const void* data, std::size_t bytes);
  /// Returns true while a row is available, false when done; throws on error.
  bool step() { return s_->step(); }
  /// Steps a statement that returns no rows.
  void run();
  /// Runs a statement that returns no rows inside a transaction whose commit is the only thing
  /// that needs its outcome. SQLite runs it now. PostgreSQL sends it without waiting and reads
  /// its result with that of the next statement that returns rows, or with the COMMIT, all in one
  /// round trip (libpq's pipeline mode). Its failure is thrown there, and the transaction then
  /// rolls back. Later statements see its effect; changes() does not report it. Outside a
  /// transaction it runs now on both backends. The statement may be reset and bound again at
  /// once.
  void defer() { s_->defer(); }
  void reset() { s_->reset(); }

  std::int64_t int64(int col) const { return s_->int64(col); }
  double real(int col) const { return s_->real(col); }
  std::string text(int col) const { return s_->text(col); }
  std::vector<std::uint8_t> blob(int col) const;
  const void* blob_data(int col) const { return s_->blob_data(col); }
  int bytes(int col) const { return s_->bytes(col); }
  bool is_null(int col) const { return s_->is_null(col); }
  /// After binding, before the first step: the rows are handed out as they arrive instead of
  /// after the whole result (PostgreSQL's single-row mode, the statement sent at once; SQLite
  /// steps row by row anyway), so a long scan is processed while the server still sends it. No
  /// other statement runs on the connection until this one has returned its last row or is reset.
  Statement& stream() {
    s_->stream();
    return *this;
  }

 private:
  std::unique_ptr<StatementBackend> s_;
};

class Database {
 public:
  Database() = default;
  /// An SQLite file (sqlite3_open_v2 flags); IoError when it cannot be opened.
  Database(const std::string& path, int flags);
  /// A PostgreSQL connection (pg_db.cpp): `conninfo` is a libpq URI or key=value string;
  /// `display` names the store in messages. IoError when the server cannot be reached;
  /// InvalidArgument when this svattn was built without libpq.
  static Database postgres(const std::string& conninfo, const std::string& display,
                           int busy_timeout_ms);
  explicit Database(std::unique_ptr<DatabaseBackend> impl) : impl_(std::move(impl)) {}
  Database(Database&& o) noexcept = default;
  Database& operator=(Database&& o) noexcept = default;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  DbHandle handle() const { return DbHandle(const_cast<Database*>(this)); }
  bool is_open() const { return impl_ != nullptr; }
  Backend backend() const;
  bool postgres() const { return is_open() && backend() == Backend::kPostgres; }
  /// The open connection (StoreError when closed).
  DatabaseBackend& impl() const;
  void exec(const std::string& sql);
  /// Single-value query helpers.
  std::int64_t query_int(const std::string& sql);
  std::string query_text(const std::string& sql);
  /// Rows changed by the last INSERT/UPDATE/DELETE.
  std::int64_t changes() { return impl().changes(); }
  void close() noexcept { impl_.reset(); }

 private:
  std::unique_ptr<DatabaseBackend> impl_;
};

/// While it lives, commits on `db` do not wait for the disk: SQLite's synchronous=NORMAL on the
/// connection (in WAL mode the WAL is written at commit and synced by the next synchronous commit
/// or checkpoint), FULL again when it dies; on PostgreSQL in_transaction(), called once the
/// transaction has begun, sets synchronous_commit off for it. For transactions whose loss in a
/// crash of the machine is harmless (docs/store.md "Bounds groups", "Erasure by key destruction").
/// `unsynced` (SQLite): synchronous=OFF instead, so that not even the header of a WAL that was
/// emptied is synced, and no automatic checkpoint (which would then copy the WAL into the file
/// without syncing either). A crash of the machine can then lose the commit, as with NORMAL, but
/// not corrupt the file: the WAL's frames are checksummed in a chain salted by its header, so a
/// lost or torn frame ends the log before the transaction, and every checkpoint runs at FULL
/// (after this object died), syncing the WAL before it copies it.
class RelaxedCommit {
 public:
  explicit RelaxedCommit(Database& db, bool unsynced = false);
  ~RelaxedCommit();
  RelaxedCommit(const RelaxedCommit&) = delete;
  RelaxedCommit& operator=(const RelaxedCommit&) = delete;
  void in_transaction();

 private:
  Database& db_;
};

/// A transaction: a writer (`immediate`: SQLite BEGIN IMMEDIATE; PostgreSQL the store's advisory
/// write lock) or a reader (one snapshot); rolled back unless committed.
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
