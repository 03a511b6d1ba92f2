// The PostgreSQL backend's catalog and header integers (db/pg_catalog.h; docs/store.md
// "Backends"): queries on the store's schema in PostgreSQL's dialect, and kPgPragmaTable.
#include "pg_catalog.h"

namespace svattn::store_detail {

const char* const kPgPragmaTable = "svattn_pragma";

namespace {

// Relations of the store's schema, kPgPragmaTable and its index left out.
const char* const kOwnRelations =
    "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = "
    "current_schema() AND c.relname NOT LIKE 'svattn\\_pragma%'";
// User-defined triggers on tables of the store's schema.
const char* const kOwnTriggers =
    "FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = "
    "c.relnamespace WHERE n.nspname = current_schema() AND NOT t.tgisinternal";

std::vector<std::string> names(DatabaseBackend& db, const std::string& sql,
                               const std::vector<std::string>& params = {}) {
  return query_column(db, sql.c_str(), params);
}

}  // namespace

bool PgCatalogBackend::has_table(const std::string& name) {
  return !names(*this,
                std::string("SELECT 1 ") + kOwnRelations + " AND c.relkind IN ('r', 'p') AND " +
                    "c.relname = $1",
                {name})
              .empty();
}

bool PgCatalogBackend::has_trigger(const std::string& name) {
  return !names(*this, std::string("SELECT 1 ") + kOwnTriggers + " AND t.tgname = $1", {name})
              .empty();
}

bool PgCatalogBackend::has_column(const std::string& table, const std::string& column) {
  return !names(*this,
                "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
                "AND table_name = $1 AND column_name = $2",
                {table, column})
              .empty();
}

std::vector<std::string> PgCatalogBackend::table_names() {
  return names(*this, std::string("SELECT c.relname::text ") + kOwnRelations +
                          " AND c.relkind IN ('r', 'p') ORDER BY c.relname::text COLLATE \"C\"");
}

std::vector<std::string> PgCatalogBackend::trigger_names() {
  return names(*this, std::string("SELECT t.tgname::text ") + kOwnTriggers +
                          " ORDER BY t.tgname::text COLLATE \"C\"");
}

std::vector<std::string> PgCatalogBackend::column_names(const std::string& table) {
  return names(*this,
               "SELECT column_name::text FROM information_schema.columns WHERE table_schema = "
               "current_schema() AND table_name = $1 ORDER BY column_name::text COLLATE \"C\"",
               {table});
}

// What SQLite's sqlite_master lists: tables, indexes and triggers.
bool PgCatalogBackend::is_empty() {
  return names(*this, std::string("SELECT 1 ") + kOwnRelations +
                          " AND c.relkind IN ('r', 'p', 'i') UNION ALL SELECT 1 " + kOwnTriggers)
      .empty();
}

std::string PgCatalogBackend::integrity_check(bool quick) {
  throw StoreError(std::string("PRAGMA ") + (quick ? "quick_check" : "integrity_check") +
                   " has no PostgreSQL equivalent (use pg_amcheck)");
}

std::int64_t PgCatalogBackend::header_int(const char* name) {
  const std::string sql =
      std::string("SELECT coalesce((SELECT value FROM ") + kPgPragmaTable + " WHERE name = $1), 0)";
  const std::unique_ptr<StatementBackend> q = prepare_bound(*this, sql.c_str(), {name});
  if (!q->step()) throw StoreError("reading " + std::string(name) + " returned no row");
  return q->int64(0);
}

void PgCatalogBackend::set_header_int(const char* name, std::int64_t v) {
  const std::string sql = std::string("INSERT INTO ") + kPgPragmaTable +
                          "(name, value) VALUES ($1, $2) ON CONFLICT(name) DO UPDATE SET value = "
                          "excluded.value";
  const std::unique_ptr<StatementBackend> q = prepare_bound(*this, sql.c_str(), {name});
  q->bind_int64(2, v);
  while (q->step()) {
  }
}

}  // namespace svattn::store_detail
