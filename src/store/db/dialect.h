// What the two backends' SQL shares (docs/store.md "Backends"): the statements that read and
// write rows are written once, in SQLite's spelling, and rewritten here for PostgreSQL where the
// spelling differs (parameters, conflict clauses, the catalog and SQLite's header integers).
// Tables are not: each backend's DDL is written in its own dialect (schema_ddl.h). Private to the
// store.
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

/// Splits `sql` into statements (at ';' outside literals) and rewrites each for PostgreSQL:
/// ?N / ? -> $N; INSERT OR IGNORE -> ON CONFLICT DO NOTHING, INSERT OR REPLACE -> ON CONFLICT
/// (primary key) DO UPDATE; sqlite_master and pragma_table_info() -> catalog queries; PRAGMA
/// user_version/application_id -> kPgPragmaTable; PRAGMA journal_mode -> 'wal' (PostgreSQL
/// always logs ahead); PRAGMA secure_delete/synchronous=... -> nothing (an empty string).
/// StoreError naming the statement when it has no rewrite (PRAGMA quick_check/integrity_check:
/// page integrity is the server's), and for CREATE/ALTER (table definitions are written per
/// backend: Database::exec_ddl).
std::vector<std::string> sqlite_to_postgres(const std::string& sql, const PrimaryKeyLookup& pk);

/// PostgreSQL array literals, bound as text parameters and cast in the statement (?2::bigint[],
/// ?3::float8[]): the batched statements that replace one round trip per row (unnest(…), = ANY(…);
/// docs/store.md "Round trips and plans"). Doubles are written with 17 significant digits, which
/// the server's strtod reads back to the same bits; NaN and infinities are refused
/// (InvalidArgument).
std::string pg_array(const std::vector<std::int64_t>& v);
std::string pg_array(const std::vector<double>& v);
/// Text elements, each quoted (so that commas, braces and quotes in them are data).
std::string pg_array(const std::vector<std::string>& v);

}  // namespace svattn::store_detail
