// postgresql:// store locations (docs/store.md "PostgreSQL"): recognising them, and splitting
// off the parameter svattn adds to libpq's URI (keys=PATH, the local key store file).
#pragma once
#include <string>

namespace svattn::store_detail {

/// True for "postgresql://..." and "postgres://..." (libpq's URI schemes).
bool is_postgres_uri(const std::string& location);

struct PgLocation {
  std::string conninfo;  ///< the URI for libpq, without keys=
  std::string keys;      ///< keys=PATH, percent-decoded; empty when absent
  std::string display;   ///< the URI with any password replaced by "***" (messages, audit)
};

/// Splits a postgresql:// URI. InvalidArgument naming the URI on an empty keys= value or a bad
/// percent escape.
PgLocation parse_postgres_uri(const std::string& uri);

}  // namespace svattn::store_detail
