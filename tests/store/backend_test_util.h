// The store tests' backends (docs/store.md "PostgreSQL test cluster"): a value-parameterised
// fixture whose instances run one test on a fresh SQLite file ("sqlite"), on a fresh PostgreSQL
// schema with a local key store file ("postgres"), and on a fresh PostgreSQL schema whose data
// keys live in a schema of a separate database ("postgres_keydb"). The PostgreSQL instances skip
// without a server, and fail with SVATTN_PG_REQUIRED=1; tests/store/CMakeLists.txt labels them
// `postgres`.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "store/key_store.h"
#include "store_test_util.h"

#ifdef SVATTN_TEST_POSTGRES
#include "pg_test_util.h"
#endif

namespace svattn::store_test {

enum class BackendKind { kSqlite, kPostgres, kPostgresKeyDb };

inline BackendKind backend_kind(const std::string& param) {
  if (param == "sqlite") return BackendKind::kSqlite;
  if (param == "postgres") return BackendKind::kPostgres;
  if (param == "postgres_keydb") return BackendKind::kPostgresKeyDb;
  throw std::runtime_error("unknown backend parameter " + param);
}

/// Stores of one backend in one test, by name: a file in a temporary directory, or a fresh
/// schema (and, for postgres_keydb, a fresh key schema in the key database).
class Stores {
 public:
  explicit Stores(BackendKind kind) : kind_(kind) {}
  BackendKind kind() const { return kind_; }
  bool pg() const { return kind_ != BackendKind::kSqlite; }
  bool key_db() const { return kind_ == BackendKind::kPostgresKeyDb; }
  const TempDir& dir() const { return dir_; }

  /// The location of store `name` (its schemas are created on first use).
  std::string at(const std::string& name) {
    if (!pg()) return dir_.file(name + ".db");
#ifdef SVATTN_TEST_POSTGRES
    return schema(name).uri(keys(name));
#else
    throw std::runtime_error("built without PostgreSQL tests");
#endif
  }
  /// The same store without a key store in its location (a plaintext PostgreSQL store may omit
  /// keys=; on SQLite the file path).
  std::string at_without_keys(const std::string& name) {
    if (!pg()) return at(name);
#ifdef SVATTN_TEST_POSTGRES
    return schema(name).uri("");
#else
    throw std::runtime_error("built without PostgreSQL tests");
#endif
  }
  /// PostgreSQL: the location of store `name` with the key store of store `other` in keys= (a
  /// misnamed key store).
  std::string at_with_keys_of(const std::string& name, const std::string& other) {
    if (!pg()) throw std::runtime_error("an SQLite store's key store is its STORE.keys file");
#ifdef SVATTN_TEST_POSTGRES
    return schema(name).uri(keys(other));
#else
    throw std::runtime_error("built without PostgreSQL tests");
#endif
  }
  /// The key store's location: STORE.keys, a local file named in keys=, or the key schema's URI.
  std::string keys(const std::string& name) {
    if (!pg()) return dir_.file(name + ".db.keys");
    if (!key_db()) return dir_.file(name + ".pgkeys");
#ifdef SVATTN_TEST_POSTGRES
    auto& k = key_schemas_[name];
    if (k == nullptr) k = std::make_unique<PgSchema>(key_database());
    return k->uri("");
#else
    throw std::runtime_error("built without PostgreSQL tests");
#endif
  }
  /// The key store's file (empty for a key database: no file).
  std::string keys_file(const std::string& name) { return key_db() ? "" : keys(name); }
  /// Opens the key store of store `name` from outside.
  std::unique_ptr<store_detail::KeyStore> key_store(const std::string& name,
                                                    const store_detail::KeyStoreOptions& o = {}) {
    return std::make_unique<store_detail::KeyStore>(keys(name), o);
  }

