// Cross-checks of the independent verifier (tools/svattn_verify, Python + numpy) against svattn's
// own verifier (verify_state, Store::verify) on every kind of state the store produces and on
// tampered exports, and the export's file contract (docs/audit.md).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "cli/cli_test_util.h"
#include "store/store_test_util.h"
#ifdef SVATTN_TEST_POSTGRES
#include "store/pg_test_util.h"
#endif
#include "svattn/hash.h"
#include "svattn/io.h"
#include "svattn/store_evidence.h"

namespace svattn {
namespace {

namespace fs = std::filesystem;
using store_test::random_keys;
using store_test::rbf_settings;
using test::RunResult;
using test::TempDir;

const std::string kVerifierPath = std::string(SVATTN_SOURCE_DIR) + "/tools/svattn_verify";

// --------------------------------------------------------------------- reading and writing .npy

struct Npy {
  std::string descr;
  std::vector<std::size_t> shape;
  std::string data;
};

Npy read_npy(const std::string& path) {
  const std::string b = test::read_text(path);
  const std::size_t hlen =
      static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8);
  const std::string header = b.substr(10, hlen);
  Npy n;
  const auto d = header.find("'descr': '") + 10;
  n.descr = header.substr(d, header.find('\'', d) - d);
  std::string dims = header.substr(header.find('(') + 1);
  dims = dims.substr(0, dims.find(')'));
  std::size_t at = 0;
  while (at < dims.size()) {
    const std::size_t comma = dims.find(',', at);
    const std::string item =
        dims.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (item.find_first_of("0123456789") != std::string::npos) n.shape.push_back(std::stoull(item));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  n.data = b.substr(10 + hlen);
  return n;
}

void write_npy_raw(const std::string& path, const Npy& n) {
  std::string dims;
  for (std::size_t k = 0; k < n.shape.size(); ++k)
    dims += std::to_string(n.shape[k]) + (n.shape.size() == 1      ? ","
                                          : k + 1 < n.shape.size() ? ", "
                                                                   : "");
  std::string header =
      "{'descr': '" + n.descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  header.append((64 - (11 + header.size()) % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  std::ofstream(path, std::ios::binary) << out << header << n.data;
}

template <class T>
std::vector<T> npy_vector(const Npy& n) {
  std::vector<T> v(n.data.size() / sizeof(T));
  std::memcpy(v.data(), n.data.data(), v.size() * sizeof(T));
  return v;
}

template <class T>
std::string raw_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

nlohmann::json read_json(const std::string& p) { return nlohmann::json::parse(test::read_text(p)); }
void write_json_file(const std::string& p, const nlohmann::json& j) {
  std::ofstream(p, std::ios::binary) << j.dump(2);
}

// ------------------------------------------------------------------------------- an export in RAM

// The export read back into svattn's own types, for verify_state.
struct Loaded {
  TokenSet tokens;
  State state;
  std::vector<std::int8_t> part;
};

Loaded load_export(const std::string& dir) {
  Loaded l;
  const nlohmann::json settings = read_json(dir + "/settings.json");
  const nlohmann::json st = read_json(dir + "/state.json");
  l.state.settings = memory_settings_from_json(settings).problem;
  l.state.dim = settings.at("dim").get<int>();
  l.state.value_dim = settings.at("value_dim").get<int>();
  l.state.ids = npy_vector<std::int64_t>(read_npy(dir + "/ids.npy"));
  l.state.alpha = npy_vector<double>(read_npy(dir + "/alpha.npy"));
  l.part = npy_vector<std::int8_t>(read_npy(dir + "/partition.npy"));
  l.state.b = st.at("b").get<double>();
  l.state.state_sha256 = st.at("state_sha256").get<std::string>();
  l.state.status = status_from_string(st.at("status").get<std::string>());
  l.state.warmup = st.at("warmup").get<bool>();
  for (std::size_t t = 0; t < l.part.size(); ++t) {
    auto& set = l.part[t] == 1   ? l.state.partition.margin
                : l.part[t] == 2 ? l.state.partition.error
                                 : l.state.partition.reserve;
    set.push_back(l.state.ids[t]);
  }
  const std::size_t n = l.state.ids.size();
  l.tokens.ids = l.state.ids;
  const auto matrix = [&](const std::string& name, int cols) {
    const Npy m = read_npy(dir + "/" + name);
    RowMatrix out(static_cast<Eigen::Index>(n), cols);
    if (n > 0) std::memcpy(out.data(), m.data.data(), n * cols * sizeof(double));
    return out;
  };
  l.tokens.keys = matrix("keys.npy", l.state.dim);
  l.tokens.values = matrix("values.npy", l.state.value_dim);
  return l;
}

// Writes `l` back over the export in `dir` and rewrites the manifest's file hashes, so that only
// the mathematics can tell a tampered export from a genuine one.
void save_export(const std::string& dir, const Loaded& l, nlohmann::json st) {
  const std::size_t n = l.state.ids.size();
  write_npy_raw(dir + "/ids.npy", {"<i8", {n}, raw_of(l.state.ids)});
  write_npy_raw(dir + "/alpha.npy", {"<f8", {n}, raw_of(l.state.alpha)});
  write_npy_raw(dir + "/partition.npy", {"|i1", {n}, raw_of(l.part)});
  write_npy_raw(dir + "/keys.npy", {"<f8",
                                    {n, static_cast<std::size_t>(l.state.dim)},
                                    std::string(reinterpret_cast<const char*>(l.tokens.keys.data()),
                                                l.tokens.keys.size() * sizeof(double))});
  write_npy_raw(dir + "/values.npy",
                {"<f8",
                 {n, static_cast<std::size_t>(l.state.value_dim)},
                 std::string(reinterpret_cast<const char*>(l.tokens.values.data()),
                             l.tokens.values.size() * sizeof(double))});
  st["b"] = l.state.b;
  st["state_sha256"] = l.state.state_sha256;
  st["n"] = n;
  write_json_file(dir + "/state.json", st);
  nlohmann::json manifest = read_json(dir + "/manifest.json");
  manifest["n"] = n;
  manifest["state_sha256"] = l.state.state_sha256;
  for (auto& f : manifest["files"]) {
    f["sha256"] = store_test::file_sha(dir + "/" + f["name"].get<std::string>());
  }
  write_json_file(dir + "/manifest.json", manifest);
}

bool cpp_verifies(const std::string& dir) {
  const Loaded l = load_export(dir);
  const VerifyReport r = verify_state(l.tokens, l.state, Tolerances{}, false);
  return r.ok();
}

RunResult run_verifier(const std::string& dir, const TempDir& tmp, const std::string& cert = "") {
  std::vector<std::string> args{
      "PYTHONPATH=" + kVerifierPath, SVATTN_PYTHON, "-m", "svattn_verify", dir, "--json"};
  if (!cert.empty()) {
    args.push_back("--certificate");
    args.push_back(cert);
  }
  return test::run_binary("/usr/bin/env", args, tmp);
}

// The names of the checks the independent verifier failed ("" when it passed).
std::vector<std::string> failed_checks(const RunResult& r) {
  std::vector<std::string> out;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  if (j.is_discarded()) return {"(no JSON: " + r.err + ")"};
  for (const auto& c : j["checks"])
    if (!c["ok"].get<bool>() && c["result"] != "not established")
      out.push_back(c["name"].get<std::string>());
  return out;
}

// -------------------------------------------------------------------------------------- fixture

enum class Forget { kReserveOnly, kSupport, kAll, kNone };

class Evidence : public ::testing::Test {
 protected:
  TempDir tmp_{"evidence"};
  std::string store_ = tmp_.file("s.db");
  std::string cert_ = tmp_.file("cert.json");

  // Memory "m" with `records` records of `per` tokens (ids 0..records-1), added one by one or
  // imported in one call.
  void fill(const MemorySettings& ms, int records, int per, int d, bool import = false,
            bool plaintext = false) {
    StoreOptions o;
    o.create = true;
    o.encrypt = !plaintext;
    Store s(store_, o);
    s.create_memory("m", ms, d, d);
    const RowMatrix keys = random_keys(records * per, d, 7);
    if (import) {
      std::vector<std::int64_t> rec;
      for (int r = 0; r < records; ++r) rec.insert(rec.end(), per, r);
      s.import_records("m", rec, keys);
      return;
    }
    for (int r = 0; r < records; ++r) s.add_record("m", r, keys.middleRows(r * per, per));
  }

  // Forgets records of the kind asked for; writes the last certificate to cert_.
  ForgetResult forget(Forget kind) {
    Store s(store_);
    const State st = s.stored_state("m");
    std::map<std::int64_t, bool> support;  // record -> holds a nonzero coefficient
    for (std::size_t t = 0; t < st.ids.size(); ++t)
      support[record_of(st.ids[t])] = support[record_of(st.ids[t])] || st.alpha[t] != 0;
    ForgetResult last;
    for (const auto& [record, has_support] : support) {
      const bool take = kind == Forget::kAll || (kind == Forget::kSupport && has_support) ||
                        (kind == Forget::kReserveOnly && !has_support);
      if (!take) continue;
      last = s.forget_record("m", record);
      if (kind != Forget::kAll) break;
    }
    EXPECT_GT(last.entry.seq, 0) << "no record of the kind asked for";
    write_json_file(cert_, last.certificate.to_json());
    return last;
  }

  std::string export_dir(const std::string& name = "export") {
    const std::string dir = tmp_.file(name);
    export_memory(store_, StoreOptions{}, "m", dir);
    return dir;
  }

  // The independent verifier, verify_state on the export and Store::verify agree (all pass).
  void expect_all_verify(const std::string& dir) {
    const RunResult py = run_verifier(dir, tmp_, cert_);
    EXPECT_EQ(py.code, 0) << py.out << py.err;
    EXPECT_TRUE(cpp_verifies(dir));
    Store s(store_, [] {
      StoreOptions o;
      o.read_only = true;
      return o;
    }());
    EXPECT_TRUE(s.verify().ok());
  }
};

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
