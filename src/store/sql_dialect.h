// The one place where the store's SQL dialects differ (docs/store.md "PostgreSQL"): the store's
// SQL is written for SQLite and translated here, statement by statement, for PostgreSQL.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace svattn::store_detail {

/// The table in which the PostgreSQL backend keeps SQLite's header integers (PRAGMA user_version,
/// application_id). It is not listed in the translated sqlite_master.
extern const char* const kPgPragmaTable;

/// Primary-key columns of a table, in key order (used by INSERT OR REPLACE).
using PrimaryKeyLookup = std::function<std::vector<std::string>(const std::string& table)>;

/// Splits `sql` into statements (at ';' outside literals and trigger bodies) and translates each
/// to PostgreSQL: ?N / ? -> $N; INTEGER -> BIGINT (INTEGER PRIMARY KEY -> an identity column),
/// REAL -> DOUBLE PRECISION, BLOB -> BYTEA, WITHOUT ROWID dropped; INSERT OR IGNORE -> ON CONFLICT
/// DO NOTHING, INSERT OR REPLACE -> ON CONFLICT (primary key) DO UPDATE; a RAISE(ABORT) trigger ->
/// a PL/pgSQL trigger function plus trigger; sqlite_master and pragma_table_info() -> catalog
/// queries; PRAGMA user_version/application_id -> kPgPragmaTable; PRAGMA journal_mode -> 'wal'
/// (PostgreSQL always logs ahead); PRAGMA quick_check/integrity_check -> 'ok' (page integrity is
/// the server's); PRAGMA secure_delete/synchronous=... -> nothing (an empty string). StoreError
/// naming the construct when a statement has no translation.
std::vector<std::string> sqlite_to_postgres(const std::string& sql, const PrimaryKeyLookup& pk);

/// PostgreSQL array literals, bound as text parameters and cast in the statement (?2::bigint[],
/// ?3::float8[]): the batched statements that replace one round trip per row (unnest(…), = ANY(…);
/// docs/performance.md "Session 14"). Doubles are written with 17 significant digits, which the
/// server's strtod reads back to the same bits; NaN and infinities are refused (InvalidArgument).
std::string pg_array(const std::vector<std::int64_t>& v);
std::string pg_array(const std::vector<double>& v);
/// Text elements, each quoted (so that commas, braces and quotes in them are data).
std::string pg_array(const std::vector<std::string>& v);

}  // namespace svattn::store_detail
