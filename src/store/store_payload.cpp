// The row-I/O boundary of token payloads (docs/store.md "Encryption at rest"): sealing a record's
// key and value bytes under its own data key when token rows are written, opening them when they
// are read, and the key store the data keys live in. Everything above this file sees plaintext.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "master_key.h"
#include "pg_uri.h"
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
    sealed_any =
        has_key_id_column && db.query_int(
                                 "SELECT count(*) FROM (SELECT 1 FROM records WHERE key_id IS NOT "
                                 "NULL LIMIT 1) r") > 0;
  }
  ko.create = !sealed_any && !options.read_only;
  ko.read_only = options.read_only;
  try {
    key_store = std::make_unique<KeyStore>(db.postgres() ? keys_path : key_store_path(), ko);
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
    Statement q(db.handle(), "SELECT key_id, record FROM records WHERE key_id IS NOT NULL LIMIT 1");
    if (q.step()) {
      key_id = q.text(0);
      owner = "data key of record " + std::to_string(q.int64(1));
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
    key_store->get(key_id);
  } catch (const NotFound&) {
    foreign_key_store = "key store '" + key_store_path() + "' is not the key store of store '" +
                        path + "': it does not hold key " + key_id + " (" + owner +
                        "), which the store names (a key store of another store?)";
  }
}

