// E7 (fact forgetting, knowledge editing, patient erasure) on a tiny configuration, its building
// blocks (AUC, capped-simplex projection, byte scan, fact codes), and `svattn reproduce` on the tiny
// preset: every section E1…E7 present, its numbers read back from REPORT.json.
#include <gtest/gtest.h>
#include "experiments/result_keys.h"

#include "cli/cli_test_util.h"
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "svattn/batch_solver.h"
#include "svattn/errors.h"
#include "experiments/e7_applications/e7_applications.h"
#include "experiments/e7_applications/tools.h"
#include "experiments/registry.h"
#include "experiments/report.h"
#include "experiments/reproduce.h"
#include "experiments/streams.h"

namespace fs = std::filesystem;
namespace ex = svattn::experiments;
namespace e7 = svattn::experiments::e7_applications;
using nlohmann::json;

namespace {

using svattn::test::TempDir;

/// A MIMIC-style vitals.csv.gz with `stays` stays of `hours` hours: each stay has its own baseline
/// (so patients differ) plus hourly noise; deterministic.
void write_vitals(const std::string& data_dir, int stays, int hours) {
  fs::create_directories(fs::path(data_dir) / "mimic-iii-demo");
  std::ostringstream csv;
  csv << "icustay_id,charttime,itemid,subject_id,hadm_id,vital,valuenum,error,row_id\n";
  ex::Rng rng(4242);
  const char* names[] = {"HeartRate", "SysBP", "DiasBP", "MeanBP", "RespRate", "SpO2", "TempC"};
  const double base[] = {85, 120, 65, 80, 18, 96, 37};
  const double spread[] = {15, 15, 8, 10, 4, 2, 0.6};
  for (int s = 0; s < stays; ++s) {
    double offset[7];
    for (int v = 0; v < 7; ++v) offset[v] = spread[v] * rng.normal();
    for (int h = 0; h < hours; ++h) {
      char t[32];
      std::snprintf(t, sizeof t, "2100-01-%02d %02d:00:00", 1 + h / 24, h % 24);
      for (int v = 0; v < 7; ++v) {
        const double x = base[v] + offset[v] + 0.4 * spread[v] * rng.normal();
        csv << (200000 + s) << "," << t << ",0,1,1," << names[v] << "," << x << ",,0\n";
      }
    }
  }
  const std::string text = csv.str();
  gzFile f = gzopen((fs::path(data_dir) / "mimic-iii-demo" / "vitals.csv.gz").c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  gzclose(f);
}

ex::ExperimentOptions tiny(const std::string& out, const std::string& data_dir) {
  ex::ExperimentOptions o;
  o.preset = "tiny";
  o.out_dir = out;
  o.data_dir = data_dir;
  o.progress = false;
  o.plots = false;
  return o;
}

/// O(m n) reference of the AUC with ties counted 1/2.
double auc_pairs(const std::vector<double>& p, const std::vector<double>& n) {
  double s = 0;
  for (double a : p)
    for (double b : n) s += a > b ? 1.0 : (a == b ? 0.5 : 0.0);
  return s / (static_cast<double>(p.size()) * static_cast<double>(n.size()));
}

double objective(const Eigen::MatrixXd& K, double mu, const Eigen::VectorXd& a) {
  return a.dot(K * a + mu * a) - K.diagonal().dot(a);
}

}  // namespace

// ------------------------------------------------------------------------------------ building blocks

TEST(E7ToolsTest, AucOnHandMadeExamples) {
  EXPECT_DOUBLE_EQ(e7::auc({3, 4, 5}, {1, 2}), 1.0);
  EXPECT_DOUBLE_EQ(e7::auc({1}, {2}), 0.0);
  // Ties count one half: (1,2) 0, (1,3) 0, (2,2) 1/2, (2,3) 0.
  EXPECT_DOUBLE_EQ(e7::auc({1, 2}, {2, 3}), 0.125);
  // 0.9 and 0.8 beat all four negatives, 0.4 beats two: 10 of 12 pairs.
  EXPECT_DOUBLE_EQ(e7::auc({0.9, 0.8, 0.4}, {0.7, 0.5, 0.3, 0.2}), 10.0 / 12.0);
  EXPECT_DOUBLE_EQ(e7::auc({7, 7, 7}, {7, 7}), 0.5);
  EXPECT_TRUE(std::isnan(e7::auc({}, {1})));
  // Against the pairwise definition on random scores with many ties.
  ex::Rng rng(5);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<double> p, n;
    for (int i = 0; i < 30 + trial; ++i) p.push_back(static_cast<double>(rng.below(12)));
    for (int i = 0; i < 25; ++i) n.push_back(static_cast<double>(rng.below(10)));
    EXPECT_NEAR(e7::auc(p, n), auc_pairs(p, n), 1e-12);
  }
}

TEST(E7ToolsTest, ClusterBootstrapInterval) {
  // Two groups drawn from the same distribution: the interval covers 0.5.
  ex::Rng rng(9);
  std::vector<std::vector<double>> a(20), b(20), far(20);
  for (auto* g : {&a, &b, &far}) {
    for (auto& grp : *g)
      for (int k = 0; k < 10; ++k) grp.push_back(rng.normal() + (g == &far ? 10.0 : 0.0));
  }
  const e7::AucInterval same = e7::auc_cluster_bootstrap(a, b, 400, 1);
  EXPECT_TRUE(same.covers(0.5)) << same.auc << " [" << same.lo << ", " << same.hi << "]";
  EXPECT_LE(same.lo, same.auc);
  EXPECT_GE(same.hi, same.auc);
  EXPECT_EQ(same.reps, 400);
  // Deterministic for a seed.
  const e7::AucInterval again = e7::auc_cluster_bootstrap(a, b, 400, 1);
  EXPECT_EQ(same.lo, again.lo);
  EXPECT_EQ(same.hi, again.hi);
  // Separated groups: AUC 1 and an interval that excludes chance.
  const e7::AucInterval sep = e7::auc_cluster_bootstrap(far, a, 400, 2);
  EXPECT_DOUBLE_EQ(sep.auc, 1.0);
  EXPECT_FALSE(sep.covers(0.5));
}

