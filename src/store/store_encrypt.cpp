// encrypt_store: converting a plaintext store in place (docs/store.md "Encrypting an existing
// store"). One transaction gives every record a fresh data key and rewrites its token rows
// sealed, switches meta 'encryption' and logs the store-level audit entry "encrypt"; then VACUUM
// rebuilds the file from the current rows and the WAL is truncated, so no plaintext stays in
// freed pages or in the free space of pages whose cells moved. On PostgreSQL the scrub is VACUUM
// FULL of the store's tables, and the result says what that cannot remove.
#include <chrono>

#include "master_key.h"
#include "db/pg_uri.h"
#include "db/sqlite.h"
#include "store_impl.h"
#include "support/clock.h"

namespace svattn {

using namespace store_detail;

nlohmann::json encryption_result_to_json(const StoreEncryptionResult& r) {
  nlohmann::json j{{"store", r.path},
                   {"converted", r.converted},
                   {"already_encrypted", r.already_encrypted},
                   {"scrubbed", r.scrubbed},
                   {"wal_truncated", r.wal_truncated},
                   {"encryption", "aes-256-gcm"},
                   {"key_store", r.key_store},
                   {"key_wrapping", r.wrapping},
                   {"records", r.records},
                   {"tokens", r.tokens},
                   {"state_sha256", r.state_sha256},
                   {"seconds", r.seconds}};
  if (!r.residual.empty()) j["residual"] = r.residual;
  if (r.entry.seq > 0) j["audit"] = audit_entry_to_json(r.entry);
  return j;
}

bool Store::Impl::scrub_pending() {
  Statement q(db.handle(), "SELECT 1 FROM meta WHERE key = 'encrypt_scrub_pending'");
  return q.step();
}

// PostgreSQL keeps an updated row's old tuple until VACUUM, and VACUUM does not zero the space it
// frees; VACUUM FULL writes each table anew and drops its old files. What it cannot reach.
constexpr const char* kPgResidual =
    "PostgreSQL does not zero freed space: VACUUM FULL rewrote the store's tables into new files, "
    "but the plaintext of the old rows may persist in the disk blocks of the dropped files until "
    "they are overwritten, in the server's WAL until it is recycled, and in WAL archives and "
    "backups taken before the conversion (docs/store.md \"Encrypting an existing store\")";

bool Store::Impl::scrub_free_space() {
  if (db.postgres()) {
    // One table per statement, outside any transaction (VACUUM cannot run inside one). Every
    // table that held payload bytes: token rows, the records' bucket digests, the support rows,
    // the bounds groups' blobs.
    for (const char* table : {"tokens", "records", "support", "bounds_groups"}) {
      db.exec(std::string("VACUUM FULL ") + table);
    }
    Transaction t(db, true, path, options.busy_timeout_ms);
    db.exec("DELETE FROM meta WHERE key = 'encrypt_scrub_pending'");
    t.commit();
    return false;  // the server's WAL is not the store's to truncate
  }
  // VACUUM builds a new database from the current rows and writes every page of it (through the
  // WAL); the checkpoint then replaces the file's pages and truncates the file and the WAL.
  db.exec("VACUUM");
  {
    Transaction t(db, true, path, options.busy_timeout_ms);
    db.exec("DELETE FROM meta WHERE key = 'encrypt_scrub_pending'");
    t.commit();
  }
  const WalCheckpoint c = sqlite_checkpoint_truncate(db, true);
  return c.ok && c.log_frames == 0;
}

namespace {

using PlainRecord = RecordRows::UnkeyedRecord;

// The record's plaintext token rows (sizes checked: a plaintext row holds dim doubles).
std::vector<RecordRows::TokenBlobs> read_plain(RecordRows& rows, const std::string& path,
                                               const PlainRecord& r) {
  std::vector<RecordRows::TokenBlobs> out = rows.token_blobs(r.memory_id, r.record);
  for (const RecordRows::TokenBlobs& t : out) {
    if (t.key.size() != sizeof(double) * r.dim || t.value.size() != sizeof(double) * r.value_dim) {
      throw FormatError("store '" + path + "': token " + std::to_string(t.id) +
                        " of a plaintext record has a blob of the wrong size; nothing converted");
    }
  }
  return out;
}

// Seals one record's rows under its new data key; returns the rows rewritten.
std::int64_t seal_record(RecordRows& rows, const RecordRows::Columns& columns,
                         const std::string& path, const PlainRecord& r, const NewDataKey& k) {
  rows.set_keys(r.memory_id, {r.record}, {k.key_id});
  std::vector<RecordRows::TokenBlobs> tokens = read_plain(rows, path, r);
  Sealer sealer(k.key);
  std::vector<std::uint8_t> kb, vb;
  for (RecordRows::TokenBlobs& t : tokens) {
    const std::int64_t pos = position_of(t.id);
    sealer.seal_token({r.memory_id, r.record, pos, RecordField::kToken}, t.key.data(), t.key.size(),
                      t.value.data(), t.value.size(), kb, vb);
    t.key.swap(kb);
    t.value.swap(vb);
  }
  rows.set_token_blobs(tokens);
  // The record's bucket digests (docs/store.md "Operations without a restore") are sealed too.
  const RecordRows::StoredBuckets b = rows.buckets(r.memory_id, r.record, columns);
  if (b.has_buckets) {
    sealer.seal_into({r.memory_id, r.record, -1, RecordField::kBuckets}, b.blob.data(),
                     b.blob.size(), kb);
    rows.set_buckets(r.memory_id, r.record, kb);
  }
  return static_cast<std::int64_t>(tokens.size());
}

nlohmann::json memory_hashes(Database& db) {
  nlohmann::json j = nlohmann::json::object();
  Statement q(db.handle(), "SELECT name, state_sha256 FROM memories ORDER BY name");
  while (q.step()) j[q.text(0)] = q.text(1);
  return j;
}

}  // namespace

// The conversion transaction (see the file comment). Data keys are committed to STORE.keys
// before the data transaction that references them; on failure they are destroyed again.
void Store::Impl::convert_to_encrypted(StoreEncryptionResult& res) {
  Store::Impl& im = *this;
  KeyStoreOptions ko;
  ko.create = true;
  ko.busy_timeout_ms = im.options.busy_timeout_ms;
  ko.master = master_key_source(im.options);
  im.vault.attach(std::make_unique<KeyStore>(
      im.db.postgres() ? im.keys_path : KeyStore::path_for(im.path), ko));
  Transaction t(im.db, true, im.path, im.options.busy_timeout_ms);
  try {
    const std::vector<PlainRecord> recs = im.record_rows.unkeyed_records();  // under the lock
    const std::vector<KeyOwner> groups = im.screening_bounds.unsealed_groups();
    std::vector<KeyOwner> owners;
    for (const PlainRecord& r : recs) owners.push_back({r.memory_id, r.record});
    owners.insert(owners.end(), groups.begin(), groups.end());
    const std::vector<NewDataKey> keys = im.vault.create_keys(owners);
    for (std::size_t i = 0; i < recs.size(); ++i)
      res.tokens += seal_record(im.record_rows, im.record_columns(), im.path, recs[i], keys[i]);
    for (std::size_t i = 0; i < groups.size(); ++i)
      im.screening_bounds.seal_group(groups[i], keys[recs.size() + i]);
    res.records = static_cast<std::int64_t>(recs.size());
    im.db.exec("UPDATE meta SET value = 'aes-256-gcm' WHERE key = 'encryption'");
    im.db.exec("INSERT INTO meta(key, value) VALUES ('encrypt_scrub_pending', '1')");
    AuditEntry& e = res.entry;
    e.operation = "encrypt";
    e.record = -1;
    e.token_count = res.tokens;
    e.certificate = nlohmann::json{{"operation", "encrypt"},
                                   {"encryption", "aes-256-gcm"},
                                   {"key_wrapping", im.vault.keys().wrapping()},
                                   {"records", res.records},
                                   {"tokens", res.tokens},
                                   {"state_sha256", memory_hashes(im.db)}}
                        .dump();
    im.audit.append(e);
    t.commit();
  } catch (...) {
    t.rollback();
    im.vault.discard_new_keys();
    throw;
  }
  im.vault.keys_referenced();
  im.encryption = "aes-256-gcm";
  res.converted = true;
}

StoreEncryptionResult encrypt_store(const std::string& path, const StoreOptions& options) {
  const support::Stopwatch watch;
  if (options.read_only || options.create) {
    throw InvalidArgument("encrypt_store: StoreOptions.read_only and .create must be false");
  }
  if (options.busy_timeout_ms < 0) {
    throw InvalidArgument("busy_timeout_ms must be >= 0, got " +
                          std::to_string(options.busy_timeout_ms));
  }
  check_master_key(options);
  auto im = std::make_unique<Store::Impl>();
  im->set_location(path);
  if (!im->pg_conninfo.empty() && im->keys_path.empty()) {
    throw InvalidArgument("store '" + im->path +
                          "': encrypting a PostgreSQL store needs its key store named in the URI "
                          "(keys=PATH of a file, or keys=postgresql://... of a separate database)");
  }
  im->options = options;
  im->converting = true;
  im->open();  // upgrades an older file, completes pending shreds, purges shredded records
  StoreEncryptionResult res;
  res.path = im->path;
  if (im->encryption == "none") {
    im->convert_to_encrypted(res);
  } else {
    res.already_encrypted = true;
  }
  res.wrapping = im->vault.keys().wrapping();
  res.key_store = im->key_store_path();
  if (res.converted || im->scrub_pending()) {
    res.scrubbed = true;
    res.wal_truncated = im->scrub_free_space();
    if (im->db.postgres()) res.residual = kPgResidual;
  } else {
    bool truncated = false;
    im->checkpoint(&truncated);
    res.wal_truncated = truncated;
  }
  res.state_sha256 = memory_hashes(im->db);
  im->db.close();
  res.seconds = watch.seconds();
  return res;
}

}  // namespace svattn
