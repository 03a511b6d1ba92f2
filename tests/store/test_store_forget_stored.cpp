// Operations without a restore (docs/store.md "Operations without a restore"): forgetting a
// reserve-only record and adding a record that stays in reserve, from the stored rows alone. The
// certificate (or the add's entry) says so, and the file after is the file the ordinary path
// (restore, path, certificate) writes -- same state, same hash, a batch solve agrees, verify
// passes and a later restore uses the updated screening bounds. A record holding (or entering) the
// support, or persisted digests that do not check, take the ordinary path.
#include <gtest/gtest.h>

#include <map>

#include "store_test_util.h"
#include "svattn/batch_solver.h"

namespace svattn {
namespace {

using store_test::add_records;
using store_test::copy_store;
using store_test::RawDb;
using store_test::rbf_settings;
using store_test::TempDir;

constexpr int kDim = 4;

std::string make_store(const TempDir& dir, bool encrypt) {
  const std::string path = dir.file("s.db");
  StoreOptions o;
  o.create = true;
  o.encrypt = encrypt;
  Store s(path, o);
  s.create_memory("m", rbf_settings(0.05), kDim, kDim);
  std::vector<std::int64_t> ids;
  for (int r = 0; r < 60; ++r) ids.push_back(r);
  add_records(s, "m", ids, 4, kDim);
  return path;
}

// Records whose tokens all have alpha = 0 in the stored state, and records holding support.
void classify(const State& st, std::vector<std::int64_t>& reserve_only,
              std::vector<std::int64_t>& support) {
  std::map<std::int64_t, bool> has;
  for (std::size_t t = 0; t < st.ids.size(); ++t)
    has[record_of(st.ids[t])] = has[record_of(st.ids[t])] || st.alpha[t] != 0.0;
  for (const auto& [r, h] : has) (h ? support : reserve_only).push_back(r);
}

ForgetResult forget_in_fresh_store(const std::string& path, std::int64_t record, bool stored) {
  StoreOptions o;
  o.without_restore = stored;
  Store s(path, o);
  return s.forget_record("m", record);
}

void expect_consistent(const std::string& path) {
  Store s(path);
  const StoreVerification v = s.verify();
  EXPECT_TRUE(v.ok()) << (v.problems.empty() ? "" : v.problems.front());
  testing::internal::CaptureStderr();
  const Memory& m = s.memory("m");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");  // no bound or state refused
  EXPECT_TRUE(s.last_restore("m").screening_used);
  BatchSettings bs;
  bs.problem = m.settings().problem;
  EXPECT_EQ(solve_batch(m.tokens(), bs).state.state_sha256, s.stored_state("m").state_sha256);
}

void run_equivalence(bool encrypt) {
  TempDir dir;
  const std::string a = make_store(dir, encrypt);
  const std::string b = dir.file("b.db");
  copy_store(a, b);
  std::vector<std::int64_t> reserve_only, support;
  {
    StoreOptions ro;
    ro.read_only = true;
    classify(Store(a, ro).stored_state("m"), reserve_only, support);
  }
  ASSERT_GE(reserve_only.size(), 3u);
  ASSERT_GE(support.size(), 1u);
  for (int k = 0; k < 3; ++k) {  // three in a row: each starts from the stored rows the last wrote
    const ForgetResult fa = forget_in_fresh_store(a, reserve_only[k], true);
    const ForgetResult fb = forget_in_fresh_store(b, reserve_only[k], false);
    EXPECT_TRUE(fa.certificate.verify.from_stored_rows);
    EXPECT_FALSE(fb.certificate.verify.from_stored_rows);
    EXPECT_TRUE(fa.certificate.verify.ok());
    EXPECT_EQ(fa.certificate.verify.argument, CertificateArgument::kReference);
    EXPECT_EQ(fa.entry.state_before, fb.entry.state_before);
    EXPECT_EQ(fa.entry.state_after, fb.entry.state_after);
    EXPECT_EQ(fa.certificate.after.n, fb.certificate.after.n);
    EXPECT_EQ(fa.certificate.after.margin, fb.certificate.after.margin);
    EXPECT_EQ(fa.certificate.removed_ids, fb.certificate.removed_ids);
    EXPECT_EQ(fa.memory_tokens, fb.memory_tokens);
    EXPECT_EQ(fa.memory_records, fb.memory_records);
    if (encrypt) {
      ASSERT_TRUE(fa.certificate.store.has_value());
      EXPECT_TRUE(fa.certificate.store->data_key_destroyed);
    }
    // The certificate round-trips with its new field.
    EXPECT_EQ(RemovalCertificate::from_json(fa.certificate.to_json()), fa.certificate);
  }
  // A record with a support token takes the ordinary path.
  EXPECT_FALSE(forget_in_fresh_store(a, support[0], true).certificate.verify.from_stored_rows);
  expect_consistent(a);
  expect_consistent(b);
}

OpResult add_in_fresh_store(const std::string& path, std::int64_t record, const RowMatrix& keys,
                            bool stored) {
  StoreOptions o;
  o.without_restore = stored;
  Store s(path, o);
  return s.add_record("m", record, keys);
}

bool added_without_restore(const OpResult& r) {
  return r.entry.certificate.find("\"without_restore\"") != std::string::npos;
}

void run_add_equivalence(bool encrypt) {
  TempDir dir;
  const std::string a = make_store(dir, encrypt);
  const std::string b = dir.file("b.db");
  copy_store(a, b);
  for (int k = 0; k < 3; ++k) {
    // Keys near the centre of the data (inside the description): reserve tokens.
    const RowMatrix keys = 0.05 * store_test::random_keys(4, kDim, 500 + k);
    const OpResult ra = add_in_fresh_store(a, 1000 + k, keys, true);
    const OpResult rb = add_in_fresh_store(b, 1000 + k, keys, false);
    EXPECT_TRUE(added_without_restore(ra)) << ra.entry.certificate;
    EXPECT_FALSE(added_without_restore(rb));
    EXPECT_EQ(ra.entry.state_before, rb.entry.state_before);
    EXPECT_EQ(ra.entry.state_after, rb.entry.state_after);
    EXPECT_EQ(ra.memory_tokens, rb.memory_tokens);
    EXPECT_EQ(ra.memory_records, rb.memory_records);
  }
  // Keys far outside the data enter the support: the ordinary path.
  const OpResult far = add_in_fresh_store(a, 2000, 50.0 * store_test::random_keys(4, kDim, 9), true);
  EXPECT_FALSE(added_without_restore(far));
  // A forget without a restore after adds without one, then everything re-derived.
  std::vector<std::int64_t> reserve_only, support;
  {
    StoreOptions ro;
    ro.read_only = true;
    classify(Store(a, ro).stored_state("m"), reserve_only, support);
  }
  EXPECT_TRUE(forget_in_fresh_store(a, reserve_only.at(0), true).certificate.verify.from_stored_rows);
  expect_consistent(a);
  expect_consistent(b);
}

}  // namespace

TEST(StoreAddStored, EncryptedReserveRecordAddEqualsTheOrdinaryPath) { run_add_equivalence(true); }

TEST(StoreAddStored, PlaintextReserveRecordAddEqualsTheOrdinaryPath) { run_add_equivalence(false); }

TEST(StoreForgetStored, EncryptedReserveOnlyForgetEqualsTheOrdinaryPath) { run_equivalence(true); }

TEST(StoreForgetStored, PlaintextReserveOnlyForgetEqualsTheOrdinaryPath) { run_equivalence(false); }

// The memory restored in this Store object takes the ordinary (in-RAM) path.
TEST(StoreForgetStored, AMemoryAtHandIsForgottenInRam) {
  TempDir dir;
  const std::string path = make_store(dir, true);
  Store s(path);
  std::vector<std::int64_t> reserve_only, support;
  classify(s.memory("m").state(), reserve_only, support);
  EXPECT_FALSE(s.forget_record("m", reserve_only.at(0)).certificate.verify.from_stored_rows);
}

// A record's persisted digests edited in the file: the state hash before no longer checks, so the
// forget restores (and succeeds); verify names the edit while it is there.
TEST(StoreForgetStored, EditedBucketDigestsAreNotUsed) {
  TempDir dir;
  const std::string path = make_store(dir, false);
  std::vector<std::int64_t> reserve_only, support;
  {
    StoreOptions ro;
    ro.read_only = true;
    classify(Store(path, ro).stored_state("m"), reserve_only, support);
  }
  {
    RawDb raw(path);
    ASSERT_EQ(raw.exec("UPDATE records SET buckets = zeroblob(44) WHERE record = " +
                       std::to_string(reserve_only.at(1))),
              SQLITE_OK);
  }
  {
    const StoreVerification v = Store(path).verify();
    ASSERT_FALSE(v.ok());
    EXPECT_NE(v.problems.front().find("bucket digests do not match"), std::string::npos)
        << v.problems.front();
  }
  const ForgetResult fr = forget_in_fresh_store(path, reserve_only.at(0), true);
  EXPECT_FALSE(fr.certificate.verify.from_stored_rows);
  EXPECT_TRUE(fr.certificate.verify.ok());
}

}  // namespace svattn
