// Opening a store file and its schema (docs/store.md "Schema"): file checks, the schema of a new
// store, validation of an existing one, migrations of older schema versions, WAL checkpoints.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "db/postgres.h"
#include "db/sqlite.h"
#include "schema_ddl.h"
#include "store_impl.h"

namespace svattn {

using namespace store_detail;

namespace {


std::string fs_parent(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}



}  // namespace

bool Store::Impl::open_file() {
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) throw IoError("store '" + path + "' is not a regular file");
  if (!exists && !options.create) throw IoError("store '" + path + "' does not exist");
  bool fresh = !exists || st.st_size == 0;
  if (fresh && !options.create) {
    throw FormatError("'" + path + "' is empty: not a svattn store");
  }
  if (!fresh) {
    if (st.st_size < 100) {
      throw FormatError("'" + path + "' is not a svattn store (" + std::to_string(st.st_size) +
                        " bytes: too short for an SQLite header)");
    }
    char header[16] = {};
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError("cannot read '" + path + "'");
    in.read(header, 16);
    if (!in || std::memcmp(header, "SQLite format 3\0", 16) != 0) {
      throw FormatError("'" + path + "' is not a svattn store (not an SQLite database)");
    }
  }
  if (fresh && options.read_only) {
    throw InvalidArgument("store '" + path + "' does not exist (cannot create it read-only)");
  }
  SqliteOpen how;
  how.read_only = options.read_only;
  how.create = fresh;
  how.busy_timeout_ms = options.busy_timeout_ms;
  // A WAL reader needs the -shm file; in a directory the user cannot write it cannot be made.
  // With no -wal file the database file is complete, so it is opened immutable (docs/store.md).
  how.uri = options.read_only && cannot_share_wal();
  db = open_sqlite(how.uri ? sqlite_immutable_uri(path) : path, how);
  if (fresh) db.enable_wal();
  return fresh;
}

bool Store::Impl::open_postgres() {
  db = store_detail::open_postgres(pg_conninfo, path, options.busy_timeout_ms);
  const bool exists = db.has_table("meta");
  if (!exists && !options.create) {
    throw IoError("store '" + path + "' does not exist (no svattn tables in the schema)");
  }
  if (!exists && options.encrypt && keys_path.empty()) {
    throw InvalidArgument("store '" + path +
                          "': a new encrypted PostgreSQL store needs its key store named in the URI "
                          "(keys=PATH of a file, or keys=postgresql://... of a separate "
                          "database), or StoreOptions::encrypt = false (--plaintext)");
  }
  return !exists;
}

void Store::Impl::open() {
  const bool fresh = pg_conninfo.empty() ? open_file() : open_postgres();
  if (fresh) initialise_schema();
  validate_existing();
  if (options.read_only) {  // connection settings below only matter to writers
    if (!vault.enabled()) open_key_store(false);
    find_shredded();  // excluded from every view (store_shredded.cpp)
    return;
  }
  db.harden_writes();
  const std::string mode = db.enable_wal();
  if (mode != "wal")
    throw StoreError("store '" + path + "': cannot enable WAL mode (" + mode + ")");
  if (schema_version < kStoreSchemaVersion) upgrade_schema();
  if (!vault.enabled()) open_key_store(fresh);
  if (!foreign_key_store.empty()) return;  // every write refuses it (require_writable)
  complete_shreds(nullptr);  // a forget interrupted between its commit and the key's destruction
  find_shredded();           // records of a restored copy whose keys are destroyed: purged
  purge_shredded();
  complete_shreds(nullptr);  // a purged record's bounds group key, if it was still live
}

bool Store::Impl::cannot_share_wal() const {
  const std::string dir = fs_parent(path);
  return ::access((path + "-wal").c_str(), F_OK) != 0 &&
         ::access((path + "-shm").c_str(), F_OK) != 0 && ::access(dir.c_str(), W_OK) != 0;
}

void Store::Impl::require_writable() const {
  if (options.read_only) {
    throw InvalidArgument("store '" + path + "' was opened read-only (StoreOptions::read_only)");
  }
  if (!foreign_key_store.empty()) throw FormatError(foreign_key_store + "; nothing was written");
}

