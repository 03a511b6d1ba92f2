// Experiments E1, E2, E4 on tiny configurations, and their helpers: each test checks an invariant of
// the experiment (exactness of forgetting, equal budgets, documented critical-hour thresholds) or a
// user-facing behaviour (clear data-directory errors).
#include <gtest/gtest.h>
#include "experiments/result_keys.h"
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "cli/cli_test_util.h"
#include "svattn/errors.h"
#include "experiments/e1_forgetting/e1_forgetting.h"
#include "experiments/e2_rare_recall/e2_rare_recall.h"
#include "experiments/e4_icu/e4_icu.h"
#include "experiments/icu.h"
#include "experiments/registry.h"
#include "experiments/report.h"
#include "experiments/selection.h"
#include "experiments/streams.h"
#include "svattn/io.h"

namespace fs = std::filesystem;
namespace ex = svattn::experiments;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using svattn::test::TempDir;

void write_gz(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  gzclose(f);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const svattn::Error& e) {
    return e.what();
  }
  return "";
}

ex::ExperimentOptions tiny(const std::string& out) {
  ex::ExperimentOptions o;
  o.preset = "tiny";
  o.out_dir = out;
  o.progress = false;
  o.plots = false;
  return o;
}

ex::VitalVector vitals(double hr, double sbp, double dbp, double map, double rr, double spo2,
                       double temp) {
  return {hr, sbp, dbp, map, rr, spo2, temp};
}

/// A vitals.csv.gz line.
std::string row(const std::string& stay, const std::string& time, const std::string& vital,
                double value, const std::string& error = "") {
  std::ostringstream o;
  o << stay << "," << time << ",0,1,1," << vital << "," << value << "," << error << ",0\n";
  return o.str();
}

const char* kHeader = "icustay_id,charttime,itemid,subject_id,hadm_id,vital,valuenum,error,row_id\n";

}  // namespace

// ------------------------------------------------------------------------------------ report

