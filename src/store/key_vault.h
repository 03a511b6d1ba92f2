// The key vault (key_vault.cpp; docs/store.md "Components", "Encryption at rest"): owns the key
// store (key_store.h: data keys, bounds-group keys and their spares, master-key wrapping,
// destruction and tombstones) and, in the store's own database, the shred log `pending_shreds`
// (keys an erasure committed to destroy). It remembers the keys made in the open transaction (so
// that a rollback destroys them again) and caches the live group keys it has read. It reads no
// other component's table: callers pass the key ids their rows name. Private to the store.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "crypto.h"
#include "db/database.h"
#include "key_store.h"
#include "svattn/store.h"

namespace svattn::store_detail {

class KeyVault {
 public:
  /// `db`: the store's database (it holds pending_shreds). No key store until attach().
  explicit KeyVault(Database& db) : db_(db) {}
  KeyVault(const KeyVault&) = delete;
  KeyVault& operator=(const KeyVault&) = delete;

  // --------------------------------------------------------------------------- the key store
  /// The key store of an encrypted store (replaces any attached one).
  void attach(std::unique_ptr<KeyStore> keys) { keys_ = std::move(keys); }
  /// A key store is attached (the store is encrypted).
  bool enabled() const { return keys_ != nullptr; }
  /// The attached key store; StoreError when none is (a plaintext store).
  KeyStore& keys() const;
  /// The attached key store, or null (for KeyStore::ReadScope and the payload codec).
  KeyStore* key_store() const { return keys_.get(); }

  // ------------------------------------------------------------ keys of the open transaction
  /// New keys for `owners`, in one key-store transaction, remembered as made by the open
  /// transaction of the store until keys_referenced() or discard_new_keys().
  std::vector<NewDataKey> create_keys(const std::vector<KeyOwner>& owners);
  NewDataKey create_key(const KeyOwner& owner);
  /// The store's transaction committed: the keys it made are referenced from now on.
  void keys_referenced() noexcept { new_key_ids_.clear(); }
  /// The store's transaction rolled back: the keys it made encrypt nothing and are destroyed
  /// (best effort: an orphan key that survives encrypts nothing either).
  void discard_new_keys() noexcept;

  // ----------------------------------------------------------------------- bounds-group keys
  /// The live keys of bounds groups of memory `memory_id`: `ids[i]` is the key id group
  /// `groups[i]`'s row names (empty: none). A group whose key is cached under the same id is
  /// answered from the cache (a cached key under another id is dropped: replaced since); the
  /// others are read in one lookup. Groups without a key, or whose key is destroyed, unknown or
  /// not the group's, are appended to `need` (they need a fresh key); the rest go into `out`.
  void group_keys(std::int64_t memory_id, const std::vector<std::int64_t>& groups,
                  const std::vector<std::string>& ids, std::map<std::int64_t, SecretKey>& out,
                  std::vector<std::int64_t>& need);
  /// Drops every cached group key among `key_ids` (destroyed, or made by a rollback).
  void drop_cached_keys(const std::vector<std::string>& key_ids) noexcept;
  /// The key that replaces group `group`'s key at an erasure: its `spare` when that is live and
  /// the group's (no key-store write in the forget), else a fresh key (docs/store.md "Bounds
  /// groups").
  std::string replacement_group_key(std::int64_t memory_id, std::int64_t group,
                                    const std::string& spare);

  // ------------------------------------------------------------------- the shred log
  /// One row of pending_shreds: a key whose destruction an erasure committed.
  struct PendingShred {
    std::int64_t rowid = 0;
    std::string key_id;
    std::string memory;
    std::int64_t record = 0;
  };
  /// A forget of an encrypted record, inside its transaction: the erasure's data-key fields
  /// filled and the key written to the shred log (deferred: Statement::defer). Nothing for a
  /// plaintext record (`key_id` empty).
  void schedule_record_key(const std::string& memory, std::int64_t record,
                           const std::string& key_id, StoreErasure& se);
  /// A bounds group's key into the shred log, unless destroyed already (a restored copy's group)
  /// or unknown (a damaged row); fills se's bounds_key_sha256 (and bounds_key_destroyed) when
  /// given.
  void schedule_group_key(const std::string& memory, std::int64_t record, const std::string& key_id,
                          StoreErasure* se);
  /// The shred log as one part of a read that spans components: `SELECT tag, rowid, key_id,
  /// memory, record`, ascending rowid when ordered by (1, 2); pending_from_row decodes one of its
  /// rows (docs/store.md "Round trips and plans").
  static std::string pending_shreds_part(int tag);
  static PendingShred pending_from_row(Statement& q);
  /// Whether the shred log holds a row (one cheap read; no write lock needed).
  bool shreds_pending();
  /// The shred log, in the order the erasures wrote it; only `memory`'s rows when not empty.
  std::vector<PendingShred> pending_shreds(const std::string& memory = {});
  /// Destroys the keys of `pending` and makes a key for each of `spares`, in one key-store
  /// transaction (one WAL truncation), and deletes their shred-log rows (deferred). Returns the
  /// destructions in the order of `pending`; `made` receives the spares' keys, aligned.
  std::vector<KeyDestruction> destroy_pending(const std::vector<PendingShred>& pending,
                                              const std::vector<KeyOwner>& spares,
                                              std::vector<NewDataKey>* made);

 private:
  struct CachedGroupKey {
    std::string key_id;
    SecretKey key;
  };
  void delete_pending_rows(const std::vector<std::int64_t>& rowids);

  Database& db_;
  std::unique_ptr<KeyStore> keys_;
  std::vector<std::string> new_key_ids_;  // made in the store's open transaction
  /// The live group keys read, per memory and group (a hit needs the row to name the same id).
  std::map<std::int64_t, std::map<std::int64_t, CachedGroupKey>> group_key_cache_;
};

}  // namespace svattn::store_detail
