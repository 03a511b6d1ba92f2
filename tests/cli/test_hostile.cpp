// Regression tests of hostile-but-fair CLI input: integer options are decimal only,
// floating-point options finite, text options UTF-8; kernels that overflow fp64 are refused at the
// setting; a non-unique optimum (ridge 0, duplicate keys) is `singular`, never `optimal`; readers
// refuse devices and FIFOs; exit 3 is reserved for bugs. Each test runs the built CLI.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
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

/// Runs the CLI under a 60 s timeout (a hang is exit 124, never a stuck test).
RunResult run(const std::vector<std::string>& args, const TempDir& dir) {
  std::vector<std::string> a = {"60", SVATTN_CLI};
  a.insert(a.end(), args.begin(), args.end());
  return test::run_binary("/usr/bin/timeout", a, dir);
}

std::string keys_file(const TempDir& dir, const std::string& name, int n, int d,
                      std::uint64_t seed) {
  support::Rng rng(seed);
  const RowMatrix m = support::gaussian_matrix(n, d, rng);
  const std::string p = dir.file(name);
  write_csv(p, m);
  return p;
}


nlohmann::json json_of(const RunResult& r) {
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

// Row 1 and the property test: an integer option given as 0NN, 0xNN, +N, ' N', Ne3 (or empty) is
// rejected with exit 2 naming the option, or read as decimal.
TEST(CliHostile, IntegerOptionsAreDecimalOnly) {
  TempDir dir("hostile");
  const std::string k = keys_file(dir, "k.csv", 30, 3, 1);
  auto solve_degree = [&](const std::string& v) {
    return run({"solve", "--keys", k, "--C", "0.2", "--kernel", "poly", "--degree", v, "--json"},
               dir);
  };
  {
    const auto j = json_of(solve_degree("010"));
    EXPECT_EQ(j["settings"]["degree"].get<int>(), 10);  // not octal 8
  }
  EXPECT_EQ(json_of(solve_degree("003"))["settings"]["degree"].get<int>(), 3);
  for (const std::string v : {"0x10", "+3", " 3", "3 ", "3e0", "1e3", "", "3.0", "--", "0b11"}) {
    SCOPED_TRACE("'" + v + "'");
    expect_bad_input(solve_degree(v), {"--degree"});
  }
  // Unsigned (seed) and 64-bit options follow the same policy.
  expect_bad_input(
      run({"forget-check", "--keys", k, "--remove", "1", "--C", "0.2", "--seed", "0x10"}, dir),
      {"--seed"});
  expect_bad_input(
      run({"forget-check", "--keys", k, "--remove", "1", "--C", "0.2", "--seed", "-1"}, dir),
      {"--seed", "negative"});
  // Out of the int64 range: the message quotes the value given, not a saturated one.
  expect_bad_input(run({"replay", "--keys", k, "--ops", k, "--C", "0.2", "--mode", "bounded",
                        "--budget", "9223372036854775808"},
                       dir),
                   {"--budget", "9223372036854775808", "out of range"});
}

TEST(CliHostile, BudgetIsValidatedLikeMemoryCreate) {
  TempDir dir("hostile");
  const std::string k = keys_file(dir, "k.csv", 30, 3, 2);
  const std::string ops = dir.write("ops.txt", "add 0-29\n");
  expect_bad_input(run({"replay", "--keys", k, "--ops", ops, "--C", "0.2", "--mode", "bounded",
                        "--budget", "-1"},
                       dir),
                   {"--budget must be >= 0", "-1"});
  const auto j = json_of(run({"replay", "--keys", k, "--ops", ops, "--C", "0.2", "--mode",
                              "bounded", "--budget", "010", "--json"},
                             dir));
  EXPECT_EQ(j["budget"].get<int>(), 10);
}

TEST(CliHostile, RowsListsAreDecimal) {
  TempDir dir("hostile");
  const std::string k = keys_file(dir, "k.csv", 30, 3, 3);
  const auto a =
      json_of(run({"solve", "--keys", k, "--C", "0.1", "--exclude", "010", "--json"}, dir));
  const auto b =
      json_of(run({"solve", "--keys", k, "--C", "0.1", "--exclude", "10", "--json"}, dir));
  EXPECT_EQ(a["state_sha256"], b["state_sha256"]);
  for (const std::string v : {"0x1", "+1", "1e1", "1.0"}) {
    SCOPED_TRACE(v);
    expect_bad_input(run({"solve", "--keys", k, "--C", "0.1", "--exclude", v}, dir), {"ROWS"});
  }
}

TEST(CliHostile, OpsFileCommentsAfterAnOp) {
  TempDir dir("hostile");
  const std::string k = keys_file(dir, "k.csv", 40, 3, 4);
  const std::string ops = dir.write("ops.txt", "add 0-39   # every token\nremove 5 # one\n");
  const auto r = json_of(run({"replay", "--keys", k, "--ops", ops, "--C", "0.1", "--json"}, dir));
  const auto s =
      json_of(run({"solve", "--keys", k, "--C", "0.1", "--exclude", "5", "--json"}, dir));
  EXPECT_EQ(r["state_sha256"], s["state_sha256"]);
}

TEST(CliHostile, FloatOptionsMustBeFiniteNumbers) {
  TempDir dir("hostile");
  const std::string k = keys_file(dir, "k.csv", 20, 3, 5);
  expect_bad_input(run({"solve", "--keys", k, "--C", ""}, dir), {"--C", "not a number"});
  expect_bad_input(run({"solve", "--keys", k, "--C", "nan"}, dir), {"--C"});
  expect_bad_input(run({"solve", "--keys", k, "--C", "0.1", "--ridge", "1e999"}, dir),
                   {"--ridge", "finite"});
}

TEST(CliHostile, TextOptionsMustBeUtf8) {
  TempDir dir("hostile");
  const std::string store = dir.file("s.db");
  expect_bad_input(
      run({"memory", "create", store, "--memory", "\xff\xfe", "--dim", "2", "--C", "0.1"}, dir),
      {"--memory", "UTF-8"});
  EXPECT_FALSE(std::filesystem::exists(store)) << "a rejected command wrote the store";
}

// Row 3: the demo never removes every token (n <= 20 used to crash on an empty memory).
TEST(CliHostile, DemoWithFewTokens) {
  TempDir dir("hostile");
  for (const std::string n : {"2", "3", "20"}) {
    SCOPED_TRACE(n);
    const auto r = run({"demo", "--n", n, "--out", dir.file("demo" + n)}, dir);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
  }
}

// Rows 4 and 6: a bandwidth whose square underflows (or overflows) fp64 is refused at the setting.
TEST(CliHostile, TinyBandwidthIsRefusedNamingIt) {
  TempDir dir("hostile");
  const std::string k = keys_file(dir, "k.csv", 10, 3, 6);
  for (const std::string s : {"1e-300", "1e-155", "1e200"}) {
    SCOPED_TRACE(s);
    expect_bad_input(run({"solve", "--keys", k, "--C", "0.3", "--bandwidth", s}, dir),
                     {"kernel.bandwidth", s == "1e-300" ? "1e-300" : ""});
  }
  const std::string store = dir.file("s.db");
  expect_bad_input(run({"memory", "create", store, "--memory", "m", "--dim", "3", "--C", "0.3",
                        "--bandwidth", "1e-300"},
                       dir),
                   {"kernel.bandwidth"});
  EXPECT_FALSE(std::filesystem::exists(store));
  // The smallest accepted bandwidth gives K = I on distinct keys: the optimum is 1/n each.
  const auto j =
      json_of(run({"solve", "--keys", k, "--C", "0.3", "--bandwidth", "1e-150", "--json"}, dir));
  EXPECT_EQ(j["status"], "optimal");
  for (const auto& a : j["alpha"]) EXPECT_NEAR(a.get<double>(), 0.1, 1e-12);
}

// Row 5: kernel values that overflow fp64 are refused naming the setting (never `optimal` with an
// infinite KKT violation).
TEST(CliHostile, OverflowingPolyKernelIsRefused) {
  TempDir dir("hostile");
  const std::string k = keys_file(dir, "k.csv", 20, 3, 7);
  expect_bad_input(
      run({"solve", "--keys", k, "--C", "0.2", "--kernel", "poly", "--degree", "1000"}, dir),
      {"kernel.degree", "1000"});
  expect_bad_input(
      run({"solve", "--keys", k, "--C", "0.2", "--kernel", "poly", "--coef0", "1e300"}, dir),
      {"kernel.coef0", "overflows"});
  const std::string ops = dir.write("ops.txt", "add 0-19\n");
  expect_bad_input(run({"replay", "--keys", k, "--ops", ops, "--C", "0.2", "--kernel", "poly",
                        "--coef0", "1e300"},
                       dir),
                   {"kernel.coef0"});
  const std::string big = dir.write("big.csv", "1e200,1\n1,1\n2,1\n");
  expect_bad_input(run({"solve", "--keys", big, "--C", "0.5", "--kernel", "linear"}, dir),
                   {"linear kernel", "token 0"});
}

// Row 7: ridge 0 with duplicate keys has no unique optimum: status singular, exit 1 with a line on
// stderr, in solve and in replay whatever the order.
TEST(CliHostile, RidgeZeroDuplicatesAreSingular) {
  TempDir dir("hostile");
  support::Rng rng(8);
  RowMatrix m = support::gaussian_matrix(10, 2, rng);
  for (int i = 5; i < 10; ++i) m.row(i) = m.row(i - 5);
  const std::string k = dir.file("same10.csv");
  write_csv(k, m);
  const auto s = run({"solve", "--keys", k, "--C", "0.3", "--ridge", "0", "--json"}, dir);
  EXPECT_EQ(s.code, 1) << s.err;
  EXPECT_EQ(nlohmann::json::parse(s.out)["status"], "singular");
  ASSERT_EQ(s.err_lines().size(), 1u) << s.err;
  EXPECT_NE(s.err.find("singular"), std::string::npos);
  for (const std::string order : {"add 0-9\n", "add 9\nadd 8\nadd 7\nadd 6\nadd 5\nadd 0-4\n"}) {
    const std::string ops = dir.write("ops.txt", order);
    const auto r =
        run({"replay", "--keys", k, "--ops", ops, "--C", "0.3", "--ridge", "0", "--json"}, dir);
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["status"], "singular");
  }
  // With the default ridge the same keys have a unique optimum.
  EXPECT_EQ(run({"solve", "--keys", k, "--C", "0.3"}, dir).code, 0);
}

