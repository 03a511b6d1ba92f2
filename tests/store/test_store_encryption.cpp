// Encryption at rest wired into the store (docs/store.md "Encryption at rest"): new stores seal
// every token payload under a per-record data key, no plaintext key bytes reach the data file, its
// WAL or a backup, hashes and certificates are those of a plaintext store, tampering is refused
// naming the record, --plaintext opts out, and a schema-2 store is upgraded in place. Forget
// destroys the record's data key after its commit (kill -9 trials on every backend:
// test_store_backends_crypto.cpp).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "store/backup.h"
#include "store/crypto.h"
#include "store/key_store.h"
#include "store_test_util.h"

namespace svattn {
namespace {

using store_test::add_records;
using store_test::file_exists;
using store_test::patterns_of;
using store_test::random_keys;
using store_test::RawDb;
using store_test::rbf_settings;
using store_test::scan_store_files;
using store_test::TempDir;

constexpr int kDim = 6;
constexpr int kPerRecord = 10;

StoreOptions opts(bool encrypt) {
  StoreOptions o;
  o.create = true;
  o.encrypt = encrypt;
  return o;
}

RowMatrix record_keys(std::int64_t r) {
  return random_keys(kPerRecord, kDim, 1000 + static_cast<std::uint64_t>(r));
}

// The same sequence of operations on any store: adds, suspend, resume, forget, import.
void run_sequence(Store& s) {
  s.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
  add_records(s, "m", {1, 2, 3, 4, 5, 6}, kPerRecord, kDim);
  s.suspend_record("m", 2);
  s.resume_record("m", 2);
  s.suspend_record("m", 5);
  s.forget_record("m", 3);
  RowMatrix keys = random_keys(30, kDim, 77);
  std::vector<std::int64_t> recs;
  for (int i = 0; i < 30; ++i) recs.push_back(100 + i % 3);
  s.import_records("m", recs, keys);
}

std::string screening_support_sha(const std::string& path) {
  return RawDb(path).query_text("SELECT support_sha256 FROM screening");
}

TEST(StoreEncryption, NewStoreIsEncryptedAndNoPlaintextReachesFiles) {
  TempDir dir;
  const std::string p = dir.file("s.db");
  Store s(p, opts(true));
  EXPECT_EQ(s.encryption(), "aes-256-gcm");
  run_sequence(s);
  EXPECT_TRUE(file_exists(p + ".keys"));
  // Every live record (active and suspended) and the forgotten one.
  RowMatrix all(6 * kPerRecord, kDim);
  for (int r = 1; r <= 6; ++r) all.middleRows((r - 1) * kPerRecord, kPerRecord) = record_keys(r);
  const auto pats = patterns_of(all);
  const auto scan = scan_store_files(p, pats);  // while open: the WAL holds recent commits
  EXPECT_GT(scan.bytes_scanned, 0u);
  EXPECT_EQ(scan.fp64_found, 0u);
  EXPECT_EQ(scan.fp32_found, 0u);
  const auto imported = scan_store_files(p, patterns_of(random_keys(30, kDim, 77)));
  EXPECT_EQ(imported.fp64_found, 0u);
  // A backup of the data file holds no plaintext and no key.
  const auto b = store_detail::backup_database(p, dir.file("b.db"));
  EXPECT_FALSE(b.keys_included);
  EXPECT_EQ(scan_store_files(dir.file("b.db"), pats).fp64_found, 0u);
  // Every record names a data key; every token row holds one token message (docs/store.md
  // "Token messages").
  RawDb raw(p);
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM records WHERE key_id IS NULL"), 0);
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM tokens WHERE length(key) != " +
                          std::to_string(kDim * 8 + store_detail::kTokenKeyOverhead) +
                          " OR length(value) != " +
                          std::to_string(kDim * 8 + store_detail::kTokenValueOverhead) +
                          " OR substr(key, 1, 1) != x'02'"),
            0);
  // The memory still answers from the plaintext (restored from the sealed rows).
  Store re(p);
  EXPECT_EQ(re.memory_info("m").state_sha256, s.memory_info("m").state_sha256);
  EXPECT_TRUE(re.verify().ok());
}

