// The key store (docs/store.md "Encryption at rest (building blocks)"): a second SQLite file beside
// the store (STORE.keys) holding one data key per record, optionally wrapped by a master key;
// destroying a key (crypto-shredding) zeroes its bytes in the file (secure_delete) and truncates
// the WAL, and leaves a tombstone so that a later lookup answers "shredded". The same tables can
// live in a PostgreSQL database instead (a postgresql:// location; docs/store.md "Keys in a
// separate PostgreSQL database"). Private to the store.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crypto.h"
#include "db/database.h"

namespace svattn::store_detail {

/// The record a data key belongs to (kept in the key store for audits; the key id is what the
/// data rows reference). A bounds group's key (docs/store.md "Bounds groups") is owned by
/// record_id = -1 - group: record ids are never negative, so the two kinds cannot collide.
struct KeyOwner {
  std::int64_t memory_id = 0;
  std::int64_t record_id = 0;
  static KeyOwner bounds_group(std::int64_t memory_id, std::int64_t group) {
    return {memory_id, -1 - group};
  }
  bool is_bounds_group() const { return record_id < 0; }
  /// The group of a bounds group's key (is_bounds_group()).
  std::int64_t group() const { return -1 - record_id; }
};

struct KeyStoreOptions {
  /// Create the key store if the file does not exist (otherwise NotFound).
  bool create = false;
  /// A new key store wraps its keys iff a master key is given; an existing one must be opened
  /// with the master key it was created with (MasterKeyError otherwise).
  MasterKeySource master;
  /// How long a locked key store is waited for, in ms (>= 0; default 5000).
  int busy_timeout_ms = 5000;
  /// Open for lookups only (SQLITE_OPEN_READONLY; a read-only store): nothing is written, and a
  /// file without a -wal in a directory the user cannot write is opened immutable. create, destroy
  /// and WAL truncation are then refused (InvalidArgument). Incompatible with create.
  bool read_only = false;
  void validate() const;
};

/// A freshly created data key. `key` is the only copy outside the key store; it is zeroed when
/// this object dies.
struct NewDataKey {
  std::string key_id;          ///< 32 hex digits, random
  std::string wrapped_sha256;  ///< see KeyStore::wrapped_sha256 (for audit entries)
  SecretKey key;
};

enum class KeyState { kLive, kShredded };
const char* to_string(KeyState s);

/// The answer to a key lookup. A shredded key has no key bytes (key is all zero).
struct KeyLookup {
  KeyState state = KeyState::kLive;
  std::string key_id;
  KeyOwner owner;
  std::string wrapped_sha256;
  std::string created_utc;
  std::string destroyed_utc;  ///< empty while live
  SecretKey key;
  bool shredded() const { return state == KeyState::kShredded; }
  /// Everything but the key.
  nlohmann::json to_json() const;
};

/// What a destruction did, for the certificate and the audit entry (never the key).
struct KeyDestruction {
  std::string key_id;
  KeyOwner owner;
  std::string wrapped_sha256;
  std::string destroyed_utc;
  /// The key was already shredded before this call (destroy is idempotent, so that a forget
  /// interrupted after the key's destruction can be completed).
  bool already_shredded = false;
  /// wal_checkpoint(TRUNCATE) completed: the WAL file is empty. False if another connection
  /// kept a read transaction open past the busy timeout; the key's bytes are then still in the WAL
  /// until truncate_wal() succeeds (every open and destroy retries it). Always false for a key
  /// store in PostgreSQL, whose WAL is the server's.
  bool wal_truncated = false;
  nlohmann::json to_json() const;
};

class KeyStore {
 public:
  /// The key store of the store at `store_path`: "STORE.keys".
  static std::string path_for(const std::string& store_path) { return store_path + ".keys"; }

  /// `path`: an SQLite file, or a postgresql:// URI of a database/schema for the key tables
  /// (then path() is that URI without its password).
  KeyStore(std::string path, const KeyStoreOptions& options);
  KeyStore(const KeyStore&) = delete;
  KeyStore& operator=(const KeyStore&) = delete;

  const std::string& path() const { return path_; }
  /// "aes-256-gcm" when data keys are wrapped by the master key, "none" otherwise.
  const std::string& wrapping() const { return wrapping_; }
  /// The key tables are in PostgreSQL (no file to scan, no WAL to truncate).
  bool postgres() const { return pg_; }