TEST(E7ToolsTest, CappedSimplexProjectionAndProjectedGradient) {
  Eigen::VectorXd y(3);
  y << 0.5, 0.5, 0.0;
  const Eigen::VectorXd p = e7::project_capped_simplex(y, 0.4);
  EXPECT_NEAR(p(0), 0.4, 1e-12);
  EXPECT_NEAR(p(1), 0.4, 1e-12);
  EXPECT_NEAR(p(2), 0.2, 1e-12);
  // A feasible point projects onto itself.
  Eigen::VectorXd f(4);
  f << 0.1, 0.2, 0.3, 0.4;
  EXPECT_LT((e7::project_capped_simplex(f, 0.5) - f).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_THROW(e7::project_capped_simplex(f, 0.2), svattn::InvalidArgument);  // 4 * 0.2 < 1

  // Projected gradient decreases F and approaches the batch optimum of the same problem.
  ex::Rng rng(3);
  const svattn::RowMatrix keys = ex::gaussian_keys(30, 2, 1.0, rng);
  svattn::BatchSettings bs;
  bs.problem.kernel.bandwidth = 1.0;
  bs.problem.C = 0.1;
  const svattn::BatchResult opt = svattn::solve_batch(svattn::TokenSet::from_rows(keys), bs);
  const Eigen::MatrixXd K = svattn::gram(bs.problem.kernel, keys);
  const double mu = bs.problem.ridge;
  const Eigen::VectorXd a_opt = Eigen::Map<const Eigen::VectorXd>(opt.state.alpha.data(), 30);
  Eigen::VectorXd a = Eigen::VectorXd::Constant(30, 1.0 / 30);
  double prev = objective(K, mu, a);
  for (int k = 0; k < 50; ++k) {
    a = e7::projected_gradient_steps(K, mu, bs.problem.C, a, 1);
    const double cur = objective(K, mu, a);
    EXPECT_LE(cur, prev + 1e-15);
    prev = cur;
  }
  const Eigen::VectorXd far = e7::projected_gradient_steps(K, mu, bs.problem.C, a, 20000);
  EXPECT_NEAR(far.sum(), 1.0, 1e-9);
  EXPECT_LE(far.maxCoeff(), bs.problem.C + 1e-15);
  EXPECT_LT(objective(K, mu, far) - objective(K, mu, a_opt), 1e-9);
  EXPECT_GE(objective(K, mu, far) - objective(K, mu, a_opt), -1e-12);  // the batch optimum is optimal
  // b refitted on the margin of the optimum equals the solver's b.
  EXPECT_NEAR(e7::refit_offset(K, mu, bs.problem.C, a_opt, 0.0), opt.state.b, 1e-9);
}

TEST(E7ToolsTest, ByteScanFindsPatternsInFilesAndNotElsewhere) {
  TempDir dir;
  const double v[3] = {1.0, -2.5, 3.14159};
  const std::vector<std::uint8_t> one = e7::fp64_bytes(v, 1);
  // IEEE 754 little-endian 1.0 = 00 00 00 00 00 00 F0 3F.
  EXPECT_EQ(one, (std::vector<std::uint8_t>{0, 0, 0, 0, 0, 0, 0xF0, 0x3F}));
  const std::vector<std::uint8_t> row = e7::fp64_bytes(v, 3);
  ASSERT_EQ(row.size(), 24u);
  {
    std::ofstream out(dir.file("a.db"), std::ios::binary);
    const std::string junk(1000, 'x');
    out.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    out.write(reinterpret_cast<const char*>(row.data()), static_cast<std::streamsize>(row.size()));
    out.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  const double other = 2.718281828;
  const auto files = e7::store_files(dir.file("a.db"));
  ASSERT_EQ(files.size(), 4u);  // db, -wal, -journal, -shm (missing ones count as empty)
  const e7::ByteScan s = e7::scan_files(files, {row, one, e7::fp64_bytes(&other, 1)});
  EXPECT_EQ(s.patterns, 3u);
  EXPECT_EQ(s.patterns_found, 2u);
  EXPECT_EQ(s.bytes_scanned, 2024u);
  ASSERT_EQ(s.files_with_hits.size(), 1u);
  EXPECT_EQ(s.files_with_hits[0], dir.file("a.db"));
}

TEST(E7ToolsTest, FactCodesAreDeterministicAndDecodable) {
  const e7::FactCodebook a(16, 32, 77), b(16, 32, 77), c(16, 32, 78);
  EXPECT_EQ(a.key(3, 1), b.key(3, 1));
  EXPECT_NE(a.key(3, 1), c.key(3, 1));
  EXPECT_NE(a.key(3, 1), a.key(3, 2));
  // Keys sharing a subject are closer than unrelated keys (averaged over pairs).
  double same = 0, diff = 0;
  for (int s = 0; s < 50; ++s) {
    same += (a.key(s, 0) - a.key(s, 1)).squaredNorm();
    diff += (a.key(s, 0) - a.key(s + 100, 1)).squaredNorm();
  }
  EXPECT_LT(same, 0.75 * diff);
  svattn::RowMatrix codes(20, 32);
  for (int o = 0; o < 20; ++o) codes.row(o) = a.value(o).transpose();
  for (int o = 0; o < 20; ++o) {
    // A shrunken mixture dominated by object o decodes to o.
    Eigen::VectorXd mix = 0.3 * a.value(o) + 0.05 * a.value((o + 1) % 20);
    EXPECT_EQ(e7::decode_object(codes, mix), o);
  }
  Eigen::VectorXd bad = Eigen::VectorXd::Constant(32, std::nan(""));
  EXPECT_EQ(e7::decode_object(codes, bad), -1);
}

// ------------------------------------------------------------------------------------ E7

TEST(E7Test, TinyConfigurationInvariants) {
  if (!ex::find_experiment("E7").available()) GTEST_SKIP() << "built without the store";
  TempDir dir;
  write_vitals(dir.file("data"), 12, 20);
  const json j = ex::run_experiment("E7", tiny(dir.file("out"), dir.file("data"))).to_json();
  // (a) forgetting
  const json& f = j["facts"];
  const long forgets = static_cast<long>(f["forgets"].size());
  ASSERT_GT(forgets, 0);
  EXPECT_EQ(f["forgotten_retrieved_after"], 0);
  EXPECT_EQ(f["hash_equal_never_seen"], forgets);
  EXPECT_EQ(f["max_abs_dreadout_vs_never_seen"].get<double>(), 0.0);
  EXPECT_EQ(f["others_recall_before"].get<double>(), f["others_recall_after"].get<double>());
  int retrieved_before = 0;
  for (const auto& t : f["forgets"]) {
    retrieved_before += t["retrieved_before"].get<bool>() ? 1 : 0;
    EXPECT_FALSE(t["retrieved_after"].get<bool>()) << t.dump();
    EXPECT_TRUE(t["hash_equal_never_seen"].get<bool>()) << t.dump();
  }
  EXPECT_GT(retrieved_before, 0);  // the test would be vacuous if nothing was retrievable
  EXPECT_GT(f["decay_max_abs_dreadout_vs_never_seen"].get<double>(), 0.0);  // decay is not exact
  // (b) editing
  const long edits = static_cast<long>(f["edits"].size());
  ASSERT_GT(edits, 1);
  EXPECT_EQ(f["edit_hash_equal_reference"], edits);
  EXPECT_EQ(f["edit_max_abs_dreadout_vs_reference"].get<double>(), 0.0);
  // Object corrections: the old object is no longer returned to the question.
  EXPECT_EQ(f["edit_old_object_gone"], f["edit_object_corrections"]);
  EXPECT_GT(f["edit_object_corrections"].get<int>(), 0);
  std::set<std::string> kinds;
  for (const auto& t : f["edits"]) kinds.insert(t["kind"].get<std::string>());
  EXPECT_EQ(kinds, (std::set<std::string>{"object", "subject"}));
  // (c) patient erasure
  const json& p = j["patients"];
  EXPECT_TRUE(p["store_hash_equal_never_seen"].get<bool>());
  EXPECT_EQ(p["sha256_erased_store"], p["sha256_never_seen_store"]);
  EXPECT_TRUE(p["scores_bit_identical_never_seen"].get<bool>());
  EXPECT_EQ(p["certificates"], p["erased"]);
  EXPECT_EQ(p["certificates_hash_equal"], p["erased"]);
  EXPECT_EQ(p["certificates_kkt_ok"], p["erased"]);
  EXPECT_TRUE(p["verify_ok"].get<bool>()) << p["verify_problems"].dump();
  const json& scan = p["byte_scan"];
  EXPECT_GT(scan["row_patterns"].get<long>(), 0);
  EXPECT_EQ(scan["rows_found_before"], scan["row_patterns"]);      // control: present before
  EXPECT_EQ(scan["values_found_before"], scan["value_patterns"]);
  EXPECT_EQ(scan["rows_found_after"], 0);                          // gone after
  EXPECT_EQ(scan["values_found_after"], 0);
  EXPECT_GT(scan["bytes_scanned_after"].get<long>(), 0);
  std::map<std::string, json> methods;
  for (const auto& m : p["methods"]) methods[m["name"].get<std::string>()] = m;
  ASSERT_TRUE(methods.count("exact") && methods.count("decay") && methods.count("pg1") && methods.count("pg10"));
  EXPECT_EQ(methods["exact"]["max_abs_dalpha_vs_retrained"].get<double>(), 0.0);
  EXPECT_EQ(methods["exact"]["max_abs_ddecision_vs_retrained"].get<double>(), 0.0);
  EXPECT_EQ(methods["exact"]["max_abs_dreadout_vs_retrained"].get<double>(), 0.0);
  // The exact store and the never-seen store give the same AUC (same scores).
  EXPECT_EQ(methods["exact"]["auc_erased_vs_never_seen"]["auc"], methods["never_seen"]["auc_erased_vs_never_seen"]["auc"]);
  EXPECT_GT(methods["decay"]["max_abs_ddecision_vs_retrained"].get<double>(), 1e-9);
  EXPECT_LT(methods["pg10"]["max_abs_dalpha_vs_retrained"].get<double>(),
            methods["pg1"]["max_abs_dalpha_vs_retrained"].get<double>());
  for (const auto& [name, m] : methods) {
    const double a = m["auc_erased_vs_never_seen"]["auc"].get<double>();
    EXPECT_GE(a, 0.0);
    EXPECT_LE(a, 1.0);
  }
  // The work stores (clinical data) are removed; the outputs are written and equal the return value.
  EXPECT_FALSE(fs::exists(dir.file("out/E7-work")));
  std::ifstream in(dir.file("out/E7.json"));
  EXPECT_EQ(json::parse(in), j);
  const std::string md = ex::read_text_file(dir.file("out/E7.md"));
  for (const char* s : {"(a) Surgical fact forgetting", "(b) Knowledge editing", "(c) Patient erasure",
                        "zero leakage"}) {
    EXPECT_NE(md.find(s), std::string::npos) << s;
  }
}

// The typed result round-trips through E7.json (under `result`), and the report rendered from the
// file alone, without the data or the stores, is the one the run wrote; a result without a
// required field is refused naming it.
TEST(E7Test, ReportRendersFromTheResultInE7JsonAlone) {
  if (!ex::find_experiment("E7").available()) GTEST_SKIP() << "built without the store";
  TempDir dir, again;
  write_vitals(dir.file("data"), 12, 20);
  ex::run_experiment("E7", tiny(dir.file("out"), dir.file("data")));
  const json file = json::parse(ex::read_text_file(dir.file("out/E7.json")));
  ASSERT_TRUE(file.contains("result"));
  const e7::Result r = e7::Result::from_json(file.at("result"));
  EXPECT_EQ(r.preset, "tiny");
  EXPECT_EQ(r.settings.members, 6);
  EXPECT_EQ(r.forgetting.trials.size(), static_cast<std::size_t>(r.settings.forget));
  EXPECT_EQ(r.editing.trials.size(), static_cast<std::size_t>(r.settings.edits));
  ASSERT_EQ(r.erasure.methods.size(), 3u + r.settings.pg_steps.size());  // exact, never_seen, decay, pg…
  EXPECT_EQ(r.erasure.exact_scores.erased.scores.size(), static_cast<std::size_t>(r.settings.erased));
  EXPECT_EQ(r.measure_seconds, file.at("runtime_seconds").get<double>());
  EXPECT_EQ(e7::Result::from_json(r.to_json()).to_json(), r.to_json());
  svattn::test::expect_every_key_checked(
      file.at("result"), [](const json& j) { e7::Result::from_json(j); }, {"settings", "facts", "scan"},
      {"machine", "first_certificate"});
  EXPECT_EQ(r.to_json(), file.at("result"));
  ex::ExperimentOptions o2 = tiny(again.str(), "/nonexistent");  // rendering reads no data
  const json rendered = e7::render(r, o2).to_json();
  const std::string md = ex::read_text_file(dir.file("out/E7.md"));
  EXPECT_NE(md.find("(c) Patient erasure"), std::string::npos);
  EXPECT_EQ(ex::read_text_file(again.file("E7.md")), md);
  // E7.json too (the plot entries aside: they describe files of the output directory).
  json expected = file;
  expected.erase("plots");
  json got = rendered;
  got.erase("plots");
  EXPECT_EQ(got, expected);
  for (const char* key : {"preset", "facts", "forgetting", "editing", "erasure", "machine", "measure_seconds"}) {
    json broken = file.at("result");
    broken.erase(key);
    EXPECT_THROW(e7::Result::from_json(broken), svattn::FormatError) << key;
  }
  json broken = file.at("result");
  broken["erasure"]["scan"].erase("rows_found_after");
  EXPECT_THROW(e7::Result::from_json(broken), svattn::FormatError);
  broken = file.at("result");
  broken["forgetting"]["trials"][0].erase("hash_equal_never_seen");
  EXPECT_THROW(e7::Result::from_json(broken), svattn::FormatError);
  broken = file.at("result");
  broken["erasure"]["methods"].erase(0);  // no exact erasure
  try {
    e7::Result::from_json(broken);
    ADD_FAILURE() << "a result without the exact method was accepted";
  } catch (const svattn::FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("exact"), std::string::npos) << e.what();
  }
}

// ------------------------------------------------------------------------------------ reproduce

TEST(ReproduceTest, TinyReportHasEverySectionWithNumbersFromTheJson) {
  TempDir dir;
  write_vitals(dir.file("data"), 12, 20);
  ex::ReproduceOptions ro;
  ro.experiment = tiny(dir.file("report"), dir.file("data"));
  const json r = ex::reproduce(ro);
  ASSERT_TRUE(fs::exists(dir.file("report/REPORT.md")));
  ASSERT_TRUE(fs::exists(dir.file("report/REPORT.json")));
  std::ifstream in(dir.file("report/REPORT.json"));
  const json parsed = json::parse(in);
  EXPECT_EQ(parsed, r);
  const std::string md = ex::read_text_file(dir.file("report/REPORT.md"));
  // The Markdown is a function of the JSON alone.
  EXPECT_EQ(ex::report_markdown(parsed), md);
  // Machine and run description.
  EXPECT_FALSE(parsed["machine"]["cpu"].get<std::string>().empty());
  EXPECT_GE(parsed["machine"]["cores"].get<int>(), 1);
  EXPECT_TRUE(parsed["machine"].contains("git_commit"));
  EXPECT_NE(md.find(parsed["machine"]["git_commit"].get<std::string>()), std::string::npos);
  ASSERT_EQ(parsed["experiments"].size(), 7u);
  const std::vector<std::string> ids = {"E1", "E2", "E3", "E4", "E5", "E6", "E7"};
  std::vector<std::size_t> starts;
  for (const auto& id : ids) {
    const std::size_t at = md.find("\n## " + id + " — ");
    ASSERT_NE(at, std::string::npos) << id;
    starts.push_back(at);
  }
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const json& e = parsed["experiments"][k];
    EXPECT_EQ(e["id"], ids[k]);
    const std::size_t end = k + 1 < ids.size() ? starts[k + 1] : md.size();
    ASSERT_LT(starts[k], end);
    const std::string section = md.substr(starts[k], end - starts[k]);
    const std::string status = e["status"].get<std::string>();
    const bool needs_model = ids[k] == "E3" || ids[k] == "E5" || ids[k] == "E6";
    if (needs_model && !ex::find_experiment(ids[k]).available()) {
      EXPECT_EQ(status, "not_available");
      EXPECT_NE(section.find("Not yet available"), std::string::npos) << section;
      EXPECT_EQ(section.find("| metric | paper | ours |"), std::string::npos);  // no numbers faked
      continue;
    }
    if (ids[k] == "E7" && !ex::find_experiment("E7").available()) {
      EXPECT_EQ(status, "not_available");
      EXPECT_NE(section.find("Not yet available"), std::string::npos) << section;
      continue;
    }
    ASSERT_EQ(status, "ok") << ids[k] << ": " << e.value("reason", "");
    ASSERT_FALSE(e["summary"].empty()) << ids[k];
    // Every summary row is printed in the section and equals the experiment's own E?.json.
    std::ifstream ein(dir.file("report/" + e["json_file"].get<std::string>()));
    const json own = json::parse(ein);
    ASSERT_EQ(own["summary"].size(), e["summary"].size());
    for (std::size_t i = 0; i < e["summary"].size(); ++i) {
      const json& row = e["summary"][i];
      EXPECT_EQ(row["ours"], own["summary"][i]["ours"]);
      std::string ours = row["ours"].get<std::string>(), metric = row["metric"].get<std::string>();
      for (auto* s : {&ours, &metric}) {
        std::string esc;
        for (char c : *s) esc += c == '|' ? std::string("\\|") : std::string(1, c);
        *s = esc;
      }
      EXPECT_NE(section.find("| " + metric + " | "), std::string::npos) << ids[k] << ": " << metric;
      EXPECT_NE(section.find(" | " + ours + " |"), std::string::npos) << ids[k] << ": " << ours;
    }
    EXPECT_NE(section.find("**Scale and data:**"), std::string::npos);
    EXPECT_NE(section.find("(" + e["markdown_file"].get<std::string>() + ")"), std::string::npos);
    EXPECT_TRUE(fs::exists(dir.file("report/" + e["markdown_file"].get<std::string>())));
  }
  EXPECT_EQ(parsed["counts"].value("failed", 0), 0);
  int missing = 0;
  for (const char* id : {"E3", "E5", "E6", "E7"}) missing += ex::find_experiment(id).available() ? 0 : 1;
  EXPECT_EQ(parsed["counts"].value("not_available", 0), missing);
}

