// The audited memory store: persistence, exact erasure, erasure at the byte level, suspend/resume,
// the audit chain and its tamper detection, and bad arguments (the backend-independent ones on
// every backend).
#include <gtest/gtest.h>

#include <set>

#include "backend_test_util.h"
#include "svattn/batch_solver.h"

namespace svattn {
namespace {

using store_test::add_records;
using store_test::patterns_of;
using store_test::random_keys;
using store_test::rbf_settings;
using store_test::RawDb;
using store_test::scan_store_files;
using store_test::TempDir;

constexpr int kDim = 6;
constexpr int kPerRecord = 24;

// Store operations on every backend (backend_test_util.h); the SQLite-file tests (byte scans of
// the file, its -wal, overflow pages) and the audit tampering below stay TEST()s, and the
// operations of test_store_pg.cpp's StoreBackends (reopen, erasure hashes, two objects, the audit
// chain, error types, locking) run on every backend too.
class StoreOps : public store_test::StoreOnBackends {};

TEST(StoreTokenId, LayoutOrdersByRecordThenPosition) {
  EXPECT_EQ(store_token_id(0, 0), 0);
  EXPECT_EQ(store_token_id(1, 0), TokenId{1} << 23);
  EXPECT_EQ(store_token_id(3, 5), (TokenId{3} << 23) | 5);
  EXPECT_LT(store_token_id(2, kMaxPosition), store_token_id(3, 0));
  EXPECT_EQ(record_of(store_token_id(kMaxRecordId, kMaxPosition)), kMaxRecordId);
  EXPECT_EQ(position_of(store_token_id(kMaxRecordId, kMaxPosition)), kMaxPosition);
  EXPECT_GT(store_token_id(kMaxRecordId, kMaxPosition), 0);  // fits a positive int64
  EXPECT_THROW(store_token_id(-1, 0), InvalidArgument);
  EXPECT_THROW(store_token_id(kMaxRecordId + 1, 0), InvalidArgument);
  EXPECT_THROW(store_token_id(0, kMaxPosition + 1), InvalidArgument);
}

TEST(StoreSettings, JsonRoundTripIsExact) {
  MemorySettings s = rbf_settings(0.0123456789012345678, 0.7310585786300049);
  s.problem.ridge = 3.3e-7;
  s.mode = MemoryMode::kBounded;
  s.token_budget = 77;
  s.tolerances.kkt_tol = 1.234567e-10;
  const MemorySettings t = memory_settings_from_json(memory_settings_to_json(s));
  EXPECT_EQ(t.problem.C, s.problem.C);
  EXPECT_EQ(t.problem.kernel.bandwidth, s.problem.kernel.bandwidth);
  EXPECT_EQ(t.problem.ridge, s.problem.ridge);
  EXPECT_EQ(t.mode, s.mode);
  EXPECT_EQ(t.token_budget, s.token_budget);
  EXPECT_EQ(t.tolerances.kkt_tol, s.tolerances.kkt_tol);
  nlohmann::json bad = memory_settings_to_json(s);
  bad.erase("C");
  EXPECT_THROW(memory_settings_from_json(bad), FormatError);
}

TEST(Store, ErasedBytesAreGoneFromEveryFile) {
  TempDir dir;
  const std::string path = dir.file("s.db");
  StoreOptions o;
  o.create = true;
  o.encrypt = false;  // the plaintext store's erasure: the scan's control finds the bytes first
  o.certificate_check = true;
  Store store(path, o);
  store.create_memory("m", rbf_settings(0.05), kDim, kDim);
  add_records(store, "m", {0, 1, 2, 3, 4, 5, 6, 7}, kPerRecord, kDim);
  const RowMatrix erased = random_keys(kPerRecord, kDim, 1000 + 3);  // record 3's keys (= values)
  const auto pats = patterns_of(erased);
  // Control: the scanner finds them before the erasure (in the db or its WAL).
  const auto before = scan_store_files(path, pats);
  EXPECT_EQ(before.fp64_found, pats.fp64.size());
  // Control for the fp32 scan: the same patterns are found in a buffer that holds fp32 copies.
  {
    std::vector<float> f32(erased.data(), erased.data() + erased.size());
    std::vector<std::uint8_t> buf(reinterpret_cast<const std::uint8_t*>(f32.data()),
                                  reinterpret_cast<const std::uint8_t*>(f32.data() + f32.size()));
    std::size_t found = 0;
    for (const auto& p : pats.fp32_pairs) found += store_test::count_occurrences(buf, p.data(), 8) > 0;
    EXPECT_EQ(found, pats.fp32_pairs.size());
  }
  const ForgetResult f = store.forget_record("m", 3);
  ASSERT_TRUE(f.wal_truncated);
  const auto after = scan_store_files(path, pats);
  EXPECT_GT(after.bytes_scanned, 0u);
  EXPECT_EQ(after.fp64_found, 0u);
  EXPECT_EQ(after.fp32_found, 0u);
  // The audit entry of the erasure carries no key bytes and no key text.
  const AuditEntry last = store.audit().back();
  EXPECT_EQ(last.operation, "forget");
  for (Eigen::Index i = 0; i < erased.rows(); ++i) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.12g", erased(i, 0));
    EXPECT_EQ(last.certificate.find(buf), std::string::npos) << buf;
  }
  // Other records' bytes are still there (the scan is not blind).
  const auto kept = scan_store_files(path, patterns_of(random_keys(kPerRecord, kDim, 1000 + 4)));
  EXPECT_EQ(kept.fp64_found, static_cast<std::size_t>(kPerRecord * kDim));
  // More operations after the erasure do not bring them back, nor does closing.
  add_records(store, "m", {8, 9}, kPerRecord, kDim);
  store.forget_record("m", 8);
  store = Store(path);
  EXPECT_EQ(scan_store_files(path, pats).fp64_found, 0u);
}

// A Store keeps its compiled SQLite statements per connection (db/sqlite.cpp, StatementPool).
// Another connection's schema change (an index created, then dropped) makes SQLite recompile them
// on their next step: the same operations then give the same state hash and token ids as on a
// store whose schema never changed, and verify passes.
TEST(Store, PooledStatementsRecompileAfterAnotherConnectionChangesTheSchema) {
  TempDir dir;
  StoreOptions o;
  o.create = true;
  const auto run = [&](const std::string& path, bool change_schema) {
    Store s(path, o);
    s.create_memory("m", rbf_settings(0.05), kDim, kDim);
    add_records(s, "m", {0, 1, 2, 3, 4, 5}, kPerRecord, kDim);
    s.forget_record("m", 1);  // every statement of an add and a forget is in the pool now
    RawDb raw(path);
    if (change_schema) EXPECT_EQ(raw.exec("CREATE INDEX test_extra ON tokens(record)"), SQLITE_OK);
    add_records(s, "m", {6}, kPerRecord, kDim);
    s.forget_record("m", 2);
    if (change_schema) EXPECT_EQ(raw.exec("DROP INDEX test_extra"), SQLITE_OK);
    s.forget_record("m", 3);
    add_records(s, "m", {7}, kPerRecord, kDim);
    const StoreVerification v = s.verify();
    EXPECT_TRUE(v.integrity_ok && v.chain_ok) << (v.problems.empty() ? "" : v.problems[0]);
    return std::make_pair(s.memory_info("m").state_sha256, s.memory("m").state().ids);
  };
  const auto changed = run(dir.file("changed.db"), true);
  const auto same = run(dir.file("same.db"), false);
  EXPECT_EQ(changed.first, same.first);
  EXPECT_EQ(changed.second, same.second);
  const std::string extra = "SELECT count(*) FROM sqlite_master WHERE name = 'test_extra'";
  EXPECT_EQ(RawDb(dir.file("changed.db")).query_int(extra), 0);
}

TEST(Store, ErasedBytesAreGoneWhenRowsSpillToOverflowPages) {
  // 300-dimensional keys and values: 4800-byte rows, larger than a 4 KiB page.
  constexpr int kWide = 300;
  TempDir dir;
  const std::string path = dir.file("s.db");
  StoreOptions o;
  o.create = true;
  o.encrypt = false;  // the plaintext store's erasure: the scan's control finds the bytes first
  Store store(path, o);
  store.create_memory("m", rbf_settings(0.1, 8.0), kWide, kWide);
  add_records(store, "m", {0, 1, 2, 3, 4}, 8, kWide);
  const auto pats = patterns_of(random_keys(8, kWide, 1000 + 2));
  EXPECT_EQ(scan_store_files(path, pats).fp64_found, pats.fp64.size());
  ASSERT_TRUE(store.forget_record("m", 2).wal_truncated);
  const auto after = scan_store_files(path, pats);
  EXPECT_EQ(after.fp64_found, 0u);
  EXPECT_EQ(after.fp32_found, 0u);
  EXPECT_TRUE(store.verify().ok());
}

TEST_P(StoreOps, SuspendKeepsDataAndResumeRestoresTheState) {
  const std::string path = stores().at_without_keys("s");
  StoreOptions o;
  o.create = true;
  o.encrypt = false;  // plaintext: the scan below sees the suspended record's bytes kept
  Store store(path, o);
  Store other(stores().at_without_keys("other"), o);
  store.create_memory("m", rbf_settings(0.05), kDim, kDim);
  other.create_memory("m", rbf_settings(0.05), kDim, kDim);
  add_records(store, "m", {0, 1, 2, 3}, kPerRecord, kDim);
  add_records(other, "m", {0, 1, 3}, kPerRecord, kDim);
  const std::string full = store.memory("m").state_sha256();
  const OpResult s = store.suspend_record("m", 2);
  EXPECT_EQ(s.entry.operation, "suspend");
  EXPECT_EQ(store.memory("m").state_sha256(), other.memory("m").state_sha256());
  EXPECT_EQ(store.memory_info("m").suspended_records, 1);
  EXPECT_EQ(store.memory_info("m").stored_tokens, 4 * kPerRecord);
  // Suspended data stays in the file (a byte scan of the SQLite file; rows on PostgreSQL).
  const auto pats = patterns_of(random_keys(kPerRecord, kDim, 1000 + 2));
  if (!pg()) EXPECT_EQ(scan_store_files(path, pats).fp64_found, pats.fp64.size());
  EXPECT_EQ(stores().raw_int("s", "SELECT count(*) FROM tokens WHERE record = 2"), kPerRecord);
  EXPECT_THROW(store.suspend_record("m", 2), InvalidArgument);
  EXPECT_TRUE(store.verify().ok());
  store = Store(path);  // persists across reopening
  EXPECT_EQ(store.memory("m").state_sha256(), other.memory("m").state_sha256());
  store.resume_record("m", 2);
  EXPECT_EQ(store.memory("m").state_sha256(), full);
  EXPECT_THROW(store.resume_record("m", 2), InvalidArgument);
  // Forgetting a suspended record erases it without changing the memory.
  store.suspend_record("m", 1);
  const std::string without1 = store.memory("m").state_sha256();
  const ForgetResult f = store.forget_record("m", 1);
  EXPECT_EQ(f.entry.state_after, without1);
  if (!pg()) {
    EXPECT_EQ(scan_store_files(path, patterns_of(random_keys(kPerRecord, kDim, 1001))).fp64_found,
              0u);
  }
  EXPECT_EQ(stores().raw_int("s", "SELECT count(*) FROM tokens WHERE record = 1"), 0);
  const auto ops = store.audit();
  std::vector<std::string> names;
  for (const auto& e : ops) names.push_back(e.operation);
  EXPECT_EQ(names, (std::vector<std::string>{"create", "add", "add", "add", "add", "suspend",
                                             "resume", "suspend", "forget"}));
  EXPECT_TRUE(store.verify().ok());
}

TEST_P(StoreOps, BadArgumentsLeaveStoreAndObjectUnchanged) {
  const std::string path = stores().at("s");
  StoreOptions o;
  o.create = true;
  Store store(path, o);
  store.create_memory("m", rbf_settings(0.05), kDim, 2);
  const RowMatrix vals = random_keys(kPerRecord, 2, 5);
  store.add_record("m", 1, random_keys(kPerRecord, kDim, 1), &vals);
  const std::string hash = store.memory("m").state_sha256();
  const auto n_audit = store.audit().size();
  EXPECT_THROW(store.create_memory("m", rbf_settings(0.05), kDim, kDim), AlreadyExists);
  EXPECT_THROW(store.create_memory("", rbf_settings(0.05), kDim, kDim), InvalidArgument);
  EXPECT_THROW(store.create_memory("z", rbf_settings(0.05), 0, kDim), InvalidArgument);
  EXPECT_THROW(store.create_memory("z", rbf_settings(-1.0), kDim, kDim), InvalidArgument);
  EXPECT_THROW(store.add_record("nope", 2, random_keys(3, kDim, 2), &vals), NotFound);
  EXPECT_THROW(store.add_record("m", 1, random_keys(kPerRecord, kDim, 2), &vals), AlreadyExists);
  EXPECT_THROW(store.add_record("m", 2, random_keys(kPerRecord, kDim + 1, 2), &vals),
               InvalidArgument);
  EXPECT_THROW(store.add_record("m", 2, random_keys(kPerRecord, kDim, 2)), InvalidArgument)
      << "values default to keys: value dimension 6 != 2";
  const RowMatrix short_vals = random_keys(3, 2, 5);
  EXPECT_THROW(store.add_record("m", 2, random_keys(kPerRecord, kDim, 2), &short_vals),
               InvalidArgument);
  RowMatrix nan_keys = random_keys(kPerRecord, kDim, 2);
  nan_keys(3, 1) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_ANY_THROW(store.add_record("m", 2, nan_keys, &vals));
  EXPECT_THROW(store.add_record("m", -1, random_keys(kPerRecord, kDim, 2), &vals), InvalidArgument);
  EXPECT_THROW(store.add_record("m", kMaxRecordId + 1, random_keys(kPerRecord, kDim, 2), &vals),
               InvalidArgument);
  EXPECT_THROW(store.forget_record("m", 9), NotFound);
  EXPECT_THROW(store.forget_record("nope", 1), NotFound);
  EXPECT_THROW(store.suspend_record("m", 9), NotFound);
  EXPECT_THROW(store.resume_record("m", 1), InvalidArgument);
  EXPECT_THROW(store.query("m", random_keys(2, kDim + 2, 3)), InvalidArgument);
  EXPECT_THROW(store.memory("nope"), NotFound);
  EXPECT_EQ(store.memory("m").state_sha256(), hash);
  EXPECT_EQ(store.audit().size(), n_audit);
  EXPECT_EQ(store.memory_names().size(), 1u);
  EXPECT_TRUE(store.verify().ok());
}

TEST_P(StoreOps, BoundedModeKeepsOnlyRetainedTokens) {
  const std::string path = stores().at("s");
  StoreOptions o;
  o.create = true;
  Store store(path, o);
  MemorySettings s = rbf_settings(0.05);
  s.mode = MemoryMode::kBounded;
  store.create_memory("m", s, kDim, kDim);
  add_records(store, "m", {0, 1, 2, 3}, kPerRecord, kDim);
  const MemoryInfo info = store.memory_info("m");
  EXPECT_EQ(info.tokens, store.memory("m").size());
  EXPECT_LT(info.tokens, 4 * kPerRecord) << "bounded mode evicts reserve tokens";
  EXPECT_TRUE(store.verify().ok());
  const ForgetResult f = store.forget_record("m", 1);
  EXPECT_TRUE(store.verify().ok());
  store = Store(path);
  EXPECT_EQ(store.memory("m").state_sha256(), f.entry.state_after);
  const auto audit = store.audit();
  EXPECT_TRUE(nlohmann::json::parse(audit[1].certificate).contains("evicted_on_arrival"));
}

TEST_P(StoreOps, LinearAndPolyKernelsPersist) {
  StoreOptions o;
  o.create = true;
  Store store(stores().at("s"), o);
  MemorySettings lin;
  lin.problem.kernel.type = KernelType::kLinear;
  lin.problem.C = 0.1;
  MemorySettings poly;
  poly.problem.kernel.type = KernelType::kPoly;
  poly.problem.kernel.degree = 3;
  poly.problem.kernel.coef0 = 0.5;
  poly.problem.C = 0.1;
  store.create_memory("lin", lin, kDim, kDim);
  store.create_memory("poly", poly, kDim, kDim);
  add_records(store, "lin", {0, 1, 2}, kPerRecord, kDim);
  add_records(store, "poly", {0, 1, 2}, kPerRecord, kDim);
  store.forget_record("lin", 1);
  store.forget_record("poly", 0);
  store = Store(stores().at("s"));
  const StoreVerification v = store.verify();
  EXPECT_TRUE(v.ok()) << verification_to_json(v).dump(2);
  EXPECT_EQ(v.memories.size(), 2u);
}

SVATTN_ON_ALL_BACKENDS(StoreOps);

// ------------------------------------------------------------------------------- audit chain

class StoreAuditTamper : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("base.db");
    StoreOptions o;
    o.create = true;
    Store store(path_, o);
    store.create_memory("m", rbf_settings(0.05), kDim, kDim);
    add_records(store, "m", {0, 1, 2, 3}, 12, kDim);
    store.suspend_record("m", 2);
    store.forget_record("m", 1);
    ASSERT_TRUE(store.verify().ok());
    entries_ = static_cast<int>(store.audit().size());
  }
  /// A copy of the store with `sql` applied from outside (append-only triggers dropped first).
  std::string tampered(const std::string& name, const std::string& sql) {
    const std::string p = dir_.file(name);
    store_test::write_bytes(p, store_test::read_bytes(path_));
    store_test::write_bytes(p + ".keys", store_test::read_bytes(path_ + ".keys"));
    RawDb db(p);
    EXPECT_EQ(db.exec("DROP TRIGGER audit_no_update; DROP TRIGGER audit_no_delete;"), SQLITE_OK);
    EXPECT_EQ(db.exec(sql), SQLITE_OK) << sql << ": " << sqlite3_errmsg(db.handle());
    return p;
  }
  TempDir dir_;
  std::string path_;
  int entries_ = 0;
};

