// Upgrades of a store of an older schema version to the current one, in place (docs/store.md
// "Schema versions and upgrade"): one transaction, logged in the audit chain as "upgrade". Each
// version step is one function with a tables part (DDL in the backend's dialect, schema_ddl.h) and,
// where the version changed rows, a rows part. The tables parts run first, oldest version first;
// then the rows parts, oldest first, except version 2's screening rows, which are written last
// because they go into the bounds groups of version 6. A read-only connection reads an older
// store as it is. Tested on the fixtures of every older version (tests/store/data).
#include <cstdio>

#include "../schema_ddl.h"
#include "../store_impl.h"

namespace svattn {

using namespace store_detail;

/// What one upgrade found and did (its audit entry's certificate).
struct Store::Impl::Upgrade {
  std::int64_t from = 0;
  bool had_record_bounds = false;  // a schema-5 file: records.bounds, emptied by version 6
  std::int64_t rehashed = 0;
  std::vector<std::string> unverified;
  std::int64_t screening_rows = 0;
};

// Keys made for the groups are destroyed again if the upgrade fails.
void Store::Impl::upgrade_schema() {
  try {
    upgrade_schema_in_transaction();
  } catch (...) {
    vault.discard_new_keys();
    throw;
  }
  vault.keys_referenced();
}

void Store::Impl::upgrade_schema_in_transaction() {
  Transaction t(db, true, path, options.busy_timeout_ms);
  Upgrade u;
  u.from = db.user_version();
  if (u.from >= kStoreSchemaVersion) {  // another process upgraded it meanwhile
    schema_version = u.from;
    encryption = db.query_text("SELECT value FROM meta WHERE key = 'encryption'");
    has_key_id_column = true;
    return;
  }
  upgrade_tables_v2(u);
  upgrade_tables_v3(u);
  upgrade_tables_v4(u);
  upgrade_tables_v5(u);
  upgrade_tables_v6(u);
  // v7: token messages (docs/store.md "Token messages"). Nothing to rewrite: rows sealed before
  // keep their two messages and are read as such; rows written from now on hold one.
  encryption = db.query_text("SELECT value FROM meta WHERE key = 'encryption'");
  has_key_id_column = true;
  if (!vault.enabled()) open_key_store(false);
  db.set_user_version(kStoreSchemaVersion);
  Statement meta(db.handle(), "UPDATE meta SET value = ?1 WHERE key = 'schema_version'");
  meta.bind(1, std::to_string(kStoreSchemaVersion)).run();
  schema_version = kStoreSchemaVersion;
  upgrade_rows_v4(u);
  upgrade_rows_v6(u);
  upgrade_rows_v2(u);
  log_upgrade(u);
  t.commit();
  std::fprintf(stderr, "svattn: store '%s' upgraded from schema version %lld to %d\n", path.c_str(),
               static_cast<long long>(u.from), kStoreSchemaVersion);
}

// v2: the persisted screening table (with v5's epoch column already).
void Store::Impl::upgrade_tables_v2(Upgrade& u) {
  if (u.from < 2) db.exec_ddl(schema_ddl(db).screening);
}

// v2: every memory's screening written (each restored once from its tokens).
void Store::Impl::upgrade_rows_v2(Upgrade& u) {
  if (u.from >= 2) return;
  for (const MemoryRow& row : all_memory_rows()) {
    const Cached& c = ensure_loaded(row);
    write_screening(row, *c.memory, true, {});
    ++u.screening_rows;
  }
}

// v3: records.key_id (NULL: plaintext payloads), meta 'encryption' and pending_shreds. An older
// store was written in plain text and stays so ("none"; docs/store.md "Encryption at rest").
void Store::Impl::upgrade_tables_v3(Upgrade&) {
  const SchemaDdl& ddl = schema_ddl(db);
  if (!db.has_column("records", "key_id")) db.exec_ddl(ddl.add_records_key_id);
  db.exec("INSERT OR IGNORE INTO meta(key, value) VALUES ('encryption', 'none')");
  db.exec_ddl(ddl.pending_shreds);
}

// v4: records.buckets (the record's bucket digests, filled by the rows part).
void Store::Impl::upgrade_tables_v4(Upgrade&) {
  if (!db.has_column("records", "buckets")) db.exec_ddl(schema_ddl(db).add_records_buckets);
}

// v4: every memory's state hash checked in the version-1 format and rewritten in the current one
// (store_rehash.cpp).
void Store::Impl::upgrade_rows_v4(Upgrade& u) {
  if (u.from < 4) u.rehashed = rehash_states(u.from, &u.unverified);
}

// v5: screening.epoch (a version-1 file's new screening table has it already).
void Store::Impl::upgrade_tables_v5(Upgrade&) {
  if (!db.has_column("screening", "epoch")) db.exec_ddl(schema_ddl(db).add_screening_epoch);
}

// v6: records.bounds_group and the bounds groups (filled by the rows part). A schema-5 file's
// records.bounds is emptied by the rows part and stays unused.
void Store::Impl::upgrade_tables_v6(Upgrade& u) {
  u.had_record_bounds = db.has_column("records", "bounds");
  if (db.has_column("records", "bounds_group")) return;
  const SchemaDdl& ddl = schema_ddl(db);
  db.exec_ddl(ddl.add_records_bounds_group);
  db.exec_ddl(ddl.bounds_groups);
}

// v6: every record joins a bounds group, and the screening bounds of schema 2-5 move into the
// groups' blobs (store_screening_legacy.cpp).
void Store::Impl::upgrade_rows_v6(Upgrade& u) {
  for (const MemoryRow& row : all_memory_rows()) place_unplaced_records(row.id);
  if (u.from >= 2 && u.from < kFirstSchemaWithBoundsGroups) {
    for (const MemoryRow& row : all_memory_rows()) regroup_screening(row, u.from);
  }
  if (u.had_record_bounds) db.exec("UPDATE records SET bounds = NULL WHERE bounds IS NOT NULL");
}

void Store::Impl::log_upgrade(const Upgrade& u) {
  AuditEntry e;
  e.operation = "upgrade";
  e.record = -1;
  e.certificate = nlohmann::json{
      {"operation", "upgrade"},
      {"from_schema_version", u.from},
      {"to_schema_version", kStoreSchemaVersion},
      {"screening_rows", u.screening_rows},
      {"rehashed_memories", u.rehashed},
      {"unverified_memories", u.unverified},
      {"bounds_groups", screening_bounds.group_count()},
      {"encryption",
       encryption}}.dump();
  audit.append(e);
}

}  // namespace svattn
