// The key vault as a component (src/store/key_vault.h) on a real connection: the shred log in an
// SQLite file (unit) or a PostgreSQL schema (label postgres), with the key store beside it (a
// file, or a key database). Keys of a rolled-back transaction die, scheduled keys are logged and
// destroyed together with the spares made, group keys are read once and cached, a live spare
// replaces a group key and a destroyed one does not.
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "db_test_util.h"
#include "store/key_vault.h"
#include "store/schema_ddl.h"

namespace svattn {
namespace {

using store_detail::Database;
using store_detail::KeyOwner;
using store_detail::KeyStore;
using store_detail::KeyStoreOptions;
using store_detail::KeyVault;
using store_detail::NewDataKey;
using store_detail::SecretKey;
using store_detail::Transaction;

class KeyVaultBackends : public store_test::StoreOnBackends {
 protected:
  // A fresh database with the shred log, and a vault over it with a new key store attached.
  void open(const std::string& name) {
    db_ = std::make_unique<Database>(store_test::open_database(stores(), name));
    db_->exec_ddl(store_detail::schema_ddl(*db_).pending_shreds);
    vault_ = std::make_unique<KeyVault>(*db_);
    KeyStoreOptions o;
    o.create = true;
    vault_->attach(std::make_unique<KeyStore>(stores().keys(name), o));
  }
  Database& db() { return *db_; }
  KeyVault& vault() { return *vault_; }
  bool shredded(const std::string& id) { return vault().keys().get(id).shredded(); }