std::string Store::key_wrapping() const {
  return impl_->key_store == nullptr ? std::string() : impl_->key_store->wrapping();
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

std::string Store::Impl::key_id_column() const { return has_key_id_column ? "r.key_id" : "NULL"; }

void PayloadReader::prefetch_keys() {
  if (keys_ == nullptr || prefetch_done_) return;
  prefetch_done_ = true;
  for (KeyLookup& k : keys_->live_keys_of(memory_id_))
    prefetched_[k.key_id] = {k.owner.record_id, std::move(k.key)};
}

Opener& PayloadReader::opener(const std::string& key_id, std::int64_t record) {
  if (last_ != nullptr && key_id == last_key_id_) return *last_;
  auto it = openers_.find(key_id);
  if (it == openers_.end()) it = openers_.emplace(key_id, open_key(key_id, record)).first;
  last_key_id_ = key_id;
  last_ = it->second.get();
  return *last_;
}

std::unique_ptr<Opener> PayloadReader::open_key(const std::string& key_id, std::int64_t record) {
  const auto pre = prefetched_.find(key_id);
  if (pre != prefetched_.end()) {
    if (pre->second.record != record)
      throw_foreign_key(key_id, record, {memory_id_, pre->second.record});
    auto op = std::make_unique<Opener>(pre->second.key);
    prefetched_.erase(pre);  // the key now lives only in the opener's schedule
    return op;
  }
  if (keys_ == nullptr) {
    throw FormatError("store '" + path_ + "': record " + std::to_string(record) +
                      " is encrypted but the store has no key store (meta says plaintext)");
  }
  KeyLookup k = keys_->get(key_id);
  if (k.shredded()) {
    throw RecordShredded("store '" + path_ + "': record " + std::to_string(record) + " of memory " +
                             std::to_string(memory_id_) + " is shredded: its data key " + key_id +
                             " was destroyed at " + k.destroyed_utc,
                         record);
  }
  if (k.owner.memory_id != memory_id_ || k.owner.record_id != record)
    throw_foreign_key(key_id, record, k.owner);
  return std::make_unique<Opener>(k.key);
}

void PayloadReader::throw_foreign_key(const std::string& key_id, std::int64_t record,
                                      const KeyOwner& owner) const {
  throw FormatError("store '" + path_ + "': record " + std::to_string(record) + " names data key " +
                    key_id + ", which belongs to memory " + std::to_string(owner.memory_id) +
                    " record " + std::to_string(owner.record_id));
}

namespace {

// Copies a token's key and value bytes: a plaintext row's, or a token message's ciphertext that is
// then opened in place.
void copy_parts(const std::uint8_t* k, std::size_t kn, const std::uint8_t* v, std::size_t vn,
                void* key, void* value) {
  if (kn > 0) std::memcpy(key, k, kn);
  if (vn > 0) std::memcpy(value, v, vn);
}

}  // namespace

PayloadReader::TokenRow PayloadReader::checked_row(const Statement& q, const PayloadColumns& c,
                                                   bool sealed, TokenId id) const {
  TokenRow t;
  t.key = static_cast<const std::uint8_t*>(q.blob_data(c.key));
  t.value = static_cast<const std::uint8_t*>(q.blob_data(c.value));
  t.kn = static_cast<std::size_t>(c.dim) * sizeof(double);
  t.vn = static_cast<std::size_t>(c.value_dim) * sizeof(double);
  std::size_t key_extra = 0;
  std::size_t value_extra = 0;
  if (sealed) {
    const bool token_message = q.bytes(c.key) > 0 && t.key[0] == kTokenSealVersion;
    t.layout = token_message ? Layout::kTokenMessage : Layout::kTwoMessages;
    key_extra = token_message ? kTokenKeyOverhead : kSealOverhead;
    value_extra = token_message ? kTokenValueOverhead : kSealOverhead;
  }
  const char* what = t.layout == Layout::kPlain          ? ""
                     : t.layout == Layout::kTokenMessage ? " (sealed token message)"
                                                         : " (sealed)";
  const auto check = [&](int col, std::size_t want, const char* field) {
    const auto have = static_cast<std::size_t>(q.bytes(col));
    if (have != want) {
      throw FormatError("store '" + path_ + "': token " + std::to_string(id) + " has a " + field +
                        " blob of " + std::to_string(have) + " bytes, expected " +
                        std::to_string(want) + what);
    }
  };
  check(c.key, t.kn + key_extra, "key");
  check(c.value, t.vn + value_extra, "value");
  return t;
}

void PayloadReader::read_token(const Statement& q, const PayloadColumns& c, int key_id_col,
                               double* key, double* value, TokenId id) {
  Opener* op = nullptr;
  if (!q.is_null(key_id_col)) op = &opener(q.text(key_id_col), record_of(id));
  const TokenRow t = checked_row(q, c, op != nullptr, id);
  const RecordAad at{memory_id_, record_of(id), position_of(id), RecordField::kToken};
  switch (t.layout) {
    case Layout::kPlain:
      copy_parts(t.key, t.kn, t.value, t.vn, key, value);
      return;
    case Layout::kTwoMessages:
      op->open_into({at.memory_id, at.record_id, at.position, RecordField::kKey}, t.key,
                    t.kn + kSealOverhead, key, t.kn);
      op->open_into({at.memory_id, at.record_id, at.position, RecordField::kValue}, t.value,
                    t.vn + kSealOverhead, value, t.vn);
      return;
    case Layout::kTokenMessage:  // straight from the row into the destinations
      op->open_token(at, t.key, t.value + t.vn,
                     {t.key + kTokenKeyOverhead, reinterpret_cast<std::uint8_t*>(key), t.kn},
                     {t.value, reinterpret_cast<std::uint8_t*>(value), t.vn});
      return;
  }
}

void PayloadReader::read_token_queued(PipelinedOpen& pipe, const Statement& q,
                                      const PayloadColumns& c, Opener* op, double* key,
                                      double* value, TokenId id) {
  const TokenRow t = checked_row(q, c, op != nullptr, id);
  const RecordAad at{memory_id_, record_of(id), position_of(id), RecordField::kToken};
  switch (t.layout) {
    case Layout::kPlain:
      copy_parts(t.key, t.kn, t.value, t.vn, key, value);
      return;
    case Layout::kTwoMessages:
      pipe.add(*op, {at.memory_id, at.record_id, at.position, RecordField::kKey}, t.key,
               t.kn + kSealOverhead, key, t.kn);
      pipe.add(*op, {at.memory_id, at.record_id, at.position, RecordField::kValue}, t.value,
               t.vn + kSealOverhead, value, t.vn);
      return;
    case Layout::kTokenMessage:
      pipe.add_token(*op, at, t.key, t.value, key, t.kn, value, t.vn);
      return;
  }
}

// ------------------------------------------------------------------------ PipelinedOpen

namespace {
// Blobs per batch (~256 KB of destinations at d = 64; a batch ends with its last record): small
// enough that finish() soon has nothing left to wait for when the idle worker is starved.
constexpr std::size_t kPipelineBatch = 512;
}  // namespace

PipelinedOpen::~PipelinedOpen() {
  if (!worker_.joinable()) return;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;  // the loop finishes a running batch first: it writes into the caller's buffers
  }
  changed_.notify_all();
  worker_.join();
}