TEST_F(StoreAuditTamper, TriggersRefuseUpdatesAndDeletes) {
  RawDb db(path_);
  EXPECT_NE(db.exec("UPDATE audit SET token_count = 5 WHERE seq = 2"), SQLITE_OK);
  EXPECT_NE(db.exec("DELETE FROM audit WHERE seq = 2"), SQLITE_OK);
}

TEST_F(StoreAuditTamper, EditingAnyFieldOfAnyRowIsDetected) {
  const char* edits[] = {"token_count = token_count + 1", "operation = operation || 'x'",
                         "memory = 'x'",                  "record = record + 1",
                         "time_utc = '2000-01-01T00:00:00.000Z'",
                         "certificate = '{}'",             "state_after = state_before",
                         "prev_hash = entry_hash"};
  int k = 0;
  for (int seq = 1; seq <= entries_; ++seq) {
    const bool shred = [&] {
      RawDb raw(path_);
      return raw.query_int("SELECT count(*) FROM audit WHERE operation = 'shred' AND seq = " +
                           std::to_string(seq)) == 1;
    }();
    for (const char* edit : edits) {
      // A store-level shred entry has empty states: this edit changes nothing.
      if (shred && std::string(edit) == "state_after = state_before") continue;
      const std::string p = tampered("t" + std::to_string(k++) + ".db",
                                     "UPDATE audit SET " + std::string(edit) +
                                         " WHERE seq = " + std::to_string(seq));
      const StoreVerification v = Store(p).verify();
      EXPECT_FALSE(v.ok()) << "seq " << seq << ": " << edit;
      EXPECT_FALSE(v.chain_ok) << "seq " << seq << ": " << edit;
    }
  }
}

