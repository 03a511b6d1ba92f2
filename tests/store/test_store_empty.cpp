// The store on memories with 0 or 1 active tokens: fresh, fully erased and fully
// suspended memories are ordinary memories whose state, hash, certificate and verification are
// defined (docs/store.md "Empty memories").
#include <gtest/gtest.h>

#include "store_test_util.h"

namespace svattn {
namespace {

using store_test::add_records;
using store_test::random_keys;
using store_test::rbf_settings;
using store_test::TempDir;

constexpr int kDim = 4;

Store open_new(const TempDir& dir) {
  StoreOptions o;
  o.create = true;
  return Store(dir.file("s.db"), o);
}

TEST(StoreEmpty, FreshMemoryVerifiesAndQueries) {
  TempDir dir;
  Store s = open_new(dir);
  s.create_memory("m", rbf_settings(0.05), kDim, kDim);
  const StoreVerification v = s.verify();
  EXPECT_TRUE(v.ok()) << (v.problems.empty() ? "" : v.problems[0]);
  ASSERT_EQ(v.memories.size(), 1u);
  EXPECT_EQ(v.memories[0].tokens, 0);
  EXPECT_EQ(s.memory("m").size(), 0);
  const RowMatrix out = s.query("m", random_keys(2, kDim, 1));
  EXPECT_TRUE(std::isnan(out(0, 0)));
  EXPECT_TRUE(s.records("m").empty());
}

TEST(StoreEmpty, ErasingTheLastRecordGivesTheFreshHash) {
  TempDir dir;
  Store s = open_new(dir);
  s.create_memory("m", rbf_settings(0.05), kDim, kDim);
  s.create_memory("fresh", rbf_settings(0.05), kDim, kDim);
  add_records(s, "m", {0, 1}, 24, kDim);
  s.forget_record("m", 0);
  const ForgetResult last = s.forget_record("m", 1);
  EXPECT_EQ(last.certificate.after.n, 0u);
  EXPECT_TRUE(last.certificate.verify.ok());
  EXPECT_EQ(last.entry.state_after, s.memory_info("fresh").state_sha256);
  EXPECT_EQ(s.memory_info("m").state_sha256, s.memory_info("fresh").state_sha256);
  EXPECT_TRUE(s.verify().ok());
  // Reopen: the empty memory restores, and takes records again.
  Store again(dir.file("s.db"));
  EXPECT_EQ(again.memory("m").size(), 0);
  again.add_record("m", 5, random_keys(3, kDim, 5));
  EXPECT_EQ(again.memory("m").size(), 3);
  EXPECT_TRUE(again.verify().ok());
}

TEST(StoreEmpty, SingleTokenRecordAndFullySuspendedMemory) {
  TempDir dir;
  Store s = open_new(dir);
  s.create_memory("m", rbf_settings(0.05), kDim, kDim);
  s.add_record("m", 0, random_keys(1, kDim, 7));
  EXPECT_EQ(s.memory("m").size(), 1);
  EXPECT_TRUE(s.verify().ok());
  s.suspend_record("m", 0);
  EXPECT_EQ(s.memory("m").size(), 0);
  const StoreVerification v = s.verify();
  EXPECT_TRUE(v.ok()) << (v.problems.empty() ? "" : v.problems[0]);
  s.resume_record("m", 0);
  EXPECT_TRUE(s.verify().ok());
  const ForgetResult f = s.forget_record("m", 0);
  EXPECT_TRUE(f.certificate.verify.ok());
  EXPECT_TRUE(s.verify().ok());
}

TEST(StoreEmpty, ForgettingASuspendedRecordCertifiesByReference) {
  TempDir dir;
  Store s = open_new(dir);
  s.create_memory("m", rbf_settings(0.05), kDim, kDim);
  add_records(s, "m", {0, 1}, 24, kDim);
  s.suspend_record("m", 1);
  const ForgetResult f = s.forget_record("m", 1);  // nothing leaves the memory
  EXPECT_EQ(f.certificate.verify.argument, CertificateArgument::kReference);
  EXPECT_TRUE(f.certificate.verify.ok());
  EXPECT_EQ(f.entry.state_before, f.entry.state_after);
}

}  // namespace
}  // namespace svattn

namespace svattn {
namespace {

// Queries read the stored support (no restore); they must equal the restored memory's readouts bit
// for bit, and a tampered stored coefficient is never used silently.
TEST(StoreQuery, StoredSupportReadoutsEqualTheMemoryAndTamperingIsNotUsed) {
  TempDir dir;
  {
    Store s = open_new(dir);
    s.create_memory("m", rbf_settings(0.05), kDim, kDim);
    add_records(s, "m", {0, 1, 2, 3}, 24, kDim);
  }
  const RowMatrix q = random_keys(5, kDim, 99);
  Store fresh(dir.file("s.db"));
  const RowMatrix a = fresh.query("m", q);
  const std::vector<double> fa = fresh.decision("m", q);
  const Memory& m = fresh.memory("m");
  for (Eigen::Index i = 0; i < q.rows(); ++i) {
    const Eigen::VectorXd qi = q.row(i).transpose();
    const Eigen::VectorXd o = m.readout(qi);
    for (Eigen::Index k = 0; k < o.size(); ++k) EXPECT_EQ(a(i, k), o[k]);
    EXPECT_EQ(fa[static_cast<std::size_t>(i)], m.decision(qi));
  }
  {
    store_test::RawDb db(dir.file("s.db"));
    ASSERT_EQ(db.exec("UPDATE support SET alpha = alpha * 1.0000001 WHERE token_id = (SELECT "
                      "min(token_id) FROM support WHERE part = 1)"),
              SQLITE_OK);
  }
  // The recomputed hash no longer matches: the query re-derives the state from the tokens (and
  // says so on stderr), so the readouts are the untampered ones.
  Store tampered(dir.file("s.db"));
  const RowMatrix b = tampered.query("m", q);
  for (Eigen::Index i = 0; i < q.rows(); ++i)
    for (Eigen::Index k = 0; k < a.cols(); ++k) EXPECT_EQ(b(i, k), a(i, k));
  EXPECT_FALSE(tampered.verify().ok());  // verify still reports the tampered row
}

}  // namespace
}  // namespace svattn