TEST(ReproduceTest, InstalledExperimentsPlugInAndFailuresAreReported) {
  TempDir dir;
  if (ex::find_experiment("E3").available() || ex::find_experiment("E5").available() ||
      ex::find_experiment("E6").available()) {
    GTEST_SKIP() << "this build installs E3/E5/E6; the test installs its own";
  }
  const auto presets = [](const std::string&) { return json{{"steps", 1}}; };
  ex::install_experiment(
      "E3",
      [](const ex::ExperimentOptions& o) {
        json j = {{"experiment", "E3"}, {"title", "t"}, {"preset", o.preset}, {"seed", o.seed},
                  {"runtime_seconds", 0.25}, {"scale", "test runner, preset " + o.preset},
                  {"summary", json::array({{{"metric", "selective-copy recall"}, {"paper", "0.99"}, {"ours", "0.123"}}})},
                  {"plots", json::array({{{"file", "E3_curve.png"}, {"written", false}, {"note", "no gnuplot here"}}})}};
        return ex::ExperimentResult::from_json(j);
      },
      presets);
  ex::install_experiment(
      "e5", [](const ex::ExperimentOptions&) -> ex::ExperimentResult {
        throw svattn::IoError("checkpoint model.pt not found");
      },
      presets);
  ex::ReproduceOptions ro;
  ro.experiment.preset = "tiny";
  ro.experiment.out_dir = dir.str();
  ro.experiment.progress = false;
  ro.experiment.plots = false;
  ro.only = {"E3", "E5"};
  const json r = ex::reproduce(ro);
  ex::uninstall_experiment("E3");
  ex::uninstall_experiment("E5");
  EXPECT_FALSE(ex::find_experiment("E3").available());
  std::map<std::string, json> by_id;
  for (const auto& e : r["experiments"]) by_id[e["id"].get<std::string>()] = e;
  EXPECT_EQ(by_id["E3"]["status"], "ok");
  EXPECT_EQ(by_id["E3"]["summary"][0]["ours"], "0.123");
  EXPECT_EQ(by_id["E5"]["status"], "failed");
  EXPECT_NE(by_id["E5"]["reason"].get<std::string>().find("model.pt"), std::string::npos);
  EXPECT_EQ(by_id["E1"]["status"], "skipped");
  EXPECT_EQ(by_id["E6"]["status"], "skipped");
  const std::string md = ex::read_text_file(dir.file("REPORT.md"));
  EXPECT_NE(md.find("| selective-copy recall | 0.99 | 0.123 |"), std::string::npos);
  EXPECT_NE(md.find("test runner, preset tiny"), std::string::npos);
  EXPECT_NE(md.find("no gnuplot here"), std::string::npos);
  EXPECT_NE(md.find("**Failed**"), std::string::npos);
  EXPECT_EQ(r["counts"]["failed"], 1);
  // A result that breaks the envelope is reported as failed, not printed.
  ex::install_experiment(
      "E6", [](const ex::ExperimentOptions&) { return ex::ExperimentResult::from_json(json{{"runtime_seconds", 1.0}}); },
      presets);
  ro.only = {"E6"};
  const json r2 = ex::reproduce(ro);
  ex::uninstall_experiment("E6");
  EXPECT_EQ(r2["experiments"][5]["status"], "failed");
  EXPECT_NE(r2["experiments"][5]["reason"].get<std::string>().find("missing field"), std::string::npos);
  // Unknown ids are refused.
  EXPECT_THROW(ex::install_experiment("E9", [](const ex::ExperimentOptions&) { return ex::ExperimentResult{}; }, presets),
               svattn::InvalidArgument);
  ro.only = {"E8"};
  EXPECT_THROW(ex::reproduce(ro), svattn::InvalidArgument);
}