// Row 10 and the /proc item: devices, FIFOs and unreadable kernel files are exit 2 at once.
TEST(CliHostile, NonRegularInputFilesAreRefused) {
  TempDir dir("hostile");
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string p : {std::string("/dev/zero"), std::string("/dev/urandom"), fifo}) {
    SCOPED_TRACE(p);
    expect_bad_input(run({"solve", "--keys", p, "--C", "0.5"}, dir), {p, "not a regular file"});
  }
  expect_bad_input(run({"solve", "--keys", "/proc/self/mem", "--C", "0.5"}, dir),
                   {"/proc/self/mem"});
  const std::string k = keys_file(dir, "k.csv", 10, 2, 9);
  expect_bad_input(run({"replay", "--keys", k, "--ops", "/dev/zero", "--C", "0.5"}, dir),
                   {"/dev/zero", "not a regular file"});
}

TEST(CliHostile, CarriageReturnLineEnds) {
  TempDir dir("hostile");
  const std::string ok = dir.write("cr.csv", "0,0\r1,0\r0,1\r1,1\r");
  const auto j = json_of(run({"solve", "--keys", ok, "--C", "0.5", "--json"}, dir));
  EXPECT_EQ(j["n"].get<int>(), 4);
  const auto bad = run({"solve", "--keys", dir.write("bad.csv", "0,0\r1,x\r"), "--C", "0.5"}, dir);
  expect_bad_input(bad, {"line 2", "column 2", "'x'"});
  EXPECT_EQ(bad.err.find("\\n"), std::string::npos) << bad.err;
}

