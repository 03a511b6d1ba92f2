// The store's SQL connection, backend-neutral: Database, Statement, Transaction and RelaxedCommit
// over one of two backends, the embedded SQLite file (db/sqlite.h) and PostgreSQL through libpq
// (db/postgres.h); docs/store.md "Backends". Tables are created in each backend's own dialect
// (schema_ddl.h); the statements that read and write rows are written once and the PostgreSQL
// backend rewrites their shared parts (db/dialect.h); the catalog, SQLite's header integers and
// the connection settings are methods each backend implements in its own dialect. Every failure is
// a typed svattn exception (svattn/store_errors.h). Private to the store.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "svattn/store_errors.h"

namespace svattn::store_detail {

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
  /// Runs a script written in this backend's own dialect (schema_ddl.h), as it is.
  virtual void exec_ddl(const std::string& sql) { exec(sql); }
  /// Starts a transaction: a writer (`immediate`) holds the store's one write lock, waiting at
  /// most `busy_timeout_ms` before StoreBusy; a reader reads one snapshot.
  virtual void begin(bool immediate, const std::string& store, int busy_timeout_ms) = 0;
  virtual void commit() = 0;
  virtual void rollback() noexcept = 0;
  /// The open transaction's COMMIT need not wait for the disk (PostgreSQL: synchronous_commit
  /// off for it alone; SQLite sets this per connection, see RelaxedCommit).
  virtual void relax_commit() {}
  /// RelaxedCommit on a connection that sets durability per connection (SQLite): commits stop
  /// waiting for the disk (`unsynced`: not even for the WAL header), and are durable again.
  virtual void relax_connection(bool /*unsynced*/) {}
  virtual void restore_connection() {}
  /// Rows changed by the last INSERT/UPDATE/DELETE.
  virtual std::int64_t changes() = 0;

  // The catalog, the header integers and the connection settings, each backend in its own
  // dialect (docs/store.md "Backends"): SQLite's sqlite_master, pragma_table_info and PRAGMAs
  // (db/sqlite.cpp); PostgreSQL's catalog of the store's schema and its table kPgPragmaTable
  // (db/pg_catalog.h). Names are compared as given; lists are in name order (bytewise).
  virtual bool has_table(const std::string& name) = 0;
  virtual bool has_trigger(const std::string& name) = 0;
  virtual bool has_column(const std::string& table, const std::string& column) = 0;
  virtual std::vector<std::string> table_names() = 0;
  virtual std::vector<std::string> trigger_names() = 0;
  virtual std::vector<std::string> column_names(const std::string& table) = 0;
  /// No table, index or trigger (on PostgreSQL none besides kPgPragmaTable's).
  virtual bool is_empty() = 0;
  /// SQLite's header integers (PRAGMA user_version, application_id); 0 when never set.
  virtual std::int64_t user_version() = 0;
  virtual void set_user_version(std::int64_t v) = 0;
  virtual std::int64_t application_id() = 0;
  virtual void set_application_id(std::int64_t v) = 0;
  /// Asks for write-ahead logging and returns the journal mode then in effect ("wal" when it is;
  /// always on PostgreSQL, which logs ahead anyway).
  virtual std::string enable_wal() = 0;
  /// A writer's settings: SQLite's secure_delete on and synchronous FULL; nothing on PostgreSQL
  /// (durability is the server's; a deleted tuple stays until VACUUM).
  virtual void harden_writes() = 0;
  /// The first row of SQLite's quick_check (`quick`) or integrity_check: "ok" when sound.
  /// StoreError on PostgreSQL, whose page integrity is the server's (pg_amcheck).
  virtual std::string integrity_check(bool quick) = 0;
};

/// `sql` prepared on `db` with `params` bound as text, in order (for the backends' catalog calls).
std::unique_ptr<StatementBackend> prepare_bound(DatabaseBackend& db, const char* sql,
                                                const std::vector<std::string>& params);
/// The first column of each row of prepare_bound(db, sql, params), as text.
std::vector<std::string> query_column(DatabaseBackend& db, const char* sql,
                                      const std::vector<std::string>& params = {});

class Database;

/// What Database::handle() returns: statements are prepared on it. The calls that exist only on
/// SQLite (busy timeout, backup, WAL checkpoints) are in db/sqlite.h.
class DbHandle {
 public:
  explicit DbHandle(Database* db) : db_(db) {}
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
  /// Moved out of the component that prepared it (a cursor over its rows, record_rows.h).
  Statement(Statement&&) noexcept = default;
  Statement& operator=(Statement&&) noexcept = default;

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
  /// A closed connection; db/sqlite.h and db/postgres.h open one.
  Database() = default;
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
  /// A script in the connected backend's own dialect (CREATE/ALTER TABLE: schema_ddl.h).
  void exec_ddl(const std::string& sql) { impl().exec_ddl(sql); }
  /// Single-value query helpers.
  std::int64_t query_int(const std::string& sql);
  std::string query_text(const std::string& sql);
  /// Rows changed by the last INSERT/UPDATE/DELETE.
  std::int64_t changes() { return impl().changes(); }
  /// The catalog, header integers and connection settings (DatabaseBackend; docs/store.md
  /// "Backends").
  bool has_table(const std::string& name) { return impl().has_table(name); }
  bool has_trigger(const std::string& name) { return impl().has_trigger(name); }
  bool has_column(const std::string& table, const std::string& column) {
    return impl().has_column(table, column);
  }
  std::vector<std::string> table_names() { return impl().table_names(); }
  std::vector<std::string> trigger_names() { return impl().trigger_names(); }
  std::vector<std::string> column_names(const std::string& table) {
    return impl().column_names(table);
  }
  bool is_empty() { return impl().is_empty(); }
  std::int64_t user_version() { return impl().user_version(); }
  void set_user_version(std::int64_t v) { impl().set_user_version(v); }
  std::int64_t application_id() { return impl().application_id(); }
  void set_application_id(std::int64_t v) { impl().set_application_id(v); }
  std::string enable_wal() { return impl().enable_wal(); }
  void harden_writes() { impl().harden_writes(); }
  std::string integrity_check(bool quick) { return impl().integrity_check(quick); }
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