 private:
  std::unique_ptr<Database> db_;
  std::unique_ptr<KeyVault> vault_;  // declared after db_: destroyed before the connection
};

TEST_P(KeyVaultBackends, ARolledBackTransactionsKeysAreDestroyed) {
  open("rollback");
  const std::vector<NewDataKey> kept = vault().create_keys({{1, 7}});
  vault().keys_referenced();  // committed: referenced from now on
  const std::vector<NewDataKey> made = vault().create_keys({{1, 8}, KeyOwner::bounds_group(1, 0)});
  const std::string one = vault().create_key({1, 9}).key_id;
  vault().discard_new_keys();
  EXPECT_FALSE(shredded(kept[0].key_id));
  EXPECT_TRUE(shredded(made[0].key_id));
  EXPECT_TRUE(shredded(made[1].key_id));
  EXPECT_TRUE(shredded(one));
  vault().discard_new_keys();  // nothing left to discard
  EXPECT_FALSE(shredded(kept[0].key_id));
}

TEST_P(KeyVaultBackends, ScheduledKeysAreLoggedThenDestroyedWithTheSparesMade) {
  open("shreds");
  const std::vector<NewDataKey> k =
      vault().create_keys({{1, 5}, KeyOwner::bounds_group(1, 0), KeyOwner::bounds_group(1, 0)});
  vault().keys_referenced();
  EXPECT_FALSE(vault().shreds_pending());
  StoreErasure se;
  {
    Transaction t(db(), true, "shreds", 1000);
    vault().schedule_record_key("m", 5, k[0].key_id, se);
    vault().schedule_group_key("m", 5, k[1].key_id, &se);
    vault().schedule_record_key("m", 6, "", se);  // plaintext: nothing scheduled
    t.commit();
  }
  EXPECT_EQ(se.data_key_id, k[0].key_id);
  EXPECT_EQ(se.data_key_sha256, k[0].wrapped_sha256);
  EXPECT_EQ(se.bounds_key_sha256, k[1].wrapped_sha256);
  EXPECT_FALSE(se.bounds_key_destroyed);
  ASSERT_TRUE(vault().shreds_pending());
  const std::vector<KeyVault::PendingShred> pending = vault().pending_shreds();
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[0].key_id, k[0].key_id);
  EXPECT_EQ(pending[1].key_id, k[1].key_id);
  EXPECT_EQ(pending[1].memory, "m");
  EXPECT_EQ(pending[1].record, 5);
  EXPECT_EQ(vault().pending_shreds("m").size(), 2u);
  EXPECT_TRUE(vault().pending_shreds("other").empty());
  std::vector<NewDataKey> spares;
  {
    Transaction t(db(), true, "shreds", 1000);
    const auto done = vault().destroy_pending(pending, {KeyOwner::bounds_group(1, 0)}, &spares);
    t.commit();
    ASSERT_EQ(done.size(), 2u);
    EXPECT_EQ(done[0].key_id, k[0].key_id);
    EXPECT_TRUE(done[1].owner.is_bounds_group());
  }
  EXPECT_FALSE(vault().shreds_pending());
  EXPECT_TRUE(shredded(k[0].key_id));
  EXPECT_TRUE(shredded(k[1].key_id));
  ASSERT_EQ(spares.size(), 1u);
  EXPECT_FALSE(shredded(spares[0].key_id));
  EXPECT_EQ(vault().keys().get(spares[0].key_id).owner.group(), 0);
  // A group key destroyed already (a restored copy's group) is not scheduled again.
  StoreErasure again;
  vault().schedule_group_key("m", 5, k[1].key_id, &again);
  EXPECT_TRUE(again.bounds_key_destroyed);
  EXPECT_FALSE(vault().shreds_pending());
}

TEST_P(KeyVaultBackends, GroupKeysAreReadOnceAndCachedUntilDropped) {
  open("groups");
  const std::vector<NewDataKey> k =
      vault().create_keys({KeyOwner::bounds_group(1, 0), {1, 3}, KeyOwner::bounds_group(1, 4)});
  vault().keys_referenced();
  const std::string unknown(32, 'e');
  std::map<std::int64_t, SecretKey> out;
  std::vector<std::int64_t> need;
  // Group 0 names its key, 1 none, 2 an id never made, 3 a record's key, 4 its own key.
  vault().group_keys(1, {0, 1, 2, 3, 4}, {k[0].key_id, "", unknown, k[1].key_id, k[2].key_id}, out,
                     need);
  EXPECT_EQ(need, (std::vector<std::int64_t>{1, 2, 3}));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(std::memcmp(out.at(0).data(), k[0].key.data(), store_detail::kKeyBytes), 0);
  // Destroyed behind the vault's back: the cache still answers for the same id...
  vault().keys().destroy(k[0].key_id);
  std::map<std::int64_t, SecretKey> cached;
  need.clear();
  vault().group_keys(1, {0}, {k[0].key_id}, cached, need);
  EXPECT_EQ(cached.size(), 1u);
  EXPECT_TRUE(need.empty());
  // ...until the id is dropped: then the key store says it is destroyed, and the group needs one.
  vault().drop_cached_keys({k[0].key_id});
  cached.clear();
  vault().group_keys(1, {0}, {k[0].key_id}, cached, need);
  EXPECT_TRUE(cached.empty());
  EXPECT_EQ(need, (std::vector<std::int64_t>{0}));
}

TEST_P(KeyVaultBackends, ALiveSpareReplacesAGroupKeyAndADestroyedOneDoesNot) {
  open("spares");
  const std::vector<NewDataKey> k =
      vault().create_keys({KeyOwner::bounds_group(2, 1), KeyOwner::bounds_group(2, 1)});
  vault().keys_referenced();
  EXPECT_EQ(vault().replacement_group_key(2, 1, k[1].key_id), k[1].key_id);
  vault().discard_new_keys();  // no key was made
  EXPECT_FALSE(shredded(k[1].key_id));
  vault().keys().destroy(k[1].key_id);
  const std::string fresh = vault().replacement_group_key(2, 1, k[1].key_id);
  EXPECT_NE(fresh, k[1].key_id);
  EXPECT_EQ(vault().keys().get(fresh).owner.group(), 1);
  // Another group's live key is not this group's spare.
  EXPECT_NE(vault().replacement_group_key(2, 5, k[0].key_id), k[0].key_id);
  vault().discard_new_keys();  // the two fresh keys were made by this "transaction"
  EXPECT_TRUE(shredded(fresh));
}

TEST_P(KeyVaultBackends, APlaintextStoreHasNoKeys) {
  Database db = store_test::open_database(stores(), "plain");
  KeyVault vault(db);
  EXPECT_FALSE(vault.enabled());
  EXPECT_EQ(vault.key_store(), nullptr);
  EXPECT_THROW(vault.keys(), StoreError);
  vault.discard_new_keys();  // nothing made, nothing to do
}

SVATTN_ON_ALL_BACKENDS(KeyVaultBackends);

}  // namespace
}  // namespace svattn
