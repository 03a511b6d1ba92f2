// The tables of a store and of a key store, written in each backend's own dialect
// (schema_sqlite.cpp, schema_postgres.cpp; docs/store.md "Schema"): the two define the same
// columns, keys and append-only audit table. Private to the store.
#pragma once
#include "db/database.h"

namespace svattn::store_detail {

struct SchemaDdl {
  /// Schema version 7 without the tables below: meta, memories, records, tokens, support, audit
  /// and the audit's append-only triggers.
  const char* store_tables;
  /// The persisted screening rows (schema 2; epoch from schema 5).
  const char* screening;
  /// Data keys whose destruction a committed forget scheduled (schema 3).
  const char* pending_shreds;
  /// The bounds groups and the index of records by group (schema 6).
  const char* bounds_groups;
  /// Columns the upgrades add to tables of older schema versions (store_schema.cpp).
  const char* add_records_key_id;        ///< schema 3
  const char* add_records_buckets;       ///< schema 4
  const char* add_screening_epoch;       ///< schema 5
  const char* add_records_bounds_group;  ///< schema 6
  /// A key store's tables (key_store.cpp): meta, data_keys, shredded_keys.
  const char* key_store_tables;
};

/// Each backend's DDL (schema_sqlite.cpp, schema_postgres.cpp).
const SchemaDdl& sqlite_schema_ddl();
const SchemaDdl& postgres_schema_ddl();
/// The DDL of `backend`.
inline const SchemaDdl& schema_ddl(Backend backend) {
  return backend == Backend::kPostgres ? postgres_schema_ddl() : sqlite_schema_ddl();
}
/// The DDL of the backend `db` is connected to.
inline const SchemaDdl& schema_ddl(const Database& db) { return schema_ddl(db.backend()); }

}  // namespace svattn::store_detail
