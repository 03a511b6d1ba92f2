// The evidence through the CLI (docs/audit.md): `memory export` and `memory receipt` of real
// erasures, tampered stores and backups, verified by svattn and the independent verifier, and the
// same on a PostgreSQL URI (label postgres).
#include "evidence_test_util.h"

namespace svattn {
namespace {

// ---------------------------------------------------------------------------------- the CLI

class EvidenceCli : public Evidence {
 protected:
  RunResult cli(const std::vector<std::string>& args) {
    std::vector<std::string> all{"-u", "SVATTN_MASTER_KEY", "-u", "SVATTN_MASTER_KEY_FILE",
                                 SVATTN_CLI};
    all.insert(all.end(), args.begin(), args.end());
    return test::run_binary("/usr/bin/env", all, tmp_);
  }
  RunResult receipt(std::int64_t record, std::vector<std::string> extra = {}) {
    std::vector<std::string> a{
        "memory", "receipt", store_, "--memory", "m", "--record", std::to_string(record)};
    a.insert(a.end(), extra.begin(), extra.end());
    return cli(a);
  }
  // A support record forgotten after a backup was taken; returns the record.
  std::int64_t forget_after_backup(const std::string& backup) {
    EXPECT_EQ(cli({"memory", "backup", store_, backup}).code, 0);
    return forget(Forget::kSupport).entry.record;
  }
};

TEST_F(EvidenceCli, ExportWritesTheFilesAndRefusesANonEmptyDirectory) {
  fill(rbf_settings(0.1), 10, 2, 3);
  const std::string out = tmp_.file("out");
  const RunResult ok = cli({"memory", "export", store_, "--memory", "m", "--out", out});
  EXPECT_EQ(ok.code, 0) << ok.err;
  for (const char* f : {"ids.npy", "keys.npy", "values.npy", "alpha.npy", "partition.npy",
                        "state.json", "settings.json", "manifest.json"})
    EXPECT_TRUE(fs::exists(out + "/" + f)) << f;
  EXPECT_EQ(run_verifier(out, tmp_).code, 0);
  test::expect_bad_input(cli({"memory", "export", store_, "--memory", "m", "--out", out}),
                         {"--out", "not empty"});
  test::expect_bad_input(
      cli({"memory", "export", store_, "--memory", "nope", "--out", tmp_.file("out2")}), {"nope"});
  EXPECT_FALSE(fs::exists(tmp_.file("out2")));
  fs::create_directory(tmp_.file("empty"));
  EXPECT_EQ(cli({"memory", "export", store_, "--memory", "m", "--out", tmp_.file("empty")}).code,
            0);
  std::size_t leftovers = 0;
  for (const auto& e : fs::directory_iterator(tmp_.path()))
    leftovers += e.path().filename().string().rfind(".svattn-export-", 0) == 0;
  EXPECT_EQ(leftovers, 0u);
}

// A store whose coefficients or b were altered from outside is exported as stored, and memory
// verify and the independent verifier both refuse it; one whose stored hash was altered cannot be
// restored, and export refuses it itself (exit 2, nothing written).
TEST_F(EvidenceCli, TamperedStoreIsExportedAsStoredAndBothVerifiersRefuseIt) {
  fill(rbf_settings(0.1), 12, 2, 3);
  forget(Forget::kSupport);
  const std::vector<std::string> edits{
      "UPDATE support SET alpha = alpha * 1.001 WHERE token_id = (SELECT min(token_id) FROM "
      "support)",
      "UPDATE memories SET b = b + 1e-4"};
  for (std::size_t k = 0; k < edits.size(); ++k) {
    const std::string copy = tmp_.file("t" + std::to_string(k) + ".db");
    store_test::copy_store(store_, copy);
    {
      store_test::RawDb db(copy);
      ASSERT_EQ(db.exec(edits[k]), SQLITE_OK) << edits[k];
    }
    EXPECT_EQ(cli({"memory", "verify", copy}).code, 1) << edits[k];
    const std::string out = tmp_.file("t" + std::to_string(k));
    const RunResult ex = cli({"memory", "export", copy, "--memory", "m", "--out", out});
    ASSERT_EQ(ex.code, 0) << edits[k] << "\n" << ex.err;
    const RunResult py = run_verifier(out, tmp_);
    EXPECT_EQ(py.code, 1) << edits[k] << "\n" << py.out;
    EXPECT_FALSE(cpp_verifies(out)) << edits[k];
  }
  const std::string copy = tmp_.file("hash.db");
  store_test::copy_store(store_, copy);
  {
    store_test::RawDb db(copy);
    ASSERT_EQ(db.exec("UPDATE memories SET state_sha256 = '" + std::string(64, 'a') + "'"),
              SQLITE_OK);
  }
  EXPECT_EQ(cli({"memory", "verify", copy}).code, 1);
  const RunResult ex = cli({"memory", "export", copy, "--memory", "m", "--out", tmp_.file("hash")});
  EXPECT_EQ(ex.code, 2);  // the store's own warnings precede the error line
  EXPECT_NE(ex.err_lines().back().find("does not match its tokens"), std::string::npos) << ex.err;
  EXPECT_FALSE(fs::exists(tmp_.file("hash")));
}

TEST_F(EvidenceCli, ReceiptOfARealErasureNamesEverythingADpoFiles) {
  fill(rbf_settings(0.1), 20, 3, 4);
  const std::string backup = tmp_.file("before.db");
  const std::int64_t record = forget_after_backup(backup);
  const RunResult md = receipt(record, {"--reason", "ticket DPO-17", "--backup", backup});
  ASSERT_EQ(md.code, 0) << md.err;
  for (const char* text :
       {"Erasure receipt: record", "ticket DPO-17", "Verdict: all", "audit\\_chain",
        "forget\\_entry", "key\\_destroyed", "SHA-256 of the wrapped key", "shredded",
        "the whole model", "Audit mode", "Ridge μ > 0", "ciphertext under the destroyed key"})
    EXPECT_NE(md.out.find(text), std::string::npos) << text << "\n" << md.out;
  const RunResult html = receipt(record, {"--format", "html", "--out", tmp_.file("r.html")});
  ASSERT_EQ(html.code, 0) << html.err;
  const std::string page = test::read_text(tmp_.file("r.html"));
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("http"), std::string::npos);
  EXPECT_NE(page.find("key_destroyed"), std::string::npos);
  EXPECT_EQ(receipt(record, {"--format", "html", "--out", tmp_.file("r.html")}).code, 2);
}

// A backup taken before the erasure, read beside the current key store: the erased record is
// shredded, the export is the memory without it and verifies independently.
TEST_F(EvidenceCli, ExportOfARestoredBackupLeavesTheShreddedRecordOut) {
  fill(rbf_settings(0.1), 12, 2, 3);
  const std::string backup = tmp_.file("before.db");
  const std::int64_t record = forget_after_backup(backup);
  fs::copy_file(store_ + ".keys", backup + ".keys");
  const std::string out = tmp_.file("restored");
  const RunResult ex = cli({"memory", "export", backup, "--memory", "m", "--out", out});
  ASSERT_EQ(ex.code, 0) << ex.err;
  const nlohmann::json manifest = read_json(out + "/manifest.json");
  EXPECT_EQ(manifest["n"], 22);
  for (const auto& r : manifest["records"]) EXPECT_NE(r["record"], record);
  EXPECT_EQ(manifest["state_sha256"], read_json(cert_)["after"]["state_sha256"]);
  EXPECT_EQ(run_verifier(out, tmp_, cert_).code, 0);
  EXPECT_TRUE(cpp_verifies(out));
}

TEST_F(EvidenceCli, ReceiptOfABoundedMemoryStatesWhatExactnessMeansThere) {
  MemorySettings ms = rbf_settings(0.1);
  ms.mode = MemoryMode::kBounded;
  fill(ms, 20, 2, 3);
  const RunResult r = receipt(forget(Forget::kSupport).entry.record);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Bounded mode: this memory evicts reserve tokens"), std::string::npos);
  EXPECT_NE(r.out.find("tokens it retained"), std::string::npos);
  EXPECT_EQ(r.out.find("as if the record had never been added"), std::string::npos);
}

TEST_F(EvidenceCli, ReceiptOfRowsDeletedByHandIsRefused) {
  fill(rbf_settings(0.1), 10, 2, 3);
  {
    store_test::RawDb db(store_);
    db.exec("DELETE FROM tokens WHERE record = 3");
    db.exec("DELETE FROM records WHERE record = 3");
  }
  const RunResult r = receipt(3);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("forget_entry"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST_F(EvidenceCli, ReceiptOfAnEditedAuditChainIsRefused) {
  fill(rbf_settings(0.1), 10, 2, 3);
  const std::int64_t record = forget(Forget::kSupport).entry.record;
  EXPECT_EQ(receipt(record).code, 0);
  {
    store_test::RawDb db(store_);
    ASSERT_EQ(db.exec("DROP TRIGGER audit_no_update"), SQLITE_OK);
    ASSERT_EQ(db.exec("UPDATE audit SET token_count = token_count + 1 WHERE operation = 'forget'"),
              SQLITE_OK);
  }
  const RunResult r = receipt(record);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("audit_chain"), std::string::npos) << r.err;
}

TEST_F(EvidenceCli, ReceiptWhoseKeyWasNotDestroyedIsRefused) {
  fill(rbf_settings(0.1), 10, 2, 3);
  const std::string keys = store_ + ".keys";
  fs::copy_file(keys, tmp_.file("keys.before"));
  const std::int64_t record = forget(Forget::kSupport).entry.record;
  fs::copy_file(tmp_.file("keys.before"), keys, fs::copy_options::overwrite_existing);
  fs::remove(keys + "-wal");
  const RunResult r = receipt(record);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("key_destroyed"), std::string::npos) << r.err;
}

TEST_F(EvidenceCli, PlaintextBackupIsNotCoveredAndRefused) {
  fill(rbf_settings(0.1), 10, 2, 3, /*import=*/false, /*plaintext=*/true);
  const std::string backup = tmp_.file("plain.db");
  const std::int64_t record = forget_after_backup(backup);
  const RunResult without = receipt(record);
  EXPECT_EQ(without.code, 0) << without.err;
  EXPECT_NE(without.out.find("not applicable"), std::string::npos);
  const RunResult with = receipt(record, {"--backup", backup});
  EXPECT_EQ(with.code, 1) << with.out;
  EXPECT_NE(with.err.find("backup"), std::string::npos) << with.err;
  EXPECT_NE(with.err.find("plaintext"), std::string::npos) << with.err;
}

TEST_F(EvidenceCli, ReceiptBadInputIsExitTwo) {
  fill(rbf_settings(0.1), 3, 2, 3);
  test::expect_bad_input(cli({"memory", "receipt", store_, "--memory", "nope", "--record", "1"}),
                         {"nope"});
  test::expect_bad_input(receipt(0, {"--format", "pdf"}), {"--format"});
  const RunResult never = receipt(1);  // present, never erased
  EXPECT_EQ(never.code, 1);
  EXPECT_NE(never.err.find("forget_entry"), std::string::npos) << never.err;
}

#ifdef SVATTN_TEST_POSTGRES
// The same on a PostgreSQL store: the export verifies independently, the receipt reads the anchor
// and the key store from the URI, and a record never erased is refused.
class EvidencePg : public EvidenceCli {};

TEST_F(EvidencePg, ExportVerifiesAndTheReceiptReadsTheUri) {
  SVATTN_REQUIRE_PG();
  store_test::PgSchema schema;
  store_ = schema.uri(tmp_.file("pg.keys"));
  fill(rbf_settings(0.1), 12, 2, 3);
  const std::int64_t record = forget(Forget::kSupport).entry.record;
  const std::string out = tmp_.file("pgexport");
  ASSERT_EQ(cli({"memory", "export", store_, "--memory", "m", "--out", out}).code, 0);
  EXPECT_EQ(run_verifier(out, tmp_, cert_).code, 0);
  EXPECT_TRUE(cpp_verifies(out));
  const RunResult ok = receipt(record, {"--reason", "DPO-18"});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("key\\_destroyed**: passed"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("postgresql://"), std::string::npos);
  const std::int64_t other = record == 0 ? 1 : 0;
  const RunResult refused = receipt(other);
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.err.find("forget_entry"), std::string::npos) << refused.err;
}
#endif

}  // namespace
}  // namespace svattn
