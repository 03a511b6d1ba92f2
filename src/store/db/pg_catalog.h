// The PostgreSQL backend's catalog, header integers and connection settings (db/database.h's
// DatabaseBackend; docs/store.md "Backends"), in PostgreSQL's own dialect: the tables, columns and
// triggers of the store's schema (current_schema()) from pg_class, pg_trigger and
// information_schema, and SQLite's header integers (user_version, application_id) kept in the
// table kPgPragmaTable. Private to the store.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "database.h"

namespace svattn::store_detail {

/// The table in which the PostgreSQL backend keeps SQLite's header integers (name TEXT PRIMARY
/// KEY, value BIGINT; made by the first write transaction, db/postgres.cpp). It is not listed
/// among the store's tables.
extern const char* const kPgPragmaTable;

/// The base of the PostgreSQL connection (db/postgres.cpp): the calls below run on its prepare().
class PgCatalogBackend : public DatabaseBackend {
 public:
  bool has_table(const std::string& name) override;
  bool has_trigger(const std::string& name) override;
  bool has_column(const std::string& table, const std::string& column) override;
  std::vector<std::string> table_names() override;
  std::vector<std::string> trigger_names() override;
  std::vector<std::string> column_names(const std::string& table) override;
  bool is_empty() override;
  std::int64_t user_version() override { return header_int("user_version"); }
  void set_user_version(std::int64_t v) override { set_header_int("user_version", v); }
  std::int64_t application_id() override { return header_int("application_id"); }
  void set_application_id(std::int64_t v) override { set_header_int("application_id", v); }
  /// PostgreSQL always logs ahead.
  std::string enable_wal() override { return "wal"; }
  void harden_writes() override {}
  std::string integrity_check(bool quick) override;

 private:
  std::int64_t header_int(const char* name);
  void set_header_int(const char* name, std::int64_t v);
};

}  // namespace svattn::store_detail