TEST(ReproduceTest, ReportIsRenderedFromReportJsonAlone) {
  TempDir dir;
  ex::ReproduceOptions ro;
  ro.experiment = tiny(dir.file("r"), dir.file("data"));
  ro.only = {"E2"};
  json r = ex::reproduce(ro);
  const std::string md = ex::read_text_file(dir.file("r/REPORT.md"));
  r = json();  // the in-memory results are gone: only the file remains
  EXPECT_EQ(ex::render_report_file(dir.file("r/REPORT.json")), md);
  EXPECT_THROW(ex::render_report_file(dir.file("r/missing.json")), svattn::IoError);
  std::ofstream(dir.file("r/bad.json")) << "[1, 2]";
  EXPECT_THROW(ex::render_report_file(dir.file("r/bad.json")), svattn::FormatError);
}

TEST(ResultTest, EveryTorchFreeResultRoundTripsThroughItsJson) {
  TempDir dir;
  write_vitals(dir.file("data"), 12, 20);
  for (const auto& id : ex::experiment_ids()) {
    if (id == "E3" || id == "E5" || id == "E6") continue;  // test_experiments_torch covers them
    const ex::ExperimentResult r = ex::run_experiment(id, tiny(dir.file("out"), dir.file("data")));
    const json j = r.to_json();
    EXPECT_EQ(ex::ExperimentResult::from_json(j).to_json(), j) << id;
    std::ifstream in(dir.file("out/" + r.json_file));
    EXPECT_EQ(json::parse(in), j) << id << ": E?.json is the result";
    EXPECT_EQ(r.experiment, id);
    EXPECT_FALSE(r.summary.empty()) << id;
  }
  EXPECT_THROW(ex::ExperimentResult::from_json(json{{"experiment", "E1"}}), svattn::FormatError);
}

