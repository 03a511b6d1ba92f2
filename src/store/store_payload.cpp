// The row-I/O boundary of token payloads (docs/store.md "Encryption at rest"): sealing a record's
// key and value bytes under its own data key when token rows are written, opening them when they
// are read, and the key store the data keys live in. Everything above this file sees plaintext.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "master_key.h"
#include "db/pg_uri.h"
#include "store_impl.h"

namespace svattn {

using namespace store_detail;

void Store::Impl::open_key_store(bool fresh) {
  if (encryption == "none") {
    // A master key for a store without data keys protects nothing: refused rather than ignored,
    // so that nobody believes a plaintext store is wrapped (docs/store.md "Master key").
    if (master_key_given(options) && !converting) {
      throw MasterKeyError("store '" + path + "' is a plaintext store (no data keys), but a " +
                           "master key was given (" + master_key_source(options).describe() +
                           "); run `svattn memory encrypt` to encrypt it, or give no master key");
    }
    return;
  }
  if (encryption != "aes-256-gcm") {
    throw FormatError("store '" + path + "': unknown encryption '" + encryption + "' in meta");
  }
  KeyStoreOptions ko;
  ko.busy_timeout_ms = options.busy_timeout_ms;
  ko.master = master_key_source(options);
  // A missing key store is created only for a store that has never sealed a record (a fresh
  // store, or one whose creation was interrupted between the two files); otherwise every record
  // would silently become unreadable. A read-only open never creates one and does not ask; the
  // question stops at the first sealed record.
  bool sealed_any = false;
  if (!fresh && !options.read_only) {
    sealed_any = has_key_id_column && !record_rows.first_keyed_record().first.empty();
  }
  ko.create = !sealed_any && !options.read_only;
  ko.read_only = options.read_only;
  try {
    vault.attach(std::make_unique<KeyStore>(db.postgres() ? keys_path : key_store_path(), ko));
  } catch (const NotFound& e) {
    throw FormatError("store '" + path + "' is encrypted but its key store '" + key_store_path() +
                      "' is missing: " + e.what());
  }
  check_key_store_is_ours();
}

// Key ids are random: a key store of another store holds none of the keys this store names.
// The first key a records (or bounds_groups) row names must be in it, live or destroyed; one
// lookup per open. A store that names no key yet cannot tell.
void Store::Impl::check_key_store_is_ours() {
  foreign_key_store.clear();
  std::string key_id, owner;
  if (has_key_id_column) {
    const auto [first, record] = record_rows.first_keyed_record();
    if (!first.empty()) {
      key_id = first;
      owner = "data key of record " + std::to_string(record);
    }
  }
  if (key_id.empty() && schema_version >= kFirstSchemaWithBoundsGroups) {
    Statement q(db.handle(),
                "SELECT key_id, group_id FROM bounds_groups WHERE key_id IS NOT NULL LIMIT 1");
    if (q.step()) {
      key_id = q.text(0);
      owner = "key of bounds group " + std::to_string(q.int64(1));
    }
  }
  if (key_id.empty()) return;
  try {
    vault.keys().get(key_id);
  } catch (const NotFound&) {
    foreign_key_store = "key store '" + key_store_path() + "' is not the key store of store '" +
                        path + "': it does not hold key " + key_id + " (" + owner +
                        "), which the store names (a key store of another store?)";
  }
}

std::string Store::key_wrapping() const {
  return impl_->vault.enabled() ? impl_->vault.keys().wrapping() : std::string();
}

std::string Store::Impl::key_store_path() const {
  if (!db.postgres()) return KeyStore::path_for(path);
  if (keys_path.empty()) {
    throw InvalidArgument("store '" + path +
                          "' is encrypted: name its key store in the URI (keys=PATH of a file, or "
                          "keys=postgresql://... of a separate database)");
  }
  return is_postgres_uri(keys_path) ? parse_postgres_uri(keys_path).display : keys_path;
}

RecordRows::Columns Store::Impl::record_columns() const {
  return {has_key_id_column, schema_version >= kFirstSchemaWithBoundsGroups};
}

void Store::Impl::insert_tokens(std::int64_t memory_id, const TokenSet& ts, const Memory& mem) {
  insert_tokens(
      memory_id, ts, [&](TokenId id) { return mem.contains(id); },
      mem.settings().mode == MemoryMode::kAudit);
}

void Store::Impl::insert_tokens(std::int64_t memory_id, const TokenSet& ts,
                                const std::function<bool(TokenId)>& retained, bool audit_mode) {
  // Prepared first, as before the groups' and keys' statements (a first prepare on PostgreSQL
  // ends the pipeline of deferred statements: docs/store.md "Round trips and plans").
  RecordRows::TokenWriter ins = record_rows.token_writer(memory_id);
  const std::size_t kb = sizeof(double) * static_cast<std::size_t>(ts.keys.cols());
  const std::size_t vb = sizeof(double) * static_cast<std::size_t>(ts.values.cols());
  std::map<std::int64_t, std::unique_ptr<Sealer>> sealers;
  // Each new record joins a bounds group (docs/store.md "Bounds groups"); in an encrypted store
  // the records' data keys and the new groups' keys are made in one key-store transaction.
  std::map<std::int64_t, std::int64_t> rows_of;  // record -> its token rows
  for (TokenId id : ts.ids) ++rows_of[record_of(id)];
  std::vector<std::int64_t> created;
  join_bounds_groups(
      memory_id, std::vector<std::pair<std::int64_t, std::int64_t>>(rows_of.begin(), rows_of.end()),
      &created);
  if (vault.enabled()) {
    std::vector<KeyOwner> owners;
    for (const auto& [r, n] : rows_of) owners.push_back({memory_id, r});
    for (std::int64_t g : created) {  // a new group's key and its spare (docs/store.md)
      owners.push_back(KeyOwner::bounds_group(memory_id, g));
      owners.push_back(KeyOwner::bounds_group(memory_id, g));
    }
    std::vector<NewDataKey> keys = vault.create_keys(owners);
    std::vector<std::int64_t> records;
    std::vector<std::string> key_ids;
    for (std::size_t k = 0; k < rows_of.size(); ++k) {
      records.push_back(owners[k].record_id);
      key_ids.push_back(keys[k].key_id);
      sealers[owners[k].record_id] = std::make_unique<Sealer>(keys[k].key);
    }
    record_rows.set_keys(memory_id, records, key_ids);
    for (std::size_t k = rows_of.size(); k + 1 < keys.size(); k += 2)
      screening_bounds.set_key(memory_id, owners[k].group(), keys[k].key_id, keys[k + 1].key_id);
  }
  std::vector<std::uint8_t> kbuf, vbuf;
  for (int i = 0; i < ts.size(); ++i) {
    const TokenId id = ts.ids[static_cast<std::size_t>(i)];
    if (!retained(id)) continue;  // bounded mode evicted it on arrival: not retained
    const double* key = ts.keys.row(i).data();
    const double* value = ts.values.row(i).data();
    if (sealers.empty()) {
      ins.add(id, key, kb, value, vb);
    } else {
      sealers.at(record_of(id))
          ->seal_token({memory_id, record_of(id), position_of(id), RecordField::kToken}, key, kb,
                       value, vb, kbuf, vbuf);
      ins.add(id, kbuf.data(), kbuf.size(), vbuf.data(), vbuf.size());
    }
  }
  if (audit_mode) {
    // Each record's bucket digests, for forgets without a restore (store_forget_stored.cpp).
    std::map<std::int64_t, std::vector<int>> rows;
    for (int i = 0; i < ts.size(); ++i)
      rows[record_of(ts.ids[static_cast<std::size_t>(i)])].push_back(i);
    for (auto& [record, idx] : rows) {
      std::sort(idx.begin(), idx.end(), [&](int a, int b) {
        return ts.ids[static_cast<std::size_t>(a)] < ts.ids[static_cast<std::size_t>(b)];
      });
      TokenSet one;
      one.keys.resize(static_cast<Eigen::Index>(idx.size()), ts.keys.cols());
      one.values.resize(static_cast<Eigen::Index>(idx.size()), ts.values.cols());
      for (std::size_t k = 0; k < idx.size(); ++k) {
        one.ids.push_back(ts.ids[static_cast<std::size_t>(idx[k])]);
        one.keys.row(static_cast<Eigen::Index>(k)) = ts.keys.row(idx[k]);
        one.values.row(static_cast<Eigen::Index>(k)) = ts.values.row(idx[k]);
      }
      const auto it = sealers.find(record);
      write_record_buckets(memory_id, record, one,
                           it == sealers.end() ? nullptr : it->second.get());
    }
  }
}

namespace {

AuditEntry shred_entry(const KeyDestruction& d, const std::string& memory, std::int64_t record) {
  AuditEntry e;
  e.operation = "shred";
  e.record = record;
  nlohmann::json c = d.to_json();
  c["operation"] = "shred";
  c["memory"] = memory;
  c["record"] = record;
  c["key_kind"] = d.owner.is_bounds_group() ? "bounds group key" : "record data key";
  if (d.owner.is_bounds_group()) c["bounds_group"] = d.owner.group();
  e.certificate = c.dump();
  return e;
}

}  // namespace

void Store::Impl::complete_shreds(std::vector<KeyDestruction>* done) {
  if (!vault.enabled() || options.read_only) return;
  // At open (no `done`), usually nothing is pending: one read without the write lock says so.
  if (done == nullptr && !vault.shreds_pending()) return;
  // The log of the destructions need not wait for the disk: if a crash of the machine loses it,
  // the pending rows are still there and the next open repeats it (destroy is idempotent). It is
  // synced with the next synchronous commit or checkpoint; not even the header of a WAL that the
  // forget's checkpoint emptied is synced for it.
  RelaxedCommit relaxed(db, true);
  Transaction t(db, true, path, options.busy_timeout_ms);
  relaxed.in_transaction();
  // Read under the write lock, every pending row is this transaction's to complete: another
  // process completes it before (the row is gone) or after (it waits for this commit). Every
  // pending key (a forget's data key and its bounds group's old key) dies in one key-store
  // transaction and one WAL truncation. The same transaction makes the spare key of every group
  // that has none (the one whose spare the forget used): the next erasure in the group then writes
  // nothing to the key store before its commit (docs/store.md "Bounds groups"). The three lists
  // in one read (one round trip on PostgreSQL), each part written by its table's owner.
  std::vector<KeyVault::PendingShred> pending;
  std::vector<KeyOwner> spares;
  AuditLog::Head head{0, kZeroHash};
  {
    Statement q(db.handle(), KeyVault::pending_shreds_part(0) + " UNION ALL " +
                                 ScreeningBounds::groups_without_spare_part(1) + " UNION ALL " +
                                 AuditLog::head_part(2) + " ORDER BY 1, 2, 5");
    while (q.step()) {
      if (q.int64(0) == 0) {
        pending.push_back(KeyVault::pending_from_row(q));
      } else if (q.int64(0) == 1) {
        spares.push_back(ScreeningBounds::group_from_row(q));
      } else {
        head = AuditLog::head_from_row(q);
      }
    }
  }
  if (pending.empty()) return;  // rolled back: nothing was written
  std::vector<NewDataKey> made;
  const std::vector<KeyDestruction> destroyed = vault.destroy_pending(pending, spares, &made);
  std::vector<AuditEntry> entries;
  entries.reserve(pending.size());
  for (std::size_t i = 0; i < pending.size(); ++i)
    entries.push_back(shred_entry(destroyed[i], pending[i].memory, pending[i].record));
  std::vector<AuditEntry*> log;
  for (AuditEntry& e : entries) log.push_back(&e);
  audit.append(log, &head);
  screening_bounds.set_spare_keys(spares, made);
  t.commit();
  if (done != nullptr) done->insert(done->end(), destroyed.begin(), destroyed.end());
}

}  // namespace svattn
