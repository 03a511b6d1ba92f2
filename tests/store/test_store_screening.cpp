// Persisted screening bounds and the schema-1 upgrade (docs/store.md "Persisted
// screening"): a reopened memory is restored from its bounds without re-deriving every gradient; a
// bound that fails its check is refused (never used) and said so; a version-1 store is upgraded in
// place, in one transaction logged in the audit chain, and keeps its hash.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "store_test_util.h"

namespace svattn {
namespace {

using store_test::add_records;
using store_test::group_blob;
using store_test::group_of;
using store_test::PlainGroup;
using store_test::RawDb;
using store_test::rbf_settings;
using store_test::TempDir;

constexpr int kDim = 4;

std::vector<std::int64_t> ids(int n) {
  std::vector<std::int64_t> v;
  for (int i = 0; i < n; ++i) v.push_back(i);
  return v;
}

// A store with one memory of 150 records x 4 tokens (optimal, out of warm-up, with reserve tokens):
// three bounds groups (64 + 64 + 22 records; docs/store.md "Bounds groups"). Plaintext (encrypt =
// false) where a test edits bytes in the file as plaintext.
constexpr int kRecords = 150;
std::string make_store(const TempDir& dir, bool encrypt = true) {
  const std::string path = dir.file("s.db");
  StoreOptions o;
  o.create = true;
  o.encrypt = encrypt;
  Store s(path, o);
  s.create_memory("m", rbf_settings(0.05), kDim, kDim);
  add_records(s, "m", ids(kRecords), 4, kDim);
  s.forget_record("m", 7);
  return path;
}

// Every group's blob, by group.
std::map<std::int64_t, std::vector<std::uint8_t>> all_blobs(const std::string& path) {
  RawDb raw(path);
  std::map<std::int64_t, std::vector<std::uint8_t>> out;
  for (std::int64_t g = 0; g < 8; ++g) {
    std::vector<std::uint8_t> b = store_test::group_blob(raw, g);
    if (!b.empty()) out[g] = std::move(b);
  }
  return out;
}

// The first reserve token's record and a record holding a support token.
void pick_records(const State& st, std::int64_t* reserve_only, std::int64_t* support) {
  std::map<std::int64_t, bool> has;
  for (std::size_t t = 0; t < st.ids.size(); ++t)
    has[record_of(st.ids[t])] = has[record_of(st.ids[t])] || st.alpha[t] != 0.0;
  *reserve_only = *support = -1;
  for (const auto& [r, h] : has) {
    if (!h && *reserve_only < 0) *reserve_only = r;
    if (h && *support < 0) *support = r;
  }
}

TEST(StoreScreening, ReopenUsesThePersistedBoundsAndFewerKernelValues) {
  TempDir dir;
  const std::string path = make_store(dir);
  const std::string want = Store(path).memory_info("m").state_sha256;
  RestoreReport seeded;
  {
    Store s(path);
    EXPECT_EQ(s.memory("m").state_sha256(), want);
    seeded = s.last_restore("m");
  }
  EXPECT_TRUE(seeded.restored);
  EXPECT_TRUE(seeded.screening_used);
  EXPECT_EQ(seeded.screening_problem, "");
  EXPECT_FALSE(seeded.resolved);
  {
    RawDb raw(path);
    ASSERT_EQ(raw.query_int("SELECT count(*) FROM screening"), 1);
    ASSERT_EQ(raw.exec("DELETE FROM screening"), SQLITE_OK);  // absent: re-derived, silently
  }
  Store s(path);
  EXPECT_EQ(s.memory("m").state_sha256(), want);
  const RestoreReport plain = s.last_restore("m");
  EXPECT_FALSE(plain.screening_used);
  EXPECT_EQ(plain.screening_problem, "");
  EXPECT_LT(seeded.kernel_evaluations, plain.kernel_evaluations);
  // The next operation writes the bounds again.
  s.forget_record("m", 8);
  RawDb raw(path);
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM screening"), 1);
}

// An import writes the bounds once, at its last chunk: the chunks before leave the head without
// bounds and write no blob (rewriting every record's blob per chunk made a 200k import quadratic),
// and the reopened memory is seeded from the last chunk's bounds.
TEST(StoreScreening, ImportWritesTheBoundsAtItsLastChunkOnly) {
  TempDir dir;
  const std::string path = dir.file("s.db");
  std::vector<std::int64_t> rec;
  for (std::int64_t r = 0; r < kRecords; ++r) rec.insert(rec.end(), 4, r);
  const RowMatrix keys = store_test::random_keys(4 * kRecords, kDim, 77);
  std::vector<std::int64_t> blobs_after_chunk;
  std::string want;
  {
    StoreOptions o;
    o.create = true;
    Store s(path, o);
    s.create_memory("m", rbf_settings(0.05), kDim, kDim);
    ImportOptions io;
    io.chunk_records = 60;
    io.progress = [&](const ImportProgress&) {
      RawDb raw(path);
      blobs_after_chunk.push_back(
          raw.query_int("SELECT count(*) FROM bounds_groups WHERE length(bounds) > 0"));
    };
    const ImportResult res = s.import_records("m", rec, keys, nullptr, io);
    EXPECT_EQ(res.chunks, 3);
    want = res.state_sha256;
  }
  EXPECT_EQ(blobs_after_chunk, (std::vector<std::int64_t>{0, 0, 3}));
  Store s(path);
  EXPECT_EQ(s.memory("m").state_sha256(), want);
  const RestoreReport r = s.last_restore("m");
  EXPECT_TRUE(r.screening_used);
  EXPECT_EQ(r.screening_problem, "");
  EXPECT_TRUE(s.verify().ok());
}

TEST(StoreScreening, TamperedBoundIsDetectedOnOpenAndRederived) {
  for (const bool encrypt : {false, true}) {
    TempDir dir;
    const std::string path = make_store(dir, encrypt);
    const std::string want = Store(path).memory_info("m").state_sha256;
    std::int64_t g = -1;
    {
      RawDb raw(path);
      g = group_of(raw, 3);
      std::vector<std::uint8_t> b = group_blob(raw, g);
      ASSERT_GT(b.size(), 200u);
      if (encrypt) {
        b[b.size() / 2] ^= 0x01;  // sealed: authentication fails
      } else {
        const PlainGroup pg = store_test::parse_group_blob(b);
        const std::size_t bounds_at = 16 + 16 * pg.entries.size();
        for (std::size_t k = bounds_at; k + 32 < b.size(); ++k) b[k] = 0x41;  // ~1e6: skip checks
      }
      store_test::write_group_blob(raw, g, b);
    }
    const std::string named = "bounds group " + std::to_string(g);
    testing::internal::CaptureStderr();
    Store s(path);
    EXPECT_EQ(s.memory("m").state_sha256(), want);
    const std::string err = testing::internal::GetCapturedStderr();
    const RestoreReport r = s.last_restore("m");
    EXPECT_FALSE(r.screening_used);
    EXPECT_NE(r.screening_problem.find(named), std::string::npos) << r.screening_problem;
    if (!encrypt) EXPECT_NE(r.screening_problem.find("checksum mismatch"), std::string::npos);
    EXPECT_NE(err.find("persisted screening bounds fail their check"), std::string::npos) << err;
    const StoreVerification v = s.verify();
    EXPECT_FALSE(v.ok());
    bool found = false;
    for (const std::string& p : v.problems) found = found || p.find(named) != p.npos;
    EXPECT_TRUE(found);
  }
}

TEST(StoreScreening, ForgedBoundWithAValidChecksumIsCaughtByVerify) {
  TempDir dir;
  const std::string path = make_store(dir, false);
  const MemoryInfo info = Store(path).memory_info("m");
  const State st = Store(path).stored_state("m");
  std::int64_t record = -1, support = -1;
  pick_records(st, &record, &support);
  ASSERT_GE(record, 0);
  {
    RawDb raw(path);
    const std::int64_t g = group_of(raw, record);
    const std::int64_t memory_id = raw.query_int("SELECT id FROM memories");
    const std::vector<std::uint8_t> old = group_blob(raw, g);
    PlainGroup pg = store_test::parse_group_blob(old);
    EXPECT_EQ(store_test::documented_group_blob(memory_id, g, pg), old);  // the documented format
    std::size_t at = 0;
    for (const auto& [r, c] : pg.entries) {
      if (r == record) break;
      at += static_cast<std::size_t>(c);
    }
    pg.bounds[at] = 1e6;  // the record's first token: far above its gradient
    store_test::write_group_blob(raw, g, store_test::documented_group_blob(memory_id, g, pg));
  }
  Store s(path);
  EXPECT_EQ(s.memory("m").state_sha256(), info.state_sha256);
  EXPECT_TRUE(s.last_restore("m").screening_used);  // the checksum matches: the bound is read
  const StoreVerification v = s.verify();
  bool named = false;
  for (const std::string& p : v.problems) named = named || p.find("exceeds its gradient") != p.npos;
  EXPECT_TRUE(named) << (v.problems.empty() ? "(no problem)" : v.problems[0]);
}

// An operation that moves no coefficient rewrites only the group of the record it touched (same
// epoch), and that group without the record; one that moves the support starts a new epoch and
// rewrites every group; a blob of an older epoch put back is refused. Either way the reopened
// memory is seeded from the bounds.
TEST(StoreScreening, OnlyAMovingOperationRewritesEveryGroup) {
  TempDir dir;
  const std::string path = make_store(dir, false);
  std::int64_t reserve_only = -1, support = -1;
  pick_records(Store(path).stored_state("m"), &reserve_only, &support);
  ASSERT_GE(reserve_only, 0);
  ASSERT_GE(support, 0);
  const auto epoch = [&] {
    RawDb raw(path);
    return raw.query_int("SELECT epoch FROM screening");
  };
  const std::int64_t g = [&] {
    RawDb raw(path);
    return group_of(raw, reserve_only);
  }();
  const auto before = all_blobs(path);
  ASSERT_EQ(before.size(), 3u);
  const std::int64_t e0 = epoch();
  {
    Store s(path);
    (void)s.memory("m");  // the ordinary path on a restored memory
    s.forget_record("m", reserve_only);
  }
  auto after = all_blobs(path);
  EXPECT_EQ(epoch(), e0);
  ASSERT_EQ(after.size(), before.size());
  for (const auto& [group, b] : after) {
    if (group != g) {
      EXPECT_EQ(b, before.at(group)) << "group " << group;
      continue;
    }
    // The record's entry and its bounds are gone; every other entry kept its bounds.
    const PlainGroup was = store_test::parse_group_blob(before.at(group));
    const PlainGroup now = store_test::parse_group_blob(b);
    EXPECT_EQ(now.epoch, was.epoch);
    ASSERT_EQ(now.entries.size() + 1, was.entries.size());
    std::vector<double> kept;
    std::size_t at = 0;
    for (const auto& [r, c] : was.entries) {
      if (r != reserve_only)
        kept.insert(kept.end(), was.bounds.begin() + at, was.bounds.begin() + at + c);
      at += static_cast<std::size_t>(c);
    }
    EXPECT_EQ(now.bounds, kept);
    for (const auto& [r, c] : now.entries) EXPECT_NE(r, reserve_only);
  }
  {
    Store s(path);
    (void)s.memory("m");
    EXPECT_TRUE(s.last_restore("m").screening_used);
    s.forget_record("m", support);
  }
  EXPECT_EQ(epoch(), e0 + 1);
  const auto moved = all_blobs(path);
  for (const auto& [group, b] : moved) EXPECT_NE(b, after.at(group)) << "group " << group;
  {
    Store s(path);
    EXPECT_TRUE(s.verify().ok());
    (void)s.memory("m");
    EXPECT_TRUE(s.last_restore("m").screening_used);
  }
  const std::int64_t stale = moved.rbegin()->first;  // a group the support forget did not shrink
  {
    RawDb raw(path);
    store_test::write_group_blob(raw, stale, after.at(stale));
  }
  testing::internal::CaptureStderr();
  Store s(path);
  (void)s.memory("m");
  (void)testing::internal::GetCapturedStderr();
  EXPECT_FALSE(s.last_restore("m").screening_used);
  EXPECT_NE(s.last_restore("m").screening_problem.find("epoch"), std::string::npos)
      << s.last_restore("m").screening_problem;
}

// A query reads only the support rows and checks them against the persisted support digest: a
// support token's key edited in the file is caught (the query falls back to restoring, which
// refuses the corrupted memory), an edited reserve key does not change the answer.
TEST(StoreScreening, QueryChecksTheSupportDigest) {
  TempDir dir;
  const std::string path = make_store(dir, false);
  const RowMatrix q = store_test::random_keys(3, kDim, 77);
  const RowMatrix want = Store(path).query("m", q);
  const State st = Store(path).stored_state("m");
  TokenId support_id = -1, reserve_id = -1;
  for (std::size_t t = 0; t < st.ids.size(); ++t) {
    if (st.alpha[t] > 0 && support_id < 0) support_id = st.ids[t];
    if (st.alpha[t] == 0 && reserve_id < 0) reserve_id = st.ids[t];
  }
  ASSERT_GE(support_id, 0);
  ASSERT_GE(reserve_id, 0);
  const std::string edit =
      "UPDATE tokens SET key = zeroblob(" + std::to_string(kDim * 8) + ") WHERE token_id = ";
  {
    RawDb raw(path);
    ASSERT_EQ(raw.exec(edit + std::to_string(reserve_id)), SQLITE_OK);
  }
  const RowMatrix same = Store(path).query("m", q);
  for (Eigen::Index i = 0; i < q.rows(); ++i)
    for (Eigen::Index k = 0; k < want.cols(); ++k) EXPECT_EQ(same(i, k), want(i, k));
  {
    RawDb raw(path);
    ASSERT_EQ(raw.exec(edit + std::to_string(support_id)), SQLITE_OK);
  }
  testing::internal::CaptureStderr();
  Store s(path);
  EXPECT_THROW(s.query("m", q), FormatError);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("stored support does not match"), std::string::npos) << err;
}

// A version-1 file is a version-2 file without the screening table, with version 1 in the header
// and the meta table (docs/store.md "Schema"); this makes one from a fresh store.
void downgrade_to_v1(const std::string& path) {
  RawDb raw(path);
  ASSERT_EQ(raw.exec("DROP TABLE screening"), SQLITE_OK);
  ASSERT_EQ(raw.exec("UPDATE meta SET value = '1' WHERE key = 'schema_version'"), SQLITE_OK);
  ASSERT_EQ(raw.exec("PRAGMA user_version = 1"), SQLITE_OK);
}

TEST(StoreUpgrade, Version1StoreIsUpgradedInPlaceAndKeepsItsHash) {
  TempDir dir;
  const std::string path = make_store(dir, false);  // a version-1 file is plaintext
  const std::string want = Store(path).memory_info("m").state_sha256;
  downgrade_to_v1(path);
  const auto entries_before = [&] {
    RawDb raw(path);
    return raw.query_int("SELECT count(*) FROM audit");
  }();
  {
    StoreOptions ro;
    ro.read_only = true;
    Store r(path, ro);  // read as it is: no upgrade, restore re-derives
    EXPECT_EQ(r.memory("m").state_sha256(), want);
    EXPECT_FALSE(r.last_restore("m").screening_used);
  }
  {
    RawDb raw(path);
    EXPECT_EQ(raw.query_int("PRAGMA user_version"), 1);
  }
  testing::internal::CaptureStderr();
  {
    Store s(path);
    EXPECT_EQ(s.memory_info("m").state_sha256, want);
    const std::vector<AuditEntry> log = s.audit();
    ASSERT_EQ(static_cast<std::int64_t>(log.size()), entries_before + 1);
    EXPECT_EQ(log.back().operation, "upgrade");
    const nlohmann::json c = nlohmann::json::parse(log.back().certificate);
    EXPECT_EQ(c.at("from_schema_version"), 1);
    EXPECT_EQ(c.at("to_schema_version"), kStoreSchemaVersion);
    EXPECT_EQ(c.at("screening_rows"), 1);
    const StoreVerification v = s.verify();
    EXPECT_TRUE(v.ok()) << (v.problems.empty() ? "" : v.problems[0]);
  }
  EXPECT_NE(testing::internal::GetCapturedStderr().find("upgraded from schema version 1"),
            std::string::npos);
  RawDb raw(path);
  EXPECT_EQ(raw.query_int("PRAGMA user_version"), kStoreSchemaVersion);
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM screening"), 1);
  Store again(path);  // the upgraded store opens seeded, and is not upgraded twice
  EXPECT_EQ(again.memory("m").state_sha256(), want);
  EXPECT_TRUE(again.last_restore("m").screening_used);
  EXPECT_EQ(static_cast<std::int64_t>(again.audit().size()), entries_before + 1);
  again.forget_record("m", 9);
  EXPECT_TRUE(again.verify().ok());
}

}  // namespace
}  // namespace svattn
