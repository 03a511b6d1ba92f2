// Stores written before the version-2 state hash (schema 3, docs/store.md "Schema versions and
// upgrade"): fixtures made by an older svattn (tests/store/data/README.md) are read as they are
// when opened read-only, and upgraded in place when opened for writing: every memory's version-1
// hash is checked and replaced by the version-2 hash of the same state, one `rehash` audit entry
// each, the coefficients unchanged, and the upgraded store verifies and keeps working.
#include <gtest/gtest.h>

#include <filesystem>

#include "store_test_util.h"
#include "svattn/batch_solver.h"
#include "svattn/store.h"

using namespace svattn;
using namespace svattn::store_test;

namespace {

std::string fixture(const TempDir& dir, const std::string& name) {
  const std::string src = std::string(SVATTN_SOURCE_DIR) + "/tests/store/data/" + name;
  const std::string dst = dir.file(name);
  std::filesystem::copy_file(src + ".db", dst + ".db");
  if (std::filesystem::exists(src + ".db.keys"))
    std::filesystem::copy_file(src + ".db.keys", dst + ".db.keys");
  return dst + ".db";
}

void expect_read_only_works(const std::string& path, State* stored_a) {
  StoreOptions ro;
  ro.read_only = true;
  Store s(path, ro);
  const State st = s.stored_state("a");
  EXPECT_EQ(st.ids.size(), 40u);
  const Memory& m = s.memory("a");  // its version-1 hash checks; the memory hashes in version 2
  EXPECT_EQ(m.state().alpha, st.alpha);
  EXPECT_NE(m.state_sha256(), st.state_sha256);
  EXPECT_EQ(s.query("a", random_keys(3, 4, 5)).rows(), 3);
  const StoreVerification v = s.verify();
  EXPECT_TRUE(v.ok()) << (v.problems.empty() ? "" : v.problems.front());
  *stored_a = st;
}

void expect_upgraded(const std::string& path, const State& before) {
  Store s(path);
  const State st = s.stored_state("a");
  EXPECT_EQ(st.alpha, before.alpha);  // the state is unchanged, only its hash format
  EXPECT_EQ(st.b, before.b);
  EXPECT_EQ(s.memory("a").state_sha256(), st.state_sha256);
  EXPECT_TRUE(s.last_restore("a").screening_used);  // the bounds moved into the records
  BatchSettings bs;
  bs.problem = s.memory("a").settings().problem;
  EXPECT_EQ(solve_batch(s.memory("a").tokens(), bs).state.state_sha256, st.state_sha256);
  int rehash = 0;
  for (const AuditEntry& e : s.audit()) {
    if (e.operation != "rehash") continue;
    ++rehash;
    if (e.memory == "a") {
      EXPECT_EQ(e.state_before, before.state_sha256);
      EXPECT_EQ(e.state_after, st.state_sha256);
    }
  }
  EXPECT_EQ(rehash, 2);  // memories 'a' and 'empty'
  EXPECT_EQ(s.audit().back().operation, "upgrade");
  StoreVerification v = s.verify();
  EXPECT_TRUE(v.ok()) << (v.problems.empty() ? "" : v.problems.front());
  // The upgraded store keeps working: forget, resume, and an empty memory's hash.
  EXPECT_TRUE(s.forget_record("a", 0).certificate.verify.ok());
  s.resume_record("a", 4);
  v = s.verify();
  EXPECT_TRUE(v.ok()) << (v.problems.empty() ? "" : v.problems.front());
  Memory fresh(s.memory("empty").settings(), 4, 4);
  EXPECT_EQ(s.stored_state("empty").state_sha256, fresh.state_sha256());
}

// A read-only open of a fixture with version-2 hashes (schema 4 or later), read in its own layout:
// memory 'a' restores to its stored state (40 tokens), seeded by the persisted screening bounds,
// and the store verifies. Returns the stored state.
State read_as_it_is(const std::string& path) {
  StoreOptions ro;
  ro.read_only = true;
  Store r(path, ro);
  const State st = r.stored_state("a");
  EXPECT_EQ(st.ids.size(), 40u);
  EXPECT_EQ(r.memory("a").state_sha256(), st.state_sha256);
  EXPECT_TRUE(r.last_restore("a").screening_used);
  EXPECT_TRUE(r.verify().ok());
  return st;
}

}  // namespace

