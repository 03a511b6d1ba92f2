// `svattn memory import`: malformed inputs exit 2 naming the file and row and
// write nothing; chunked import equals record-by-record adds; an import killed with SIGKILL resumes
// to the same final hash. On every backend (backend_test_util.h).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

#include "backend_test_util.h"
#include "support/clock.h"
#include "support/random.h"
#include "svattn/io.h"

namespace svattn {
namespace {

using store_test::random_keys;
using store_test::TempDir;

struct CliResult {
  int code = -1;
  std::string out;
  std::string err;
};

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CliResult cli(const TempDir& dir, const std::string& args) {
  const std::string cmd =
      std::string(SVATTN_CLI) + " " + args + " >" + dir.file("o.txt") + " 2>" + dir.file("e.txt");
  const int st = std::system(cmd.c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(dir.file("o.txt")), slurp(dir.file("e.txt"))};
}

RowMatrix record_column(const std::vector<double>& ids) {
  RowMatrix r(static_cast<Eigen::Index>(ids.size()), 1);
  for (std::size_t i = 0; i < ids.size(); ++i) r(static_cast<Eigen::Index>(i), 0) = ids[i];
  return r;
}

// n records of `per` tokens: rows grouped by record, ids 0..n-1.
std::vector<double> grouped(int n, int per) {
  std::vector<double> ids;
  for (int r = 0; r < n; ++r)
    for (int p = 0; p < per; ++p) ids.push_back(r);
  return ids;
}

// Quoted for the shell (a PostgreSQL URI has '&' and '?').
std::string q(const std::string& location) { return "'" + location + "'"; }

class StoreImport : public store_test::StoreOnBackends {
 protected:
  void SetUp() override {
    store_test::StoreOnBackends::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    store_ = q(stores().at("s"));
    write_npy(dir_.file("k.npy"), random_keys(60, 3, 21));
    write_npy(dir_.file("r.npy"), record_column(grouped(20, 3)));
    ASSERT_EQ(cli(dir_, "memory create " + store_ + " --memory m --dim 3 --C 0.05").code, 0);
  }
  void expect2(const std::string& args, const std::string& file, const std::string& fragment) {
    const std::string before = stores().digest("s");
    const CliResult r = cli(dir_, args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find(file), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
    EXPECT_EQ(stores().digest("s"), before) << "a refused import changed the store";
  }
  std::string import_args(const std::string& keys, const std::string& recs) {
    return "memory import " + store_ + " --memory m --keys " + keys + " --records " + recs;
  }
  TempDir dir_;
  std::string store_;
};

TEST_P(StoreImport, ChunkedImportEqualsRecordByRecordAdds) {
  const CliResult r =
      cli(dir_, import_args(dir_.file("k.npy"), dir_.file("r.npy")) + " --chunk 7 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("records_imported"), 20);
  EXPECT_EQ(j.at("chunks"), 3);
  EXPECT_NE(r.err.find("records/s"), std::string::npos) << r.err;  // the progress line
  StoreOptions o;
  o.create = true;
  Store ref(dir_.file("ref.db"), o);
  MemorySettings ms;
  ms.problem.C = 0.05;
  ref.create_memory("m", ms, 3, 3);
  const RowMatrix k = random_keys(60, 3, 21);
  for (int rec = 19; rec >= 0; --rec) ref.add_record("m", rec, k.middleRows(3 * rec, 3));
  EXPECT_EQ(j.at("state_sha256"), ref.memory_info("m").state_sha256);
  Store s(stores().at("s"));
  EXPECT_TRUE(s.verify().ok());
  EXPECT_EQ(s.records("m").size(), 20u);
  // Importing again skips everything.
  const CliResult again =
      cli(dir_, import_args(dir_.file("k.npy"), dir_.file("r.npy")) + " --json");
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out).at("records_skipped"), 20);
}

TEST_P(StoreImport, MalformedInputsExitTwoNamingFileAndRowAndWriteNothing) {
  write_npy(dir_.file("short.npy"), record_column(std::vector<double>(59, 0.0)));
  expect2(import_args(dir_.file("k.npy"), dir_.file("short.npy")), "short.npy", "59 rows");
  std::vector<double> neg = grouped(20, 3);
  neg[17] = -4;
  write_npy(dir_.file("neg.npy"), record_column(neg));
  expect2(import_args(dir_.file("k.npy"), dir_.file("neg.npy")), "neg.npy", "row 17");
  std::vector<double> big = grouped(20, 3);
  big[5] = std::ldexp(1.0, 41);
  write_csv(dir_.file("big.csv"), record_column(big));
  expect2(import_args(dir_.file("k.npy"), dir_.file("big.csv")), "big.csv", "row 5");
  std::vector<double> frac = grouped(20, 3);
  frac[2] = 1.5;
  write_csv(dir_.file("frac.csv"), record_column(frac));
  expect2(import_args(dir_.file("k.npy"), dir_.file("frac.csv")), "frac.csv", "row 2");
  {
    std::ofstream f(dir_.file("nan.csv"));
    const RowMatrix k = random_keys(60, 3, 21);
    for (int i = 0; i < 60; ++i)
      f << (i == 33 ? std::string("nan") : std::to_string(k(i, 0))) << ",1,2\n";
  }
  expect2(import_args(dir_.file("nan.csv"), dir_.file("r.npy")), "nan.csv", "line 34");
  // A record already in the memory with other tokens.
  write_npy(dir_.file("k5.npy"), random_keys(3, 3, 5));
  ASSERT_EQ(
      cli(dir_, "memory add " + store_ + " --memory m --record 5 --keys " + dir_.file("k5.npy"))
          .code,
      0);
  expect2(import_args(dir_.file("k.npy"), dir_.file("r.npy")), "r.npy", "record 5");
}

// A record-id .npy as numpy writes it: dtype `descr` (little-endian), shape `shape`.
void write_id_npy(const std::string& path, const std::string& descr, const std::string& shape,
                  const std::vector<std::int64_t>& ids, int item) {
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  for (std::int64_t v : ids)
    for (int b = 0; b < item; ++b)
      out += static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * b)) & 0xff);
  std::ofstream(path, std::ios::binary) << out;
}

