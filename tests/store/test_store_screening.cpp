// Persisted screening bounds and the schema-1 upgrade (issue 19 item 1, docs/store.md "Persisted
// screening"): a reopened memory is restored from its bounds without re-deriving every gradient; a
// bound that fails its check is refused (never used) and said so; a version-1 store is upgraded in
// place, in one transaction logged in the audit chain, and keeps its hash.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "store_test_util.h"

namespace svattn {
namespace {

using store_test::add_records;
using store_test::RawDb;
using store_test::rbf_settings;
using store_test::TempDir;

constexpr int kDim = 4;

std::vector<std::int64_t> ids(int n) {
  std::vector<std::int64_t> v;
  for (int i = 0; i < n; ++i) v.push_back(i);
  return v;
}

// A store with one memory of 60 records x 4 tokens (optimal, out of warm-up, with reserve tokens).
// Plaintext (encrypt = false) where a test edits token bytes in the file as plaintext doubles.
std::string make_store(const TempDir& dir, bool encrypt = true) {
  const std::string path = dir.file("s.db");
  StoreOptions o;
  o.create = true;
  o.encrypt = encrypt;
  Store s(path, o);
  s.create_memory("m", rbf_settings(0.05), kDim, kDim);
  add_records(s, "m", ids(60), 4, kDim);
  s.forget_record("m", 7);
  return path;
}

// The checksum of a screening row as docs/store.md "Persisted screening" defines it.
std::string documented_checksum(std::int64_t memory_id, const std::string& state_sha,
                                const std::vector<double>& bounds) {
  const std::string head = "svattn-screening-v1\n" + std::to_string(memory_id) + "\n" + state_sha +
                           "\n" + std::to_string(bounds.size()) + "\n";
  std::vector<std::uint8_t> bytes(head.begin(), head.end());
  const auto* p = reinterpret_cast<const std::uint8_t*>(bounds.data());
  bytes.insert(bytes.end(), p, p + bounds.size() * sizeof(double));
  return sha256_hex(bytes);
}

std::vector<double> read_bounds(RawDb& db) {
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(db.handle(), "SELECT bounds FROM screening", -1, &q, nullptr);
  std::vector<double> b;
  if (sqlite3_step(q) == SQLITE_ROW) {
    b.resize(static_cast<std::size_t>(sqlite3_column_bytes(q, 0)) / sizeof(double));
    std::memcpy(b.data(), sqlite3_column_blob(q, 0), b.size() * sizeof(double));
  }
  sqlite3_finalize(q);
  return b;
}

void write_bounds(RawDb& db, const std::vector<double>& b, const std::string* checksum) {
  const std::string sql = checksum != nullptr ? "UPDATE screening SET bounds = ?1, checksum = ?2"
                                              : "UPDATE screening SET bounds = ?1";
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &q, nullptr);
  sqlite3_bind_blob(q, 1, b.data(), static_cast<int>(b.size() * sizeof(double)), SQLITE_TRANSIENT);
  if (checksum != nullptr) sqlite3_bind_text(q, 2, checksum->c_str(), -1, SQLITE_TRANSIENT);
  ASSERT_EQ(sqlite3_step(q), SQLITE_DONE);
  sqlite3_finalize(q);
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

TEST(StoreScreening, TamperedBoundIsDetectedOnOpenAndRederived) {
  TempDir dir;
  const std::string path = make_store(dir);
  const std::string want = Store(path).memory_info("m").state_sha256;
  {
    RawDb raw(path);
    std::vector<double> b = read_bounds(raw);
    ASSERT_FALSE(b.empty());
    for (double& x : b) x = 1e6;  // would skip every reserve check if it were used
    write_bounds(raw, b, nullptr);
  }
  testing::internal::CaptureStderr();
  Store s(path);
  EXPECT_EQ(s.memory("m").state_sha256(), want);
  const std::string err = testing::internal::GetCapturedStderr();
  const RestoreReport r = s.last_restore("m");
  EXPECT_FALSE(r.screening_used);
  EXPECT_EQ(r.screening_problem, "checksum mismatch");
  EXPECT_NE(err.find("persisted screening bounds fail their check"), std::string::npos) << err;
  const StoreVerification v = s.verify();
  EXPECT_FALSE(v.ok());
  bool named = false;
  for (const std::string& p : v.problems) named = named || p.find("checksum mismatch") != p.npos;
  EXPECT_TRUE(named);
}

TEST(StoreScreening, ForgedBoundWithAValidChecksumIsCaughtByVerify) {
  TempDir dir;
  const std::string path = make_store(dir);
  const MemoryInfo info = Store(path).memory_info("m");
  {
    RawDb raw(path);
    std::vector<double> b = read_bounds(raw);
    const State st = Store(path).stored_state("m");
    std::size_t reserve = 0;
    while (reserve < st.alpha.size() && st.alpha[reserve] != 0.0) ++reserve;
    ASSERT_LT(reserve, st.alpha.size());
    b[reserve] = 1e6;
    const std::string sum =
        documented_checksum(raw.query_int("SELECT id FROM memories"), info.state_sha256, b);
    write_bounds(raw, b, &sum);
  }
  Store s(path);
  EXPECT_EQ(s.memory("m").state_sha256(), info.state_sha256);
  EXPECT_TRUE(s.last_restore("m").screening_used);  // the checksum matches: the bound is read
  const StoreVerification v = s.verify();
  bool named = false;
  for (const std::string& p : v.problems) named = named || p.find("exceeds its gradient") != p.npos;
  EXPECT_TRUE(named) << (v.problems.empty() ? "(no problem)" : v.problems[0]);
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