TEST(OverridesTest, SetReplacesPresetFieldsAndRejectsUnknownKeysAndBadValues) {
  const json preset = {{"steps", 300}, {"C", 0.125}, {"gate", "token"}, {"bounded", false},
                       {"factors", {1, 2, 4}}, {"methods", {"hybrid", "swa"}}};
  const auto set = [](std::vector<std::string> items) {
    std::vector<ex::Override> v;
    for (const auto& i : items) v.push_back(ex::parse_override(i));
    return v;
  };
  const json p = ex::apply_overrides(preset, "E3",
                                     set({"steps=10", "C=1/4", "C=0.25", "gate=chunk", "bounded=true",
                                          "factors=1,8", "E3.methods=[\"softmax\"]", "E5.steps=7"}));
  EXPECT_EQ(p["steps"], 10);
  EXPECT_EQ(p["C"].get<double>(), 0.25);
  EXPECT_EQ(p["gate"], "chunk");
  EXPECT_EQ(p["bounded"], true);
  EXPECT_EQ(p["factors"], json({1, 8}));
  EXPECT_EQ(p["methods"], json({"softmax"}));
  const auto key_of = [&](std::vector<std::string> items) {
    try {
      ex::apply_overrides(preset, "E3", set(items));
    } catch (const ex::SettingError& e) {
      EXPECT_NE(std::string(e.what()).find(e.key()), std::string::npos);
      return e.key();
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(key_of({"nope=1"}), "nope");
  EXPECT_EQ(key_of({"E3.nope=1"}), "E3.nope");
  EXPECT_EQ(key_of({"steps=ten"}), "steps");
  EXPECT_EQ(key_of({"steps=1.5"}), "steps");
  EXPECT_EQ(key_of({"C=x"}), "C");
  EXPECT_EQ(key_of({"bounded=1"}), "bounded");
  EXPECT_EQ(key_of({"factors=1,a"}), "factors");
  EXPECT_THROW(ex::parse_override("steps"), ex::SettingError);
  // The registry checks overrides against the experiments that run, before they run.
  ex::ExperimentOptions o;
  o.preset = "tiny";
  o.overrides = set({"E2.seeds=1"});
  EXPECT_NO_THROW(ex::check_overrides(o, {"E2"}));
  EXPECT_THROW(ex::check_overrides(o, {"E1"}), ex::SettingError);  // E2 is not run
  o.overrides = set({"seeds=1"});
  EXPECT_THROW(ex::check_overrides(o, {"E1", "E2"}), ex::SettingError);  // unscoped, several run
  o.overrides = set({"E9.x=1"});
  EXPECT_THROW(ex::check_overrides(o, {"E2"}), ex::SettingError);
}

// Every preset key of every experiment this build runs has a range, and every preset lies in it.
TEST(OverridesTest, EveryPresetKeyHasARangeThePresetsMeet) {
  for (const auto& e : ex::all_experiments()) {
    if (!e.available()) continue;
    SCOPED_TRACE(e.id);
    EXPECT_FALSE(e.ranges.keys.empty());
    std::vector<std::string> names = {"tiny", "quick", "paper"};
    names.insert(names.end(), e.extra_presets.begin(), e.extra_presets.end());
    for (const auto& name : names) {
      SCOPED_TRACE(name);
      EXPECT_NO_THROW(ex::check_ranges(e.presets(name), e.id, e.ranges));
    }
  }
}

// Out-of-range `--set` values are refused before anything runs, naming the key: they used to crash
// (SIGSEGV, abort, exit 3), hang, or run with exit 0.
TEST(OverridesTest, OutOfRangeValuesAreRefusedNamingTheKey) {
  const auto refused = [](const std::string& id, const std::string& item) {
    ex::ExperimentOptions o;
    o.preset = "tiny";
    o.overrides = {ex::parse_override(item)};
    try {
      ex::check_overrides(o, {id});
    } catch (const ex::SettingError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"E2", "patterns=0"},   {"E2", "patterns=-1"},  {"E2", "tokens=-1"},
      {"E2", "rare_share=2"}, {"E2", "seeds=-1"},     {"E2", "budgets=[]"},
      {"E2", "noise=-1"},     {"E2", "dim=0"},        {"E2", "budgets=6,6"},
      {"E2", "budgets=6,500"}, {"E2", "headline_budget=7"}, {"E2", "tokens=10000000000"},
      {"E1", "n=-5"},         {"E1", "trials=0"},     {"E1", "streams=[]"},
      {"E1", "streams=gaussian_d2,gaussian_d2"}, {"E1", "keys_steps=-1"},
      {"E4", "fractions=[-1]"}, {"E4", "fractions=[2]"}, {"E4", "max_stays=-1"},
      {"E4", "random_draws=0"}, {"E4", "datasets=[\"eicu\"]"}, {"E4", "headline_fraction=0.2"}};
  for (const auto& [id, item] : cases) {
    const std::string key = id + "." + item.substr(0, item.find('='));
    const std::string what = refused(id, item);
    EXPECT_NE(what.find("--set " + key), std::string::npos) << item << ": " << what;
    EXPECT_NE(what.find("must be"), std::string::npos) << item << ": " << what;
  }
  if (ex::find_experiment("E7").available()) {
    for (const std::string item : {"subjects=-1", "subjects=-2", "relations=-1", "members=1",
                                   "erased=0", "erased=6", "max_hours=0", "bootstrap=0",
                                   "pg_steps=0", "subjects=3000"}) {
      const std::string key = "E7." + item.substr(0, item.find('='));
      EXPECT_NE(refused("E7", item).find("--set " + key), std::string::npos)
          << item << ": " << refused("E7", item);
    }
  }
  EXPECT_EQ(refused("E2", "patterns=3"), "(accepted)");
}

TEST(ReproduceTest, ThePresetCpuIsE5sAlone) {
  EXPECT_TRUE(ex::find_experiment("E5").has_preset("cpu"));
  EXPECT_FALSE(ex::find_experiment("E2").has_preset("cpu"));
  EXPECT_TRUE(ex::find_experiment("E2").has_preset("quick"));
  ex::ExperimentOptions o;
  o.preset = "cpu";
  try {
    ex::check_overrides(o, {"E2"});
    ADD_FAILURE() << "E2 accepted the preset cpu";
  } catch (const svattn::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("E2 has no preset 'cpu'"), std::string::npos) << e.what();
  }
  o.preset = "fast";
  EXPECT_THROW(ex::check_overrides(o, {"E2"}), svattn::InvalidArgument);  // no experiment has it
}

#ifdef SVATTN_CLI
TEST(ReproduceCliTest, WritesTheReportAndSaysWhere) {
  TempDir dir;
  const std::string cmd = std::string(SVATTN_CLI) + " reproduce --preset tiny --only E2 --no-plots --out '" +
                          dir.file("r") + "' > '" + dir.file("log") + "' 2> '" + dir.file("err") + "'";
  EXPECT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 0) << ex::read_text_file(dir.file("err"));
  const std::string log = ex::read_text_file(dir.file("log"));
  EXPECT_NE(log.find("report: " + dir.file("r/REPORT.md")), std::string::npos) << log;
  EXPECT_NE(log.find("E2  Rare-item recall"), std::string::npos) << log;
  EXPECT_NE(log.find("skipped"), std::string::npos) << log;
  // One progress line per stage on stderr.
  const std::string err = ex::read_text_file(dir.file("err"));
  EXPECT_NE(err.find("[reproduce 1/1] E2"), std::string::npos) << err;
  EXPECT_TRUE(fs::exists(dir.file("r/REPORT.json")));
  const std::string bad = std::string(SVATTN_CLI) + " reproduce --preset huge --out '" + dir.file("r") +
                          "' > /dev/null 2>&1";
  EXPECT_EQ(WEXITSTATUS(std::system(bad.c_str())), 2);
}

