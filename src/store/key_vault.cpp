// The key vault (key_vault.h; docs/store.md "Components"): the key store's keys as the store's
// operations use them, the keys of the open transaction, the group-key cache and the shred log
// (pending_shreds).
#include "key_vault.h"

#include <algorithm>
#include <iterator>

namespace svattn::store_detail {

KeyStore& KeyVault::keys() const {
  if (keys_ == nullptr) throw StoreError("the store is plaintext: it has no key store");
  return *keys_;
}

std::vector<NewDataKey> KeyVault::create_keys(const std::vector<KeyOwner>& owners) {
  std::vector<NewDataKey> made = keys().create_keys(owners);
  for (const NewDataKey& k : made) new_key_ids_.push_back(k.key_id);
  return made;
}

NewDataKey KeyVault::create_key(const KeyOwner& owner) {
  NewDataKey k = keys().create_key(owner);
  new_key_ids_.push_back(k.key_id);
  return k;
}

void KeyVault::discard_new_keys() noexcept {
  drop_cached_keys(new_key_ids_);
  for (const std::string& id : new_key_ids_) {
    try {
      keys_->destroy(id);
    } catch (...) {  // an orphan key (no row references it) encrypts nothing
    }
  }
  new_key_ids_.clear();
}

// ---------------------------------------------------------------------------- bounds-group keys

void KeyVault::drop_cached_keys(const std::vector<std::string>& key_ids) noexcept {
  for (auto& [memory, groups] : group_key_cache_) {
    for (auto it = groups.begin(); it != groups.end();) {
      const bool gone =
          std::find(key_ids.begin(), key_ids.end(), it->second.key_id) != key_ids.end();
      it = gone ? groups.erase(it) : std::next(it);
    }
  }
}

void KeyVault::group_keys(std::int64_t memory_id, const std::vector<std::int64_t>& groups,
                          const std::vector<std::string>& ids,
                          std::map<std::int64_t, SecretKey>& out, std::vector<std::int64_t>& need) {
  std::map<std::int64_t, CachedGroupKey>& cached = group_key_cache_[memory_id];
  std::vector<std::int64_t> named;
  std::vector<std::string> named_ids;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const std::int64_t g = groups[i];
    const auto hit = cached.find(g);
    if (!ids[i].empty() && hit != cached.end() && hit->second.key_id == ids[i]) {
      out.emplace(g, hit->second.key.clone());  // the key store's lookup skipped
      continue;
    }
    if (hit != cached.end()) cached.erase(hit);  // replaced since: dropped (and zeroed)
    if (ids[i].empty()) {
      need.push_back(g);
    } else {
      named.push_back(g);
      named_ids.push_back(ids[i]);
    }
  }
  std::vector<KeyLookup> got;
  try {
    got = keys().get_many(named_ids);
  } catch (const NotFound&) {  // an id the key store never had (a damaged row): one at a time
    for (const std::string& id : named_ids) {
      try {
        got.push_back(keys_->get(id));
      } catch (const NotFound&) {
        got.emplace_back().state = KeyState::kShredded;
      }
    }
  }
  for (std::size_t i = 0; i < named.size(); ++i) {
    const KeyOwner own = KeyOwner::bounds_group(memory_id, named[i]);
    if (got[i].shredded() || got[i].owner.memory_id != own.memory_id ||
        got[i].owner.record_id != own.record_id) {
      need.push_back(named[i]);  // destroyed (a restored copy) or not the group's: a fresh key
    } else {
      cached[named[i]] = CachedGroupKey{named_ids[i], got[i].key.clone()};
      out.emplace(named[i], std::move(got[i].key));
    }
  }
}

std::string KeyVault::replacement_group_key(std::int64_t memory_id, std::int64_t group,
                                            const std::string& spare) {
  const KeyOwner own = KeyOwner::bounds_group(memory_id, group);
  if (!spare.empty()) {
    try {
      const KeyLookup k = keys().get(spare);
      if (!k.shredded() && k.owner.memory_id == own.memory_id && k.owner.record_id == own.record_id)
        return spare;
    } catch (const NotFound&) {  // a damaged row: a fresh key below
    }
  }
  return create_key(own).key_id;
}

