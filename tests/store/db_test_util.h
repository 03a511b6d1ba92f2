// A Database of the store's connection layer (src/store/db/) on a test's backend: a new SQLite
// file, or a connection to a fresh PostgreSQL schema (backend_test_util.h's Stores).
#pragma once
#include <string>

#include "backend_test_util.h"
#include "store/db/postgres.h"
#include "store/db/sqlite.h"

namespace svattn::store_test {

inline store_detail::Database open_database(Stores& stores, const std::string& name) {
  const std::string at = stores.at_without_keys(name);
  if (stores.pg()) return store_detail::open_postgres(at, name, 1000);
  store_detail::SqliteOpen how;
  how.create = true;
  return store_detail::open_sqlite(at, how);
}

}  // namespace svattn::store_test