// Record ids are integers: an int64 or int32 .npy and a 1-D .npy are read (as numpy writes them);
// CSV cells follow the integer policy of every CLI input ("1e3", "+5", "7.0" are refused).
TEST_P(StoreImport, RecordIdsAreIntegersInEveryFormat) {
  std::vector<std::int64_t> ids;
  for (double v : grouped(20, 3)) ids.push_back(static_cast<std::int64_t>(v));
  write_id_npy(dir_.file("i8.npy"), "<i8", "(60,)", ids, 8);
  write_id_npy(dir_.file("i4.npy"), "<i4", "(60, 1)", ids, 4);
  write_id_npy(dir_.file("u8.npy"), "<u8", "(60,)", ids, 8);
  std::vector<std::string> hashes;
  for (const char* f : {"i8.npy", "i4.npy", "u8.npy", "r.npy"}) {
    const std::string name = std::string("c_") + f[0] + f[1];
    const std::string at = q(stores().at(name));
    ASSERT_EQ(cli(dir_, "memory create " + at + " --memory m --dim 3 --C 0.05").code, 0);
    const CliResult r = cli(dir_, "memory import " + at + " --memory m --keys " +
                                      dir_.file("k.npy") + " --records " + dir_.file(f));
    ASSERT_EQ(r.code, 0) << f << "\n" << r.err;
    hashes.push_back(Store(stores().at(name)).memory_info("m").state_sha256);
  }
  EXPECT_EQ(hashes[0], hashes[3]);
  EXPECT_EQ(hashes[1], hashes[3]);
  EXPECT_EQ(hashes[2], hashes[3]);
  std::vector<std::int64_t> neg = ids;
  neg[9] = -1;
  write_id_npy(dir_.file("neg8.npy"), "<i8", "(60,)", neg, 8);
  expect2(import_args(dir_.file("k.npy"), dir_.file("neg8.npy")), "neg8.npy", "row 9");
  write_id_npy(dir_.file("wide.npy"), "<i8", "(30, 2)", ids, 8);
  expect2(import_args(dir_.file("k.npy"), dir_.file("wide.npy")), "wide.npy", "one column");
  for (const std::string cell : {"1e3", "+5", "7.0", "0x10"}) {
    std::ofstream f(dir_.file("bad.csv"));
    for (int i = 0; i < 60; ++i) f << (i == 11 ? cell : std::to_string(ids[i])) << "\n";
    f.close();
    expect2(import_args(dir_.file("k.npy"), dir_.file("bad.csv")), "bad.csv", "row 11");
  }
}