TEST_F(StoreAuditTamper, DeletedReorderedAndForgedRowsAreDetected) {
  // Last row deleted (the head anchor catches it).
  EXPECT_FALSE(Store(tampered("del_last.db", "DELETE FROM audit WHERE seq = " +
                                                 std::to_string(entries_)))
                   .verify()
                   .ok());
  // A middle row deleted.
  EXPECT_FALSE(Store(tampered("del_mid.db", "DELETE FROM audit WHERE seq = 3")).verify().ok());
  // Two rows swapped (reordered).
  EXPECT_FALSE(Store(tampered("swap.db",
                              "UPDATE audit SET seq = -1 WHERE seq = 2; "
                              "UPDATE audit SET seq = 2 WHERE seq = 3; "
                              "UPDATE audit SET seq = 3 WHERE seq = -1;"))
                   .verify()
                   .ok());
  // Head anchor moved back together with deleting the last row: the memory's stored state is no
  // longer the last state in the log.
  const std::string both =
      tampered("del_anchor.db",
               "DELETE FROM audit WHERE seq = " + std::to_string(entries_) +
                   "; UPDATE meta SET value = (SELECT entry_hash FROM audit ORDER BY seq DESC "
                   "LIMIT 1) WHERE key = 'audit_head_hash'; UPDATE meta SET value = '" +
                   std::to_string(entries_ - 1) + "' WHERE key = 'audit_head_seq';");
  const StoreVerification v = Store(both).verify();
  EXPECT_TRUE(v.chain_ok);
  EXPECT_FALSE(v.ok());
  // Triggers dropped without any other change are reported too.
  EXPECT_FALSE(Store(tampered("notrig.db", "SELECT 1")).verify().ok());
}

