// Opening a store file and its schema (docs/store.md "Schema"): file checks, the schema of a new
// store, validation of an existing one, migrations of older schema versions, WAL checkpoints.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "store_impl.h"

namespace svattn {

using namespace store_detail;

namespace {

// Schema version 6 (docs/store.md "Schema"), with kScreeningTableSql, kPendingShredsSql and
// kBoundsGroupsSql below (shared with the upgrades). Version 5 is this without the bounds groups
// (records.bounds_group, the bounds_groups table) and with each record's screening bounds in
// records.bounds; version 4 also without records.bounds and screening.epoch, every bound in the
// screening row; version 3 also without records.buckets and with version-1 state hashes; version 2
// also without records.key_id, the meta row 'encryption' and pending_shreds; version 1 also without
// the screening table. records.key_id is the id of the record's data key in STORE.keys (NULL: its
// token payloads are plaintext) and records.buckets its bucket digests (sealed under that key;
// docs/store.md "Forget without a restore"); neither is a payload, so they may live in a WITHOUT
// ROWID table (docs/store.md "Encryption at rest"). records.bounds_group names the record's
// bounds group, whose blob holds the screening bounds of its records (docs/store.md "Bounds
// groups"); an upgraded file keeps an unused records.bounds column (NULL).
const char* kSchemaSql = R"SQL(
CREATE TABLE meta(
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE memories(
  id                INTEGER PRIMARY KEY,
  name              TEXT    NOT NULL UNIQUE,
  settings          TEXT    NOT NULL,
  dim               INTEGER NOT NULL,
  value_dim         INTEGER NOT NULL,
  b                 REAL    NOT NULL,
  status            TEXT    NOT NULL,
  warmup            INTEGER NOT NULL,
  kkt_max_violation REAL    NOT NULL,
  kkt_sum_error     REAL    NOT NULL,
  kkt_box_violation REAL    NOT NULL,
  state_sha256      TEXT    NOT NULL,
  last_audit_seq    INTEGER NOT NULL,
  created_utc       TEXT    NOT NULL
);
CREATE TABLE records(
  memory_id INTEGER NOT NULL,
  record    INTEGER NOT NULL,
  suspended INTEGER NOT NULL DEFAULT 0,
  added_utc TEXT    NOT NULL,
  key_id    TEXT,
  buckets   BLOB,
  bounds_group INTEGER,
  PRIMARY KEY(memory_id, record)
) WITHOUT ROWID;
CREATE TABLE tokens(
  rowid     INTEGER PRIMARY KEY,
  memory_id INTEGER NOT NULL,
  token_id  INTEGER NOT NULL,
  record    INTEGER NOT NULL,
  position  INTEGER NOT NULL,
  key       BLOB    NOT NULL,
  value     BLOB    NOT NULL,
  UNIQUE(memory_id, token_id)
);
CREATE TABLE support(
  memory_id INTEGER NOT NULL,
  token_id  INTEGER NOT NULL,
  part      INTEGER NOT NULL,
  alpha     REAL    NOT NULL,
  PRIMARY KEY(memory_id, token_id)
) WITHOUT ROWID;
CREATE TABLE audit(
  seq          INTEGER PRIMARY KEY,
  time_utc     TEXT    NOT NULL,
  operation    TEXT    NOT NULL,
  memory       TEXT    NOT NULL,
  record       INTEGER NOT NULL,
  token_count  INTEGER NOT NULL,
  state_before TEXT    NOT NULL,
  state_after  TEXT    NOT NULL,
  certificate  TEXT    NOT NULL,
  prev_hash    TEXT    NOT NULL,
  entry_hash   TEXT    NOT NULL
);
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
)SQL";

std::string fs_parent(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// file: URI of `path` with immutable=1 ('%', '?' and '#' percent-encoded).
std::string immutable_uri(const std::string& path) {
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

// Version 2 -> 3: data keys whose destruction a committed forget scheduled (docs/store.md
// "Erasure by key destruction").
const char* kPendingShredsSql = R"SQL(
CREATE TABLE IF NOT EXISTS pending_shreds(
  rowid     INTEGER PRIMARY KEY,
  key_id    TEXT    NOT NULL,
  memory    TEXT    NOT NULL,
  record    INTEGER NOT NULL
);
)SQL";

// Version 1 -> 2: the persisted screening bounds (docs/store.md "Persisted screening"); epoch from
// version 5 (bounds is then empty: they live in records.bounds).
const char* kScreeningTableSql = R"SQL(
CREATE TABLE screening(
  memory_id    INTEGER PRIMARY KEY,
  state_sha256 TEXT    NOT NULL,
  tokens       INTEGER NOT NULL,
  bounds       BLOB    NOT NULL,
  checksum     TEXT    NOT NULL,
  support_sha256 TEXT  NOT NULL,
  epoch        INTEGER NOT NULL DEFAULT 0
);
)SQL";

// Version 5 -> 6: the bounds groups (docs/store.md "Bounds groups"). One row per group: its key
// and the spare key that replaces it at the next erasure of one of its records (NULL in a
// plaintext store; the spare NULL until made), how many records and token rows it was given (for
// placing new records; not checked), and the blob of its active records' screening bounds (NULL:
// none).
const char* kBoundsGroupsSql = R"SQL(
CREATE TABLE bounds_groups(
  rowid          INTEGER PRIMARY KEY,
  memory_id      INTEGER NOT NULL,
  group_id       INTEGER NOT NULL,
  key_id         TEXT,
  next_key_id    TEXT,
  member_records INTEGER NOT NULL,
  member_tokens  INTEGER NOT NULL,
  bounds         BLOB,
  UNIQUE(memory_id, group_id)
);
CREATE INDEX records_bounds_group ON records(memory_id, bounds_group);
)SQL";
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
  int flags =
      (options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOMUTEX;
  if (fresh) flags |= SQLITE_OPEN_CREATE;
  if (options.read_only && cannot_share_wal()) {
    // A WAL reader needs the -shm file; in a directory the user cannot write it cannot be made.
    // With no -wal file the database file is complete, so it is opened immutable (docs/store.md).
    db = Database(immutable_uri(path), flags | SQLITE_OPEN_URI);
  } else {
    db = Database(path, flags);
  }
  sqlite3_busy_timeout(db.handle(), options.busy_timeout_ms);
  if (fresh) db.exec("PRAGMA journal_mode=WAL");
  return fresh;
}

bool Store::Impl::open_postgres() {
  db = Database::postgres(pg_conninfo, path, options.busy_timeout_ms);
  const bool exists =
      db.query_int("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'") > 0;
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
    if (key_store == nullptr) open_key_store(false);
    find_shredded();  // excluded from every view (store_shredded.cpp)
    return;
  }
  db.exec("PRAGMA secure_delete=ON");
  db.exec("PRAGMA synchronous=FULL");
  const std::string mode = db.query_text("PRAGMA journal_mode=WAL");
  if (mode != "wal")
    throw StoreError("store '" + path + "': cannot enable WAL mode (" + mode + ")");
  if (schema_version < kStoreSchemaVersion) upgrade_schema();
  if (key_store == nullptr) open_key_store(fresh);
  if (!foreign_key_store.empty()) return;  // every write refuses it (require_writable)
  complete_shreds(nullptr);  // a forget interrupted between its commit and the key's destruction
  find_shredded();           // records of a restored copy whose keys are destroyed: purged
  purge_shredded();
  complete_shreds(nullptr);  // a purged record's bounds group key, if it was still live
}