void Store::Impl::initialise_schema() {
  Transaction t(db, true, path, options.busy_timeout_ms);
  // Another process may have initialised the file between our stat and the lock.
  if (db.user_version() != 0 || !db.is_empty()) {
    return;  // rolled back (nothing written); validate_existing() checks what is there
  }
  const SchemaDdl& ddl = schema_ddl(db);
  db.exec_ddl(ddl.store_tables);  // then the tables the upgrades also create (one text each)
  db.exec_ddl(ddl.screening);
  db.exec_ddl(ddl.pending_shreds);
  db.exec_ddl(ddl.bounds_groups);
  db.set_application_id(kStoreApplicationId);
  db.set_user_version(kStoreSchemaVersion);
  Statement ins(db.handle(), "INSERT INTO meta(key, value) VALUES (?1, ?2)");
  const std::pair<const char*, std::string> rows[] = {
      {"magic", kMagic},
      {"schema_version", std::to_string(kStoreSchemaVersion)},
      {"created_utc", now_utc()},
      {"token_id_layout", "record << 23 | position"},
      {"audit_head_seq", "0"},
      {"audit_head_hash", kZeroHash},
      {"encryption", options.encrypt ? "aes-256-gcm" : "none"}};
  for (const auto& [k, v] : rows) {
    ins.bind(1, std::string(k)).bind(2, v).run();
    ins.reset();
  }
  t.commit();
}

void Store::Impl::validate_existing() {
  const std::string not_store = "'" + path + "' is not a svattn store";
  std::int64_t app_id = 0;
  std::int64_t version = 0;
  try {
    app_id = db.application_id();
    version = db.user_version();
  } catch (const FormatError& e) {
    throw FormatError(not_store + " or is corrupted: " + e.what());
  }
  if (app_id != kStoreApplicationId) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%08llx", static_cast<unsigned long long>(app_id));
    throw FormatError(not_store + " (SQLite application_id " + buf + ", expected 0x53564154)");
  }
  if (version > kStoreSchemaVersion) {
    throw FormatError("store '" + path + "' has schema version " + std::to_string(version) +
                      ", newer than this svattn supports (" + std::to_string(kStoreSchemaVersion) +
                      "); upgrade svattn");
  }
  if (version < 1) {
    throw FormatError(not_store + " (schema version " + std::to_string(version) + ")");
  }
  schema_version = version;
  if (options.check_on_open && !db.postgres()) {  // PostgreSQL: page integrity is the server's
    std::string first;
    try {
      first = db.integrity_check(true);
    } catch (const Error& e) {
      throw FormatError("store '" + path + "' is corrupted or truncated: " + e.what());
    }
    if (first != "ok") {
      throw FormatError("store '" + path + "' is corrupted or truncated: " + first);
    }
  }
  std::string magic;
  try {
    Statement q(db.handle(), "SELECT value FROM meta WHERE key = 'magic'");
    if (q.step()) magic = q.text(0);
  } catch (const StoreError& e) {
    throw FormatError(not_store + " (no meta table: " + e.what() + ")");
  }
  if (magic != kMagic) throw FormatError(not_store + " (meta magic '" + magic + "')");
  std::string meta_version;
  {
    Statement q(db.handle(), "SELECT value FROM meta WHERE key = 'schema_version'");
    if (q.step()) meta_version = q.text(0);
  }
  {
    Statement q(db.handle(), "SELECT value FROM meta WHERE key = 'encryption'");
    if (q.step()) {
      encryption = q.text(0);
    } else if (version >= 3) {
      throw FormatError("store '" + path + "': meta has no 'encryption' row");
    }
  }
  has_key_id_column = record_rows.key_id_column_exists();
  if (meta_version != std::to_string(version)) {
    throw FormatError("store '" + path + "': unsupported schema version " +
                      (meta_version.empty() ? std::string("(missing)") : meta_version) +
                      " in the meta table (the file header says " + std::to_string(version) +
                      "; this svattn supports " + std::to_string(kStoreSchemaVersion) + ")");
  }
}

void Store::Impl::describe_erasure(StoreErasure& se) const {
  if (!db.postgres()) return;  // SQLite: secure_delete zeroes freed pages, the WAL is truncated
  se.secure_delete = false;
  se.erasure_basis =
      encryption == "none"
          ? "none: a plaintext PostgreSQL store; the deleted rows stay in the server's files until "
            "VACUUM, which does not zero freed space"
      : vault.enabled() && vault.keys().postgres()
          ? "key destruction: the record's data key is destroyed in the key database; the "
            "ciphertext, and the key's old tuple in the key database, may stay in the "
            "servers' files and WAL until VACUUM, which does not zero freed space"
          : "key destruction: the record's data key is destroyed; its ciphertext may stay in "
            "the server's files until VACUUM, which does not zero freed space";
}

void Store::Impl::checkpoint(bool* truncated) {
  if (db.postgres()) {  // the server's WAL is not the store's to truncate (docs/store.md)
    *truncated = false;
    return;
  }
  *truncated = sqlite_checkpoint_truncate(db, true).ok;
}

}  // namespace svattn