TEST(StoreRehash, PlaintextVersion3StoreIsReadThenUpgraded) {
  TempDir dir;
  const std::string path = fixture(dir, "v3_plain");
  State before;
  expect_read_only_works(path, &before);
  testing::internal::CaptureStderr();
  expect_upgraded(path, before);
  EXPECT_NE(testing::internal::GetCapturedStderr().find(
                "upgraded from schema version 3 to " + std::to_string(kStoreSchemaVersion)),
            std::string::npos);
  // Upgraded once: a second writable open changes nothing.
  const std::size_t entries = Store(path).audit().size();
  EXPECT_EQ(Store(path).audit().size(), entries);
}

TEST(StoreRehash, EncryptedVersion3StoreIsReadThenUpgraded) {
  TempDir dir;
  const std::string path = fixture(dir, "v3_enc");
  State before;
  expect_read_only_works(path, &before);
  expect_upgraded(path, before);
  EXPECT_EQ(Store(path).encryption(), "aes-256-gcm");
}

// A version-3 file whose recorded hash does not check against its tokens is not re-hashed: the
// upgrade names it, and opening the memory refuses it as for any state that does not check.
TEST(StoreRehash, UpgradeLeavesAHashThatDoesNotCheck) {
  TempDir dir;
  const std::string path = fixture(dir, "v3_plain");
  {
    RawDb raw(path);
    ASSERT_EQ(raw.exec("UPDATE memories SET b = b + 1e-9 WHERE name = 'a'"), SQLITE_OK);
  }
  testing::internal::CaptureStderr();
  Store s(path);
  (void)testing::internal::GetCapturedStderr();
  const std::string cert = s.audit().back().certificate;
  EXPECT_NE(cert.find("\"unverified_memories\":[\"a\"]"), std::string::npos) << cert;
  testing::internal::CaptureStderr();
  EXPECT_THROW(s.memory("a"), FormatError);
  (void)testing::internal::GetCapturedStderr();
  EXPECT_FALSE(s.verify().ok());
}

// Schema 4 kept every screening bound in one row per memory and schema 5 in each record's row; the
// upgrade to 6 moves them into the bounds groups' blobs (docs/store.md "Bounds groups"), one group
// here (4 active records, record 4 suspended), sealed under a group key in the encrypted store, and
// the memory is still seeded from them. Schema 5's records.bounds is emptied.
TEST(StoreRehash, Version4And5StoresMoveTheirBoundsIntoGroups) {
  for (const std::string name : {"v4_plain", "v4_enc", "v5_plain", "v5_enc"}) {
    SCOPED_TRACE(name);
    TempDir dir;
    const std::string path = fixture(dir, name);
    const bool v5 = name[1] == '5';
    std::int64_t epoch_before = 0;
    {
      RawDb raw(path);
      epoch_before = raw.query_int("SELECT epoch FROM screening WHERE memory_id = 1");
      if (v5) EXPECT_EQ(raw.query_int("SELECT count(*) FROM records WHERE bounds IS NOT NULL"), 5);
    }
    const State before = read_as_it_is(path);
    testing::internal::CaptureStderr();
    {
      Store s(path);
      EXPECT_EQ(s.memory("a").state_sha256(), before.state_sha256);
      EXPECT_TRUE(s.last_restore("a").screening_used) << s.last_restore("a").screening_problem;
      const AuditEntry up = s.audit().back();
      EXPECT_EQ(up.operation, "upgrade");
      EXPECT_EQ(nlohmann::json::parse(up.certificate).at("bounds_groups"), 1);
    }
    EXPECT_NE(testing::internal::GetCapturedStderr().find(
                  std::string("upgraded from schema version ") + (v5 ? "5" : "4") + " to " +
                  std::to_string(kStoreSchemaVersion)),
              std::string::npos);
    {
      RawDb raw(path);
      EXPECT_EQ(raw.query_int("SELECT count(*) FROM screening WHERE length(bounds) > 0"), 0);
      if (v5) EXPECT_EQ(raw.query_int("SELECT count(*) FROM records WHERE bounds IS NOT NULL"), 0);
      EXPECT_EQ(raw.query_int("SELECT count(*) FROM records WHERE bounds_group = 0"), 5);
      EXPECT_EQ(raw.query_int("SELECT count(*) FROM bounds_groups WHERE length(bounds) > 0"), 1);
      EXPECT_EQ(raw.query_int("SELECT count(*) FROM bounds_groups WHERE key_id IS NOT NULL"),
                name.find("enc") != std::string::npos ? 1 : 0);
      // Schema 5 kept its epoch; schema 4's row had none (epoch 1).
      EXPECT_EQ(raw.query_int("SELECT epoch FROM screening WHERE memory_id = 1"),
                v5 ? epoch_before : 1);
    }
    Store s(path);
    const StoreVerification v = s.verify();
    EXPECT_TRUE(v.ok()) << (v.problems.empty() ? "" : v.problems.front());
    EXPECT_TRUE(s.forget_record("a", 0).certificate.verify.ok());
    s.resume_record("a", 4);
    EXPECT_TRUE(s.verify().ok());
    Store again(path);
    (void)again.memory("a");
    EXPECT_TRUE(again.last_restore("a").screening_used);
  }
}