// Upgrades an older store in place, in one transaction logged in the audit chain: from version 1
// the screening table is created and filled for every memory (each restored once from its
// tokens); from version 2 records.key_id, meta 'encryption' and pending_shreds are added; from
// version 3 every memory's state hash is checked in the version-1 format and rewritten in the
// current one (store_rehash.cpp); from version 5 every record joins a bounds group and the
// screening bounds move into the groups' blobs (store_screening_legacy.cpp); from version 6 only
// the version number changes (token messages are written from then on). A read-only
// connection reads an older store as it is. Keys made for the groups are destroyed again if the
// upgrade fails.
void Store::Impl::upgrade_schema() {
  try {
    upgrade_schema_in_transaction();
  } catch (...) {
    discard_new_keys();
    throw;
  }
  new_key_ids.clear();
}

void Store::Impl::upgrade_schema_in_transaction() {
  Transaction t(db, true, path, options.busy_timeout_ms);
  const std::int64_t version = db.query_int("PRAGMA user_version");
  if (version >= kStoreSchemaVersion) {  // another process upgraded it meanwhile
    schema_version = version;
    encryption = db.query_text("SELECT value FROM meta WHERE key = 'encryption'");
    has_key_id_column = true;
    return;
  }
  // v3: records.key_id (NULL: plaintext payloads) and meta 'encryption'. An older store was
  // written in plain text and stays so ("none"; docs/store.md "Encryption at rest").
  if (db.query_int("SELECT count(*) FROM pragma_table_info('records') WHERE name = 'key_id'") == 0)
    db.exec("ALTER TABLE records ADD COLUMN key_id TEXT");
  // v4: records.buckets (the record's bucket digests, filled by rehash_states below).
  if (db.query_int("SELECT count(*) FROM pragma_table_info('records') WHERE name = 'buckets'") == 0)
    db.exec("ALTER TABLE records ADD COLUMN buckets BLOB");
  // v5: screening.epoch; v6: records.bounds_group and the bounds groups (filled below). A schema-5
  // file's records.bounds is emptied below and stays unused.
  if (version >= 2 &&
      db.query_int("SELECT count(*) FROM pragma_table_info('screening') WHERE name = 'epoch'") == 0)
    db.exec("ALTER TABLE screening ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0");
  const bool had_record_bounds =
      db.query_int("SELECT count(*) FROM pragma_table_info('records') WHERE name = 'bounds'") > 0;
  if (db.query_int(
          "SELECT count(*) FROM pragma_table_info('records') WHERE name = 'bounds_group'") == 0) {
    db.exec("ALTER TABLE records ADD COLUMN bounds_group INTEGER");
    db.exec(kBoundsGroupsSql);
  }
  // v7: token messages (docs/store.md "Token messages"). Nothing to rewrite: rows sealed before
  // keep their two messages and are read as such; rows written from now on hold one.
  db.exec("INSERT OR IGNORE INTO meta(key, value) VALUES ('encryption', 'none')");
  db.exec(kPendingShredsSql);
  encryption = db.query_text("SELECT value FROM meta WHERE key = 'encryption'");
  has_key_id_column = true;
  if (key_store == nullptr) open_key_store(false);
  if (version < 2) db.exec(kScreeningTableSql);
  db.exec("PRAGMA user_version=" + std::to_string(kStoreSchemaVersion));
  Statement meta(db.handle(), "UPDATE meta SET value = ?1 WHERE key = 'schema_version'");
  meta.bind(1, std::to_string(kStoreSchemaVersion)).run();
  schema_version = kStoreSchemaVersion;
  std::vector<std::string> unverified;
  const std::int64_t rehashed = version < 4 ? rehash_states(version, &unverified) : 0;
  std::int64_t rows = 0;
  for (const MemoryRow& row : all_memory_rows()) place_unplaced_records(row.id);
  if (version >= 2 && version < kFirstSchemaWithBoundsGroups) {
    for (const MemoryRow& row : all_memory_rows()) regroup_screening(row, version);
  }
  if (had_record_bounds) db.exec("UPDATE records SET bounds = NULL WHERE bounds IS NOT NULL");
  if (version < 2) {
    for (const MemoryRow& row : all_memory_rows()) {
      const Cached& c = ensure_loaded(row);
      write_screening(row, *c.memory, true, {});
      ++rows;
    }
  }
  AuditEntry e;
  e.operation = "upgrade";
  e.record = -1;
  e.certificate = nlohmann::json{
      {"operation", "upgrade"},
      {"from_schema_version", version},
      {"to_schema_version", kStoreSchemaVersion},
      {"screening_rows", rows},
      {"rehashed_memories", rehashed},
      {"unverified_memories", unverified},
      {"bounds_groups", db.query_int("SELECT count(*) FROM bounds_groups")},
      {"encryption",
       encryption}}.dump();
  append_audit(e);
  t.commit();
  std::fprintf(stderr, "svattn: store '%s' upgraded from schema version %lld to %d\n", path.c_str(),
               static_cast<long long>(version), kStoreSchemaVersion);
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
  if (db.query_int("PRAGMA user_version") != 0 ||
      db.query_int("SELECT count(*) FROM sqlite_master") != 0) {
    return;  // rolled back (nothing written); validate_existing() checks what is there
  }
  db.exec(kSchemaSql);  // then the tables the upgrades also create (one definition each)
  db.exec(kScreeningTableSql);
  db.exec(kPendingShredsSql);
  db.exec(kBoundsGroupsSql);
  db.exec("PRAGMA application_id=" + std::to_string(kStoreApplicationId));
  db.exec("PRAGMA user_version=" + std::to_string(kStoreSchemaVersion));
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
    app_id = db.query_int("PRAGMA application_id");
    version = db.query_int("PRAGMA user_version");
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
      Statement q(db.handle(), "PRAGMA quick_check");
      if (q.step()) first = q.text(0);
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
  has_key_id_column =
      db.query_int("SELECT count(*) FROM pragma_table_info('records') WHERE name = 'key_id'") > 0;
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
          : key_store != nullptr && key_store->postgres()
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
  int log = 0;
  int done = 0;
  const int rc =
      sqlite3_wal_checkpoint_v2(db.handle(), "main", SQLITE_CHECKPOINT_TRUNCATE, &log, &done);
  *truncated = rc == SQLITE_OK;
}

}  // namespace svattn
