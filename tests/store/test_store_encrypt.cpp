// Master key, in-place encryption and shredded records (docs/store.md "Master key", "Encrypting an
// existing store", "Shredded records"): data keys wrapped by a master key (wrong, missing and unexpected keys refused with
// nothing written; no raw data key in the key store's files), `encrypt_store` converting a
// plaintext store in place (no plaintext left in any file, hashes unchanged, kill -9 safe), and a
// backup restored after an erasure (the erased record is reported shredded, cannot be decrypted,
// and the memory equals a store that never saw it).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "store/key_store.h"
#include "store_test_util.h"
#include "support/clock.h"
#include "support/random.h"
#include "svattn/batch_solver.h"

namespace svattn {
namespace {

using store_test::add_records;
using store_test::count_occurrences;
using store_test::file_exists;
using store_test::file_sha;
using store_test::patterns_of;
using store_test::random_keys;
using store_test::RawDb;
using store_test::rbf_settings;
using store_test::read_bytes;
using store_test::scan_store_files;
using store_test::TempDir;
using store_test::write_bytes;

constexpr int kDim = 6;
constexpr int kPerRecord = 10;

RowMatrix record_keys(std::int64_t r) {
  return random_keys(kPerRecord, kDim, 1000 + static_cast<std::uint64_t>(r));
}

// A master key file (64 hex digits, mode 0600) holding `hex`.
std::string key_file(const TempDir& dir, const std::string& name, const std::string& hex) {
  const std::string p = dir.file(name);
  std::ofstream(p) << hex << "\n";
  ::chmod(p.c_str(), 0600);
  return p;
}
const std::string kHexA(64, 'a');
const std::string kHexB = std::string(63, 'b') + "c";

StoreOptions with_file(const std::string& file, bool create = false) {
  StoreOptions o;
  o.create = create;
  o.master_key_file = file;
  return o;
}

// Every data key of the store (unwrapped through the key store), as raw bytes.
std::vector<std::array<std::uint8_t, 32>> data_keys(const std::string& p, const StoreOptions& o) {
  store_detail::KeyStoreOptions ko;
  if (!o.master_key_file.empty()) {
    ko.master.kind = store_detail::MasterKeySource::Kind::kFile;
    ko.master.key_file = o.master_key_file;
  }
  store_detail::KeyStore ks(p + ".keys", ko);
  std::vector<std::array<std::uint8_t, 32>> out;
  RawDb raw(p);
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(raw.handle(), "SELECT key_id FROM records", -1, &q, nullptr);
  while (sqlite3_step(q) == SQLITE_ROW) {
    const auto k = ks.get(reinterpret_cast<const char*>(sqlite3_column_text(q, 0)));
    std::array<std::uint8_t, 32> a{};
    std::memcpy(a.data(), k.key.data(), 32);
    out.push_back(a);
  }
  sqlite3_finalize(q);
  return out;
}

// How many of `keys` (raw 32 bytes, or either 16-byte half) appear in the key store's files.
std::size_t raw_keys_found(const std::string& p,
                           const std::vector<std::array<std::uint8_t, 32>>& keys) {
  std::size_t found = 0;
  for (const std::string& f : {p + ".keys", p + ".keys-wal", p + ".keys-shm"}) {
    const auto bytes = read_bytes(f);
    for (const auto& k : keys) {
      found += count_occurrences(bytes, k.data(), 16) + count_occurrences(bytes, k.data() + 16, 16);
    }
  }
  return found;
}

// ------------------------------------------------------------------------------- master key

TEST(StoreMasterKey, WrappedKeyStoreHoldsNoRawDataKey) {
  TempDir dir;
  const std::string kf = key_file(dir, "master.hex", kHexA);
  for (const bool wrapped : {true, false}) {
    const std::string p = dir.file(wrapped ? "w.db" : "u.db");
    const StoreOptions o = wrapped ? with_file(kf) : StoreOptions{};
    StoreOptions oc = o;
    oc.create = true;
    {
      Store s(p, oc);
      EXPECT_EQ(s.key_wrapping(), wrapped ? "aes-256-gcm" : "none");
      s.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
      add_records(s, "m", {1, 2, 3, 4, 5, 6}, kPerRecord, kDim);
      s.forget_record("m", 4);
    }
    const auto keys = data_keys(p, o);
    ASSERT_EQ(keys.size(), 5u);
    // The scan can see a raw key: the unwrapped control finds every one of them.
    if (wrapped) {
      EXPECT_EQ(raw_keys_found(p, keys), 0u);
    } else {
      EXPECT_GE(raw_keys_found(p, keys), 2 * keys.size());
    }
    Store re(p, o);  // the wrapped store reads back under its master key
    EXPECT_TRUE(re.verify().ok());
  }
}

TEST(StoreMasterKey, WrongOrMissingMasterKeyIsRefusedAndNothingIsWritten) {
  TempDir dir;
  const std::string kf = key_file(dir, "a.hex", kHexA);
  const std::string wrong = key_file(dir, "b.hex", kHexB);
  const std::string p = dir.file("s.db");
  {
    Store s(p, with_file(kf, true));
    s.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
    add_records(s, "m", {1, 2, 3}, kPerRecord, kDim);
  }
  const std::string db0 = file_sha(p), keys0 = file_sha(p + ".keys");
  StoreOptions env;
  env.master_key_env = "SVATTN_TEST_MASTER_KEY";
  ::setenv("SVATTN_TEST_MASTER_KEY", kHexB.c_str(), 1);
  StoreOptions ro_none;
  ro_none.read_only = true;
  StoreOptions ro_wrong = with_file(wrong);
  ro_wrong.read_only = true;
  for (const StoreOptions& o : {StoreOptions{}, with_file(wrong), env, ro_none, ro_wrong}) {
    try {
      Store s(p, o);
      ADD_FAILURE() << "opened without the right master key";
    } catch (const MasterKeyError& e) {
      const std::string msg = e.what();
      EXPECT_TRUE(msg.find("master key") != std::string::npos) << msg;
    }
  }
  ::setenv("SVATTN_TEST_MASTER_KEY", "", 1);  // set but empty: an error, not "no key"
  EXPECT_THROW(Store(p, env), MasterKeyError);
  ::unsetenv("SVATTN_TEST_MASTER_KEY");
  EXPECT_THROW(Store(p, env), MasterKeyError);
  EXPECT_THROW(Store(p, with_file(dir.file("missing.hex"))), MasterKeyError);
  EXPECT_EQ(file_sha(p), db0);
  EXPECT_EQ(file_sha(p + ".keys"), keys0);
  Store ok(p, with_file(kf));
  EXPECT_EQ(ok.memory_info("m").tokens, 3 * kPerRecord);
}

TEST(StoreMasterKey, MasterKeyForAStoreWithoutWrappedKeysIsRefused) {
  TempDir dir;
  const std::string kf = key_file(dir, "a.hex", kHexA);
  const std::string enc = dir.file("enc.db"), plain = dir.file("plain.db");
  {
    StoreOptions o;
    o.create = true;
    Store(enc, o).create_memory("m", rbf_settings(0.05), kDim, kDim);
    o.encrypt = false;
    Store(plain, o).create_memory("m", rbf_settings(0.05), kDim, kDim);
  }
  EXPECT_THROW(Store(enc, with_file(kf)), MasterKeyError);    // unwrapped key store
  EXPECT_THROW(Store(plain, with_file(kf)), MasterKeyError);  // no key store at all
  StoreOptions both = with_file(kf);
  both.master_key_env = "SVATTN_MASTER_KEY";
  EXPECT_THROW(Store(enc, both), InvalidArgument);
  StoreOptions new_plain = with_file(kf, true);
  new_plain.encrypt = false;
  EXPECT_THROW(Store(dir.file("new.db"), new_plain), MasterKeyError);
  EXPECT_FALSE(file_exists(dir.file("new.db")));
}

// ---------------------------------------------------------------------------------- encrypt

void plaintext_history(Store& s) {
  s.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
  s.create_memory("n", rbf_settings(0.1, 2.0), kDim, kDim);
  add_records(s, "m", {1, 2, 3, 4, 5, 6}, kPerRecord, kDim);
  add_records(s, "n", {20, 21}, kPerRecord, kDim);
  s.suspend_record("m", 2);
  s.forget_record("m", 5);
}

TEST(StoreEncrypt, ConvertsAPlaintextStoreInPlaceAndLeavesNoPlaintext) {
  TempDir dir;
  const std::string p = dir.file("s.db");
  StoreOptions o;
  o.create = true;
  o.encrypt = false;
  std::string sha_m, sha_n;
  RowMatrix before_q;
  const RowMatrix q = random_keys(4, kDim, 5);
  {
    Store s(p, o);
    plaintext_history(s);
    sha_m = s.memory_info("m").state_sha256;
    sha_n = s.memory_info("n").state_sha256;
    before_q = s.query("m", q);
  }
  RowMatrix all(8 * kPerRecord, kDim);
  int at = 0;
  for (std::int64_t r : {1, 2, 3, 4, 5, 6, 20, 21}) {
    all.middleRows(at, kPerRecord) = record_keys(r);
    at += kPerRecord;
  }
  const auto pats = patterns_of(all);
  EXPECT_GT(scan_store_files(p, pats).fp64_found, 0u);  // control: the plaintext is visible
  const StoreEncryptionResult r = encrypt_store(p);
  EXPECT_TRUE(r.converted);
  EXPECT_TRUE(r.scrubbed);
  EXPECT_TRUE(r.wal_truncated);
  EXPECT_EQ(r.records, 7);  // record 5 was erased before
  EXPECT_EQ(r.tokens, 7 * kPerRecord);
  EXPECT_EQ(r.state_sha256.at("m"), sha_m);
  const auto scan = scan_store_files(p, pats);  // data file, -wal, -journal, -shm
  EXPECT_EQ(scan.fp64_found, 0u);
  EXPECT_EQ(scan.fp32_found, 0u);
  {
    RawDb raw(p);
    EXPECT_EQ(raw.query_int("SELECT count(*) FROM records WHERE key_id IS NULL"), 0);
    EXPECT_EQ(raw.query_int("SELECT count(*) FROM meta WHERE key = 'encrypt_scrub_pending'"), 0);
  }
  Store s(p);
  EXPECT_EQ(s.encryption(), "aes-256-gcm");
  EXPECT_EQ(s.memory_info("m").state_sha256, sha_m);
  EXPECT_EQ(s.memory_info("n").state_sha256, sha_n);
  EXPECT_EQ(s.memory("m").state_sha256(), sha_m);  // restored from the sealed rows
  EXPECT_EQ((s.query("m", q) - before_q).norm(), 0.0);
  const auto audit = s.audit();
  EXPECT_EQ(audit.back().operation, "encrypt");
  EXPECT_EQ(audit.back().seq, r.entry.seq);
  EXPECT_TRUE(s.verify().ok());
  s.resume_record("m", 2);  // a sealed suspended record resumes
  s.forget_record("m", 2);
  EXPECT_TRUE(s.verify().ok());
  // A second encrypt is a no-op: nothing sealed, no audit entry.
  const std::size_t entries = s.audit().size();
  const StoreEncryptionResult again = encrypt_store(p);
  EXPECT_TRUE(again.already_encrypted);
  EXPECT_FALSE(again.converted);
  EXPECT_EQ(again.records, 0);
  EXPECT_EQ(Store(p).audit().size(), entries);
}

TEST(StoreEncrypt, ConversionWithAMasterKeyWrapsTheNewKeys) {
  TempDir dir;
  const std::string kf = key_file(dir, "a.hex", kHexA);
  const std::string p = dir.file("s.db");
  StoreOptions o;
  o.create = true;
  o.encrypt = false;
  {
    Store s(p, o);
    s.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
    add_records(s, "m", {1, 2, 3}, kPerRecord, kDim);
  }
  const StoreEncryptionResult r = encrypt_store(p, with_file(kf));
  EXPECT_EQ(r.wrapping, "aes-256-gcm");
  EXPECT_THROW(Store(p, StoreOptions{}), MasterKeyError);
  EXPECT_EQ(raw_keys_found(p, data_keys(p, with_file(kf))), 0u);
  EXPECT_TRUE(Store(p, with_file(kf)).verify().ok());
}

TEST(StoreEncrypt, AnOlderSchemaIsUpgradedThenEncrypted) {
  TempDir dir;
  const std::string p = dir.file("s.db");
  std::string sha;
  {
    StoreOptions o;
    o.create = true;
    o.encrypt = false;
    Store s(p, o);
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
  const StoreEncryptionResult r = encrypt_store(p);
  EXPECT_TRUE(r.converted);
  EXPECT_EQ(r.records, 3);
  EXPECT_EQ(scan_store_files(p, patterns_of(record_keys(2))).fp64_found, 0u);
  Store s(p);
  EXPECT_EQ(s.memory_info("m").state_sha256, sha);
  const auto audit = s.audit();
  ASSERT_GE(audit.size(), 2u);
  EXPECT_EQ(audit[audit.size() - 2].operation, "upgrade");
  EXPECT_EQ(audit.back().operation, "encrypt");
  EXPECT_TRUE(s.verify().ok());
}

// kill -9 at random points of encrypt_store (20 trials): the store opens and verifies with its
// hashes, and is either fully plaintext or fully encrypted; running encrypt again completes it and
// no plaintext is left.
TEST(StoreEncrypt, KillNineDuringEncryptLeavesAPlaintextOrAnEncryptedStore) {
  TempDir dir;
  const std::string base = dir.file("base.db");
  std::vector<std::int64_t> ids;
  for (int r = 0; r < 100; ++r) ids.push_back(r);
  std::string sha;
  {
    StoreOptions o;
    o.create = true;
    o.encrypt = false;
    Store s(base, o);
    s.create_memory("m", rbf_settings(0.05, 2.0), 8, 8);
    s.import_records(
        "m",
        [&] {
          std::vector<std::int64_t> rec;
          for (std::int64_t r : ids)
            for (int i = 0; i < 6; ++i) rec.push_back(r);
          return rec;
        }(),
        random_keys(600, 8, 4242));
    sha = s.memory_info("m").state_sha256;
  }
  const auto base_bytes = read_bytes(base);
  const auto pats = patterns_of(random_keys(600, 8, 4242).topRows(40));
  const std::string timing = dir.file("timing.db");
  // Time of an uninterrupted run in a child process (as in the trials; the longest of three, the
  // fsyncs make it noisy), to draw the kill delays over the whole conversion.
  double full = 0;
  for (int k = 0; k < 3; ++k) {
    write_bytes(timing, base_bytes);
    std::remove((timing + ".keys").c_str());
    const svattn::support::Stopwatch watch;
    const pid_t timer = ::fork();
    if (timer == 0) {
      encrypt_store(timing);
      ::_exit(0);
    }
    int timer_status = 0;
    ::waitpid(timer, &timer_status, 0);
    ASSERT_TRUE(WIFEXITED(timer_status) && WEXITSTATUS(timer_status) == 0);
    full = std::max(full, watch.seconds());
  }
  svattn::support::Rng gen(14);
  int plain = 0, sealed = 0, scrub_pending = 0;
  for (int trial = 0; trial < 20; ++trial) {
    const std::string p = dir.file("t" + std::to_string(trial) + ".db");
    write_bytes(p, base_bytes);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::_exit([&] {
        try {
          encrypt_store(p);
          return 0;
        } catch (...) {
          return 98;
        }
      }());
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(1.2 * full * gen.uniform()));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 98) << "child failed";
    {
      Store s(p);
      EXPECT_EQ(s.memory_info("m").state_sha256, sha) << "trial " << trial;
      EXPECT_TRUE(s.verify().ok()) << "trial " << trial;
      RawDb raw(p);
      const std::int64_t null_keys =
          raw.query_int("SELECT count(*) FROM records WHERE key_id IS NULL");
      if (s.encryption() == "none") {
        ++plain;
        EXPECT_EQ(null_keys, 100) << "trial " << trial << ": partly encrypted";
      } else {
        ++sealed;
        scrub_pending +=
            raw.query_int("SELECT count(*) FROM meta WHERE key = 'encrypt_scrub_pending'") > 0;
        EXPECT_EQ(null_keys, 0) << "trial " << trial << ": partly encrypted";
      }
    }
    encrypt_store(p);  // converts, or finishes an interrupted scrub, or does nothing
    EXPECT_EQ(scan_store_files(p, pats).fp64_found, 0u) << "trial " << trial;
    Store s(p);
    EXPECT_EQ(s.encryption(), "aes-256-gcm");
    EXPECT_EQ(s.memory_info("m").state_sha256, sha);
  }
  std::printf(
      "kill -9 during encrypt (%.3f s uninterrupted): %d trials left it plaintext, %d "
      "encrypted (%d of them before the scrub finished)\n",
      full, plain, sealed, scrub_pending);
}

// ---------------------------------------------------------------------------------- shredded

// The state of a store holding exactly `ids` (same keys as add_records), built from scratch.
std::string never_seen_sha(const TempDir& dir, const std::vector<std::int64_t>& ids,
                           const RowMatrix& q, RowMatrix* readout) {
  const std::string p = dir.file("never.db");
  StoreOptions o;
  o.create = true;
  Store s(p, o);
  s.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
  add_records(s, "m", ids, kPerRecord, kDim);
  *readout = s.query("m", q);
  return s.memory_info("m").state_sha256;
}

// Backup -> forget the record -> copy the backup over the store (keeping the
// current STORE.keys) -> open.
TEST(StoreShredded, RestoredBackupReportsTheErasedRecordAndEqualsAStoreThatNeverSawIt) {
  TempDir dir;
  const std::string p = dir.file("s.db"), bak = dir.file("backup.db");
  const RowMatrix q = random_keys(5, kDim, 9);
  std::string key_id, sha_with, sha_b;
  {
    StoreOptions o;
    o.create = true;
    Store s(p, o);
    s.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
    s.create_memory("b", rbf_settings(0.05, 1.5), kDim, kDim);
    add_records(s, "m", {1, 2, 3, 4, 5, 6}, kPerRecord, kDim);
    add_records(s, "b", {10, 11}, kPerRecord, kDim);
    s.suspend_record("b", 11);  // a suspended record erased after the backup
    sha_with = s.memory_info("m").state_sha256;
    sha_b = s.memory_info("b").state_sha256;
    backup_store(p, bak);
    RawDb raw(p);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(raw.handle(), "SELECT key_id FROM records WHERE record = 3", -1, &st,
                       nullptr);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    key_id = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
  }
  {
    Store s(p);
    s.forget_record("m", 3);
    s.forget_record("b", 11);
    add_records(s, "m", {7}, kPerRecord, kDim);  // after the backup: an orphan key when restored
  }
  write_bytes(p, read_bytes(bak));  // restore the backup over the store, keep STORE.keys
  std::remove((p + "-wal").c_str());
  std::remove((p + "-shm").c_str());
  RowMatrix never_q;
  const std::string sha_never = never_seen_sha(dir, {1, 2, 4, 5, 6}, q, &never_q);
  ASSERT_NE(sha_never, sha_with);
  // The ciphertext is in the restored file, its key is not in the key store.
  EXPECT_EQ(RawDb(p).query_int("SELECT count(*) FROM tokens WHERE record = 3"), kPerRecord);
  EXPECT_TRUE(store_detail::KeyStore(p + ".keys", {}).get(key_id).shredded());
  // Read-only: reported, excluded everywhere, nothing written.
  const std::string file0 = store_test::file_sha(p);
  {
    StoreOptions ro;
    ro.read_only = true;
    Store s(p, ro);
    ASSERT_EQ(s.shredded_records().size(), 2u);
    const ShreddedRecord& r =
        s.shredded_records()[0].memory == "m" ? s.shredded_records()[0] : s.shredded_records()[1];
    EXPECT_EQ(r.record, 3);
    EXPECT_EQ(r.key_id, key_id);
    EXPECT_FALSE(r.purged);
    const MemoryInfo info = s.memory_info("m");
    EXPECT_EQ(info.shredded_records, 1);
    EXPECT_EQ(info.state_sha256, sha_never);
    EXPECT_EQ(info.file_state_sha256, sha_with);
    EXPECT_EQ(info.tokens, 5 * kPerRecord);
    EXPECT_EQ(s.memory("m").state_sha256(), sha_never);
    EXPECT_EQ(s.stored_state("m").state_sha256, sha_never);
    EXPECT_EQ((s.query("m", q) - never_q).norm(), 0.0);
    EXPECT_EQ(s.memory_info("b").state_sha256, sha_b);
    int shredded = 0;
    for (const RecordInfo& ri : s.records("m")) shredded += ri.shredded ? 1 : 0;
    EXPECT_EQ(shredded, 1);
    const StoreVerification v = s.verify();
    EXPECT_TRUE(v.ok()) << (v.problems.empty() ? "" : v.problems[0]);
    for (const MemoryVerification& m : v.memories) {
      if (m.name != "m") continue;
      EXPECT_EQ(m.shredded_records, std::vector<std::int64_t>{3});
      EXPECT_EQ(m.resolved_sha256, sha_never);
    }
  }
  EXPECT_EQ(store_test::file_sha(p), file0);
  // Writable: purged, logged, and the memory is the never-seen state.
  {
    Store s(p);
    ASSERT_EQ(s.shredded_records().size(), 2u);
    EXPECT_TRUE(s.shredded_records()[0].purged);
    ASSERT_EQ(s.purge_entries().size(), 2u);
    EXPECT_EQ(s.memory_info("m").state_sha256, sha_never);
    EXPECT_EQ(s.memory_info("m").shredded_records, 0);
    EXPECT_EQ(s.memory_info("b").state_sha256, sha_b);  // the suspended record was not in it
    EXPECT_EQ(s.audit().back().operation, "purge");
    EXPECT_TRUE(s.verify().ok());
  }
  EXPECT_EQ(RawDb(p).query_int("SELECT count(*) FROM tokens WHERE record IN (3, 11)"), 0);
  Store s(p);
  EXPECT_TRUE(s.shredded_records().empty());
  EXPECT_EQ(s.memory("m").state_sha256(), sha_never);  // restored and hash-checked
  // The same state as a batch solve of the remaining tokens.
  TokenSet rest;
  rest.keys.resize(5 * kPerRecord, kDim);
  int at = 0;
  for (std::int64_t r : {1, 2, 4, 5, 6}) {
    rest.keys.middleRows(at, kPerRecord) = record_keys(r);
    for (int i = 0; i < kPerRecord; ++i) rest.ids.push_back(store_token_id(r, i));
    at += kPerRecord;
  }
  rest.values = rest.keys;
  BatchSettings bs;
  bs.problem = rbf_settings(0.05, 1.5).problem;
  EXPECT_EQ(solve_batch(rest, bs).state.state_sha256, sha_never);
  s.forget_record("m", 4);  // the purged store keeps working
  EXPECT_TRUE(s.verify().ok());
}

// Open looks the tombstones' records up 64 per query (store_shredded.cpp): 70 records erased after
// a backup span two queries, and a record erased, re-added under a new key (in the backup) and
// erased again has two tombstones, of which only its second key's matches the restored row.
TEST(StoreShredded, ManyErasedRecordsAndARecordErasedTwiceAreAllFound) {
  TempDir dir;
  const std::string p = dir.file("s.db"), bak = dir.file("backup.db");
  std::vector<std::int64_t> all, kept;
  for (std::int64_t r = 1; r <= 80; ++r) (r <= 70 ? all : kept).push_back(r);
  all.insert(all.end(), kept.begin(), kept.end());
  std::string second_key;
  {
    StoreOptions o;
    o.create = true;
    Store s(p, o);
    s.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
    add_records(s, "m", all, kPerRecord, kDim);
    s.forget_record("m", 5);
    add_records(s, "m", {5}, kPerRecord, kDim);
    second_key = RawDb(p).query_text("SELECT key_id FROM records WHERE record = 5");
    backup_store(p, bak);
    for (std::int64_t r = 1; r <= 70; ++r) s.forget_record("m", r);
  }
  write_bytes(p, read_bytes(bak));
  std::remove((p + "-wal").c_str());
  std::remove((p + "-shm").c_str());
  const RowMatrix q = random_keys(5, kDim, 9);
  RowMatrix never_q;
  const std::string sha_never = never_seen_sha(dir, kept, q, &never_q);
  StoreOptions ro;
  ro.read_only = true;
  Store s(p, ro);
  const std::vector<ShreddedRecord>& found = s.shredded_records();
  ASSERT_EQ(found.size(), 70u);
  for (std::size_t i = 0; i < found.size(); ++i) {
    EXPECT_EQ(found[i].record, static_cast<std::int64_t>(i) + 1);  // ascending (memory, record)
    EXPECT_EQ(found[i].tokens, kPerRecord);
  }
  EXPECT_EQ(found[4].key_id, second_key);
  EXPECT_EQ(s.memory_info("m").state_sha256, sha_never);
  EXPECT_EQ((s.query("m", q) - never_q).norm(), 0.0);
}

}  // namespace
}  // namespace svattn