// Schema 6 sealed a token's key and value as two messages; schema 7 writes one token message per
// token (docs/store.md "Token messages"). The upgrade rewrites no row: the old rows keep their
// layout, new records are written in the new one, and a store mixing both restores, verifies,
// forgets from either layout and hashes exactly like the plaintext store given the same operations.
TEST(StoreRehash, Version6StoreKeepsItsRowsAndMixesInTokenMessages) {
  std::string hash_after[2];
  for (const std::string name : {"v6_plain", "v6_enc"}) {
    SCOPED_TRACE(name);
    const bool enc = name == "v6_enc";
    TempDir dir;
    const std::string path = fixture(dir, name);
    // Token rows by the first byte of their key column: 1 = two messages, 2 = a token message.
    const auto rows_with_first_byte = [&](int b) {
      RawDb raw(path);
      return raw.query_int("SELECT count(*) FROM tokens WHERE substr(key, 1, 1) = x'0" +
                           std::to_string(b) + "'");
    };
    ASSERT_EQ(rows_with_first_byte(1), enc ? 50 : 0);  // 40 active, 10 suspended
    const State before = read_as_it_is(path);
    testing::internal::CaptureStderr();
    {
      Store s(path);
      EXPECT_EQ(s.memory("a").state_sha256(), before.state_sha256);
      EXPECT_EQ(s.audit().back().operation, "upgrade");
      s.add_record("a", 6, random_keys(10, 4, 66));
    }
    EXPECT_NE(testing::internal::GetCapturedStderr().find(
                  "upgraded from schema version 6 to " + std::to_string(kStoreSchemaVersion)),
              std::string::npos);
    EXPECT_EQ(rows_with_first_byte(1), enc ? 50 : 0);  // nothing rewritten
    EXPECT_EQ(rows_with_first_byte(2), enc ? 10 : 0);  // record 6: one message per token
    {
      RawDb raw(path);
      EXPECT_EQ(raw.query_int("SELECT count(*) FROM tokens WHERE length(key) = " +
                              std::to_string(enc ? 4 * 8 + 13 : 4 * 8) + " AND length(value) = " +
                              std::to_string(enc ? 4 * 8 + 16 : 4 * 8)),
                enc ? 10 : 60);
    }
    Store s(path);  // a new restore reads both layouts
    const State mixed = s.stored_state("a");
    EXPECT_EQ(mixed.ids.size(), 50u);
    EXPECT_EQ(s.memory("a").state_sha256(), mixed.state_sha256);
    BatchSettings bs;
    bs.problem = s.memory("a").settings().problem;
    EXPECT_EQ(solve_batch(s.memory("a").tokens(), bs).state.state_sha256, mixed.state_sha256);
    StoreVerification v = s.verify();
    EXPECT_TRUE(v.ok()) << (v.problems.empty() ? "" : v.problems.front());
    EXPECT_TRUE(s.forget_record("a", 1).certificate.verify.ok());  // an old-layout record
    EXPECT_TRUE(s.forget_record("a", 6).certificate.verify.ok());  // a token-message record
    s.resume_record("a", 4);
    v = s.verify();
    EXPECT_TRUE(v.ok()) << (v.problems.empty() ? "" : v.problems.front());
    hash_after[enc ? 1 : 0] = Store(path).memory("a").state_sha256();
  }
  EXPECT_EQ(hash_after[0], hash_after[1]);  // hashes are computed on the plaintext
}