// ------------------------------------------------------------------------------ the shred log

void KeyVault::schedule_record_key(const std::string& memory, std::int64_t record,
                                   const std::string& key_id, StoreErasure& se) {
  if (key_id.empty()) return;  // a plaintext record: nothing to destroy
  se.data_key_id = key_id;
  se.data_key_sha256 = keys().get(key_id).wrapped_sha256;
  Statement ins(db_.handle(),
                "INSERT INTO pending_shreds(key_id, memory, record) VALUES (?1, ?2, ?3)");
  ins.bind(1, key_id).bind(2, memory).bind(3, record).defer();
}

void KeyVault::schedule_group_key(const std::string& memory, std::int64_t record,
                                  const std::string& key_id, StoreErasure* se) {
  KeyLookup k;
  try {
    k = keys().get(key_id);
  } catch (const NotFound&) {  // named by a damaged row: nothing to destroy
    return;
  }
  if (se != nullptr) se->bounds_key_sha256 = k.wrapped_sha256;
  if (k.shredded()) {  // a restored copy's group: its key died with an earlier erasure
    if (se != nullptr) se->bounds_key_destroyed = true;
    return;
  }
  Statement ins(db_.handle(),
                "INSERT INTO pending_shreds(key_id, memory, record) VALUES (?1, ?2, ?3)");
  ins.bind(1, key_id).bind(2, memory).bind(3, record).run();
}

std::string KeyVault::pending_shreds_part(int tag) {
  return "SELECT " + std::to_string(tag) + ", rowid, key_id, memory, record FROM pending_shreds";
}

KeyVault::PendingShred KeyVault::pending_from_row(Statement& q) {
  return {q.int64(1), q.text(2), q.text(3), q.int64(4)};
}

bool KeyVault::shreds_pending() {
  return db_.query_int("SELECT count(*) FROM (SELECT 1 FROM pending_shreds LIMIT 1) p") != 0;
}

std::vector<KeyVault::PendingShred> KeyVault::pending_shreds(const std::string& memory) {
  std::vector<PendingShred> out;
  Statement q(db_.handle(), memory.empty() ? "SELECT rowid, key_id, memory, record FROM "
                                             "pending_shreds ORDER BY rowid"
                                           : "SELECT rowid, key_id, memory, record FROM "
                                             "pending_shreds WHERE memory = ?1 ORDER BY rowid");
  if (!memory.empty()) q.bind(1, memory);
  while (q.step()) out.push_back({q.int64(0), q.text(1), q.text(2), q.int64(3)});
  return out;
}

// Deletes these pending_shreds rows, a few per statement, deferred (Statement::defer).
void KeyVault::delete_pending_rows(const std::vector<std::int64_t>& rowids) {
  constexpr std::size_t kPerStatement = 16;
  for (std::size_t at = 0; at < rowids.size(); at += kPerStatement) {
    const std::size_t n = std::min(kPerStatement, rowids.size() - at);
    std::string sql = "DELETE FROM pending_shreds WHERE rowid IN (";
    for (std::size_t k = 0; k < n; ++k) sql += (k == 0 ? "?" : ", ?") + std::to_string(k + 1);
    Statement del(db_.handle(), sql + ")");
    for (std::size_t k = 0; k < n; ++k) del.bind(static_cast<int>(k + 1), rowids[at + k]);
    del.defer();
  }
}

std::vector<KeyDestruction> KeyVault::destroy_pending(const std::vector<PendingShred>& pending,
                                                      const std::vector<KeyOwner>& spares,
                                                      std::vector<NewDataKey>* made) {
  keys().require_writable(std::to_string(pending.size()) +
                          " key(s) of erased records whose destruction is pending");
  std::vector<std::string> ids;
  std::vector<std::int64_t> rowids;
  for (const PendingShred& p : pending) {
    ids.push_back(p.key_id);
    rowids.push_back(p.rowid);
  }
  drop_cached_keys(ids);
  std::vector<KeyDestruction> destroyed = keys_->destroy_and_create(ids, spares, made);
  delete_pending_rows(rowids);
  return destroyed;
}

}  // namespace svattn::store_detail
