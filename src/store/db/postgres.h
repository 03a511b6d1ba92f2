// The PostgreSQL backend of the store's connection (db/postgres.cpp; docs/store.md "Backends"):
// opening a connection through libpq. Never includes the SQLite backend. Private to the store.
#pragma once
#include <string>

#include "database.h"

namespace svattn::store_detail {

/// A PostgreSQL connection: `conninfo` is a libpq URI or key=value string; `display` names the
/// store in messages. IoError when the server cannot be reached; InvalidArgument when this svattn
/// was built without libpq.
Database open_postgres(const std::string& conninfo, const std::string& display,
                       int busy_timeout_ms);

}  // namespace svattn::store_detail