TEST(CliHostile, DimensionErrorsArePlain) {
  TempDir dir("hostile");
  const auto r =
      run({"memory", "create", dir.file("s.db"), "--memory", "m", "--dim", "0", "--C", "0.1"}, dir);
  expect_bad_input(r, {"--dim must be >= 1", "got 0"});
  EXPECT_LT(r.err.size(), 200u) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("s.db")));
}

// Removing a token that bounded mode evicted says so (it used to say only "not present").
TEST(CliHostile, RemovingAnEvictedTokenSaysItWasEvicted) {
  TempDir dir("hostile");
  const std::string k = keys_file(dir, "k.csv", 60, 2, 10);
  const std::string ops = dir.write("ops.txt", "add 0-59\nevict\n");
  const auto j = json_of(run({"replay", "--keys", k, "--ops", ops, "--C", "0.05", "--json"}, dir));
  const auto& ids = j["ids"];
  std::set<long> kept;
  for (const auto& id : ids) kept.insert(id.get<long>());
  long gone = -1;
  for (long i = 0; i < 60 && gone < 0; ++i)
    if (!kept.count(i)) gone = i;
  ASSERT_GE(gone, 0) << "nothing was evicted";
  const std::string ops2 =
      dir.write("ops2.txt", "add 0-59\nevict\nremove " + std::to_string(gone) + "\n");
  expect_bad_input(run({"replay", "--keys", k, "--ops", ops2, "--C", "0.05"}, dir),
                   {"token " + std::to_string(gone), "was evicted"});
}

// Out-of-range `--set` values are exit 2 naming the key before anything runs or is written (they
// crashed with SIGSEGV / SIGBUS / abort, hung, exited 3, or ran with exit 0).
TEST(CliHostile, ExperimentSetValuesHaveRanges) {
  TempDir dir("hostile");
  const auto experiment = [&](const std::string& id, const std::string& set) {
    return run({"experiment", id, "--preset", "tiny", "--quiet", "--no-plots", "--out",
                dir.file("out"), "--set", set},
               dir);
  };
  for (const std::string set : {"patterns=0", "patterns=-1", "tokens=-1", "rare_share=2",
                                "seeds=-1", "budgets=[]"}) {
    SCOPED_TRACE(set);
    expect_bad_input(experiment("E2", set), {"--set E2." + set.substr(0, set.find('=')), "must be"});
  }
  expect_bad_input(experiment("E4", "fractions=[-1]"), {"--set E4.fractions", "(0, 1]"});
  for (const std::string set : {"subjects=-1", "subjects=-2", "relations=-1"}) {
    SCOPED_TRACE(set);
    const auto r = experiment("E7", set);
    if (r.err.find("not available") != std::string::npos) continue;  // a build without the store
    expect_bad_input(r, {"--set E7." + set.substr(0, set.find('='))});
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("out"))) << "a refused run wrote its directory";
}

}  // namespace
}  // namespace svattn