void PipelinedOpen::add(Opener& op, const RecordAad& aad, const void* blob, std::size_t n,
                        void* out, std::size_t out_bytes) {
  const std::size_t bytes = opened_size(aad, n);
  if (out_bytes != bytes) {
    throw InvalidArgument("PipelinedOpen::add: output has " + std::to_string(out_bytes) +
                          " bytes, the sealed blob holds " + std::to_string(bytes));
  }
  const auto* b = static_cast<const std::uint8_t*>(blob);
  Item& it = next_item(op);
  it.op = &op;
  it.aad = aad;
  std::memcpy(it.header.data(), b, it.header.size());
  std::memcpy(it.tag.data(), b + it.header.size() + bytes, it.tag.size());
  it.buf = out;
  it.bytes = bytes;
  it.value_buf = nullptr;
  it.value_bytes = 0;
  if (bytes > 0) std::memcpy(out, b + it.header.size(), bytes);
}

void PipelinedOpen::add_token(Opener& op, const RecordAad& aad, const std::uint8_t* key_blob,
                              const std::uint8_t* value_blob, void* key_out, std::size_t kn,
                              void* value_out, std::size_t vn) {
  Item& it = next_item(op);
  it.op = &op;
  it.aad = aad;
  std::memcpy(it.header.data(), key_blob, it.header.size());
  std::memcpy(it.tag.data(), value_blob + vn, it.tag.size());
  it.buf = key_out;
  it.bytes = kn;
  it.value_buf = value_out;
  it.value_bytes = vn;
  copy_parts(key_blob + kTokenKeyOverhead, kn, value_blob, vn, key_out, value_out);
}

PipelinedOpen::Item& PipelinedOpen::next_item(const Opener& op) {
  // A full batch ends where a record (an opener) does: two threads never share an opener.
  if (filling_.size() >= kPipelineBatch && filling_.back().op != &op) submit();
  if (filling_.empty()) filling_.reserve(kPipelineBatch);
  return filling_.emplace_back();
}

void PipelinedOpen::open_batch(const Batch& b) {
  for (const Item& it : b) {
    if (it.aad.field == RecordField::kToken) {
      it.op->open_token_in_place(it.aad, it.header.data(), it.tag.data(), it.buf, it.bytes,
                                 it.value_buf, it.value_bytes);
    } else {
      it.op->open_in_place(it.aad, it.header.data(), it.tag.data(), it.buf, it.bytes);
    }
  }
}

void PipelinedOpen::submit() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back({std::move(filling_), nullptr});
  }
  filling_ = Batch();
  if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
  changed_.notify_all();
}

bool PipelinedOpen::open_next() {
  Queued* q = nullptr;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (taken_ == queue_.size()) return false;
    q = &queue_[taken_++];
  }
  try {
    open_batch(q->items);
  } catch (...) {
    q->failure = std::current_exception();
  }
  Batch().swap(q->items);
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    ++opened_;
  }
  changed_.notify_all();
  return true;
}

void PipelinedOpen::work() {
#ifdef SCHED_IDLE
  // Only CPU time nothing else wants: while the rows stream in, the server and the reader can
  // keep both cores of a small machine busy, and a worker beside them slows the scan by more than
  // it opens. What it has not opened by the end, finish() opens on both threads. (Unsupported:
  // it runs at normal priority.)
  const sched_param idle{};
  pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
#endif
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] { return stop_ || taken_ < queue_.size(); });
      if (stop_) return;
    }
    open_next();
  }
}