TEST(StoreEncryption, ReadOnlyOpenReadsKeysAndWritesNothing) {
  TempDir dir;
  const std::string p = dir.file("s.db");
  std::string sha;
  {
    Store s(p, opts(true));
    s.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
    add_records(s, "m", {1, 2}, kPerRecord, kDim);
    sha = s.memory_info("m").state_sha256;
  }
  const std::string keys_sha = store_test::file_sha(p + ".keys");
  const bool had_wal = file_exists(p + ".keys-wal");
  const std::string wal_sha = store_test::file_sha(p + ".keys-wal");
  StoreOptions ro;
  ro.read_only = true;
  {
    Store r(p, ro);
    EXPECT_EQ(r.memory("m").state_sha256(), sha);  // restored from the sealed rows
    EXPECT_TRUE(r.verify().ok());
  }
  EXPECT_EQ(store_test::file_sha(p + ".keys"), keys_sha);
  // SQLite's read-only WAL reader may create an empty -wal/-shm in a writable directory; nothing
  // is written to them (the data store's read-only open behaves the same).
  if (had_wal) {
    EXPECT_EQ(store_test::file_sha(p + ".keys-wal"), wal_sha);
  } else {
    EXPECT_TRUE(store_test::read_bytes(p + ".keys-wal").empty());
  }
  store_detail::KeyStoreOptions ko;
  ko.read_only = true;
  ko.create = true;
  EXPECT_THROW(ko.validate(), InvalidArgument);
  ko.create = false;
  store_detail::KeyStore ks(p + ".keys", ko);
  EXPECT_EQ(ks.live_keys(), 4);  // two records' data keys, their bounds group's key and spare
  EXPECT_THROW(ks.create_key({1, 9}), InvalidArgument);
}

TEST(StoreEncryption, HashesAndCertificatesEqualAPlaintextStore) {
  TempDir dir;
  Store enc(dir.file("e.db"), opts(true));
  Store pln(dir.file("p.db"), opts(false));
  EXPECT_EQ(pln.encryption(), "none");
  run_sequence(enc);
  run_sequence(pln);
  EXPECT_FALSE(file_exists(dir.file("p.db.keys")));
  EXPECT_EQ(enc.memory_info("m").state_sha256, pln.memory_info("m").state_sha256);
  // The same entries plus two store-level "shred" per encrypted forget: the record's data key and
  // its bounds group's replaced key (docs/store.md "Bounds groups").
  auto ae = enc.audit();
  const auto shreds = std::count_if(ae.begin(), ae.end(),
                                    [](const AuditEntry& e) { return e.operation == "shred"; });
  EXPECT_EQ(shreds, 2);
  ae.erase(std::remove_if(ae.begin(), ae.end(),
                          [](const AuditEntry& e) { return e.operation == "shred"; }),
           ae.end());
  const auto ap = pln.audit();
  ASSERT_EQ(ae.size(), ap.size());
  for (std::size_t i = 0; i < ae.size(); ++i) {
    EXPECT_EQ(ae[i].state_before, ap[i].state_before) << i;
    EXPECT_EQ(ae[i].state_after, ap[i].state_after) << i;
    const auto ce = nlohmann::json::parse(ae[i].certificate);
    if (ae[i].operation == "forget") {
      EXPECT_EQ(ce.at("store").at("encryption"), "aes-256-gcm");
      EXPECT_EQ(nlohmann::json::parse(ap[i].certificate).at("store").at("encryption"), "none");
    } else if (ae[i].operation != "suspend" && ae[i].operation != "resume") {
      EXPECT_EQ(ce.at("encryption"), "aes-256-gcm") << ae[i].operation;
    }
  }
  EXPECT_EQ(screening_support_sha(dir.file("e.db")), screening_support_sha(dir.file("p.db")));
  const RowMatrix q = random_keys(5, kDim, 9);
  EXPECT_EQ(enc.query("m", q), pln.query("m", q));
  // Restored from the files by fresh objects: still identical.
  Store e2(dir.file("e.db"));
  Store p2(dir.file("p.db"));
  EXPECT_EQ(e2.stored_state("m").alpha, p2.stored_state("m").alpha);
  EXPECT_EQ(e2.query("m", q), p2.query("m", q));
  EXPECT_TRUE(e2.verify().ok());
}

