// The SQLite backend of the store's connection (db/sqlite.cpp; docs/store.md "Backends"): opening
// a store or key-store file, and the calls that exist only on SQLite (busy timeout, WAL
// checkpoint, read-only test, page counts, online backup, a read-only reader of a backup copy).
// The SQLite header stays in db/sqlite.cpp. Private to the store.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "database.h"

struct sqlite3;

namespace svattn::store_detail {

/// How open_sqlite opens a file (sqlite3_open_v2's flags).
struct SqliteOpen {
  bool read_only = false;    ///< SQLITE_OPEN_READONLY, else READWRITE
  bool create = false;       ///< SQLITE_OPEN_CREATE
  bool uri = false;          ///< `path` is a file: URI (SQLITE_OPEN_URI)
  bool full_mutex = false;   ///< SQLITE_OPEN_FULLMUTEX, else NOMUTEX
  int busy_timeout_ms = -1;  ///< sqlite3_busy_timeout when >= 0
};

/// An SQLite connection; IoError naming `path` when it cannot be opened.
Database open_sqlite(const std::string& path, const SqliteOpen& how);

/// file: URI of `path` with immutable=1 ('%', '?' and '#' percent-encoded): a read-only open of a
/// file with no WAL beside it, in a directory where no -shm file can be made.
std::string sqlite_immutable_uri(const std::string& path);

/// sqlite3_wal_checkpoint_v2 in TRUNCATE mode.
struct WalCheckpoint {
  bool ok = false;      ///< the checkpoint ran
  bool busy = false;    ///< another connection held a lock (BUSY/LOCKED)
  int log_frames = -1;  ///< frames left in the WAL afterwards (0: it was truncated)
};
/// `main_only`: the main schema (else every attached one). With `throw_what`, a failure other than
/// BUSY/LOCKED throws the typed exception naming it; otherwise it is reported in the result.
WalCheckpoint sqlite_checkpoint_truncate(Database& db, bool main_only,
                                         const char* throw_what = nullptr);

/// The file's pages (PRAGMA page_count, page_size).
struct SqlitePages {
  std::int64_t count = 0;
  std::int64_t size = 0;
};
SqlitePages sqlite_pages(Database& db);

/// sqlite3_db_readonly of the main schema (a read-only file or connection).
bool sqlite_read_only(Database& db);

/// Copies every page of `src` into `dst` with sqlite3_backup (`pages_per_step` per step, -1: all
/// in one), retrying a locked source for `busy_timeout_ms`; returns the steps that copied pages.
/// StoreBusy when the source stayed locked; the typed exception of any other failure. `source`
/// names the source in messages.
int sqlite_backup(Database& src, Database& dst, int pages_per_step, int busy_timeout_ms,
                  const std::string& source);

/// A read-only SQLite connection to a backup copy (the rows the public Store API does not give).
class ReadOnlyDb {
 public:
  explicit ReadOnlyDb(const std::string& path);  ///< IoError naming the path
  ~ReadOnlyDb();
  ReadOnlyDb(const ReadOnlyDb&) = delete;
  ReadOnlyDb& operator=(const ReadOnlyDb&) = delete;
  /// Rows of `sql` as text, the text parameters bound in order; FormatError on any failure.
  std::vector<std::vector<std::string>> rows(const std::string& sql,
                                             const std::vector<std::string>& params = {});

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace svattn::store_detail
