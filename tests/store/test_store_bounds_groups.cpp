// Bounds groups (schema 6, docs/store.md "Bounds groups"): records are placed into groups of at
// most 64 records and 4,096 token rows (a larger record alone), one screening-bounds blob per group
// sealed under the group's key. Forgetting a record rewrites its group's blob without it under a
// fresh key and destroys the old key with the record's data key, so a copy made before the erasure
// holds the record's bounds only under a destroyed key; a plaintext store keeps none of its bounds'
// bytes. Suspend and resume rewrite the group and keep its key; a group's last record takes the
// group with it; an add without a restore joins its group's blob.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "store/key_store.h"
#include "store_test_util.h"

namespace svattn {
namespace {

using store_test::group_blob;
using store_test::group_key_id;
using store_test::group_of;
using store_test::PlainGroup;
using store_test::RawDb;
using store_test::rbf_settings;
using store_test::TempDir;

constexpr int kDim = 4;
constexpr int kRecords = 150;  // three groups: 64 + 64 + 22 records

StoreOptions create(bool encrypt) {
  StoreOptions o;
  o.create = true;
  o.encrypt = encrypt;
  return o;
}

// A store of kRecords records x 4 tokens, imported (one memory "m").
std::string make_store(const TempDir& dir, bool encrypt) {
  const std::string path = dir.file(encrypt ? "e.db" : "p.db");
  Store s(path, create(encrypt));
  s.create_memory("m", rbf_settings(0.05), kDim, kDim);
  std::vector<std::int64_t> rec;
  for (std::int64_t r = 0; r < kRecords; ++r) rec.insert(rec.end(), 4, r);
  s.import_records("m", rec, store_test::random_keys(4 * kRecords, kDim, 5));
  return path;
}

// Records holding no support token, ascending.
std::vector<std::int64_t> reserve_only_records(const State& st) {
  std::map<std::int64_t, bool> support;
  for (std::size_t t = 0; t < st.ids.size(); ++t)
    support[record_of(st.ids[t])] = support[record_of(st.ids[t])] || st.alpha[t] != 0.0;
  std::vector<std::int64_t> out;
  for (const auto& [r, s] : support)
    if (!s) out.push_back(r);
  return out;
}

std::vector<std::int64_t> column(RawDb& raw, const std::string& sql) {
  std::vector<std::int64_t> out;
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(raw.handle(), sql.c_str(), -1, &q, nullptr);
  while (sqlite3_step(q) == SQLITE_ROW) out.push_back(sqlite3_column_int64(q, 0));
  sqlite3_finalize(q);
  return out;
}

// The memory reopened in a new Store is seeded from the persisted bounds, with no problem.
void expect_seeded(const std::string& path) {
  Store s(path);
  (void)s.memory("m");
  EXPECT_TRUE(s.last_restore("m").screening_used) << s.last_restore("m").screening_problem;
  EXPECT_EQ(s.last_restore("m").screening_problem, "");
  const StoreVerification v = s.verify();
  EXPECT_TRUE(v.ok()) << (v.problems.empty() ? "" : v.problems.front());
}

TEST(BoundsGroups, RecordsFillGroupsAndALargeRecordGetsItsOwn) {
  TempDir dir;
  const std::string path = make_store(dir, false);
  {
    RawDb raw(path);
    EXPECT_EQ(column(raw, "SELECT member_records FROM bounds_groups ORDER BY group_id"),
              (std::vector<std::int64_t>{64, 64, 22}));
    EXPECT_EQ(column(raw, "SELECT member_tokens FROM bounds_groups ORDER BY group_id"),
              (std::vector<std::int64_t>{256, 256, 88}));
    EXPECT_EQ(group_of(raw, 0), 0);
    EXPECT_EQ(group_of(raw, 64), 1);
    EXPECT_EQ(group_of(raw, 149), 2);
  }
  {
    Store s(path);
    // 4,097 token rows do not fit the newest group (88 + 4,097 > 4,096): a group of its own; the
    // next record does not fit beside it either.
    s.add_record("m", 1000, store_test::random_keys(4097, kDim, 6));
    s.add_record("m", 1001, store_test::random_keys(4, kDim, 7));
  }
  {
    RawDb raw(path);
    EXPECT_EQ(column(raw, "SELECT member_records FROM bounds_groups ORDER BY group_id"),
              (std::vector<std::int64_t>{64, 64, 22, 1, 1}));
    EXPECT_EQ(group_of(raw, 1000), 3);
    EXPECT_EQ(group_of(raw, 1001), 4);
  }
  expect_seeded(path);
}

// Both forget paths (the memory in RAM, and a fresh Store without a restore).
TEST(BoundsGroups, ForgetReplacesOnlyItsGroupsKeyAndDestroysTheOldOne) {
  TempDir dir;
  const std::string path = make_store(dir, true);
  const std::vector<std::int64_t> reserve = reserve_only_records(Store(path).stored_state("m"));
  ASSERT_GE(reserve.size(), 2u);
  for (const bool in_ram : {true, false}) {
    SCOPED_TRACE(in_ram ? "memory in RAM" : "without a restore");
    const std::int64_t r = in_ram ? reserve.front() : reserve.back();
    std::map<std::int64_t, std::string> keys_before;
    std::int64_t g = -1;
    std::string spare;
    {
      RawDb raw(path);
      g = group_of(raw, r);
      for (std::int64_t k = 0; k < 3; ++k) keys_before[k] = group_key_id(raw, k);
      spare = group_key_id(raw, g, "next_key_id");
    }
    ASSERT_EQ(spare.size(), 32u);  // made with the group's key (docs/store.md "Bounds groups")
    Store s(path);
    if (in_ram) (void)s.memory("m");
    const ForgetResult fr = s.forget_record("m", r);
    ASSERT_TRUE(fr.certificate.store.has_value());
    const StoreErasure& se = *fr.certificate.store;
    EXPECT_EQ(se.bounds_group, g);
    EXPECT_EQ(se.bounds_key_id, keys_before[g]);
    EXPECT_EQ(se.bounds_key_sha256.size(), 64u);
    EXPECT_TRUE(se.bounds_key_destroyed);
    EXPECT_TRUE(se.data_key_destroyed);
    store_detail::KeyStore ks(path + ".keys", {});
    RawDb raw(path);
    for (std::int64_t k = 0; k < 3; ++k) {
      const std::string now = group_key_id(raw, k);
      if (k == g) {
        EXPECT_EQ(now, spare);  // the spare took over: no key-store write before the commit
        EXPECT_TRUE(ks.get(keys_before[k]).shredded());
        EXPECT_FALSE(ks.get(now).shredded());
        EXPECT_EQ(ks.get(now).owner.record_id, -1 - g);                // a group key's owner
        const std::string next = group_key_id(raw, k, "next_key_id");  // made with the shreds
        ASSERT_EQ(next.size(), 32u);
        EXPECT_NE(next, spare);
        EXPECT_FALSE(ks.get(next).shredded());
      } else {
        EXPECT_EQ(now, keys_before[k]) << "group " << k;
        EXPECT_FALSE(ks.get(now).shredded());
      }
    }
    EXPECT_EQ(raw.query_int("SELECT count(*) FROM pending_shreds"), 0);
    expect_seeded(path);
  }
}

// A Store keeps the group keys it has read (docs/store.md "Bounds groups", Cost). When another
// Store replaces a group's key (an erasure in that group), the first one's next full rewrite
// seals that group under the new key, not the cached destroyed one: a new Store is seeded from
// every group.
TEST(BoundsGroups, ACachedGroupKeyReplacedByAnotherStoreIsNotUsed) {
  TempDir dir;
  const std::string path = make_store(dir, true);
  const State st = Store(path).stored_state("m");
  const std::vector<std::int64_t> reserve = reserve_only_records(st);
  std::vector<std::int64_t> support;
  for (std::size_t t = 0; t < st.ids.size(); ++t)
    if (st.alpha[t] != 0.0 && (support.empty() || support.back() != record_of(st.ids[t])))
      support.push_back(record_of(st.ids[t]));
  ASSERT_GE(support.size(), 2u);
  ASSERT_FALSE(reserve.empty());
  Store a(path);
  (void)a.forget_record("m", support[0]);  // a full rewrite: every group's key read and kept
  std::string replaced;
  std::int64_t g = -1;
  {
    RawDb raw(path);
    g = group_of(raw, reserve.front());
    replaced = group_key_id(raw, g);
  }
  {
    Store b(path);
    const ForgetResult f = b.forget_record("m", reserve.front());
    ASSERT_TRUE(f.certificate.store.has_value());
    EXPECT_EQ(f.certificate.store->bounds_key_id, replaced);
    EXPECT_TRUE(f.certificate.store->bounds_key_destroyed);
  }
  (void)a.forget_record("m", support[1]);  // reloads the changed memory, rewrites every group
  {
    RawDb raw(path);
    EXPECT_NE(group_key_id(raw, g), replaced);
  }
  expect_seeded(path);
}

// A group whose spare is missing (never made: a crash between a forget's commit and its key
// destructions) or destroyed gets a fresh key at the next erasure; the forget is the same.
TEST(BoundsGroups, AGroupWithoutALiveSpareGetsAFreshKey) {
  TempDir dir;
  const std::string path = make_store(dir, true);
  const std::vector<std::int64_t> reserve = reserve_only_records(Store(path).stored_state("m"));
  ASSERT_GE(reserve.size(), 2u);
  for (const bool destroyed : {false, true}) {
    SCOPED_TRACE(destroyed ? "spare destroyed" : "no spare");
    const std::int64_t r = destroyed ? reserve.back() : reserve.front();
    std::string key, spare;
    std::int64_t g = -1;
    {
      RawDb raw(path);
      g = group_of(raw, r);
      key = group_key_id(raw, g);
      spare = group_key_id(raw, g, "next_key_id");
      if (!destroyed)
        ASSERT_EQ(raw.exec("UPDATE bounds_groups SET next_key_id = NULL WHERE group_id = " +
                           std::to_string(g)),
                  SQLITE_OK);
    }
    if (destroyed) store_detail::KeyStore(path + ".keys", {}).destroy(spare);
    const ForgetResult fr = Store(path).forget_record("m", r);
    EXPECT_TRUE(fr.certificate.store->bounds_key_destroyed);
    RawDb raw(path);
    const std::string now = group_key_id(raw, g);
    ASSERT_EQ(now.size(), 32u);
    EXPECT_NE(now, key);
    EXPECT_NE(now, spare);
    store_detail::KeyStore ks(path + ".keys", {});
    EXPECT_TRUE(ks.get(key).shredded());
    EXPECT_FALSE(ks.get(now).shredded());
    expect_seeded(path);
  }
}

// A copy taken before the erasure holds the record's bounds in its group's blob under the group's
// key of that time, which the erasure destroyed; restored beside the key store, the copy purges
// the record and writes its groups anew under fresh keys, and its memory is seeded from them.
TEST(BoundsGroups, ABackupsBlobOfAnErasedRecordIsSealedUnderADestroyedKey) {
  TempDir dir;
  const std::string path = make_store(dir, true);
  const std::string bak = dir.file("backup.db");
  const std::int64_t r = reserve_only_records(Store(path).stored_state("m")).front();
  backup_store(path, bak);
  std::string old_key;
  {
    RawDb raw(bak);
    old_key = group_key_id(raw, group_of(raw, r));
  }
  Store(path).forget_record("m", r);
  EXPECT_TRUE(store_detail::KeyStore(path + ".keys", {}).get(old_key).shredded());
  const std::string want = Store(path).memory_info("m").state_sha256;
  store_test::write_bytes(path, store_test::read_bytes(bak));  // restore over the store
  std::remove((path + "-wal").c_str());
  std::remove((path + "-shm").c_str());
  {
    StoreOptions ro;
    ro.read_only = true;
    Store s(path, ro);
    ASSERT_EQ(s.shredded_records().size(), 1u);
    EXPECT_EQ(s.memory_info("m").state_sha256, want);
  }
  {
    Store s(path);  // purged
    EXPECT_EQ(s.memory_info("m").state_sha256, want);
  }
  {
    RawDb raw(path);
    EXPECT_NE(group_key_id(raw, group_of(raw, r + 1)), old_key);
  }
  expect_seeded(path);
}

// The bytes of a record's bounds (fp64, from its group's plaintext blob) are in the file before
// the forget and nowhere in the file or its WAL after it, on both forget paths.
TEST(BoundsGroups, PlaintextForgetLeavesNoneOfTheRecordsBoundsInTheFile) {
  TempDir dir;
  const std::string path = make_store(dir, false);
  const std::vector<std::int64_t> reserve = reserve_only_records(Store(path).stored_state("m"));
  ASSERT_GE(reserve.size(), 2u);
  for (const bool in_ram : {true, false}) {
    SCOPED_TRACE(in_ram ? "memory in RAM" : "without a restore");
    const std::int64_t r = in_ram ? reserve.front() : reserve.back();
    store_test::Patterns pats;
    {
      RawDb raw(path);
      const PlainGroup g = store_test::parse_group_blob(group_blob(raw, group_of(raw, r)));
      std::size_t at = 0;
      for (const auto& [rec, count] : g.entries) {
        for (std::int64_t k = 0; k < count && rec == r; ++k) {
          std::array<std::uint8_t, 8> a{};
          std::memcpy(a.data(), &g.bounds[at + static_cast<std::size_t>(k)], 8);
          if (g.bounds[at + static_cast<std::size_t>(k)] != 0.0) pats.fp64.push_back(a);
        }
        at += static_cast<std::size_t>(count);
      }
    }
    ASSERT_EQ(pats.fp64.size(), 4u);  // reserve tokens: bounds > 0
    EXPECT_EQ(store_test::scan_store_files(path, pats).fp64_found, 4u);
    {
      Store s(path);
      if (in_ram) (void)s.memory("m");
      const ForgetResult fr = s.forget_record("m", r);
      EXPECT_TRUE(fr.wal_truncated);
      EXPECT_TRUE(fr.certificate.store->bounds_key_id.empty());  // no keys in a plaintext store
      EXPECT_GE(fr.certificate.store->bounds_group, 0);
      EXPECT_EQ(store_test::scan_store_files(path, pats).fp64_found, 0u);
    }
    EXPECT_EQ(store_test::scan_store_files(path, pats).fp64_found, 0u);
    expect_seeded(path);
  }
}

TEST(BoundsGroups, SuspendAndResumeRewriteTheGroupAndKeepItsKey) {
  for (const bool encrypt : {false, true}) {
    SCOPED_TRACE(encrypt ? "encrypted" : "plaintext");
    TempDir dir;
    const std::string path = make_store(dir, encrypt);
    const std::int64_t r = reserve_only_records(Store(path).stored_state("m")).front();
    std::int64_t g = -1;
    std::string key;
    {
      RawDb raw(path);
      g = group_of(raw, r);
      key = group_key_id(raw, g);
    }
    const auto listed = [&] {  // the record's entry in its group's plaintext blob
      RawDb raw(path);
      bool found = false;
      for (const auto& [rec, c] : store_test::parse_group_blob(group_blob(raw, g)).entries)
        found = found || rec == r;
      return found;
    };
    if (!encrypt) EXPECT_TRUE(listed());
    Store(path).suspend_record("m", r);
    if (!encrypt) EXPECT_FALSE(listed());
    expect_seeded(path);
    Store(path).resume_record("m", r);
    if (!encrypt) EXPECT_TRUE(listed());
    RawDb raw(path);
    EXPECT_EQ(group_key_id(raw, g), key);
    EXPECT_EQ(raw.query_int("SELECT count(*) FROM pending_shreds"), 0);
    expect_seeded(path);
  }
}

TEST(BoundsGroups, ForgettingAGroupsLastRecordDeletesTheGroup) {
  TempDir dir;
  const std::string path = make_store(dir, true);
  {
    Store s(path);
    s.add_record("m", 1000, store_test::random_keys(4097, kDim, 6));  // a group of its own
  }
  std::string key, spare;
  {
    RawDb raw(path);
    ASSERT_EQ(group_of(raw, 1000), 3);
    key = group_key_id(raw, 3);
    spare = group_key_id(raw, 3, "next_key_id");
  }
  const ForgetResult fr = Store(path).forget_record("m", 1000);
  EXPECT_EQ(fr.certificate.store->bounds_group, 3);
  EXPECT_EQ(fr.certificate.store->bounds_key_id, key);
  EXPECT_TRUE(fr.certificate.store->bounds_key_destroyed);
  EXPECT_TRUE(store_detail::KeyStore(path + ".keys", {}).get(key).shredded());
  EXPECT_TRUE(store_detail::KeyStore(path + ".keys", {}).get(spare).shredded());  // both go
  RawDb raw(path);
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM bounds_groups WHERE group_id = 3"), 0);
  expect_seeded(path);
}

// An add that stays in reserve, without a restore: the record joins its group and its bounds join
// the group's blob, which the reopened memory uses.
TEST(BoundsGroups, StoredAddJoinsItsGroupsBlob) {
  for (const bool encrypt : {false, true}) {
    SCOPED_TRACE(encrypt ? "encrypted" : "plaintext");
    TempDir dir;
    const std::string path = make_store(dir, encrypt);
    RowMatrix inside = store_test::random_keys(3, kDim, 8);
    inside *= 0.01;  // near the centre of the keys: strictly inside the description
    const OpResult res = Store(path).add_record("m", 500, inside);
    EXPECT_NE(res.entry.certificate.find("without_restore"), std::string::npos);
    if (!encrypt) {
      RawDb raw(path);
      const PlainGroup g = store_test::parse_group_blob(group_blob(raw, group_of(raw, 500)));
      ASSERT_FALSE(g.entries.empty());
      EXPECT_EQ(g.entries.back(), (std::pair<std::int64_t, std::int64_t>{500, 3}));
    }
    expect_seeded(path);
  }
}

// A record whose bounds group is missing: the restore says so and re-derives; verify names it.
TEST(BoundsGroups, ARecordWithoutItsGroupIsReported) {
  TempDir dir;
  const std::string path = make_store(dir, false);
  {
    RawDb raw(path);
    ASSERT_EQ(raw.exec("UPDATE records SET bounds_group = 99 WHERE record = 3"), SQLITE_OK);
  }
  testing::internal::CaptureStderr();
  Store s(path);
  (void)s.memory("m");
  (void)testing::internal::GetCapturedStderr();
  EXPECT_FALSE(s.last_restore("m").screening_used);
  // Group 0's blob lists record 3, which names another group: refused, naming the record.
  EXPECT_NE(s.last_restore("m").screening_problem.find("record 3"), std::string::npos)
      << s.last_restore("m").screening_problem;
  const StoreVerification v = s.verify();
  bool named = false;
  for (const std::string& p : v.problems) named = named || p.find("no bounds group") != p.npos;
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace svattn
