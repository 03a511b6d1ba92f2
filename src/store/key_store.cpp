// The key store file STORE.keys: schema, key creation, lookup, destruction with secure_delete and
// WAL truncation (docs/store.md "Encryption at rest (building blocks)").
#include "key_store.h"

#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <map>

#include "db/pg_uri.h"
#include "db/postgres.h"
#include "db/sqlite.h"
#include "schema_ddl.h"
#include "db/dialect.h"
#include "svattn/hash.h"
#include "svattn/store.h"
#include "utc_clock.h"

namespace svattn::store_detail {
namespace {

constexpr char kFormat[] = "svattn-keys";
constexpr char kVersion[] = "1";
constexpr int kKeyStoreApplicationId = 0x5356414b;  // "SVAK"
constexpr char kWrapGcm[] = "aes-256-gcm";
constexpr char kWrapNone[] = "none";


// -1 if the file does not exist, else its size.
long long file_size(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? static_cast<long long>(st.st_size) : -1;
}

std::string meta_value(Database& db, const char* key) {
  Statement s(db.handle(), "SELECT value FROM meta WHERE key = ?");
  s.bind(1, std::string(key));
  return s.step() ? s.text(0) : std::string();
}

void cleanse(std::vector<std::uint8_t>& v) {
  if (!v.empty()) OPENSSL_cleanse(v.data(), v.size());
}

nlohmann::json owner_json(const KeyOwner& o) {
  return {{"memory_id", o.memory_id}, {"record_id", o.record_id}};
}

}  // namespace

const char* to_string(KeyState s) { return s == KeyState::kLive ? "live" : "shredded"; }

nlohmann::json KeyLookup::to_json() const {
  return {{"state", to_string(state)},  {"key_id", key_id},
          {"owner", owner_json(owner)}, {"wrapped_sha256", wrapped_sha256},
          {"created_utc", created_utc}, {"destroyed_utc", destroyed_utc}};
}

nlohmann::json KeyDestruction::to_json() const {
  return {{"key_id", key_id},
          {"owner", owner_json(owner)},
          {"wrapped_sha256", wrapped_sha256},
          {"destroyed_utc", destroyed_utc},
          {"already_shredded", already_shredded},
          {"wal_truncated", wal_truncated}};
}

void KeyStoreOptions::validate() const {
  master.validate();
  if (busy_timeout_ms < 0) {
    throw InvalidArgument("KeyStoreOptions.busy_timeout_ms must be >= 0, got " +
                          std::to_string(busy_timeout_ms));
  }
  if (read_only && create) {
    throw InvalidArgument(
        "KeyStoreOptions.read_only and KeyStoreOptions.create exclude each other");
  }
}

std::string KeyStore::wrapped_sha256(const std::string& key_id,
                                     const std::vector<std::uint8_t>& stored) {
  static const std::string kLabel = "svattn-keyhash-v1";
  std::vector<std::uint8_t> buf(kLabel.begin(), kLabel.end());
  buf.push_back(static_cast<std::uint8_t>(key_id.size()));
  buf.insert(buf.end(), key_id.begin(), key_id.end());
  buf.insert(buf.end(), stored.begin(), stored.end());
  const std::string h = sha256_hex(buf);
  cleanse(buf);
  return h;
}

KeyStore::KeyStore(std::string path, const KeyStoreOptions& options)
    : path_(std::move(path)), options_(options) {
  options_.validate();
  has_master_ = load_master_key(options_.master, master_);
  if (is_postgres_uri(path_)) {
    open_postgres();
    return;
  }
  // Every failure names the key store (a truncated or foreign file fails inside SQLite, whose
  // message names no file); the type is kept.
  const auto named = [&](const std::string& what) {
    return what.find(path_) != std::string::npos ? what : "key store '" + path_ + "': " + what;
  };
  try {
    open_file();
  } catch (const StoreBusy& e) {
    throw StoreBusy(named(e.what()));
  } catch (const StoreFull& e) {
    throw StoreFull(named(e.what()));
  } catch (const StoreError& e) {
    throw StoreError(named(e.what()));
  } catch (const FormatError& e) {
    throw FormatError(named(e.what()));
  }
}

void KeyStore::open_file() {
  const long long size = file_size(path_);
  if (size < 0 && !options_.create) {
    throw NotFound("key store '" + path_ + "' does not exist (KeyStoreOptions.create is false)");
  }
  if (options_.read_only) {
    open_read_only(size);
    return;
  }
  // An empty file, or an SQLite file with no table and no application id (a creation killed
  // after `journal_mode=WAL` wrote the header but before the schema committed), is initialised
  // like a new one.
  bool exists = size > 0 || (size == 0 && !options_.create);
  SqliteOpen how;
  how.create = size < 0;
  how.busy_timeout_ms = options_.busy_timeout_ms;
  db_ = open_sqlite(path_, how);
  if (exists && options_.create && db_.application_id() == 0 && db_.is_empty()) {
    exists = false;
  }
  if (exists) check_schema();  // before any pragma changes a file that is not a key store
  const std::string mode = db_.enable_wal();
  if (mode != "wal")
    throw StoreError("key store '" + path_ + "': cannot enable WAL (" + mode + ")");
  db_.harden_writes();
  if (!exists) {
    create_schema();
    check_schema();
  }
  truncate_wal();  // finishes a truncation an earlier destroy could not complete
}

// A key table in a PostgreSQL database (docs/store.md "Keys in a separate PostgreSQL database"):
// the same three tables, written through the dialect layer; no file, so no WAL of ours to
// truncate and no secure_delete (the server keeps a destroyed key's old tuple until VACUUM).
void KeyStore::open_postgres() {
  const PgLocation loc = parse_postgres_uri(path_);
  if (!loc.keys.empty()) {
    throw InvalidArgument("key store URI '" + loc.display +
                          "' has keys= (a key store does not have a key store of its own)");
  }
  path_ = loc.display;  // messages never show a password
  pg_ = true;
  db_ = store_detail::open_postgres(loc.conninfo, path_, options_.busy_timeout_ms);
  const bool exists = db_.has_table("meta");
  if (!exists && (!options_.create || options_.read_only)) {
    throw NotFound("key store '" + path_ + "' does not exist (no key tables in the schema" +
                   (options_.read_only ? ")" : "; KeyStoreOptions.create is false)"));
  }
  if (exists) {
    check_schema();
    return;
  }
  create_schema();
  check_schema();
}

void KeyStore::open_read_only(long long size) {
  if (size <= 0) throw NotFound("key store '" + path_ + "' does not exist or is empty");
  const std::size_t slash = path_.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path_.substr(0, slash + 1);
  const bool immutable = ::access((path_ + "-wal").c_str(), F_OK) != 0 &&
                         ::access((path_ + "-shm").c_str(), F_OK) != 0 &&
                         ::access(dir.c_str(), W_OK) != 0;
  SqliteOpen how;
  how.read_only = true;
  how.uri = immutable;  // no WAL to read: the file is complete (as the store's read-only open)
  how.busy_timeout_ms = options_.busy_timeout_ms;
  db_ = open_sqlite(immutable ? sqlite_immutable_uri(path_) : path_, how);
  check_schema();
}

void KeyStore::create_schema() {
  Transaction t(db_, true, path_, options_.busy_timeout_ms);
  if (!db_.is_empty()) return;  // made by another process
  db_.exec_ddl(schema_ddl(db_).key_store_tables);
  db_.set_application_id(kKeyStoreApplicationId);
  Statement ins(db_.handle(), "INSERT INTO meta(key, value) VALUES (?, ?)");
  auto put = [&](const char* k, const std::string& v) {
    ins.bind(1, std::string(k)).bind(2, v).run();
    ins.reset();
  };
  put("format", kFormat);
  put("version", kVersion);
  put("wrapping", has_master_ ? kWrapGcm : kWrapNone);
  if (has_master_) put("master_check", master_key_check(master_));
  put("created_utc", now_utc());
  t.commit();
}

void KeyStore::check_schema() {
  if (db_.application_id() != kKeyStoreApplicationId || meta_value(db_, "format") != kFormat) {
    throw FormatError("'" + path_ + "' is not an svattn key store");
  }
  const std::string version = meta_value(db_, "version");
  if (version != kVersion) {
    throw FormatError("key store '" + path_ + "' has version " + version + "; this build reads " +
                      kVersion);
  }
  wrapping_ = meta_value(db_, "wrapping");
  if (wrapping_ == kWrapNone) {
    if (has_master_) {
      throw MasterKeyError("key store '" + path_ + "' was created without a master key, but one " +
                           "was given (" + options_.master.describe() + ")");
    }
  } else if (wrapping_ == kWrapGcm) {
    if (!has_master_) {
      throw MasterKeyError("key store '" + path_ +
                           "' wraps its keys under a master key; none was given (StoreOptions::"
                           "master_key_file / master_key_env; the CLI and Python's Store read "
                           "--master-key-file / master_key_file=, else SVATTN_MASTER_KEY_FILE, "
                           "else SVATTN_MASTER_KEY)");
    }
    if (meta_value(db_, "master_check") != master_key_check(master_)) {
      throw MasterKeyError("the master key from " + options_.master.describe() +
                           " is not the key the key store '" + path_ + "' was created with");
    }
  } else {
    throw FormatError("key store '" + path_ + "': unknown wrapping '" + wrapping_ + "'");
  }
}

std::vector<std::uint8_t> KeyStore::stored_form(const std::string& key_id,
                                                const SecretKey& key) const {
  if (has_master_) return wrap_key(master_, key_id, key);
  return std::vector<std::uint8_t>(key.data(), key.data() + kKeyBytes);
}

SecretKey KeyStore::key_from_stored(const std::string& key_id,
                                    std::vector<std::uint8_t>& stored) const {
  if (has_master_) {
    try {
      SecretKey k = unwrap_key(master_, key_id, stored);
      cleanse(stored);
      return k;
    } catch (const MasterKeyError&) {
      // The master key matched the key store's check, so the wrapped key itself was altered.
      cleanse(stored);
      throw FormatError("key store '" + path_ + "': wrapped key '" + key_id +
                        "' fails authentication under the key store's master key (altered, or "
                        "moved from another key row)");
    }
  }
  if (stored.size() != kKeyBytes) {
    cleanse(stored);
    throw FormatError("key store '" + path_ + "': key '" + key_id + "' has " +
                      std::to_string(stored.size()) + " bytes, expected " +
                      std::to_string(kKeyBytes));
  }
  SecretKey k = SecretKey::from_bytes(stored.data(), stored.size());
  cleanse(stored);
  return k;
}

NewDataKey KeyStore::insert_key(const KeyOwner& owner, const std::string& now) {
  NewDataKey k;
  k.key_id = random_id_hex();
  k.key = SecretKey::random();
  std::vector<std::uint8_t> stored = stored_form(k.key_id, k.key);
  k.wrapped_sha256 = wrapped_sha256(k.key_id, stored);
  Statement ins(db_.handle(),
                "INSERT INTO data_keys(key_id, memory_id, record_id, live, stored, wrapped_sha256, "
                "created_utc) VALUES (?, ?, ?, 1, ?, ?, ?)");
  ins.bind(1, k.key_id).bind(2, owner.memory_id).bind(3, owner.record_id);
  ins.bind_blob(4, stored.data(), stored.size()).bind(5, k.wrapped_sha256).bind(6, now);
  cleanse(stored);
  ins.run();
  return k;
}

NewDataKey KeyStore::create_key(const KeyOwner& owner) {
  std::vector<NewDataKey> keys = create_keys({owner});
  return std::move(keys.front());
}

std::vector<NewDataKey> KeyStore::create_keys(const std::vector<KeyOwner>& owners) {
  if (options_.read_only) throw InvalidArgument("key store '" + path_ + "' was opened read-only");
  Transaction t(db_, true, path_, options_.busy_timeout_ms);
  const std::string now = now_utc();
  std::vector<NewDataKey> out;
  out.reserve(owners.size());
  for (const KeyOwner& o : owners) out.push_back(insert_key(o, now));
  t.commit();
  return out;
}

KeyLookup KeyStore::get(const std::string& key_id) {
  KeyLookup r;
  r.key_id = key_id;
  if (get_live_ == nullptr) {  // prepared once: a restore looks up one key per record
    get_live_ = std::make_unique<Statement>(
        db_.handle(),
        "SELECT memory_id, record_id, stored, wrapped_sha256, created_utc FROM data_keys "
        "WHERE key_id = ? AND live = 1");
  }
  Statement& live = *get_live_;
  live.reset();  // (after a lookup that threw)
  live.bind(1, key_id);
  if (!live.step()) {
    live.reset();
    return tombstone(key_id);
  }
  r.state = KeyState::kLive;
  r.owner = {live.int64(0), live.int64(1)};
  std::vector<std::uint8_t> stored = live.blob(2);
  r.wrapped_sha256 = live.text(3);
  r.created_utc = live.text(4);
  live.reset();  // ends the statement's read of the file
  r.key = key_from_stored(key_id, stored);
  return r;
}

KeyLookup KeyStore::tombstone(const std::string& key_id) {
  KeyLookup r;
  r.key_id = key_id;
  Statement dead(db_.handle(),
                 "SELECT memory_id, record_id, wrapped_sha256, created_utc, destroyed_utc FROM "
                 "shredded_keys WHERE key_id = ?");
  dead.bind(1, key_id);
  if (!dead.step()) throw NotFound("key store '" + path_ + "': no data key '" + key_id + "'");
  r.state = KeyState::kShredded;
  r.owner = {dead.int64(0), dead.int64(1)};
  r.wrapped_sha256 = dead.text(2);
  r.created_utc = dead.text(3);
  r.destroyed_utc = dead.text(4);
  return r;
}

std::vector<KeyLookup> KeyStore::get_many(const std::vector<std::string>& key_ids) {
  std::vector<KeyLookup> out;
  out.reserve(key_ids.size());
  const ReadScope scope(this);
  if (!pg_) {  // a local file: a point lookup costs microseconds
    for (const std::string& id : key_ids) out.push_back(get(id));
    return out;
  }
  std::map<std::string, KeyLookup> live;
  {
    Statement q(db_.handle(),
                "SELECT key_id, memory_id, record_id, stored, wrapped_sha256, created_utc FROM "
                "data_keys WHERE key_id = ANY(?1::text[]) AND live = 1");
    q.bind(1, pg_array(key_ids));
    while (q.step()) {
      KeyLookup k;
      k.key_id = q.text(0);
      k.owner = {q.int64(1), q.int64(2)};
      std::vector<std::uint8_t> stored = q.blob(3);
      k.wrapped_sha256 = q.text(4);
      k.created_utc = q.text(5);
      k.key = key_from_stored(k.key_id, stored);
      live.emplace(k.key_id, std::move(k));
    }
  }
  for (const std::string& id : key_ids) {
    const auto it = live.find(id);
    if (it == live.end()) {
      out.push_back(tombstone(id));
    } else {
      KeyLookup k;
      k.key_id = id;
      k.owner = it->second.owner;
      k.wrapped_sha256 = it->second.wrapped_sha256;
      k.created_utc = it->second.created_utc;
      k.key = it->second.key.clone();
      out.push_back(std::move(k));
    }
  }
  return out;
}

KeyStore::ReadScope::ReadScope(KeyStore* keys) {
  if (keys == nullptr || keys->in_read_scope_) return;
  keys->db_.exec("BEGIN");
  keys->in_read_scope_ = true;
  keys_ = keys;
}

KeyStore::ReadScope::~ReadScope() {
  if (keys_ == nullptr) return;
  keys_->in_read_scope_ = false;
  if (keys_->get_live_ != nullptr) keys_->get_live_->reset();
  try {
    keys_->db_.exec("COMMIT");  // a read: nothing to lose
  } catch (...) {
  }
}

KeyDestruction KeyStore::destroy(const std::string& key_id) {
  std::vector<KeyDestruction> d = destroy_many({key_id});
  return std::move(d.front());
}

std::vector<KeyDestruction> KeyStore::destroy_many(const std::vector<std::string>& key_ids) {
  return destroy_and_create(key_ids, {}, nullptr);
}

std::vector<KeyDestruction> KeyStore::destroy_and_create(const std::vector<std::string>& key_ids,
                                                         const std::vector<KeyOwner>& owners,
                                                         std::vector<NewDataKey>* made) {
  if (options_.read_only) throw InvalidArgument("key store '" + path_ + "' was opened read-only");
  std::vector<KeyDestruction> out;
  {
    // Two syncs instead of four (SQLite): the commit syncs nothing, not even the header of the
    // WAL the last erasure emptied, and the truncating checkpoint right after (synchronous=FULL
    // again) syncs the WAL before it copies it into the file, syncs the file and empties the WAL.
    // A crash before that checkpoint's first sync loses the whole transaction, never part of it
    // (the WAL's frames are checksummed and salted by its header), and the caller has not yet
    // logged it or dropped its pending rows: the next open destroys the keys again. When a reader
    // keeps the checkpoint from completing, a synchronous commit syncs the WAL instead. Either way
    // the destruction is on disk before this returns, as with a synchronous commit.
    RelaxedCommit unsynced(db_, true);
    Transaction t(db_, true, path_, options_.busy_timeout_ms);
    for (const std::string& id : key_ids) out.push_back(destroy_in_transaction(id));
    const std::string now = now_utc();
    for (const KeyOwner& o : owners) made->push_back(insert_key(o, now));
    t.commit();
  }
  const bool truncated = truncate_wal();
  if (!truncated && !pg_) sync_wal();
  for (KeyDestruction& d : out) d.wal_truncated = truncated;
  return out;
}

void KeyStore::sync_wal() {
  Transaction t(db_, true, path_, options_.busy_timeout_ms);  // synchronous=FULL again here
  db_.exec("UPDATE meta SET value = value WHERE key = 'format'");
  t.commit();
}

KeyDestruction KeyStore::destroy_in_transaction(const std::string& key_id) {
  KeyDestruction d;
  d.key_id = key_id;
  Statement sel(db_.handle(),
                "SELECT memory_id, record_id, wrapped_sha256, created_utc FROM data_keys WHERE "
                "key_id = ? AND live = 1");
  sel.bind(1, key_id);
  if (!sel.step()) {
    const KeyLookup prior = tombstone(key_id);  // NotFound for an id never seen
    d.owner = prior.owner;
    d.wrapped_sha256 = prior.wrapped_sha256;
    d.destroyed_utc = prior.destroyed_utc;
    d.already_shredded = true;
    return d;
  }
  d.owner = {sel.int64(0), sel.int64(1)};
  d.wrapped_sha256 = sel.text(2);
  const std::string created = sel.text(3);
  sel.reset();
  d.destroyed_utc = now_utc();
  // Overwritten in place, never deleted (docs/store.md "Encryption at rest"): the row keeps its
  // size (live 1 -> 0 and an all-zero blob of the same length), so SQLite rewrites the cell where
  // it is and no b-tree page is rebalanced. A DELETE can move other rows between pages, and the
  // copies a move leaves in a page's free space are not erased by secure_delete. PostgreSQL has no
  // zeroblob(); the row is rewritten as a new tuple there anyway.
  Statement zero(db_.handle(),
                 pg_ ? "UPDATE data_keys SET live = 0, stored = "
                       "decode(repeat('00', length(stored)), 'hex') WHERE key_id = ?"
                     : "UPDATE data_keys SET live = 0, stored = zeroblob(length(stored)) "
                       "WHERE key_id = ?");
  zero.bind(1, key_id).run();
  Statement tomb(db_.handle(),
                 "INSERT INTO shredded_keys(key_id, memory_id, record_id, wrapped_sha256, "
                 "created_utc, destroyed_utc) VALUES (?, ?, ?, ?, ?, ?)");
  tomb.bind(1, key_id).bind(2, d.owner.memory_id).bind(3, d.owner.record_id);
  tomb.bind(4, d.wrapped_sha256).bind(5, created).bind(6, d.destroyed_utc).run();
  return d;
}

bool KeyStore::truncate_wal() {
  if (options_.read_only) throw InvalidArgument("key store '" + path_ + "' was opened read-only");
  if (pg_) return false;  // the server's WAL is not the key store's to truncate
  const std::string what = "truncating the WAL of key store '" + path_ + "'";
  const WalCheckpoint c = sqlite_checkpoint_truncate(db_, false, what.c_str());
  return c.ok && c.log_frames == 0;
}

void KeyStore::require_writable(const std::string& purpose) {
  const std::string refused = "key store '" + path_ + "' ";
  const std::string then = ": " + purpose + " would stay live; nothing was changed";
  if (options_.read_only) throw InvalidArgument(refused + "was opened read-only" + then);
  if (pg_) {
    if (writable_checked_) return;
    if (db_.query_int("SELECT CASE WHEN has_table_privilege('data_keys', 'DELETE') AND "
                      "has_table_privilege('shredded_keys', 'INSERT') AND "
                      "current_setting('transaction_read_only') = 'off' THEN 1 ELSE 0 END") != 1)
      throw StoreError(refused + "does not let this role destroy keys (read-only)" + then);
    writable_checked_ = true;  // privileges are the server's: asked once per open
  } else if (sqlite_read_only(db_) || ::access(path_.c_str(), W_OK) != 0) {
    throw StoreError(refused + "is read-only (file or directory permissions)" + then);
  }
}

std::int64_t KeyStore::live_keys() {
  return db_.query_int("SELECT count(*) FROM data_keys WHERE live = 1");
}
std::int64_t KeyStore::shredded_keys() {
  return db_.query_int("SELECT count(*) FROM shredded_keys");
}

std::vector<KeyLookup> KeyStore::live_keys_of(std::int64_t memory_id) {
  std::vector<KeyLookup> out;
  Statement q(db_.handle(),
              "SELECT key_id, record_id, stored, wrapped_sha256, created_utc FROM data_keys WHERE "
              "memory_id = ? AND live = 1");
  q.bind(1, memory_id);
  while (q.step()) {
    KeyLookup k;
    k.key_id = q.text(0);
    k.owner = {memory_id, q.int64(1)};
    std::vector<std::uint8_t> stored = q.blob(2);
    k.wrapped_sha256 = q.text(3);
    k.created_utc = q.text(4);
    k.key = key_from_stored(k.key_id, stored);
    out.push_back(std::move(k));
  }
  return out;
}

std::vector<KeyLookup> KeyStore::tombstones() {
  std::vector<KeyLookup> out;
  Statement q(db_.handle(),
              "SELECT key_id, memory_id, record_id, wrapped_sha256, created_utc, destroyed_utc "
              "FROM shredded_keys ORDER BY key_id");
  while (q.step()) {
    KeyLookup k;
    k.state = KeyState::kShredded;
    k.key_id = q.text(0);
    k.owner = {q.int64(1), q.int64(2)};
    k.wrapped_sha256 = q.text(3);
    k.created_utc = q.text(4);
    k.destroyed_utc = q.text(5);
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace svattn::store_detail