  /// Runs raw SQL on store `name` from outside (tampering); "" on success, else the error.
  std::string raw_exec(const std::string& name, const std::string& sql) {
    if (!pg()) {
      RawDb raw(at(name));
      return raw.exec(sql) == SQLITE_OK ? "" : sqlite3_errmsg(raw.handle());
    }
#ifdef SVATTN_TEST_POSTGRES
    RawPg raw(schema(name).name());
    return raw.exec(sql);
#else
    return "built without PostgreSQL tests";
#endif
  }
  std::int64_t raw_int(const std::string& name, const std::string& sql) {
    if (!pg()) return RawDb(at(name)).query_int(sql);
#ifdef SVATTN_TEST_POSTGRES
    return RawPg(schema(name).name()).query_int(sql);
#else
    return -1;
#endif
  }
  std::string raw_text(const std::string& name, const std::string& sql) {
    if (!pg()) {
      RawDb raw(at(name));
      sqlite3_stmt* q = nullptr;
      sqlite3_prepare_v2(raw.handle(), sql.c_str(), -1, &q, nullptr);
      std::string out;
      if (sqlite3_step(q) == SQLITE_ROW) {
        out = reinterpret_cast<const char*>(sqlite3_column_text(q, 0));
      }
      sqlite3_finalize(q);
      return out;
    }
#ifdef SVATTN_TEST_POSTGRES
    return RawPg(schema(name).name()).query(sql);
#else
    return "";
#endif
  }
  /// A count on the key store of store `name` (an SQLite file or the key schema).
  std::int64_t keys_int(const std::string& name, const std::string& sql) {
    if (!key_db()) return RawDb(keys(name)).query_int(sql);
#ifdef SVATTN_TEST_POSTGRES
    keys(name);
    return RawPg(key_schemas_.at(name)->name(), key_database()).query_int(sql);
#else
    return -1;
#endif
  }

#ifdef SVATTN_TEST_POSTGRES
  /// A connection to the key schema of store `name` (key_db() only), e.g. to hold its locks.
  std::unique_ptr<RawPg> raw_keys(const std::string& name) {
    keys(name);
    return std::make_unique<RawPg>(key_schemas_.at(name)->name(), key_database());
  }
#endif
  /// What a refused command must not change: on SQLite the bytes of the store file and its key
  /// store; on PostgreSQL the audit chain, records, token rows and state hashes, and the key
  /// store (its file's bytes, or its key rows).
  std::string digest(const std::string& name) {
    if (!pg()) {
      const std::string p = at(name);
      return file_sha(p) + "/" + (file_exists(p + ".keys") ? file_sha(p + ".keys") : "-");
    }
    std::string d = std::to_string(raw_int(name, "SELECT count(*) FROM audit")) + "/" +
                    std::to_string(raw_int(name, "SELECT count(*) FROM records")) + "/" +
                    std::to_string(raw_int(name, "SELECT count(*) FROM tokens")) + "/" +
                    raw_text(name, "SELECT string_agg(name || ':' || state_sha256, ',' ORDER BY "
                                   "name) FROM memories");
    if (key_db()) {
      d += "/" + std::to_string(keys_int(name, "SELECT count(*) FROM data_keys")) + "/" +
           std::to_string(keys_int(name, "SELECT count(*) FROM shredded_keys"));
    } else {
      d += "/" + (file_exists(keys(name)) ? file_sha(keys(name)) : std::string("-"));
    }
    return d;
  }

 private:
#ifdef SVATTN_TEST_POSTGRES
  PgSchema& schema(const std::string& name) {
    auto& s = schemas_[name];
    if (s == nullptr) s = std::make_unique<PgSchema>();
    return *s;
  }
  std::map<std::string, std::unique_ptr<PgSchema>> schemas_;
  std::map<std::string, std::unique_ptr<PgSchema>> key_schemas_;
#endif
  BackendKind kind_;
  TempDir dir_;
};

/// Whether the PostgreSQL instances can run here: a server, or fail/skip (see the file comment).
#ifdef SVATTN_TEST_POSTGRES
#define SVATTN_BACKEND_REQUIRE_PG() SVATTN_REQUIRE_PG()
#else
#define SVATTN_BACKEND_REQUIRE_PG() \
  GTEST_SKIP() << "this build has no PostgreSQL tests (libpq-dev missing at configure time)"
#endif

/// The fixture: GetParam() is the backend's name; stores() the test's stores.
class StoreOnBackends : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (pg()) SVATTN_BACKEND_REQUIRE_PG();
    stores_ = std::make_unique<Stores>(backend_kind(GetParam()));
  }
  BackendKind kind() const { return backend_kind(GetParam()); }
  bool pg() const { return kind() != BackendKind::kSqlite; }
  Stores& stores() { return *stores_; }

 private:
  std::unique_ptr<Stores> stores_;
};

inline std::string backend_name(const ::testing::TestParamInfo<const char*>& i) {
  return std::string(i.param);
}

}  // namespace svattn::store_test

/// Instantiates `suite` (a fixture derived from StoreOnBackends) on the three backends.
#define SVATTN_ON_ALL_BACKENDS(suite)                                                        \
  INSTANTIATE_TEST_SUITE_P(Backends, suite,                                                \
                           ::testing::Values("sqlite", "postgres", "postgres_keydb"),      \
                           ::svattn::store_test::backend_name)
