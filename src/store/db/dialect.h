// What the two backends' SQL shares (docs/store.md "Backends"): the statements that read and
// write rows are written once, in SQLite's spelling, and rewritten here for PostgreSQL where the
// spelling differs (parameters, conflict clauses). Tables are not: each backend's DDL is written
// in its own dialect (schema_ddl.h); nor are the catalog, SQLite's header integers and the
// connection settings: Database methods each backend implements (db/database.h). Private to the
// store.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace svattn::store_detail {

/// Primary-key columns of a table, in key order (used by INSERT OR REPLACE).
using PrimaryKeyLookup = std::function<std::vector<std::string>(const std::string& table)>;

/// Splits `sql` into statements (at ';' outside literals) and rewrites each for PostgreSQL:
/// ?N / ? -> $N; INSERT OR IGNORE -> ON CONFLICT DO NOTHING, INSERT OR REPLACE -> ON CONFLICT
/// (primary key) DO UPDATE. StoreError naming the statement for INSERT OR with another conflict
/// action, for CREATE/ALTER (table definitions are written per backend: Database::exec_ddl), and
/// for PRAGMA, sqlite_master and pragma_table_info (the catalog and header integers are Database
/// methods: has_table, user_version, ...).
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