TEST(ReproduceCliTest, SetRejectsUnknownKeysAndBadValuesWithExit2NamingTheKey) {
  TempDir dir;
  const auto run = [&](const std::string& args) {
    const std::string cmd = std::string(SVATTN_CLI) + " " + args + " --preset tiny --no-plots --quiet --out '" +
                            dir.file("o") + "' > '" + dir.file("log") + "' 2> '" + dir.file("err") + "'";
    return WEXITSTATUS(std::system(cmd.c_str()));
  };
  for (const auto& [args, key] : std::vector<std::pair<std::string, std::string>>{
           {"experiment E2 --set nope=1", "nope"},
           {"experiment E2 --set seeds=many", "seeds"},
           {"experiment E2 --set E1.trials=2", "E1.trials"},
           {"reproduce --only E2 --set E2.budgets=1,x", "E2.budgets"},
           {"reproduce --set E2.nope=1", "E2.nope"},
           {"reproduce --set seeds=1", "seeds"}}) {
    EXPECT_EQ(run(args), 2) << args;
    const std::string err = ex::read_text_file(dir.file("err"));
    EXPECT_NE(err.find("--set " + key + ":"), std::string::npos) << args << ": " << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << args << ": " << err;
    EXPECT_FALSE(fs::exists(dir.file("o"))) << args << ": nothing is written";
  }
  EXPECT_EQ(run("experiment E2 --set seeds=1 --set budgets=6,12,24"), 0) << ex::read_text_file(dir.file("err"));
  std::ifstream in(dir.file("o/E2.json"));
  const json j = json::parse(in);
  EXPECT_EQ(j["settings"]["seeds"], 1) << j["settings"].dump();
}
// The experiments' knobs are `--set` keys (docs/experiments.md "Ranges of the `--set` keys"): the
// flags they replace are unknown options now (exit 2, as for any), and the keys select what the
// flags did: E1's trials per stream and streams, E2's seeds.
TEST(ReproduceCliTest, ExperimentKnobsAreSetKeysAndTheOldFlagsAreUnknownOptions) {
  TempDir dir;
  const auto run = [&](const std::string& args) {
    const std::string cmd = std::string(SVATTN_CLI) + " " + args + " --preset tiny --no-plots --quiet --out '" +
                            dir.file("o") + "' > '" + dir.file("log") + "' 2> '" + dir.file("err") + "'";
    return WEXITSTATUS(std::system(cmd.c_str()));
  };
  for (const auto& [args, flag] : std::vector<std::pair<std::string, std::string>>{
           {"experiment E1 --trials 3", "--trials"},
           {"experiment E2 --trials 3", "--trials"},
           {"experiment E1 --streams gaussian_d2", "--streams"},
           {"experiment E5 --steps 10", "--steps"},
           {"reproduce --only E2 --trials 3", "--trials"}}) {
    EXPECT_EQ(run(args), 2) << args;
    const std::string err = ex::read_text_file(dir.file("err"));
    EXPECT_NE(err.find(flag), std::string::npos) << args << ": " << err;
    EXPECT_FALSE(fs::exists(dir.file("o"))) << args << ": nothing is written";
  }
  ASSERT_EQ(run("experiment E1 --set E1.trials=3 --set E1.streams=gaussian_d2,clustered"), 0)
      << ex::read_text_file(dir.file("err"));
  const json e1 = json::parse(ex::read_text_file(dir.file("o/E1.json")));
  EXPECT_EQ(e1["result"]["trials"], 3);
  EXPECT_EQ(e1["settings"]["trials_per_stream"], 3);
  EXPECT_EQ(e1["result"]["selected_streams"], json({"gaussian_d2", "clustered"}));
  ASSERT_EQ(e1["streams"].size(), 2u);
  std::size_t deletions = 0;
  for (const auto& st : e1["streams"]) {
    EXPECT_EQ(st["trials"], 3) << st.dump();
    deletions += st["deletions"].get<std::size_t>();
  }
  EXPECT_EQ(e1["comparisons"].size(), deletions);
  ASSERT_EQ(run("experiment E2 --set E2.seeds=3"), 0) << ex::read_text_file(dir.file("err"));
  const json e2 = json::parse(ex::read_text_file(dir.file("o/E2.json")));
  EXPECT_EQ(e2["settings"]["seeds"], 3) << e2["settings"].dump();
}