// Kill -9 at random points of an import, then import again: the same final hash as an
// uninterrupted import, every record fully present, verify passes.
void kill_and_resume(store_test::Stores& st, int trials, std::uint64_t seed) {
  const TempDir& dir = st.dir();
  const int records = 120;
  write_npy(dir.file("k.npy"), random_keys(records * 4, 3, 31));
  write_npy(dir.file("r.npy"), record_column(grouped(records, 4)));
  const std::string create = " --memory m --dim 3 --C 0.02";
  const std::string args =
      " --memory m --keys " + dir.file("k.npy") + " --records " + dir.file("r.npy") + " --chunk 3";
  ASSERT_EQ(cli(dir, "memory create " + dir.file("ref.db") + create).code, 0);
  // Kill points are drawn inside the span an uninterrupted import takes (process start included),
  // so trials interrupt it however fast the machine is.
  const svattn::support::Stopwatch watch;
  ASSERT_EQ(cli(dir, "memory import " + dir.file("ref.db") + args).code, 0);
  const auto span_ms = std::max<long long>(2, static_cast<long long>(watch.milliseconds()));
  const std::string want = Store(dir.file("ref.db")).memory_info("m").state_sha256;
  svattn::support::Rng gen(seed);
  int interrupted = 0;
  for (int t = 0; t < trials; ++t) {
    const std::string name = "t" + std::to_string(t);
    const std::string s = q(st.at(name));
    ASSERT_EQ(cli(dir, "memory create " + s + create).code, 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      const std::string cmd =
          std::string(SVATTN_CLI) + " memory import " + s + args + " >/dev/null 2>/dev/null";
      ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(
        span_ms / 10 + static_cast<long long>(gen.next() % (span_ms * 8 / 10 + 1))));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) ++interrupted;
    {
      Store check(st.at(name));
      const StoreVerification v = check.verify();
      ASSERT_TRUE(v.ok()) << "trial " << t << ": " << (v.problems.empty() ? "" : v.problems[0]);
      for (const RecordInfo& r : check.records("m")) ASSERT_EQ(r.tokens, 4) << "trial " << t;
    }
    const CliResult resumed = cli(dir, "memory import " + s + args);
    ASSERT_EQ(resumed.code, 0) << resumed.err;
    EXPECT_EQ(Store(st.at(name)).memory_info("m").state_sha256, want) << "trial " << t;
  }
  EXPECT_GT(interrupted, 0) << "no trial interrupted the import";
}

class StoreImportKill : public store_test::StoreOnBackends {};
class StoreImportKillSlow : public store_test::StoreOnBackends {};
TEST_P(StoreImportKill, KillNineResumesToTheSameHash) { kill_and_resume(stores(), 3, 5); }
TEST_P(StoreImportKillSlow, KillNineResumesToTheSameHashManyTrials) {
  kill_and_resume(stores(), 20, 6);
}

SVATTN_ON_ALL_BACKENDS(StoreImport);
SVATTN_ON_ALL_BACKENDS(StoreImportKill);
SVATTN_ON_ALL_BACKENDS(StoreImportKillSlow);

}  // namespace
}  // namespace svattn