TEST(StoreEncryption, PlaintextStoreKeepsBytesTheScanCanSee) {
  TempDir dir;
  const std::string p = dir.file("p.db");
  Store s(p, opts(false));
  s.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
  add_records(s, "m", {1}, kPerRecord, kDim);
  // The scan that finds nothing in an encrypted store finds the plaintext here.
  EXPECT_GT(scan_store_files(p, patterns_of(record_keys(1))).fp64_found, 0u);
  // An existing store keeps its encryption whatever a later open asks for.
  Store again(p, opts(true));
  EXPECT_EQ(again.encryption(), "none");
}

TEST(StoreEncryption, TamperedOrMovedCiphertextIsRefusedNamingTheRecord) {
  TempDir dir;
  const std::string p = dir.file("s.db");
  {
    Store s(p, opts(true));
    s.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
    add_records(s, "m", {1, 2}, kPerRecord, kDim);
  }
  {
    RawDb raw(p);  // record 2's first key blob moved onto record 1's first token
    ASSERT_EQ(raw.exec("UPDATE tokens SET key = (SELECT key FROM tokens WHERE record = 2 AND "
                       "position = 0) WHERE record = 1 AND position = 0"),
              SQLITE_OK);
  }
  Store s(p);
  try {
    s.query("m", random_keys(1, kDim, 3));
    ADD_FAILURE() << "tampered ciphertext was accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("record 1"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(s.verify().ok());
}

// A memory of more sealed blobs than one batch of the pipelined restore (2,048 blobs): the worker
// thread opens the earlier batches. The restore gives the plaintext store's state; a tampered
// blob in a worker batch is reported naming its record, even when the reading thread meets a
// later, different problem (a truncated blob) first.
// n = 1,500: 3,000 blobs, one worker batch, then the rest in the caller; n = 3,500: 7,000 blobs,
// three batches on the one worker thread of the restore.
void import_large(Store& s, int n = 1500, int per_record = kPerRecord) {
  s.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
  std::vector<std::int64_t> recs;
  for (int i = 0; i < n; ++i) recs.push_back(1 + i / per_record);
  s.import_records("m", recs, random_keys(n, kDim, 4242));
}

// The same `n` tokens (records of `per_record`) imported into an encrypted and a plaintext store:
// the encrypted store's pipelined restore gives the same state, keys and values, and verifies.
void expect_restores_alike(int n, int per_record = kPerRecord) {
  TempDir dir;
  {
    Store enc(dir.file("e.db"), opts(true));
    Store pln(dir.file("p.db"), opts(false));
    import_large(enc, n, per_record);
    import_large(pln, n, per_record);
  }
  Store e2(dir.file("e.db"));
  Store p2(dir.file("p.db"));
  const Memory& e = e2.memory("m");
  const Memory& p = p2.memory("m");
  EXPECT_EQ(e.state_sha256(), p.state_sha256());
  EXPECT_EQ(e.tokens(e.state().ids).keys, p.tokens(p.state().ids).keys);
  EXPECT_EQ(e.tokens(e.state().ids).values, p.tokens(p.state().ids).values);
  EXPECT_TRUE(e2.verify().ok());
}

TEST(StoreEncryption, PipelinedRestoreEqualsThePlaintextStore) { expect_restores_alike(1500); }

TEST(StoreEncryption, PipelinedRestoreOverSeveralWorkerBatchesEqualsThePlaintextStore) {
  expect_restores_alike(3500);
}

// Imports `n` tokens into an encrypted store, applies `updates` to its file behind the store's
// back, and expects the memory's (pipelined) restore to be refused naming `record`.
void expect_restore_refused_naming(int n, std::initializer_list<const char*> updates,
                                   const std::string& record, int per_record = kPerRecord) {
  TempDir dir;
  const std::string p = dir.file("s.db");
  {
    Store s(p, opts(true));
    import_large(s, n, per_record);
  }
  {
    RawDb raw(p);
    for (const char* u : updates) ASSERT_EQ(raw.exec(u), SQLITE_OK) << u;
  }
  Store s(p);
  try {
    (void)s.memory("m");
    ADD_FAILURE() << "tampered ciphertext was accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(record), std::string::npos) << e.what();
  }
}

// A tampered blob in a batch queued behind the first (record 160) is reported, not the truncated
// row of record 320 the reader meets later.
TEST(StoreEncryption, PipelinedRestoreReportsATamperedRecordInALaterWorkerBatch) {
  expect_restore_refused_naming(
      3500,
      {"UPDATE tokens SET key = (SELECT key FROM tokens WHERE record = 160 AND position = 1) WHERE "
       "record = 160 AND position = 2",
       "UPDATE tokens SET value = substr(value, 1, 10) WHERE record = 320 AND position = 0"},
      "record 160");
}

TEST(StoreEncryption, PipelinedRestoreReportsTheEarliestTamperedRecord) {
  // record 20 (a worker batch): a value blob moved within it; record 140 truncated
  expect_restore_refused_naming(
      1500,
      {"UPDATE tokens SET value = (SELECT value FROM tokens WHERE record = 20 AND position = 4) "
       "WHERE record = 20 AND position = 3",
       "UPDATE tokens SET key = substr(key, 1, 10) WHERE record = 140 AND position = 0"},
      "record 20");
}

// Both failures after the first batch and in one (a batch holds 52 records of 10 tokens): the
// tampered blob (record 110) is still in the batch being filled when the reader meets the
// truncated row (record 130), and is the one reported.
TEST(StoreEncryption, PipelinedRestoreReportsAQueuedTamperedRecordBeforeALaterTruncatedOne) {
  expect_restore_refused_naming(
      1500,
      {"UPDATE tokens SET key = (SELECT key FROM tokens WHERE record = 110 AND position = 1) WHERE "
       "record = 110 AND position = 2",
       "UPDATE tokens SET value = substr(value, 1, 10) WHERE record = 130 AND position = 0"},
      "record 110");
}

// Records longer than a batch of the pipelined restore (a batch ends with a record, so these
// batches outgrow it): the restore equals the plaintext store's, and a tampered token late in the
// second long record is reported by its record.
TEST(StoreEncryption, PipelinedRestoreOfRecordsLongerThanABatch) {
  expect_restores_alike(2100, 700);
  expect_restore_refused_naming(
      2100,
      {"UPDATE tokens SET value = (SELECT value FROM tokens WHERE record = 2 AND position = 1) "
       "WHERE record = 2 AND position = 650"},
      "record 2", 700);
}

TEST(StoreEncryption, MissingKeyStoreIsAClearError) {
  TempDir dir;
  const std::string p = dir.file("s.db");
  {
    Store s(p, opts(true));
    s.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
    add_records(s, "m", {1}, kPerRecord, kDim);
  }
  std::filesystem::remove(p + ".keys");
  std::filesystem::remove(p + ".keys-wal");
  std::filesystem::remove(p + ".keys-shm");
  try {
    Store s(p);
    ADD_FAILURE() << "opened without its key store";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("key store"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(file_exists(p + ".keys"));  // not silently recreated
}

TEST(StoreEncryption, SchemaTwoStoreIsUpgradedInPlaceAndStaysPlaintext) {
  TempDir dir;
  const std::string p = dir.file("s.db");
  std::string sha;
  {
    Store s(p, opts(false));
    s.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
    add_records(s, "m", {1, 2, 3}, kPerRecord, kDim);
    sha = s.memory_info("m").state_sha256;
  }
  {
    RawDb raw(p);  // what a schema-2 file looks like
    ASSERT_EQ(raw.exec("ALTER TABLE records DROP COLUMN key_id"), SQLITE_OK);
    ASSERT_EQ(raw.exec("DELETE FROM meta WHERE key = 'encryption'"), SQLITE_OK);
    ASSERT_EQ(raw.exec("UPDATE meta SET value = '2' WHERE key = 'schema_version'"), SQLITE_OK);
    ASSERT_EQ(raw.exec("PRAGMA user_version = 2"), SQLITE_OK);
  }
  {
    StoreOptions ro;
    ro.read_only = true;  // a reader sees the old file as it is
    Store r(p, ro);
    EXPECT_EQ(r.encryption(), "none");
    EXPECT_EQ(r.records("m").size(), 3u);
  }
  Store s(p);
  EXPECT_EQ(s.encryption(), "none");
  EXPECT_EQ(s.memory_info("m").state_sha256, sha);
  const auto audit = s.audit();
  ASSERT_FALSE(audit.empty());
  const auto c = nlohmann::json::parse(audit.back().certificate);
  EXPECT_EQ(audit.back().operation, "upgrade");
  EXPECT_EQ(c.at("from_schema_version"), 2);
  EXPECT_EQ(c.at("to_schema_version"), kStoreSchemaVersion);
  EXPECT_EQ(c.at("encryption"), "none");
  add_records(s, "m", {4}, kPerRecord, kDim);  // new records of a plaintext store stay plaintext
  EXPECT_TRUE(s.verify().ok());
  RawDb raw(p);
  EXPECT_EQ(raw.query_int("PRAGMA user_version"), kStoreSchemaVersion);
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM records WHERE key_id IS NOT NULL"), 0);
}

std::string key_id_of(const std::string& path, std::int64_t record) {
  return RawDb(path).query_text("SELECT key_id FROM records WHERE record = " +
                                std::to_string(record));
}

// A forget's result times its parts (docs/api.md, OpResult): the bounds written, the commit, the
// key's destruction and the checkpoint after it are each measured and together with the memory
// and the certificate fit in the total. A support forget rewrites every record's bounds.
TEST(StoreEncryption, ForgetResultTimesTheScreeningTheShredAndTheCheckpoint) {
  TempDir dir;
  const std::string p = dir.file("s.db");
  Store s(p, opts(true));
  s.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
  std::vector<std::int64_t> recs;
  for (std::int64_t r = 1; r <= 12; ++r) recs.push_back(r);
  add_records(s, "m", recs, kPerRecord, kDim);
  const State st = s.stored_state("m");
  std::int64_t support = -1;
  for (std::size_t t = 0; t < st.ids.size() && support < 0; ++t)
    if (st.alpha[t] > 0) support = record_of(st.ids[t]);
  ASSERT_GE(support, 0);
  const ForgetResult f = s.forget_record("m", support);
  ASSERT_TRUE(f.certificate.store.has_value());
  EXPECT_TRUE(f.certificate.store->data_key_destroyed);
  EXPECT_GT(f.screening_seconds, 0.0);
  EXPECT_GT(f.commit_seconds, 0.0);
  EXPECT_GT(f.shred_seconds, 0.0);
  EXPECT_GT(f.checkpoint_seconds, 0.0);
  const double parts = f.memory_seconds + f.certificate_seconds + f.screening_seconds +
                       f.commit_seconds + f.shred_seconds + f.checkpoint_seconds;
  EXPECT_LE(parts, f.total_seconds);
}

TEST(StoreEncryption, ForgetDestroysTheDataKeyAndLogsTheDestruction) {
  TempDir dir;
  const std::string p = dir.file("s.db");
  Store s(p, opts(true));
  s.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
  add_records(s, "m", {1, 2, 3, 4}, kPerRecord, kDim);
  const std::string id = key_id_of(p, 2);
  ASSERT_EQ(id.size(), 32u);
  std::array<std::uint8_t, 32> key{};
  std::string wrapped_sha;
  {
    store_detail::KeyStore ks(p + ".keys", {});
    const auto k = ks.get(id);
    std::memcpy(key.data(), k.key.data(), 32);
    wrapped_sha = k.wrapped_sha256;
  }
  // Suspend keeps ciphertext and key; resume decrypts and re-adds.
  const std::string sha0 = s.memory_info("m").state_sha256;
  s.suspend_record("m", 2);
  EXPECT_EQ(key_id_of(p, 2), id);
  s.resume_record("m", 2);
  EXPECT_EQ(s.memory_info("m").state_sha256, sha0);
  // The bounds group's key that sealed the record's screening bounds (docs/store.md "Bounds
  // groups"): replaced in the forget and destroyed with the data key.
  std::string group_key;
  std::array<std::uint8_t, 32> gkey{};
  {
    RawDb raw(p);
    group_key = store_test::group_key_id(raw, store_test::group_of(raw, 2));
    store_detail::KeyStore ks(p + ".keys", {});
    std::memcpy(gkey.data(), ks.get(group_key).key.data(), 32);
  }
  ASSERT_EQ(group_key.size(), 32u);
  const ForgetResult fr = s.forget_record("m", 2);
  ASSERT_TRUE(fr.certificate.store.has_value());
  EXPECT_EQ(fr.certificate.store->data_key_id, id);
  EXPECT_EQ(fr.certificate.store->data_key_sha256, wrapped_sha);
  EXPECT_TRUE(fr.certificate.store->data_key_destroyed);
  EXPECT_EQ(fr.certificate.store->bounds_group, 0);
  EXPECT_EQ(fr.certificate.store->bounds_key_id, group_key);
  EXPECT_TRUE(fr.certificate.store->bounds_key_destroyed);
  const auto audit = s.audit();
  ASSERT_GE(audit.size(), 3u);
  const auto& f = audit[audit.size() - 3];
  const auto& sh = audit[audit.size() - 2];
  const auto& gsh = audit.back();
  ASSERT_EQ(f.operation, "forget");
  const auto fc = nlohmann::json::parse(f.certificate).at("store");
  EXPECT_EQ(fc.at("data_key_id"), id);
  EXPECT_FALSE(fc.at("data_key_destroyed").get<bool>());  // committed before the destruction
  EXPECT_EQ(fc.at("bounds_key_id"), group_key);
  EXPECT_FALSE(fc.at("bounds_key_destroyed").get<bool>());
  ASSERT_EQ(sh.operation, "shred");
  EXPECT_EQ(sh.record, 2);
  const auto sc = nlohmann::json::parse(sh.certificate);
  EXPECT_EQ(sc.at("key_id"), id);
  EXPECT_EQ(sc.at("wrapped_sha256"), wrapped_sha);
  EXPECT_EQ(sc.at("memory"), "m");
  EXPECT_EQ(sc.at("key_kind"), "record data key");
  ASSERT_EQ(gsh.operation, "shred");
  EXPECT_EQ(gsh.record, 2);  // destroyed for record 2's erasure
  const auto gc = nlohmann::json::parse(gsh.certificate);
  EXPECT_EQ(gc.at("key_id"), group_key);
  EXPECT_EQ(gc.at("key_kind"), "bounds group key");
  EXPECT_EQ(gc.at("bounds_group"), 0);
  EXPECT_EQ(gc.at("wrapped_sha256"), fr.certificate.store->bounds_key_sha256);
  {
    RawDb raw(p);  // the group kept its other records under a fresh key
    const std::string fresh = store_test::group_key_id(raw, 0);
    EXPECT_EQ(fresh.size(), 32u);
    EXPECT_NE(fresh, group_key);
  }
  std::string key_hex;
  for (std::uint8_t b : key) {
    char buf[3];
    std::snprintf(buf, sizeof buf, "%02x", b);
    key_hex += buf;
  }
  for (const AuditEntry& e : audit) EXPECT_EQ(e.certificate.find(key_hex), std::string::npos);
  {
    store_detail::KeyStore ks(p + ".keys", {});
    EXPECT_TRUE(ks.get(id).shredded());
    EXPECT_TRUE(ks.get(group_key).shredded());
  }
  RawDb raw(p);
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM pending_shreds"), 0);
  for (const std::string& file : {p + ".keys", p + ".keys-wal", p + ".keys-shm", p, p + "-wal"}) {
    const auto bytes = store_test::read_bytes(file);
    EXPECT_EQ(store_test::count_occurrences(bytes, key.data(), 16), 0u) << file;
    EXPECT_EQ(store_test::count_occurrences(bytes, gkey.data(), 16), 0u) << file;
  }
  EXPECT_TRUE(s.verify().ok());
}

// kill -9 at random points of a sequence of forgets (20 trials): a record whose data key is
// destroyed is never still in the file (hence never in a memory); reopening completes every
// destruction a committed forget scheduled.
// kill -9 during forgets: on every backend in test_store_backends_crypto.cpp.

}  // namespace
}  // namespace svattn