TEST(ReproduceCliTest, RenderWritesTheSameReportFromAnEarlierJsonAndRefusesBadFiles) {
  TempDir dir;
  const auto run = [&](const std::string& args) {
    const std::string cmd = std::string(SVATTN_CLI) + " experiment " + args + " --no-plots --quiet > '" +
                            dir.file("log") + "' 2> '" + dir.file("err") + "'";
    return WEXITSTATUS(std::system(cmd.c_str()));
  };
  ASSERT_EQ(run("E2 --preset tiny --out '" + dir.file("a") + "'"), 0) << ex::read_text_file(dir.file("err"));
  ASSERT_EQ(run("E2 --render '" + dir.file("a/E2.json") + "' --out '" + dir.file("b") + "'"), 0)
      << ex::read_text_file(dir.file("err"));
  EXPECT_EQ(ex::read_text_file(dir.file("b/E2.md")), ex::read_text_file(dir.file("a/E2.md")));
  EXPECT_EQ(json::parse(ex::read_text_file(dir.file("b/E2.json"))),
            json::parse(ex::read_text_file(dir.file("a/E2.json"))));
  EXPECT_NE(ex::read_text_file(dir.file("log")).find("rendered from " + dir.file("a/E2.json")),
            std::string::npos);
  // Another experiment's file, a file that is not JSON, one that lacks a field, a missing file, and
  // --render with a run option: exit 2 with one line naming the file or option, nothing written.
  json broken = json::parse(ex::read_text_file(dir.file("a/E2.json")));
  broken.erase("sigmas");
  std::ofstream(dir.file("broken.json")) << broken.dump();
  std::ofstream(dir.file("text.json")) << "E2 results\n";
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {"E4 --render '" + dir.file("a/E2.json") + "'", "is not an E4.json"},
           {"E2 --render '" + dir.file("text.json") + "'", "is not JSON"},
           {"E2 --render '" + dir.file("broken.json") + "'", "`sigmas`"},
           {"E2 --render '" + dir.file("none.json") + "'", "none.json"},
           {"E2 --render '" + dir.file("a/E2.json") + "' --set seeds=2", "--render"}}) {
    EXPECT_EQ(run(args + " --out '" + dir.file("c") + "'"), 2) << args;
    const std::string err = ex::read_text_file(dir.file("err"));
    EXPECT_NE(err.find(needle), std::string::npos) << args << ": " << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << args << ": " << err;
    EXPECT_FALSE(fs::exists(dir.file("c"))) << args << ": nothing is written";
  }
}
#endif