TEST(ReportTest, StatisticsAndFormatting) {
  EXPECT_DOUBLE_EQ(ex::median_of({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(ex::median_of({4, 1, 2, 3}), 2.5);
  EXPECT_DOUBLE_EQ(ex::quantile_of({0, 10}, 0.25), 2.5);
  EXPECT_DOUBLE_EQ(ex::max_of({1, 7, 3}), 7.0);
  EXPECT_TRUE(std::isnan(ex::median_of({})));
  // mean 2, sd 1, n 3: half width = t(2) * 1 / sqrt(3) = 4.303 / 1.732
  const ex::MeanCi ci = ex::mean_ci95({1, 2, 3});
  EXPECT_DOUBLE_EQ(ci.mean, 2.0);
  EXPECT_NEAR(ci.half_width, 4.303 / std::sqrt(3.0), 1e-12);
  EXPECT_EQ(ex::mean_ci95({5}).half_width, 0.0);
  EXPECT_EQ(ex::fmt_sci(0.0), "0");
  EXPECT_EQ(ex::fmt_sci(1.5e-9), "1.50e-09");
  EXPECT_EQ(ex::fmt_pct(0.98), "98.0 %");
}

TEST(ReportTest, TableMarkdownAndJson) {
  ex::Table t({"a", "b|c"});
  t.add_row({"1", "x|y"});
  EXPECT_EQ(t.markdown(), "| a | b\\|c |\n| --- | --- |\n| 1 | x\\|y |\n");
  const auto j = t.json();
  EXPECT_EQ(j["rows"][0]["b|c"], "x|y");
  EXPECT_THROW(t.add_row({"only one"}), svattn::InvalidArgument);
}

TEST(ReportTest, PlotWritesDataAndScriptEvenWithoutGnuplot) {
  TempDir dir;
  ex::LinePlot p;
  p.title = "t";
  p.series.push_back({"s", {1, 2}, {0.5, 0.7}, {}});
  const ex::PlotResult r = ex::write_line_plot(dir.str(), "plot", p);
  EXPECT_TRUE(fs::exists(dir.file("plot-src/plot.gp")));
  EXPECT_TRUE(fs::exists(dir.file("plot-src/plot.dat")));
  if (ex::gnuplot_terminal().empty()) {
    EXPECT_FALSE(r.written);
    EXPECT_NE(r.note.find("gnuplot"), std::string::npos);
  } else {
    EXPECT_TRUE(r.written) << r.note;
    EXPECT_GT(fs::file_size(dir.file("plot.png")), 100u);
  }
}

// ------------------------------------------------------------------------------------ data dir

TEST(DataDirTest, MissingFlagDirectoryIsNamed) {
  const std::string msg = error_of([] { ex::resolve_data_dir("/nonexistent/svattn-data"); });
  EXPECT_NE(msg.find("/nonexistent/svattn-data"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--data-dir"), std::string::npos) << msg;
}

TEST(DataDirTest, EnvironmentVariableIsUsedAndNamed) {
  TempDir dir;
  ::setenv("SVATTN_DATA", dir.str().c_str(), 1);
  const ex::DataDir d = ex::resolve_data_dir("");
  EXPECT_EQ(d.path, dir.str());
  EXPECT_EQ(d.source, "SVATTN_DATA");
  ::setenv("SVATTN_DATA", "/nonexistent/env-data", 1);
  const std::string msg = error_of([] { ex::resolve_data_dir(""); });
  ::unsetenv("SVATTN_DATA");
  EXPECT_NE(msg.find("SVATTN_DATA"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/nonexistent/env-data"), std::string::npos) << msg;
}

TEST(DataDirTest, FlagWinsOverEnvironment) {
  TempDir a, b;
  ::setenv("SVATTN_DATA", b.str().c_str(), 1);
  const ex::DataDir d = ex::resolve_data_dir(a.str());
  ::unsetenv("SVATTN_DATA");
  EXPECT_EQ(d.path, a.str());
  EXPECT_EQ(d.source, "--data-dir");
}

TEST(DataDirTest, MissingFileNamesFileAndDownloadSource) {
  TempDir dir;
  const ex::DataDir d{dir.str(), "--data-dir"};
  const std::string m1 = error_of([&] { ex::data_file(d, "mimic-iii-demo/vitals.csv.gz"); });
  EXPECT_NE(m1.find("mimic-iii-demo/vitals.csv.gz"), std::string::npos) << m1;
  EXPECT_NE(m1.find("physionet.org/content/mimiciii-demo"), std::string::npos) << m1;
  const std::string m2 = error_of([&] { ex::data_file(d, "physionet2012/set-a.tar.gz"); });
  EXPECT_NE(m2.find("set-a.tar.gz"), std::string::npos) << m2;
  EXPECT_NE(m2.find("physionet.org/content/challenge-2012"), std::string::npos) << m2;
  // E4 on a data directory without the file fails with the same message.
  ex::ExperimentOptions o = tiny(dir.file("out"));
  o.data_dir = dir.str();
  const std::string m3 = error_of([&] { ex::run_experiment("E4", o).to_json(); });
  EXPECT_NE(m3.find("vitals.csv.gz"), std::string::npos) << m3;
}

// ------------------------------------------------------------------------------------ ICU

TEST(IcuTest, CriticalLabelsFollowTheDocumentedThresholds) {
  const double n = kNaN;
  const ex::VitalVector normal = vitals(80, 120, 70, 85, 16, 97, 37);
  EXPECT_FALSE(ex::is_critical(normal));
  EXPECT_FALSE(ex::is_critical(vitals(n, n, n, n, n, n, n)));
  // SpO2 < 90
  EXPECT_TRUE(ex::is_critical(vitals(80, 120, 70, 85, 16, 89.9, 37)));
  EXPECT_FALSE(ex::is_critical(vitals(80, 120, 70, 85, 16, 90, 37)));
  // MAP < 65
  EXPECT_TRUE(ex::is_critical(vitals(80, 120, 70, 64.9, 16, 97, 37)));
  EXPECT_FALSE(ex::is_critical(vitals(80, 120, 70, 65, 16, 97, 37)));
  // HR > 130 or < 40
  EXPECT_TRUE(ex::is_critical(vitals(130.1, 120, 70, 85, 16, 97, 37)));
  EXPECT_FALSE(ex::is_critical(vitals(130, 120, 70, 85, 16, 97, 37)));
  EXPECT_TRUE(ex::is_critical(vitals(39.9, 120, 70, 85, 16, 97, 37)));
  EXPECT_FALSE(ex::is_critical(vitals(40, 120, 70, 85, 16, 97, 37)));
  // RR > 30
  EXPECT_TRUE(ex::is_critical(vitals(80, 120, 70, 85, 30.5, 97, 37)));
  EXPECT_FALSE(ex::is_critical(vitals(80, 120, 70, 85, 30, 97, 37)));
  // SBP < 90
  EXPECT_TRUE(ex::is_critical(vitals(80, 89, 70, 85, 16, 97, 37)));
  EXPECT_FALSE(ex::is_critical(vitals(80, 90, 70, 85, 16, 97, 37)));
  // Temperature and DBP have no threshold; a missing vital never fires.
  EXPECT_FALSE(ex::is_critical(vitals(n, n, 20, n, n, n, 41)));
  EXPECT_TRUE(ex::is_critical(vitals(n, n, n, 60, n, n, n)));
  const auto why = ex::critical_reasons(vitals(150, 80, 40, 50, 35, 85, 37));
  EXPECT_EQ(why.size(), 5u);  // SpO2, MAP, HR high, RR, SBP
  EXPECT_EQ(ex::critical_thresholds().size(), 6u);
}

TEST(IcuTest, MimicReaderAggregatesHoursAndLabels) {
  TempDir dir;
  std::string csv = kHeader;
  // Stay 1, hour 0: two HR readings averaged (100, 140 -> 120, not critical), SpO2 88 (critical).
  csv += row("1", "2100-01-01 10:05:00", "HeartRate", 100);
  csv += row("1", "2100-01-01 10:35:00", "HeartRate", 140);
  csv += row("1", "2100-01-01 10:05:00", "SpO2", 88);
  // hour 1: temperature in Fahrenheit, an error-flagged MAP (dropped), an implausible HR (dropped).
  csv += row("1", "2100-01-01 11:00:00", "TempF", 98.6);
  csv += row("1", "2100-01-01 11:00:00", "MeanBP", 40, "1");
  csv += row("1", "2100-01-01 11:00:00", "HeartRate", 0);
  // hour 3 (hour 2 has no data): MAP 60 -> critical.
  csv += row("1", "2100-01-01 13:10:00", "MeanBP", 60);
  // Stay 2 across midnight: RR 31 at 23:00 and SBP 120 at 00:00 next day.
  csv += row("2", "2100-01-01 23:59:00", "RespRate", 31);
  csv += row("2", "2100-01-02 00:01:00", "SysBP", 120);
  write_gz(dir.file("vitals.csv.gz"), csv);
  const ex::IcuDataset d = ex::load_mimic_vitals(dir.file("vitals.csv.gz"));
  ASSERT_EQ(d.stays.size(), 2u);
  EXPECT_EQ(d.rows_read, 9);
  EXPECT_EQ(d.rows_flagged_error, 1);
  EXPECT_EQ(d.rows_out_of_range, 1);
  const ex::IcuStay& s1 = d.stays[0];
  EXPECT_EQ(s1.id, "1");
  ASSERT_EQ(s1.hours.size(), 3u);
  EXPECT_EQ(s1.hours[0].hour, 0);
  EXPECT_DOUBLE_EQ(s1.hours[0].measured[ex::kHeartRate], 120.0);
  EXPECT_TRUE(ex::is_critical(s1.hours[0].measured));
  EXPECT_EQ(s1.hours[1].hour, 1);
  EXPECT_NEAR(s1.hours[1].measured[ex::kTempC], 37.0, 1e-9);
  EXPECT_TRUE(std::isnan(s1.hours[1].measured[ex::kMeanBp]));
  EXPECT_TRUE(std::isnan(s1.hours[1].measured[ex::kHeartRate]));
  EXPECT_FALSE(ex::is_critical(s1.hours[1].measured));
  EXPECT_EQ(s1.hours[2].hour, 3);
  EXPECT_TRUE(ex::is_critical(s1.hours[2].measured));
  const ex::IcuStay& s2 = d.stays[1];
  ASSERT_EQ(s2.hours.size(), 2u);
  EXPECT_EQ(s2.hours[1].hour, 1);  // 23:xx -> 00:xx is the next clock hour
  EXPECT_TRUE(ex::is_critical(s2.hours[0].measured));
  EXPECT_FALSE(ex::is_critical(s2.hours[1].measured));

  // Keys: forward fill within a stay, dataset mean before the first measurement, standardised.
  const ex::IcuKeys k = ex::icu_keys(d);
  ASSERT_EQ(k.keys.rows(), 5);
  ASSERT_EQ(k.stays(), 2);
  EXPECT_EQ(k.stay_begin[1], 3);
  EXPECT_EQ(std::vector<char>(k.critical.begin(), k.critical.end()),
            (std::vector<char>{1, 0, 1, 1, 0}));
  // HR measured once (hourly mean 120): mean 120, degenerate std -> 1; carried forward -> 0.
  EXPECT_DOUBLE_EQ(k.mean[ex::kHeartRate], 120.0);
  EXPECT_DOUBLE_EQ(k.keys(1, ex::kHeartRate), 0.0);
  // MAP measured once (60): stay 1 hour 0 has the mean (0), hour 3 has 60 -> 0 as well.
  EXPECT_DOUBLE_EQ(k.keys(0, ex::kMeanBp), 0.0);
  // SpO2 only in hour 0 of stay 1: carried forward into hours 1 and 3 of stay 1.
  EXPECT_DOUBLE_EQ(k.keys(2, ex::kSpO2), k.keys(0, ex::kSpO2));
}

TEST(IcuTest, PhysionetRecordParsing) {
  const std::string text =
      "Time,Parameter,Value\n00:00,RecordID,555\n00:00,Age,70\n00:07,HR,73\n00:37,HR,77\n"
      "00:37,NISysABP,85\n01:37,SaO2,88\n01:40,Temp,-1\n47:59,RespRate,35\n";
  long read = 0, dropped = 0;
  const ex::IcuStay s = ex::parse_physionet_record(text, "fallback", &read, &dropped);
  EXPECT_EQ(s.id, "555");
  EXPECT_EQ(read, 5);  // the -1 temperature is a missing value, not a measurement
  ASSERT_EQ(s.hours.size(), 3u);
  EXPECT_EQ(s.hours[0].hour, 0);
  EXPECT_DOUBLE_EQ(s.hours[0].measured[ex::kHeartRate], 75.0);
  EXPECT_TRUE(ex::is_critical(s.hours[0].measured));  // SBP 85
  EXPECT_EQ(s.hours[1].hour, 1);
  EXPECT_DOUBLE_EQ(s.hours[1].measured[ex::kSpO2], 88.0);
  EXPECT_TRUE(std::isnan(s.hours[1].measured[ex::kTempC]));
  EXPECT_EQ(s.hours[2].hour, 47);
  EXPECT_TRUE(ex::is_critical(s.hours[2].measured));  // RR 35
}

TEST(IcuTest, PhysionetArchiveReader) {
  if (std::system("command -v tar >/dev/null 2>&1") != 0) GTEST_SKIP() << "tar not installed";
  TempDir dir;
  fs::create_directories(dir.file("set-x"));
  std::ofstream(dir.file("set-x/1001.txt")) << "Time,Parameter,Value\n00:00,RecordID,1001\n00:10,HR,150\n";
  std::ofstream(dir.file("set-x/1002.txt")) << "Time,Parameter,Value\n00:00,RecordID,1002\n02:10,MAP,80\n";
  const std::string cmd = "cd '" + dir.str() + "' && tar czf set-x.tar.gz set-x";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const ex::IcuDataset d = ex::load_physionet2012({dir.file("set-x.tar.gz")});
  ASSERT_EQ(d.stays.size(), 2u);
  EXPECT_EQ(d.stays[0].id, "1001");
  EXPECT_TRUE(ex::is_critical(d.stays[0].hours[0].measured));
  EXPECT_EQ(d.stays[1].hours[0].hour, 2);
  EXPECT_THROW(ex::load_physionet2012({dir.file("missing.tar.gz")}), svattn::IoError);
}

// ------------------------------------------------------------------------------------ selection

TEST(SelectionTest, EveryMethodKeepsExactlyTheBudget) {
  ex::Rng rng(7);
  const svattn::RowMatrix keys = ex::gaussian_keys(60, 4, 1.0, rng);
  const svattn::RowMatrix future = ex::gaussian_keys(30, 4, 1.0, rng);
  for (int b : {1, 2, 5, 17, 59, 60, 80}) {
    ex::SelectionProblem p;
    p.keys = &keys;
    p.queries = &keys;
    p.future_queries = &future;
    p.budget = b;
    p.sv.kernel.bandwidth = 2.0;
    for (ex::Method m : {ex::Method::kSv, ex::Method::kSvBounded, ex::Method::kHeavyHitters,
                         ex::Method::kH2o, ex::Method::kH2oOracle, ex::Method::kSnapKv,
                         ex::Method::kRecency, ex::Method::kRandom}) {
      const ex::Selection s = ex::select_tokens(m, p);
      ASSERT_EQ(static_cast<int>(s.kept.size()), std::min(b, 60)) << ex::method_name(m) << " B=" << b;
      EXPECT_TRUE(std::is_sorted(s.kept.begin(), s.kept.end()));
      EXPECT_EQ(std::set<int>(s.kept.begin(), s.kept.end()).size(), s.kept.size());
      EXPECT_GE(s.kept.front(), 0);
      EXPECT_LT(s.kept.back(), 60);
      if (m == ex::Method::kRecency) EXPECT_EQ(s.kept.front(), 60 - std::min(b, 60));
      if (m == ex::Method::kSv && b < 60) {
        EXPECT_GE(s.support_size, b);  // C = 1/B forces |S u E| >= B
      }
    }
  }
}

TEST(SelectionTest, H2oKeepsTheRecentWindowAndTopKBreaksTiesToRecent) {
  Eigen::VectorXd score(5);
  score << 1, 3, 3, 0, 2;
  EXPECT_EQ(ex::top_k(score, {0, 1, 2, 3, 4}, 2), (std::vector<int>{1, 2}));
  EXPECT_EQ(ex::top_k(score, {0, 1, 3, 4}, 2), (std::vector<int>{1, 4}));
  score << 1, 1, 1, 1, 1;
  EXPECT_EQ(ex::top_k(score, {0, 1, 2, 3, 4}, 2), (std::vector<int>{3, 4}));
  ex::Rng rng(3);
  const svattn::RowMatrix keys = ex::gaussian_keys(40, 3, 1.0, rng);
  ex::SelectionProblem p;
  p.keys = &keys;
  p.queries = &keys;
  p.budget = 10;
  const ex::Selection s = ex::select_tokens(ex::Method::kH2o, p);
  for (int i = 35; i < 40; ++i) EXPECT_TRUE(std::count(s.kept.begin(), s.kept.end(), i)) << i;
  // Missing inputs are reported, not guessed.
  p.queries = nullptr;
  EXPECT_THROW(ex::select_tokens(ex::Method::kH2o, p), svattn::InvalidArgument);
  EXPECT_THROW(ex::select_tokens(ex::Method::kH2oOracle, p), svattn::InvalidArgument);
}

TEST(SelectionTest, AccumulatedAttentionIsCausal) {
  svattn::RowMatrix keys(3, 1);
  keys << 0, 0, 0;
  const Eigen::VectorXd s = ex::causal_accumulated_attention(keys, keys);
  // Equal logits: query 0 gives 1 to token 0; query 1 gives 1/2, 1/2; query 2 gives 1/3 each.
  EXPECT_NEAR(s(0), 1 + 0.5 + 1.0 / 3, 1e-15);
  EXPECT_NEAR(s(1), 0.5 + 1.0 / 3, 1e-15);
  EXPECT_NEAR(s(2), 1.0 / 3, 1e-15);
}

// ------------------------------------------------------------------------------------ E1

TEST(E1Test, DecrementIsBitIdenticalToRetrainingAndDecayIsNot) {
  TempDir dir;
  ex::ExperimentOptions o = tiny(dir.str());
  o.overrides = {ex::parse_override("E1.streams=gaussian_d2,gaussian_d8,clustered,near_duplicate,learned")};
  const nlohmann::json j = ex::run_experiment("E1", o).to_json();
  ASSERT_GT(j["comparisons"].size(), 20u);
  std::set<std::string> scenarios;
  int decay_checked = 0;
  for (const auto& c : j["comparisons"]) {
    scenarios.insert(c["scenario"].get<std::string>());
    // ridge > 0: the optimum is unique, so exact forgetting must give the same bits.
    EXPECT_TRUE(c["hash_equal"].get<bool>()) << c.dump();
    EXPECT_TRUE(c["partition_equal"].get<bool>()) << c.dump();
    EXPECT_EQ(c["max_abs_dalpha"].get<double>(), 0.0);
    EXPECT_EQ(c["max_abs_ddecision"].get<double>(), 0.0);
    EXPECT_EQ(c["max_abs_dreadout"].get<double>(), 0.0);
    if (c["removed_alpha_mass"].get<double>() > 1e-9) {
      // The decay baseline never re-solves: it deviates whenever it removed coefficient mass.
      EXPECT_GT(c["decay_zero"]["max_abs_ddecision"].get<double>(), 1e-9) << c.dump();
      EXPECT_GT(c["decay_zero"]["max_abs_dalpha"].get<double>(), 0.0) << c.dump();
      EXPECT_GT(c["decay_mult"]["max_abs_ddecision"].get<double>(), 1e-9) << c.dump();
      ++decay_checked;
    }
  }
  EXPECT_GT(decay_checked, 5);
  EXPECT_TRUE(scenarios.count("margin") && scenarios.count("reserve") && scenarios.count("record") &&
              scenarios.count("random_set"));
  // The learned-keys row without keys is "pending", never faked.
  bool pending = false;
  for (const auto& s : j["streams"])
    if (s["name"] == "learned") pending = s["status"] == "pending";
  EXPECT_TRUE(pending);
  // Files: the JSON on disk equals the returned one; the Markdown carries the paper's numbers.
  std::ifstream in(dir.file("E1.json"));
  EXPECT_EQ(nlohmann::json::parse(in), j);
  const std::string md = ex::read_text_file(dir.file("E1.md"));
  EXPECT_NE(md.find("98–100 %"), std::string::npos);
  EXPECT_NE(md.find("pending"), std::string::npos);
}

TEST(E1Test, LearnedKeysFromNpyAreUsed) {
  TempDir dir;
  ex::Rng rng(11);
  svattn::write_npy(dir.file("keys.npy"), ex::gaussian_keys(90, 5, 0.7, rng));
  ex::ExperimentOptions o = tiny(dir.str());
  o.overrides = {ex::parse_override("E1.streams=learned")};
  o.learned_keys = dir.file("keys.npy");
  const nlohmann::json j = ex::run_experiment("E1", o).to_json();
  ASSERT_EQ(j["streams"].size(), 1u);
  EXPECT_EQ(j["streams"][0]["status"], "ok");
  EXPECT_EQ(j["streams"][0]["d"], 5);
  EXPECT_DOUBLE_EQ(j["streams"][0]["hash_identical_rate"].get<double>(), 1.0);
  o.learned_keys = dir.file("absent.npy");
  EXPECT_THROW(ex::run_experiment("E1", o).to_json(), svattn::IoError);
}

TEST(E1Test, UnknownStreamIsRejected) {
  TempDir dir;
  ex::ExperimentOptions o = tiny(dir.str());
  o.overrides = {ex::parse_override("E1.streams=gaussian_d3")};
  const std::string msg = error_of([&] { ex::run_experiment("E1", o).to_json(); });
  EXPECT_NE(msg.find("gaussian_d3"), std::string::npos);
  EXPECT_NE(msg.find("gaussian_d8"), std::string::npos);  // lists the known ones
}

// The typed result round-trips through E1.json (under `result`), and the report rendered from the
// file alone is the one the run wrote: render reads no option but the output folder (other
// preset, seed, streams, trials, keys and data directory here), re-solves nothing (the timings
// would differ) and reads no data. A result without a required field is refused naming it.
TEST(E1Test, ReportRendersFromTheResultInE1JsonAlone) {
  namespace e1 = ex::e1_forgetting;
  TempDir dir, again;
  ex::ExperimentOptions o = tiny(dir.str());
  o.overrides = {ex::parse_override("E1.streams=gaussian_d2,near_duplicate,learned")};
  ex::run_experiment("E1", o);
  const auto text = [](const std::string& path) {
    std::ifstream f(path);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const nlohmann::json file = nlohmann::json::parse(text(dir.file("E1.json")));
  const e1::Result r = e1::Result::from_json(file.at("result"));
  ASSERT_EQ(r.streams.size(), 3u);
  EXPECT_EQ(r.selected_streams, (std::vector<std::string>{"gaussian_d2", "near_duplicate", "learned"}));
  EXPECT_EQ(r.streams[2].status, "pending");
  EXPECT_EQ(r.trials, r.settings.trials);
  std::size_t deletions = 0;
  for (const auto& s : r.streams) deletions += s.comparisons.size();
  EXPECT_EQ(deletions, file["comparisons"].size());
  EXPECT_EQ(e1::Result::from_json(r.to_json()).to_json(), r.to_json());
  svattn::test::expect_every_key_checked(
      file.at("result"), [](const nlohmann::json& j) { e1::Result::from_json(j); }, {"settings"}, {"machine"});
  EXPECT_EQ(r.streams[0].comparisons[0].to_json(), file["comparisons"][0]);
  ex::ExperimentOptions o2 = tiny(again.str());
  o2.preset = "quick";
  o2.seed = 7;
  o2.overrides = {ex::parse_override("E1.trials=3"), ex::parse_override("E1.streams=gaussian_d8")};
  o2.learned_keys = again.file("absent.npy");
  o2.data_dir = "/nonexistent";
  e1::render(r, o2);
  const std::string md = text(dir.file("E1.md"));
  EXPECT_NE(md.find("## By deletion kind (all streams)"), std::string::npos);
  EXPECT_EQ(text(again.file("E1.md")), md);
  EXPECT_EQ(nlohmann::json::parse(text(again.file("E1.json"))), file);
  // An infinite deviation (written as null) reads back as infinity, so the report keeps "inf".
  nlohmann::json inf = file.at("result");
  inf["streams"][0]["comparisons"][0]["max_abs_dreadout"] = nullptr;
  EXPECT_EQ(e1::Result::from_json(inf).streams[0].comparisons[0].dreadout,
            std::numeric_limits<double>::infinity());
  const auto refused = [&](const std::function<void(nlohmann::json&)>& breaks, const std::string& name) {
    nlohmann::json broken = file.at("result");
    breaks(broken);
    const std::string msg = error_of([&] { e1::Result::from_json(broken); });
    EXPECT_NE(msg.find(name), std::string::npos) << name << ": " << msg;
  };
  refused([](nlohmann::json& b) { b.erase("trials"); }, "`trials`");
  refused([](nlohmann::json& b) { b["streams"][0]["comparisons"][0].erase("hash_equal"); }, "`hash_equal`");
  refused([](nlohmann::json& b) { b["streams"][1]["comparisons"][0]["decay_zero"].erase("max_abs_dalpha"); },
          "`max_abs_dalpha`");
  refused([](nlohmann::json& b) { b["streams"].erase(1); }, "`streams`");
  EXPECT_THROW(e1::Result::from_json(file), svattn::FormatError);  // the report, not the result
}

// ------------------------------------------------------------------------------------ E2

TEST(E2Test, BudgetsAreEqualAcrossMethods) {
  TempDir dir;
  const nlohmann::json j = ex::run_experiment("E2", tiny(dir.str())).to_json();
  EXPECT_TRUE(j["budgets_equal"].get<bool>());
  const auto budgets = j["settings"]["budgets"].get<std::vector<int>>();
  ASSERT_FALSE(budgets.empty());
  int methods = 0;
  for (const auto& [name, m] : j["methods"].items()) {
    ++methods;
    for (int b : budgets) {
      const auto& bj = m["budgets"][std::to_string(b)];
      for (const auto& k : bj["retained_counts"]) EXPECT_EQ(k.get<int>(), b) << name << " B=" << b;
      const double r = bj["recall_mean"].get<double>();
      EXPECT_GE(r, 0.0);
      EXPECT_LE(r, 1.0);
    }
  }
  EXPECT_EQ(methods, 8);
  EXPECT_TRUE(fs::exists(dir.file("E2.md")));
  EXPECT_FALSE(j["summary"].empty());
}

// The typed result round-trips through E2.json, and the report rendered from the file alone is
// the one the run wrote; a file without one method's outcomes is refused naming the field.
TEST(E2Test, ReportRendersFromTheResultInE2JsonAlone) {
  TempDir dir, again;
  ex::run_experiment("E2", tiny(dir.str()));
  const auto text = [](const std::string& path) {
    std::ifstream f(path);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const nlohmann::json file = nlohmann::json::parse(text(dir.file("E2.json")));
  const ex::e2_rare_recall::Result r = ex::e2_rare_recall::Result::from_json(file);
  EXPECT_EQ(r.outcomes.size(), 8u);
  EXPECT_EQ(r.sigmas.size(), static_cast<std::size_t>(r.settings.seeds));
  EXPECT_EQ(ex::e2_rare_recall::Result::from_json(r.to_json()).to_json(), r.to_json());
  ex::e2_rare_recall::render(r, tiny(again.str()));
  const std::string md = text(dir.file("E2.md"));
  EXPECT_NE(md.find("## Rare-item recall (retained)"), std::string::npos);
  EXPECT_EQ(text(again.file("E2.md")), md);
  nlohmann::json broken = file;
  broken["outcomes"].erase("sv");
  EXPECT_THROW(ex::e2_rare_recall::Result::from_json(broken), svattn::FormatError);
}

// ------------------------------------------------------------------------------------ E4

TEST(E4Test, BudgetsEqualAndCriticalHoursCountedOnAHandMadeDataset) {
  TempDir dir;
  fs::create_directories(dir.file("mimic-iii-demo"));
  std::string csv = kHeader;
  int critical = 0;
  for (int stay = 0; stay < 3; ++stay) {
    for (int h = 0; h < 20; ++h) {
      char t[32];
      std::snprintf(t, sizeof t, "2100-01-%02d %02d:00:00", 1 + h / 24, h % 24);
      const bool crit = (h % 7 == 3);
      critical += crit ? 1 : 0;
      csv += row(std::to_string(100 + stay), t, "HeartRate", crit ? 140.0 : 80.0 + h % 3);
      csv += row(std::to_string(100 + stay), t, "SysBP", 120.0 + stay);
      csv += row(std::to_string(100 + stay), t, "SpO2", 97.0 - (h % 2));
    }
  }
  write_gz(dir.file("mimic-iii-demo/vitals.csv.gz"), csv);
  ex::ExperimentOptions o = tiny(dir.file("out"));
  o.data_dir = dir.str();
  const nlohmann::json j = ex::run_experiment("E4", o).to_json();
  EXPECT_TRUE(j["budgets_equal"].get<bool>());
  ASSERT_EQ(j["datasets"].size(), 1u);
  const auto& ds = j["datasets"][0];
  EXPECT_EQ(ds["stays_used"], 3);
  EXPECT_EQ(ds["hours"], 60);
  EXPECT_EQ(ds["critical_hours"], critical);
  EXPECT_EQ(ds["threshold_hours"]["HR > 130 /min"], critical);
  for (const auto& [name, m] : ds["methods"].items()) {
    if (name == "upper_bound") continue;
    for (const auto& [f, fj] : m["fractions"].items()) {
      EXPECT_EQ(fj["retained_tokens"], fj["budget_tokens"]) << name << " f=" << f;
      EXPECT_EQ(fj["critical_total"], critical);
      EXPECT_LE(fj["pooled_share"].get<double>(),
                ds["methods"]["upper_bound"]["fractions"][f]["pooled_share"].get<double>() + 1e-12);
    }
  }
  // Budget 10 % of 20 hours = 2 hours per stay.
  EXPECT_EQ(ds["methods"]["sv"]["fractions"]["0.10"]["budget_tokens"], 6);
  // The sweep re-scores the same selections: its "standard" rows are the main tables; HR 140 is
  // no profound or two-system derangement, but a NEWS2 red score and an early warning.
  const std::map<std::string, int> expected = {
      {"extreme", 0},         {"profound", 0},         {"two-system", 0},
      {"standard", critical}, {"news2-red", critical}, {"early-warning", critical}};
  ASSERT_EQ(ds["criticality_sweep"].size(), expected.size());
  for (const auto& def : ds["criticality_sweep"]) {
    const std::string name = def["definition"];
    EXPECT_EQ(def["critical_hours"], expected.at(name)) << name;
    for (const auto& [f, cell] : def["fractions"].items()) {
      for (const auto& [m, mj] : cell["methods"].items()) {
        if (expected.at(name) == 0) {
          const auto& v = mj["pooled_share"];  // NaN (null once written): nothing to retain
          EXPECT_TRUE(v.is_null() || std::isnan(v.get<double>())) << name;
          continue;
        }
        EXPECT_LE(mj["pooled_share"].get<double>(), cell["upper_bound"].get<double>() + 1e-12)
            << name << m;
        if (name == "standard") {
          EXPECT_EQ(mj["pooled_share"], ds["methods"][m]["fractions"][f]["pooled_share"])
              << m << " f=" << f;
        }
      }
    }
  }
}

// The typed result round-trips through E4.json (under `result`), and the report rendered from the
// file alone is the one the run wrote; a result without one method's tallies is refused.
TEST(E4Test, ReportRendersFromTheResultInE4JsonAlone) {
  TempDir dir, again;
  fs::create_directories(dir.file("mimic-iii-demo"));
  std::string csv = kHeader;
  for (int stay = 0; stay < 2; ++stay) {
    for (int h = 0; h < 16; ++h) {
      char t[32];
      std::snprintf(t, sizeof t, "2100-01-01 %02d:00:00", h);
      csv += row(std::to_string(200 + stay), t, "HeartRate", h % 5 == 2 ? 150.0 : 75.0 + h % 4);
      csv += row(std::to_string(200 + stay), t, "SysBP", 118.0 + stay);
    }
  }
  write_gz(dir.file("mimic-iii-demo/vitals.csv.gz"), csv);
  ex::ExperimentOptions o = tiny(dir.file("out"));
  o.data_dir = dir.str();
  ex::run_experiment("E4", o);
  const auto text = [](const std::string& path) {
    std::ifstream f(path);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const nlohmann::json file = nlohmann::json::parse(text(dir.file("out/E4.json")));
  const ex::e4_icu::Result r = ex::e4_icu::Result::from_json(file.at("result"));
  ASSERT_EQ(r.datasets.size(), 1u);
  EXPECT_EQ(r.datasets[0].hours, 32);
  EXPECT_EQ(ex::e4_icu::Result::from_json(r.to_json()).to_json(), r.to_json());
  svattn::test::expect_every_key_checked(
      file.at("result"), [](const nlohmann::json& j) { ex::e4_icu::Result::from_json(j); },
      {"settings", "upper", "methods"}, {"machine"});
  ex::ExperimentOptions o2 = tiny(again.str());
  o2.data_dir = "/nonexistent";  // rendering reads no data
  ex::e4_icu::render(r, o2);
  const std::string md = text(dir.file("out/E4.md"));
  EXPECT_NE(md.find("Criticality sweep"), std::string::npos);
  EXPECT_EQ(text(again.file("E4.md")), md);
  nlohmann::json broken = file.at("result");
  broken["datasets"][0]["tallies"].erase("sv");
  EXPECT_THROW(ex::e4_icu::Result::from_json(broken), svattn::FormatError);
}

TEST(IcuTest, CriticalityDefinitionsAreStatedAndOrdered) {
  const double n = std::nan("");
  const auto& defs = ex::criticality_definitions();
  ASSERT_EQ(defs.size(), 6u);
  EXPECT_EQ(std::string(defs[3].name), "standard");
  EXPECT_EQ(defs[3].rules.size(), ex::critical_thresholds().size());
  const auto& news2 = ex::criticality_definition("news2-red");
  EXPECT_TRUE(news2.meets(vitals(131, n, n, n, n, n, n)));  // >= is inclusive
  EXPECT_FALSE(news2.meets(vitals(130.9, n, n, n, n, n, n)));
  EXPECT_TRUE(news2.meets(vitals(n, n, n, n, 8, n, n)));  // <= is inclusive
  EXPECT_FALSE(news2.meets(vitals(n, n, n, n, 8.1, n, n)));
  EXPECT_TRUE(news2.meets(vitals(n, n, n, n, n, n, 35.0)));
  const auto& two = ex::criticality_definition("two-system");
  EXPECT_FALSE(two.meets(vitals(140, n, n, n, n, n, n)));
  EXPECT_TRUE(two.meets(vitals(140, n, n, 60, n, n, n)));
  EXPECT_EQ(two.rules_met(vitals(140, 85, n, 60, 31, 89, n)), 5);
  EXPECT_FALSE(ex::criticality_definition("profound").meets(vitals(n, n, n, n, n, n, n)));
  // Every hour critical under a stricter definition is critical under "standard" or wider ones.
  for (const auto& v : {vitals(161, n, n, n, n, n, n), vitals(n, 69, n, n, n, n, n),
                        vitals(n, n, n, n, 41, n, n), vitals(n, n, n, n, n, 79, n)}) {
    for (std::size_t d = 0; d < defs.size();
         ++d)  // one rule met: all but the two-system definition
      EXPECT_EQ(defs[d].meets(v), std::string(defs[d].name) != "two-system") << defs[d].name;
  }
  const std::string msg = error_of([] { ex::criticality_definition("severe"); });
  EXPECT_NE(msg.find("'severe'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("news2-red"), std::string::npos) << msg;
}

// ------------------------------------------------------------------------------------ CLI

#ifdef SVATTN_CLI
TEST(ExperimentCliTest, RunsAndReportsDataErrors) {
  TempDir dir;
  const std::string ok = std::string(SVATTN_CLI) + " experiment E2 --preset tiny --quiet --no-plots --out '" +
                         dir.file("o") + "' > '" + dir.file("log") + "' 2>&1";
  EXPECT_EQ(WEXITSTATUS(std::system(ok.c_str())), 0) << ex::read_text_file(dir.file("log"));
  EXPECT_TRUE(fs::exists(dir.file("o/E2.md")));
  EXPECT_TRUE(fs::exists(dir.file("o/E2.json")));
  const std::string bad = std::string(SVATTN_CLI) + " experiment E4 --preset tiny --quiet --data-dir '" +
                          dir.file("nodata") + "' --out '" + dir.file("o") + "' > '" + dir.file("log2") +
                          "' 2>&1";
  EXPECT_EQ(WEXITSTATUS(std::system(bad.c_str())), 2);
  const std::string log = ex::read_text_file(dir.file("log2"));
  EXPECT_NE(log.find("nodata"), std::string::npos) << log;
  EXPECT_NE(log.find("--data-dir"), std::string::npos) << log;
}
#endif

TEST(ExperimentApiTest, IdsTitlesAndUnknownIds) {
  // This binary links only the torch-free half of the wing: E3, E5 and E6 are listed, not runnable.
  if (ex::find_experiment("E7").available()) {
    EXPECT_EQ(ex::experiment_ids(), (std::vector<std::string>{"E1", "E2", "E4", "E7"}));
  } else {
    EXPECT_EQ(ex::experiment_ids(), (std::vector<std::string>{"E1", "E2", "E4"}));
    EXPECT_THROW(ex::run_experiment("E7", ex::ExperimentOptions{}), svattn::InvalidArgument);
  }
  ASSERT_EQ(ex::all_experiments().size(), 7u);
  for (const auto& e : ex::all_experiments()) {
    EXPECT_FALSE(e.title.empty());
    EXPECT_EQ(e.available(), !!e.presets) << e.id;
    if (!e.available()) EXPECT_FALSE(e.needs.empty()) << e.id;
    if (e.available()) EXPECT_TRUE(e.presets("tiny").is_object()) << e.id;
  }
  EXPECT_EQ(&ex::find_experiment("e2"), &ex::find_experiment("E2"));
  EXPECT_THROW(ex::find_experiment("E8"), svattn::InvalidArgument);
  ex::ExperimentOptions o;
  try {
    ex::run_experiment("E3", o);
    FAIL() << "E3 ran without LibTorch";
  } catch (const svattn::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("LibTorch"), std::string::npos) << e.what();
  }
  o.preset = "huge";
  EXPECT_THROW(o.validate(), svattn::InvalidArgument);
  ex::ExperimentOptions s;
  s.out_dir = "";
  EXPECT_THROW(s.validate(), svattn::InvalidArgument);
  s.out_dir = "out";
  EXPECT_NO_THROW(s.validate());
}
