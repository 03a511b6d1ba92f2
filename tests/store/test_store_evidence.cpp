// Cross-checks of the independent verifier (tools/svattn_verify, Python + numpy) against svattn's
// own verifier (verify_state, Store::verify) on every kind of state the store produces and on
// tampered exports, and the export's file contract (docs/audit.md).
#include "evidence_test_util.h"

namespace svattn {
namespace {

TEST_F(Evidence, ReserveOnlyForgetVerifiesIndependently) {
  fill(rbf_settings(0.1), 30, 3, 4);
  const ForgetResult r = forget(Forget::kReserveOnly);
  EXPECT_EQ(r.certificate.verify.argument, CertificateArgument::kReference);
  expect_all_verify(export_dir());
}

TEST_F(Evidence, SupportForgetVerifiesIndependently) {
  fill(rbf_settings(0.1), 30, 3, 4);
  const ForgetResult r = forget(Forget::kSupport);
  EXPECT_EQ(r.certificate.verify.argument, CertificateArgument::kFull);
  expect_all_verify(export_dir());
}

TEST_F(Evidence, SingleTokenRecordsVerifyIndependently) {
  fill(rbf_settings(0.08, 0.7), 40, 1, 3);
  forget(Forget::kSupport);
  expect_all_verify(export_dir());
}

TEST_F(Evidence, ImportedBatchAndItsRemovalVerifyIndependently) {
  fill(rbf_settings(0.05), 25, 6, 5, /*import=*/true);
  const ForgetResult r = forget(Forget::kSupport);
  EXPECT_EQ(r.certificate.removed_ids.size(), 6u);
  expect_all_verify(export_dir());
}

TEST_F(Evidence, EmptyMemoryVerifiesIndependently) {
  fill(rbf_settings(0.2), 4, 2, 3);
  forget(Forget::kAll);
  const std::string dir = export_dir();
  EXPECT_EQ(read_json(dir + "/state.json")["status"], "empty");
  expect_all_verify(dir);
}

TEST_F(Evidence, WarmUpVerifiesIndependently) {
  fill(rbf_settings(0.3), 2, 2, 3);  // n C = 1.2; after forgetting one record 0.6: warm-up
  forget(Forget::kSupport);
  const std::string dir = export_dir();
  EXPECT_EQ(read_json(dir + "/state.json")["status"], "warmup");
  expect_all_verify(dir);
}

TEST_F(Evidence, CAtLeastOneVerifiesIndependently) {
  fill(rbf_settings(1.5), 12, 2, 3);
  forget(Forget::kSupport);
  expect_all_verify(export_dir());
}

TEST_F(Evidence, BoundedModeVerifiesIndependently) {
  MemorySettings ms = rbf_settings(0.1);
  ms.mode = MemoryMode::kBounded;
  fill(ms, 30, 3, 4);
  forget(Forget::kSupport);
  const std::string dir = export_dir();
  EXPECT_LT(read_json(dir + "/manifest.json")["n"].get<int>(), 87);  // reserve tokens evicted
  expect_all_verify(dir);
}

TEST_F(Evidence, PolyKernelVerifiesIndependently) {
  MemorySettings ms = rbf_settings(0.1);
  ms.problem.kernel.type = KernelType::kPoly;
  ms.problem.kernel.degree = 3;
  ms.problem.kernel.coef0 = 1.0;
  fill(ms, 20, 2, 3);
  forget(Forget::kSupport);
  expect_all_verify(export_dir());
}

TEST_F(Evidence, RidgeZeroLinearKernelVerifiesWithUniquenessNotEstablished) {
  MemorySettings ms = rbf_settings(0.1);
  ms.problem.kernel.type = KernelType::kLinear;
  ms.problem.ridge = 0;
  fill(ms, 20, 2, 3);
  forget(Forget::kSupport);
  const std::string dir = export_dir();
  expect_all_verify(dir);
  const nlohmann::json out = nlohmann::json::parse(run_verifier(dir, tmp_).out);
  for (const auto& c : out["checks"])
    if (c["name"] == "uniqueness") EXPECT_EQ(c["result"], "not established");
}

// ------------------------------------------------------------------------------------- tampering

class EvidenceTamper : public Evidence {
 protected:
  std::string dir_;
  Loaded l_;
  nlohmann::json st_;
  void SetUp() override {
    fill(rbf_settings(0.1), 30, 3, 4);
    forget(Forget::kSupport);
    dir_ = export_dir();
    l_ = load_export(dir_);
    st_ = read_json(dir_ + "/state.json");
    ASSERT_EQ(run_verifier(dir_, tmp_, cert_).code, 0);
  }
  std::size_t first_with(int part) const {
    for (std::size_t t = 0; t < l_.part.size(); ++t)
      if (l_.part[t] == part) return t;
    ADD_FAILURE() << "no token in part " << part;
    return 0;
  }
  void forge_hash() {
    std::vector<int> order(l_.state.ids.size());
    for (std::size_t t = 0; t < order.size(); ++t) order[t] = static_cast<int>(t);
    l_.state.state_sha256 =
        canonical_sha256(l_.state.settings, l_.tokens, order, l_.state.alpha, l_.state.b);
  }
  // Both verifiers refuse the tampered export; the independent one names `expected` among its
  // failed checks.
  void expect_refused(const std::vector<std::string>& expected, bool with_cert = false) {
    save_export(dir_, l_, st_);
    const RunResult py = run_verifier(dir_, tmp_, with_cert ? cert_ : "");
    EXPECT_EQ(py.code, 1) << py.out << py.err;
    const std::vector<std::string> failed = failed_checks(py);
    for (const std::string& e : expected)
      EXPECT_NE(std::find(failed.begin(), failed.end(), e), failed.end()) << e << "\n" << py.out;
    const bool cpp_ok =
        cpp_verifies(dir_) &&
        (!with_cert || l_.state.state_sha256 == read_json(cert_)["after"]["state_sha256"]);
    EXPECT_FALSE(cpp_ok) << "svattn's verifier accepted what the independent one refused";
  }
};

TEST_F(EvidenceTamper, UntouchedRoundTripStillVerifies) {
  save_export(dir_, l_, st_);  // the rewrite itself changes nothing
  EXPECT_EQ(run_verifier(dir_, tmp_, cert_).code, 0);
  EXPECT_TRUE(cpp_verifies(dir_));
}

TEST_F(EvidenceTamper, AlphaMovedIsRefused) {
  const std::size_t a = first_with(1);
  const std::size_t r = first_with(0);
  l_.state.alpha[a] -= 1e-3;
  l_.state.alpha[r] += 1e-3;
  l_.part[r] = 1;
  expect_refused({"hash", "kkt_signs"});
}

TEST_F(EvidenceTamper, AlphaMovedWithAForgedHashIsRefusedByTheKktCheck) {
  const std::size_t a = first_with(1);
  const std::size_t r = first_with(0);
  l_.state.alpha[a] -= 1e-3;
  l_.state.alpha[r] += 1e-3;
  l_.part[r] = 1;
  forge_hash();
  expect_refused({"kkt_signs"});
}

TEST_F(EvidenceTamper, DroppedTokenIsRefused) {
  const std::size_t t = first_with(0);
  l_.state.ids.erase(l_.state.ids.begin() + static_cast<long>(t));
  l_.state.alpha.erase(l_.state.alpha.begin() + static_cast<long>(t));
  l_.part.erase(l_.part.begin() + static_cast<long>(t));
  l_.tokens.ids = l_.state.ids;
  const auto drop_row = [t](RowMatrix& m) {
    RowMatrix out(m.rows() - 1, m.cols());
    for (Eigen::Index r = 0, o = 0; r < m.rows(); ++r)
      if (r != static_cast<Eigen::Index>(t)) out.row(o++) = m.row(r);
    m = out;
  };
  drop_row(l_.tokens.keys);
  drop_row(l_.tokens.values);
  st_["reserve"] = st_["reserve"].get<int>() - 1;
  expect_refused({"hash"});
  forge_hash();  // a consistent state of another token set: only the certificate tells
  expect_refused({"certificate"}, /*with_cert=*/true);
}

TEST_F(EvidenceTamper, ChangedSettingsAreRefused) {
  nlohmann::json s = read_json(dir_ + "/settings.json");
  s["bandwidth"] = 1.5;
  write_json_file(dir_ + "/settings.json", s);
  l_.state.settings.kernel.bandwidth = 1.5;
  expect_refused({"hash"});
}

TEST_F(EvidenceTamper, SwappedHashIsRefused) {
  l_.state.state_sha256 = read_json(cert_)["before"]["state_sha256"].get<std::string>();
  expect_refused({"hash"});
}

TEST_F(EvidenceTamper, EditedFileWithoutManifestUpdateIsNamed) {
  nlohmann::json st = read_json(dir_ + "/state.json");
  st["b"] = st["b"].get<double>() + 1e-3;
  write_json_file(dir_ + "/state.json", st);
  const RunResult py = run_verifier(dir_, tmp_);
  EXPECT_EQ(py.code, 1);
  const auto failed = failed_checks(py);
  EXPECT_NE(std::find(failed.begin(), failed.end(), "files"), failed.end()) << py.out;
  EXPECT_NE(std::find(failed.begin(), failed.end(), "kkt_signs"), failed.end()) << py.out;
}

TEST_F(EvidenceTamper, MissingOrMalformedFilesAreBadInput) {
  fs::remove(dir_ + "/alpha.npy");
  const RunResult py = run_verifier(dir_, tmp_);
  EXPECT_EQ(py.code, 2) << py.out << py.err;
  EXPECT_NE(py.err.find("alpha.npy"), std::string::npos) << py.err;
  EXPECT_EQ(run_verifier(tmp_.file("nowhere"), tmp_).code, 2);
}

}  // namespace
}  // namespace svattn