void PipelinedOpen::finish() {
  if (!worker_.joinable()) {  // a pass of less than one batch: nothing was queued
    open_batch(filling_);
    filling_.clear();
    return;
  }
  if (!filling_.empty()) submit();
  while (open_next()) {  // what the worker has not taken yet, beside it
  }
  std::deque<Queued> done;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return opened_ == queue_.size(); });
    done.swap(queue_);
    taken_ = opened_ = 0;
  }
  for (Queued& q : done)
    if (q.failure != nullptr) std::rethrow_exception(q.failure);
}

void Store::Impl::discard_new_keys() noexcept {
  drop_cached_group_keys(new_key_ids);
  for (const std::string& id : new_key_ids) {
    try {
      key_store->destroy(id);
    } catch (...) {  // an orphan key (no row references it) encrypts nothing
    }
  }
  new_key_ids.clear();
}

void Store::Impl::insert_tokens(std::int64_t memory_id, const TokenSet& ts, const Memory& mem) {
  insert_tokens(
      memory_id, ts, [&](TokenId id) { return mem.contains(id); },
      mem.settings().mode == MemoryMode::kAudit);
}

void Store::Impl::insert_tokens(std::int64_t memory_id, const TokenSet& ts,
                                const std::function<bool(TokenId)>& retained, bool audit_mode) {
  Statement ins(db.handle(),
                "INSERT INTO tokens(memory_id, token_id, record, position, key, value) VALUES "
                "(?1, ?2, ?3, ?4, ?5, ?6)");
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
  if (key_store != nullptr) {
    std::vector<KeyOwner> owners;
    for (const auto& [r, n] : rows_of) owners.push_back({memory_id, r});
    for (std::int64_t g : created) {  // a new group's key and its spare (docs/store.md)
      owners.push_back(KeyOwner::bounds_group(memory_id, g));
      owners.push_back(KeyOwner::bounds_group(memory_id, g));
    }
    std::vector<NewDataKey> keys = key_store->create_keys(owners);
    for (const NewDataKey& k : keys) new_key_ids.push_back(k.key_id);
    Statement up(db.handle(),
                 "UPDATE records SET key_id = ?3 WHERE memory_id = ?1 AND record = ?2");
    for (std::size_t k = 0; k < rows_of.size(); ++k) {
      up.bind(1, memory_id).bind(2, owners[k].record_id).bind(3, keys[k].key_id).run();
      up.reset();
      sealers[owners[k].record_id] = std::make_unique<Sealer>(keys[k].key);
    }
    for (std::size_t k = rows_of.size(); k + 1 < keys.size(); k += 2)
      set_group_key(memory_id, owners[k].group(), keys[k].key_id, keys[k + 1].key_id);
  }
  std::vector<std::uint8_t> kbuf, vbuf;
  for (int i = 0; i < ts.size(); ++i) {
    const TokenId id = ts.ids[static_cast<std::size_t>(i)];
    if (!retained(id)) continue;  // bounded mode evicted it on arrival: not retained
    const double* key = ts.keys.row(i).data();
    const double* value = ts.values.row(i).data();
    ins.bind(1, memory_id)
        .bind(2, static_cast<std::int64_t>(id))
        .bind(3, record_of(id))
        .bind(4, position_of(id));
    if (sealers.empty()) {
      ins.bind_blob(5, key, kb).bind_blob(6, value, vb);
    } else {
      sealers.at(record_of(id))
          ->seal_token({memory_id, record_of(id), position_of(id), RecordField::kToken}, key, kb,
                       value, vb, kbuf, vbuf);
      ins.bind_blob(5, kbuf.data(), kbuf.size()).bind_blob(6, vbuf.data(), vbuf.size());
    }
    ins.run();
    ins.reset();
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

void Store::Impl::schedule_shred(const std::string& memory, std::int64_t record,
                                 const std::string& key_id, StoreErasure& se) {
  if (key_id.empty()) return;  // a plaintext record: nothing to destroy
  se.data_key_id = key_id;
  se.data_key_sha256 = key_store->get(key_id).wrapped_sha256;
  Statement ins(db.handle(),
                "INSERT INTO pending_shreds(key_id, memory, record) VALUES (?1, ?2, ?3)");
  ins.bind(1, key_id).bind(2, memory).bind(3, record).defer();
}

// Deletes these pending_shreds rows, a few per statement, deferred (Statement::defer).
void Store::Impl::delete_pending_shreds(const std::vector<std::int64_t>& rowids) {
  constexpr std::size_t kPerStatement = 16;
  for (std::size_t at = 0; at < rowids.size(); at += kPerStatement) {
    const std::size_t n = std::min(kPerStatement, rowids.size() - at);
    std::string sql = "DELETE FROM pending_shreds WHERE rowid IN (";
    for (std::size_t k = 0; k < n; ++k) sql += (k == 0 ? "?" : ", ?") + std::to_string(k + 1);
    Statement del(db.handle(), sql + ")");
    for (std::size_t k = 0; k < n; ++k) del.bind(static_cast<int>(k + 1), rowids[at + k]);
    del.defer();
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
  if (key_store == nullptr || options.read_only) return;
  // At open (no `done`), usually nothing is pending: one read without the write lock says so.
  if (done == nullptr &&
      db.query_int("SELECT count(*) FROM (SELECT 1 FROM pending_shreds LIMIT 1) p") == 0)
    return;
  struct Pending {
    std::int64_t rowid;
    std::string key_id, memory;
    std::int64_t record;
  };
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
  // nothing to the key store before its commit. Both lists and the audit chain's head in one
  // query (one round trip on PostgreSQL): pending rows first.
  std::vector<Pending> pending;
  std::vector<KeyOwner> spares;
  AuditHead head{0, kZeroHash};
  {
    Statement q(db.handle(),
                "SELECT 0, rowid, key_id, memory, record FROM pending_shreds UNION ALL SELECT 1, "
                "memory_id, NULL, NULL, group_id FROM bounds_groups WHERE key_id IS NOT NULL AND "
                "next_key_id IS NULL UNION ALL SELECT 2, seq, NULL, entry_hash, NULL FROM (SELECT "
                "seq, entry_hash FROM audit ORDER BY seq DESC LIMIT 1) h ORDER BY 1, 2, 5");
    while (q.step()) {
      if (q.int64(0) == 0) {
        pending.push_back({q.int64(1), q.text(2), q.text(3), q.int64(4)});
      } else if (q.int64(0) == 1) {
        spares.push_back(KeyOwner::bounds_group(q.int64(1), q.int64(4)));
      } else {
        head = {q.int64(1), q.text(3)};
      }
    }
  }
  if (pending.empty()) return;  // rolled back: nothing was written
  key_store->require_writable(std::to_string(pending.size()) +
                              " key(s) of erased records whose destruction is pending");
  std::vector<std::string> ids;
  std::vector<std::int64_t> rowids;
  for (const Pending& p : pending) {
    ids.push_back(p.key_id);
    rowids.push_back(p.rowid);
  }
  std::vector<NewDataKey> made;
  drop_cached_group_keys(ids);
  const std::vector<KeyDestruction> destroyed = key_store->destroy_and_create(ids, spares, &made);
  delete_pending_shreds(rowids);
  std::vector<AuditEntry> entries;
  entries.reserve(pending.size());
  for (std::size_t i = 0; i < pending.size(); ++i)
    entries.push_back(shred_entry(destroyed[i], pending[i].memory, pending[i].record));
  std::vector<AuditEntry*> log;
  for (AuditEntry& e : entries) log.push_back(&e);
  append_audits(log, &head);
  Statement spare(db.handle(),
                  "UPDATE bounds_groups SET next_key_id = ?3 WHERE memory_id = ?1 AND group_id = "
                  "?2 AND next_key_id IS NULL AND key_id IS NOT NULL");
  for (std::size_t i = 0; i < made.size(); ++i) {
    spare.bind(1, spares[i].memory_id).bind(2, spares[i].group()).bind(3, made[i].key_id).defer();
    spare.reset();
  }
  t.commit();
  if (done != nullptr) done->insert(done->end(), destroyed.begin(), destroyed.end());
}

}  // namespace svattn
