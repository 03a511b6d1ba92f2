// Consistent online copies of an SQLite data file with the SQLite backup API (docs/store.md
// "Encryption at rest (building blocks)"). The copy is the data file only: data keys stay in the
// key store and are never included. Private to the store.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace svattn::store_detail {

struct BackupSettings {
  /// Pages copied per sqlite3_backup_step; -1 (default) copies everything in one step, i.e. from
  /// one read snapshot (in WAL mode that does not block writers). Otherwise > 0: writers may run
  /// between steps, and a write by another connection restarts the copy.
  int pages_per_step = -1;
  /// How long a busy or locked source is retried, in ms (>= 0; default 5000).
  int busy_timeout_ms = 5000;
  void validate() const;
};

struct BackupResult {
  std::string source;
  std::string destination;
  std::int64_t pages = 0;
  std::int64_t page_size = 0;
  std::int64_t bytes = 0;      ///< size of the destination file
  std::string sha256;          ///< of the destination file
  int steps = 0;               ///< sqlite3_backup_step calls that copied pages
  bool integrity_ok = false;   ///< SQLite's quick_check of the copy answered "ok"
  bool keys_included = false;  ///< always false: see keys_note
  std::string keys_note;
  double seconds = 0;
  nlohmann::json to_json() const;
};

/// Copies the SQLite database `source` (with the committed contents of its WAL) to `destination`,
/// which must not exist (AlreadyExists, nothing written). The copy is written to a temporary file
/// beside the destination, synced, and linked into place, so `destination` either does not exist
/// or is complete. NotFound if the source does not exist, FormatError if it is not SQLite,
/// StoreBusy if it stays locked past the timeout.
BackupResult backup_database(const std::string& source, const std::string& destination,
                             const BackupSettings& settings = {});

}  // namespace svattn::store_detail