  /// A new random data key for `owner`, committed before returning.
  NewDataKey create_key(const KeyOwner& owner);
  /// Several keys in one transaction (an import creates one key per record).
  std::vector<NewDataKey> create_keys(const std::vector<KeyOwner>& owners);
  /// The key (unwrapped) or a shredded answer. NotFound if the id was never in this key store.
  KeyLookup get(const std::string& key_id);
  /// get() of every id, in order, in one read of the key store (one statement on PostgreSQL
  /// instead of a round trip per key). NotFound for an id never in this key store.
  std::vector<KeyLookup> get_many(const std::vector<std::string>& key_ids);
  /// Every live key of `memory_id` (unwrapped), in one scan of the key table: a restore reads all
  /// of a memory's keys, and one scan costs far less than a point lookup per record
  /// (docs/store.md "Encryption at rest"). Shredded keys are not listed (get()
  /// answers them).
  std::vector<KeyLookup> live_keys_of(std::int64_t memory_id);
  /// Many get()s in one read transaction of the key store (a restore or a forget without a
  /// restore looks up one key per record; each get() alone starts and ends a read). Nests.
  class ReadScope {
   public:
    explicit ReadScope(KeyStore* keys);
    ~ReadScope();
    ReadScope(const ReadScope&) = delete;
    ReadScope& operator=(const ReadScope&) = delete;

   private:
    KeyStore* keys_ = nullptr;  // null: no key store, or an outer scope holds the transaction
  };
  /// Destroys the key: deletes its row (secure_delete zeroes the bytes), records a tombstone, and
  /// truncates the WAL. NotFound if the id was never in this key store.
  KeyDestruction destroy(const std::string& key_id);
  /// destroy() of every id in one transaction and one WAL truncation (a forget destroys the
  /// record's data key and its bounds group's old key together).
  std::vector<KeyDestruction> destroy_many(const std::vector<std::string>& key_ids);
  /// destroy_many(key_ids) and create_keys(owners) in one transaction: the spare keys of bounds
  /// groups are made with a forget's destructions, so that the next erasure needs no key-store
  /// write (docs/store.md "Bounds groups").
  std::vector<KeyDestruction> destroy_and_create(const std::vector<std::string>& key_ids,
                                                 const std::vector<KeyOwner>& owners,
                                                 std::vector<NewDataKey>* made);
  /// wal_checkpoint(TRUNCATE); true if the WAL is now empty.
  bool truncate_wal();
  /// StoreError naming the key store unless keys can be destroyed in it: a file opened read-only
  /// (its permissions, a read-only directory or mount) or a PostgreSQL key table this role may
  /// not delete from. An erasure checks it before it starts (`purpose` says which), so that it
  /// never commits a removal whose key then stays live.
  void require_writable(const std::string& purpose);

  std::int64_t live_keys();
  std::int64_t shredded_keys();
  /// Every destroyed key's tombstone (state shredded, no key bytes), in key id order.
  std::vector<KeyLookup> tombstones();

  /// SHA-256("svattn-keyhash-v1" | key id | stored bytes), hex: identifies a key in audits without
  /// revealing it (the stored bytes are the wrapped key, or the raw key when wrapping is "none").
  static std::string wrapped_sha256(const std::string& key_id,
                                    const std::vector<std::uint8_t>& stored);

 private:
  void create_schema();
  void open_file();  // the SQLite file (the constructor names the file in every failure)
  void open_read_only(long long size);
  void open_postgres();
  void check_schema();
  NewDataKey insert_key(const KeyOwner& owner, const std::string& now);
  /// A synchronous commit of a one-row rewrite: syncs the WAL with every frame before it.
  void sync_wal();
  /// The destruction of one key inside an open write transaction (destroy, destroy_many).
  KeyDestruction destroy_in_transaction(const std::string& key_id);
  /// The shredded answer for an id that has no live row (NotFound if it never existed).
  KeyLookup tombstone(const std::string& key_id);
  std::vector<std::uint8_t> stored_form(const std::string& key_id, const SecretKey& key) const;
  SecretKey key_from_stored(const std::string& key_id, std::vector<std::uint8_t>& stored) const;

  std::string path_;
  KeyStoreOptions options_;
  Database db_;
  // get(): the live-key lookup, prepared once, reset after every use (declared after db_, so it is
  // finalized before the connection closes).
  std::unique_ptr<Statement> get_live_;
  bool in_read_scope_ = false;
  std::string wrapping_;
  bool has_master_ = false;
  bool pg_ = false;
  bool writable_checked_ = false;  // require_writable passed once (PostgreSQL: one round trip)
  SecretKey master_;
};

}  // namespace svattn::store_detail
