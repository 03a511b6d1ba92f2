// The store's and the key store's tables in SQLite's dialect (schema_ddl.h; docs/store.md
// "Schema"): INTEGER PRIMARY KEY row ids, WITHOUT ROWID tables for rows that hold no payload, and
// RAISE(ABORT) triggers that keep the audit log append-only.
#include "schema_ddl.h"

namespace svattn::store_detail {
namespace {

// Schema version 7 (docs/store.md "Schema") is kStoreTables with kScreening, kPendingShreds and
// kBoundsGroups below (shared with the upgrades); version 6 has the same tables. Version 5 is this
// without the bounds groups (records.bounds_group, the bounds_groups table) and with each record's
// screening bounds in records.bounds; version 4 also without records.bounds and screening.epoch,
// every bound in the screening row; version 3 also without records.buckets and with version-1 state
// hashes; version 2 also without records.key_id, the meta row 'encryption' and pending_shreds;
// version 1 also without the screening table. records.key_id is the id of the record's data key in
// STORE.keys (NULL: its token payloads are plaintext) and records.buckets its bucket digests
// (sealed under that key; docs/store.md "Forget without a restore"); neither is a payload, so they
// may live in a WITHOUT ROWID table (docs/store.md "Encryption at rest"). records.bounds_group
// names the record's bounds group, whose blob holds the screening bounds of its records
// (docs/store.md "Bounds groups"); an upgraded file keeps an unused records.bounds column (NULL).
const char* const kStoreTables = R"SQL(
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

// Version 1 -> 2: the persisted screening bounds (docs/store.md "Persisted screening"); epoch from
// version 5 (bounds is then empty: they live in records.bounds).
const char* const kScreening = R"SQL(
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

// Version 2 -> 3: data keys whose destruction a committed forget scheduled (docs/store.md
// "Erasure by key destruction").
const char* const kPendingShreds = R"SQL(
CREATE TABLE IF NOT EXISTS pending_shreds(
  rowid     INTEGER PRIMARY KEY,
  key_id    TEXT    NOT NULL,
  memory    TEXT    NOT NULL,
  record    INTEGER NOT NULL
);
)SQL";

// Version 5 -> 6: the bounds groups (docs/store.md "Bounds groups"). One row per group: its key
// and the spare key that replaces it at the next erasure of one of its records (NULL in a
// plaintext store; the spare NULL until made), how many records and token rows it was given (for
// placing new records; not checked), and the blob of its active records' screening bounds (NULL:
// none).
const char* const kBoundsGroups = R"SQL(
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

// A key store (key_store.h): its format and version in meta, every data key (wrapped under the
// master key, or stored as it is), and a tombstone per destroyed key.
const char* const kKeyStoreTables = R"SQL(
CREATE TABLE meta(
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE data_keys(
  seq            INTEGER PRIMARY KEY,
  key_id         TEXT    NOT NULL UNIQUE,
  memory_id      INTEGER NOT NULL,
  record_id      INTEGER NOT NULL,
  live           INTEGER NOT NULL,
  stored         BLOB    NOT NULL,
  wrapped_sha256 TEXT    NOT NULL,
  created_utc    TEXT    NOT NULL
);
CREATE TABLE shredded_keys(
  key_id         TEXT    PRIMARY KEY,
  memory_id      INTEGER NOT NULL,
  record_id      INTEGER NOT NULL,
  wrapped_sha256 TEXT    NOT NULL,
  created_utc    TEXT    NOT NULL,
  destroyed_utc  TEXT    NOT NULL
) WITHOUT ROWID;
)SQL";

}  // namespace

const SchemaDdl& sqlite_schema_ddl() {
  static const SchemaDdl ddl{kStoreTables,
                             kScreening,
                             kPendingShreds,
                             kBoundsGroups,
                             "ALTER TABLE records ADD COLUMN key_id TEXT",
                             "ALTER TABLE records ADD COLUMN buckets BLOB",
                             "ALTER TABLE screening ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0",
                             "ALTER TABLE records ADD COLUMN bounds_group INTEGER",
                             kKeyStoreTables};
  return ddl;
}

}  // namespace svattn::store_detail