TEST_F(StoreAuditTamper, TamperedStateOrTokensAreDetected) {
  // A coefficient changed.
  const StoreVerification a =
      Store(tampered("alpha.db", "UPDATE support SET alpha = alpha * 1.0000001 WHERE token_id = "
                                 "(SELECT min(token_id) FROM support)"))
          .verify();
  EXPECT_FALSE(a.ok());
  // A key byte changed: the stored state no longer matches a re-solve of the tokens.
  const std::string p = tampered("key.db",
                                 "UPDATE tokens SET key = zeroblob(length(key)) WHERE rowid = "
                                 "(SELECT min(rowid) FROM tokens)");
  const StoreVerification k = Store(p).verify();
  EXPECT_FALSE(k.ok());
  ASSERT_EQ(k.memories.size(), 1u);
  EXPECT_FALSE(k.memories[0].ok());
  // ... and using that memory raises a typed error rather than silently serving it.
  Store s(p);
  EXPECT_THROW(s.memory("m"), FormatError);
  EXPECT_THROW(s.add_record("m", 50, random_keys(4, kDim, 50)), FormatError);
  // The stored hash changed.
  EXPECT_FALSE(Store(tampered("hash.db", "UPDATE memories SET state_sha256 = '" +
                                             std::string(64, 'a') + "'"))
                   .verify()
                   .ok());
}

}  // namespace
}  // namespace svattn
