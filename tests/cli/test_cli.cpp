// End-to-end tests of the svattn binary: bad input gives exit 2 and one stderr line naming the
// problem; --json field names are exact; replay and solve agree bit for bit; forget-check
// certifies.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"
#include "support/random_matrix.h"
#include "svattn/io.h"

namespace svattn {
namespace {

using test::RunResult;
using test::TempDir;
using test::expect_bad_input;

RunResult run(const std::vector<std::string>& args, const TempDir& dir) {
  return test::run_binary(SVATTN_CLI, args, dir);
}

std::set<std::string> keys_of(const nlohmann::json& j) {
  std::set<std::string> out;
  for (const auto& [k, v] : j.items()) out.insert(k);
  return out;
}

/// Random Gaussian keys written as .npy; returns the path.
std::string gaussian_keys(const TempDir& dir, const std::string& name, int n, int d,
                          std::uint64_t seed) {
  support::Rng rng(seed);
  const RowMatrix m = support::gaussian_matrix(n, d, rng);
  const std::string p = dir.file(name);
  if (name.size() > 4 && name.substr(name.size() - 4) == ".npy") {
    write_npy(p, m);
  } else {
    write_csv(p, m);
  }
  return p;
}


const std::set<std::string> kSolveFields = {"n",         "dim", "settings",    "status",
                                            "warmup",    "ids", "alpha",       "b",
                                            "partition", "kkt", "state_sha256"};

TEST(CliBadInput, BadFilesExitTwoWithOneLine) {
  TempDir dir("cli");
  const std::string good = dir.write("good.csv", "0,0\n1,0\n0,1\n1,1\n0.5,0.5\n");
  struct Case {
    std::string name;
    std::string contents;
    std::vector<std::string> fragments;
  };
  const std::vector<Case> cases = {
      {"nan.csv", "0,0\n1,nan\n", {"nan.csv", "line 2", "column 2"}},
      {"inf.csv", "0,0\n1,0\n-Inf,1\n", {"inf.csv", "line 3", "column 1"}},
      {"ragged.csv", "0,0\n1,0,3\n", {"ragged.csv", "line 2", "ragged"}},
      {"empty.csv", "", {"empty.csv", "empty"}},
      {"comments.csv", "# nothing here\n", {"comments.csv", "empty"}},
      {"text.csv", "0,0\nfoo,1\n", {"text.csv", "line 2", "column 1"}},
      {"bad.npy", "this is not numpy data", {"bad.npy", "magic"}},
  };
  for (const auto& c : cases) {
    const std::string p = dir.write(c.name, c.contents);
    SCOPED_TRACE(c.name);
    expect_bad_input(run({"solve", "--keys", p, "--C", "0.5"}, dir), c.fragments);
  }
  // Missing file.
  const std::string missing = dir.file("missing.csv");
  expect_bad_input(run({"solve", "--keys", missing, "--C", "0.5"}, dir), {"missing.csv"});
  // Bad values file, and a values file whose row count differs from the keys'.
  const std::string bad_values = dir.write("vals_nan.csv", "1\n2\nnan\n4\n5\n");
  expect_bad_input(run({"solve", "--keys", good, "--values", bad_values, "--C", "0.5"}, dir),
                   {"vals_nan.csv", "line 3"});
  const std::string short_values = dir.write("vals_short.csv", "1\n2\n3\n");
  expect_bad_input(run({"solve", "--keys", good, "--values", short_values, "--C", "0.5"}, dir),
                   {"good.csv", "vals_short.csv", "5", "3"});
}

TEST(CliBadInput, BadSettingsExitTwoNamingTheField) {
  TempDir dir("cli");
  const std::string k = dir.write("k.csv", "0,0\n1,0\n0,1\n1,1\n");
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
      {{"--C", "0"}, {"C"}},
      {{"--C", "-0.5"}, {"C"}},
      {{"--C", "nan"}, {"C"}},
      {{"--C", "abc"}, {"--C"}},
      {{"--C", "0.5", "--bandwidth", "0"}, {"bandwidth"}},
      {{"--C", "0.5", "--bandwidth", "-2"}, {"bandwidth"}},
      {{"--C", "0.5", "--kernel", "sigmoid"}, {"sigmoid"}},
      {{"--C", "0.5", "--ridge", "-1"}, {"ridge"}},
      {{"--C", "0.5", "--kernel", "poly", "--degree", "0"}, {"degree"}},
      {{"--C", "0.5", "--kernel", "poly", "--coef0", "-1"}, {"coef0"}},
      {{}, {"--C"}},  // --C is required
  };
  for (const auto& [extra, fragments] : cases) {
    std::vector<std::string> args = {"solve", "--keys", k};
    args.insert(args.end(), extra.begin(), extra.end());
    std::string trace;
    for (const auto& a : extra) trace += a + " ";
    SCOPED_TRACE(trace);
    expect_bad_input(run(args, dir), fragments);
  }
}

TEST(CliBadInput, BadRowsExitTwoNamingTheItem) {
  TempDir dir("cli");
  const std::string k = dir.write("k.csv", "0,0\n1,0\n0,1\n1,1\n");
  for (const auto& [rows, fragment] : std::vector<std::pair<std::string, std::string>>{
           {"3-1", "3-1"}, {"x", "x"}, {"4", "4"}, {"1,,2", "empty"}, {"-1", "-1"}}) {
    SCOPED_TRACE(rows);
    expect_bad_input(run({"solve", "--keys", k, "--C", "0.5", "--exclude", rows}, dir), {fragment});
    expect_bad_input(run({"forget-check", "--keys", k, "--C", "0.5", "--remove", rows}, dir),
                     {fragment});
  }
}

TEST(CliBadInput, BadOpsFilesNameFileAndLine) {
  TempDir dir("cli");
  const std::string k = dir.write("k.csv", "0,0\n1,0\n0,1\n1,1\n");
  struct Case {
    std::string ops;
    std::vector<std::string> fragments;
  };
  const std::vector<Case> cases = {
      {"add 0-3\njump 2\n", {"ops.txt", "line 2", "jump"}},
      {"# c\n\nadd 0-9\n", {"ops.txt", "line 3", "9"}},
      {"add\n", {"ops.txt", "line 1"}},
      {"add 0-3\nevict now\n", {"ops.txt", "line 2"}},
      {"add 0-3\nremove 2-1\n", {"ops.txt", "line 2", "2-1"}},
      {"add 0-1\nremove 3\n", {"ops.txt", "line 2", "3"}},  // not present
      {"add 0-1\nadd 1-2\n", {"ops.txt", "line 2", "1"}},   // added twice
  };
  for (const auto& c : cases) {
    const std::string ops = dir.write("ops.txt", c.ops);
    SCOPED_TRACE(c.ops);
    expect_bad_input(run({"replay", "--keys", k, "--ops", ops, "--C", "0.5"}, dir), c.fragments);
  }
  expect_bad_input(run({"replay", "--keys", k, "--ops", dir.file("none.txt"), "--C", "0.5"}, dir),
                   {"none.txt"});
  const std::string ops = dir.write("ok.txt", "add 0-3\n");
  expect_bad_input(
      run({"replay", "--keys", k, "--ops", ops, "--C", "0.5", "--mode", "forgetful"}, dir),
      {"forgetful"});
  expect_bad_input(run({"replay", "--keys", k, "--ops", ops, "--C", "0.5", "--budget", "2"}, dir),
                   {"budget"});
}

TEST(CliSolve, JsonFieldsAreExactAndConsistent) {
  TempDir dir("cli");
  const std::string k = gaussian_keys(dir, "k.npy", 120, 3, 11);
  const RunResult r =
      run({"solve", "--keys", k, "--kernel", "rbf", "--bandwidth", "1.5", "--C", "0.05", "--json"},
          dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(keys_of(j), kSolveFields);
  EXPECT_EQ(keys_of(j["settings"]),
            (std::set<std::string>{"kernel", "bandwidth", "degree", "coef0", "C", "ridge"}));
  EXPECT_EQ(keys_of(j["partition"]), (std::set<std::string>{"margin", "error", "reserve"}));
  EXPECT_EQ(keys_of(j["kkt"]),
            (std::set<std::string>{"max_violation", "sum_error", "box_violation"}));
  EXPECT_EQ(j["n"], 120);
  EXPECT_EQ(j["dim"], 3);
  EXPECT_EQ(j["status"], "optimal");
  EXPECT_EQ(j["settings"]["kernel"], "rbf");
  EXPECT_EQ(j["settings"]["bandwidth"].get<double>(), 1.5);
  EXPECT_EQ(j["settings"]["C"].get<double>(), 0.05);
  EXPECT_EQ(j["ids"].size(), 120u);
  EXPECT_EQ(j["alpha"].size(), 120u);
  EXPECT_EQ(j["partition"]["margin"].size() + j["partition"]["error"].size() +
                j["partition"]["reserve"].size(),
            120u);
  double sum = 0;
  for (const auto& a : j["alpha"]) sum += a.get<double>();
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_EQ(j["state_sha256"].get<std::string>().size(), 64u);
  EXPECT_LE(j["kkt"]["max_violation"].get<double>(), 1e-9);

  // The human-readable summary names the status and the hash.
  const RunResult h = run({"solve", "--keys", k, "--bandwidth", "1.5", "--C", "0.05"}, dir);
  ASSERT_EQ(h.code, 0) << h.err;
  EXPECT_NE(h.out.find("optimal"), std::string::npos) << h.out;
  EXPECT_NE(h.out.find(j["state_sha256"].get<std::string>()), std::string::npos) << h.out;
}

TEST(CliSolve, CsvAndNpyOfTheSameKeysHashAlike) {
  TempDir dir("cli");
  const std::string npy = gaussian_keys(dir, "k.npy", 80, 4, 5);
  const std::string csv = gaussian_keys(dir, "k.csv", 80, 4, 5);
  const auto a = run({"solve", "--keys", npy, "--C", "0.1", "--bandwidth", "2", "--json"}, dir);
  const auto b = run({"solve", "--keys", csv, "--C", "0.1", "--bandwidth", "2", "--json"}, dir);
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(nlohmann::json::parse(a.out)["state_sha256"],
            nlohmann::json::parse(b.out)["state_sha256"]);
  // Values default to the keys: passing the keys as values explicitly changes nothing.
  const auto c = run(
      {"solve", "--keys", npy, "--values", csv, "--C", "0.1", "--bandwidth", "2", "--json"}, dir);
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(nlohmann::json::parse(a.out)["state_sha256"],
            nlohmann::json::parse(c.out)["state_sha256"]);
}

TEST(CliSolve, ExcludeKeepsOriginalIdsAndWarmupIsReported) {
  TempDir dir("cli");
  const std::string k = gaussian_keys(dir, "k.csv", 10, 2, 3);
  const auto r = run({"solve", "--keys", k, "--C", "0.5", "--exclude", "0,2-4", "--json"}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ids"], (std::vector<int>{1, 5, 6, 7, 8, 9}));
  // n*C = 1.5 with C = 0.25 and n = 6 is feasible; with C = 0.1, n*C = 0.6: warm-up, a = 1/n.
  const auto w = run({"solve", "--keys", k, "--C", "0.1", "--exclude", "0,2-4", "--json"}, dir);
  ASSERT_EQ(w.code, 0) << w.err;
  const auto jw = nlohmann::json::parse(w.out);
  EXPECT_EQ(jw["status"], "warmup");
  EXPECT_EQ(jw["warmup"], true);
  for (const auto& a : jw["alpha"]) EXPECT_DOUBLE_EQ(a.get<double>(), 1.0 / 6.0);
}

TEST(CliSolve, NumericalFailureExitsOneAndPrintsTheStatus) {
  TempDir dir("cli");
  // Exact duplicates with ridge 0: the margin system is singular (types.h, Status::kSingular).
  const std::string k = dir.write("dup.csv", "0,0\n0,0\n0,0\n1,0\n1,0\n0,1\n0,1\n");
  const RunResult r = run({"solve", "--keys", k, "--C", "0.2", "--ridge", "0", "--json"}, dir);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["status"], "singular");
  const RunResult h = run({"solve", "--keys", k, "--C", "0.2", "--ridge", "0"}, dir);
  EXPECT_EQ(h.code, 1);
  EXPECT_NE(h.out.find("singular"), std::string::npos) << h.out;
  // The default ridge makes the same keys well posed.
  EXPECT_EQ(run({"solve", "--keys", k, "--C", "0.2"}, dir).code, 0);
}

TEST(CliReplay, MatchesSolveBitForBitAndFieldsAreExact) {
  TempDir dir("cli");
  const std::string k = gaussian_keys(dir, "k.npy", 300, 5, 2024);
  const std::vector<std::string> problem = {"--kernel", "rbf", "--bandwidth", "2.5", "--C", "0.02"};
  const std::string ops = dir.write("ops.txt",
                                    "# build then forget two tokens\n"
                                    "add 0-299\n"
                                    "\n"
                                    "remove 5,17\n");
  std::vector<std::string> replay_args = {"replay", "--keys", k, "--ops", ops, "--json"};
  replay_args.insert(replay_args.end(), problem.begin(), problem.end());
  std::vector<std::string> solve_args = {"solve", "--keys", k, "--exclude", "5,17", "--json"};
  solve_args.insert(solve_args.end(), problem.begin(), problem.end());
  const RunResult rr = run(replay_args, dir);
  const RunResult rs = run(solve_args, dir);
  ASSERT_EQ(rr.code, 0) << rr.err;
  ASSERT_EQ(rs.code, 0) << rs.err;
  const auto jr = nlohmann::json::parse(rr.out);
  const auto js = nlohmann::json::parse(rs.out);
  EXPECT_EQ(jr["state_sha256"], js["state_sha256"]);
  EXPECT_EQ(jr["partition"], js["partition"]);
  EXPECT_EQ(jr["alpha"], js["alpha"]);
  EXPECT_EQ(jr["b"], js["b"]);
  std::set<std::string> expected = kSolveFields;
  expected.insert("mode");
  expected.insert("ops");
  EXPECT_EQ(keys_of(jr), expected);
  EXPECT_EQ(keys_of(jr["ops"]),
            (std::set<std::string>{"count", "adds", "removes", "evictions", "events", "zero_steps",
                                   "refused_entrants", "refactorizations", "canonical_solves",
                                   "repairs", "batch_fallbacks", "seconds"}));
  EXPECT_EQ(jr["mode"], "audit");
  EXPECT_EQ(jr["ops"]["count"], 2);
  EXPECT_EQ(jr["ops"]["adds"], 300);
  EXPECT_EQ(jr["ops"]["removes"], 2);
  EXPECT_EQ(jr["ops"]["evictions"], 0);
  EXPECT_GT(jr["ops"]["events"].get<long>(), 0);
}

TEST(CliReplay, EvictionKeepsTheSupportAndBoundedModeIsReported) {
  TempDir dir("cli");
  const std::string k = gaussian_keys(dir, "k.csv", 150, 3, 77);
  const std::vector<std::string> problem = {"--bandwidth", "2", "--C", "0.05"};
  const std::string ops = dir.write("ops.txt", "add 0-149\nevict\n");
  std::vector<std::string> args = {"replay", "--keys", k, "--ops", ops, "--json"};
  args.insert(args.end(), problem.begin(), problem.end());
  const RunResult r = run(args, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["partition"]["reserve"].empty());
  const long evicted = j["ops"]["evictions"].get<long>();
  EXPECT_GT(evicted, 0);
  EXPECT_EQ(j["n"].get<long>() + evicted, 150);
  // The support and its coefficients are those of the full solve.
  std::vector<std::string> solve_args = {"solve", "--keys", k, "--json"};
  solve_args.insert(solve_args.end(), problem.begin(), problem.end());
  const auto full = nlohmann::json::parse(run(solve_args, dir).out);
  EXPECT_EQ(j["partition"]["margin"], full["partition"]["margin"]);
  EXPECT_EQ(j["partition"]["error"], full["partition"]["error"]);

  std::vector<std::string> bounded = {"replay", "--keys",  k,          "--ops", ops,
                                      "--mode", "bounded", "--budget", "100",   "--json"};
  bounded.insert(bounded.end(), problem.begin(), problem.end());
  const RunResult rb = run(bounded, dir);
  ASSERT_EQ(rb.code, 0) << rb.err;
  const auto jb = nlohmann::json::parse(rb.out);
  EXPECT_EQ(jb["mode"], "bounded");
  EXPECT_EQ(jb["budget"], 100);
  EXPECT_EQ(jb["partition"]["margin"], full["partition"]["margin"]);
}

TEST(CliForgetCheck, CertifiesExactForgetting) {
  TempDir dir("cli");
  const std::string k = gaussian_keys(dir, "k.npy", 250, 4, 99);
  const RunResult r = run({"forget-check", "--keys", k, "--remove", "0-9,100", "--bandwidth", "2",
                           "--C", "0.02", "--probes", "16", "--json"},
                          dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* f :
       {"partition_match", "max_abs_dalpha", "max_abs_ddecision", "max_abs_dreadout",
        "state_sha256_decremental", "state_sha256_retrained", "timing"}) {
    EXPECT_TRUE(j.contains(f)) << f;
  }
  EXPECT_TRUE(j["timing"].contains("remove_seconds"));
  EXPECT_TRUE(j["timing"].contains("retrain_seconds"));
  EXPECT_EQ(j["partition_match"], true);
  EXPECT_EQ(j["state_sha256_decremental"], j["state_sha256_retrained"]);
  EXPECT_EQ(j["max_abs_dalpha"].get<double>(), 0.0);

  // The retrained hash is the hash `svattn solve --exclude` prints.
  const auto s = run(
      {"solve", "--keys", k, "--exclude", "0-9,100", "--bandwidth", "2", "--C", "0.02", "--json"},
      dir);
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(nlohmann::json::parse(s.out)["state_sha256"], j["state_sha256_retrained"]);
}

TEST(CliDemo, RunsSmallAndWritesJson) {
  TempDir dir("cli");
  const std::string out = dir.file("demo-out");
  const RunResult r = run({"demo", "--out", out, "--n", "300"}, dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("hashes equal yes"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(test::read_text(out + "/demo.json"));
  EXPECT_EQ(j["stream"]["equals_batch"], true);
  EXPECT_EQ(j["removal"]["ids"].size(), 20u);
}

}  // namespace
}  // namespace svattn
