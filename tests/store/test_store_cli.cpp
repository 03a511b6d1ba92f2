// `svattn memory ...` through the real binary: output formats and exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "store_test_util.h"
#include "svattn/io.h"

#ifndef SVATTN_CLI
#error "SVATTN_CLI must name the svattn binary"
#endif

namespace svattn {
namespace {

using store_test::random_keys;
using store_test::RawDb;
using store_test::TempDir;

struct CliRun {
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

CliRun run(const TempDir& dir, const std::string& args) {
  const std::string out = dir.file("stdout.txt");
  const std::string err = dir.file("stderr.txt");
  const std::string cmd = std::string(SVATTN_CLI) + " " + args + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

class StoreCli : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = dir_.file("s.db");
    for (int r = 0; r < 4; ++r) {
      write_csv(dir_.file("k" + std::to_string(r) + ".csv"), random_keys(20, 4, 1000 + r));
    }
    write_csv(dir_.file("wide.csv"), random_keys(20, 5, 9));
    write_npy(dir_.file("q.npy"), random_keys(3, 4, 77));
    const CliRun c = run(dir_, "memory create " + store_ +
                                " --memory m --dim 4 --kernel rbf --bandwidth 1.5 --C 0.05");
    ASSERT_EQ(c.code, 0) << c.err;
    for (int r = 0; r < 3; ++r) {
      const CliRun a = run(dir_, "memory add " + store_ + " --memory m --record " + std::to_string(r) +
                                  " --keys " + dir_.file("k" + std::to_string(r) + ".csv"));
      ASSERT_EQ(a.code, 0) << a.err;
    }
  }
  TempDir dir_;
  std::string store_;
};

TEST_F(StoreCli, ShowQueryForgetVerifyAudit) {
  const CliRun show = run(dir_, "memory show " + store_ + " --memory m --json");
  ASSERT_EQ(show.code, 0) << show.err;
  const nlohmann::json s = nlohmann::json::parse(show.out);
  EXPECT_EQ(s.at("n"), 60);
  EXPECT_EQ(s.at("state_sha256").get<std::string>().size(), 64u);
  EXPECT_TRUE(s.contains("partition"));
  EXPECT_TRUE(s.contains("alpha"));
  EXPECT_EQ(s.at("records").size(), 3u);
  const CliRun q = run(dir_, "memory query " + store_ + " --memory m --queries " + dir_.file("q.npy") +
                              " --json");
  ASSERT_EQ(q.code, 0) << q.err;
  const nlohmann::json qj = nlohmann::json::parse(q.out);
  EXPECT_EQ(qj.at("readouts").size(), 3u);
  EXPECT_EQ(qj.at("readouts")[0].size(), 4u);
  EXPECT_EQ(qj.at("state_sha256"), s.at("state_sha256"));
  const CliRun qt = run(dir_, "memory query " + store_ + " --memory m --queries " + dir_.file("q.npy"));
  EXPECT_EQ(qt.code, 0);
  EXPECT_EQ(lines(qt.out), 2 + 3);
  const CliRun f = run(dir_, "memory forget " + store_ + " --memory m --record 1 --json");
  ASSERT_EQ(f.code, 0) << f.err;
  const nlohmann::json fj = nlohmann::json::parse(f.out);
  EXPECT_EQ(fj.at("tokens_erased"), 20);
  EXPECT_TRUE(fj.at("certificate").is_object());
  EXPECT_EQ(fj.at("certificate").at("store").at("record"), 1);
  EXPECT_TRUE(fj.at("wal_truncated").get<bool>());
  const CliRun ft = run(dir_, "memory forget " + store_ + " --memory m --record 2 --no-check");
  ASSERT_EQ(ft.code, 0) << ft.err;
  EXPECT_NE(ft.out.find("certificate"), std::string::npos);
  const CliRun sp = run(dir_, "memory suspend " + store_ + " --memory m --record 0 --json");
  EXPECT_EQ(sp.code, 0) << sp.err;
  const CliRun rs = run(dir_, "memory resume " + store_ + " --memory m --record 0");
  EXPECT_EQ(rs.code, 0) << rs.err;
  const CliRun v = run(dir_, "memory verify " + store_ + " --json");
  EXPECT_EQ(v.code, 0) << v.out << v.err;
  EXPECT_TRUE(nlohmann::json::parse(v.out).at("ok").get<bool>());
  const CliRun vt = run(dir_, "memory verify " + store_);
  EXPECT_EQ(vt.code, 0);
  EXPECT_NE(vt.out.find("result      ok"), std::string::npos);
  const CliRun au = run(dir_, "memory audit " + store_ + " --json");
  ASSERT_EQ(au.code, 0);
  const nlohmann::json aj = nlohmann::json::parse(au.out);
  ASSERT_EQ(aj.at("entries").size(), 8u);  // create, 3 adds, 2 forgets, suspend, resume
  EXPECT_EQ(aj.at("entries")[4].at("operation"), "forget");
  const CliRun at = run(dir_, "memory audit " + store_);
  EXPECT_EQ(lines(at.out), 1 + 8);
}

TEST_F(StoreCli, BadInputsExitTwoWithOneLine) {
  auto expect2 = [&](const std::string& args, const std::string& fragment) {
    const CliRun r = run(dir_, args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out << r.err;
    EXPECT_EQ(lines(r.err), 1) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << args << "\n" << r.err;
  };
  const std::string k3 = dir_.file("k3.csv");
  const std::string before = store_test::file_sha(store_);
  expect2("memory add " + store_ + " --memory nope --record 5 --keys " + k3, "no memory 'nope'");
  expect2("memory add " + store_ + " --memory m --record 1 --keys " + k3, "already has record 1");
  expect2("memory add " + store_ + " --memory m --record 5 --keys " + dir_.file("wide.csv"),
          "dimension mismatch");
  expect2("memory add " + store_ + " --memory m --record=-3 --keys " + k3, "out of range");
  expect2("memory add " + store_ + " --memory m --record 5 --keys " + dir_.file("missing.csv"),
          "missing.csv");
  expect2("memory forget " + store_ + " --memory m --record 42", "no record 42");
  expect2("memory suspend " + store_ + " --memory m --record 42", "no record 42");
  expect2("memory resume " + store_ + " --memory m --record 0", "not suspended");
  expect2("memory show " + store_ + " --memory nope", "no memory 'nope'");
  expect2("memory query " + store_ + " --memory m --queries " + dir_.file("wide.csv"),
          "dimension mismatch");
  expect2("memory create " + store_ + " --memory m --dim 4 --kernel rbf --C 0.1", "already has");
  expect2("memory create " + store_ + " --memory z --dim 4 --kernel cosine --C 0.1", "cosine");
  expect2("memory create " + store_ + " --memory z --dim 4 --kernel rbf --C 0.1 --mode lazy",
          "lazy");
  expect2("memory verify " + dir_.file("missing.db"), "does not exist");
  expect2("memory verify " + dir_.file("k0.csv"), "not a svattn store");
  EXPECT_EQ(store_test::file_sha(store_), before) << "a failed command changed the store";
  {
    RawDb db(store_);
    ASSERT_EQ(db.exec("PRAGMA user_version = 99"), SQLITE_OK);
  }
  expect2("memory show " + store_ + " --memory m", "newer");
}

TEST_F(StoreCli, VerifyExitsOneOnTamperingAndLockedStoreExitsTwo) {
  {
    RawDb db(store_);
    ASSERT_EQ(db.exec("BEGIN IMMEDIATE"), SQLITE_OK);
    const CliRun r = run(dir_, "memory add " + store_ + " --memory m --record 9 --busy-timeout 100 "
                            "--keys " + dir_.file("k3.csv"));
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("locked"), std::string::npos) << r.err;
    ASSERT_EQ(db.exec("ROLLBACK"), SQLITE_OK);
  }
  {
    RawDb db(store_);
    ASSERT_EQ(db.exec("DROP TRIGGER audit_no_update"), SQLITE_OK);
    ASSERT_EQ(db.exec("UPDATE audit SET token_count = 19 WHERE seq = 2"), SQLITE_OK);
  }
  const CliRun v = run(dir_, "memory verify " + store_);
  EXPECT_EQ(v.code, 1) << v.out << v.err;
  EXPECT_NE(v.out.find("entry hash does not match"), std::string::npos) << v.out;
  const CliRun vj = run(dir_, "memory verify " + store_ + " --json");
  EXPECT_EQ(vj.code, 1);
  EXPECT_FALSE(nlohmann::json::parse(vj.out).at("ok").get<bool>());
}

}  // namespace
}  // namespace svattn

namespace svattn {
namespace {

// Issue 19 item 8: these crashed with SIGSEGV in verify_state on zero tokens.
TEST(StoreCliEmpty, VerifyFreshForgetLastAndForgetCheckEveryRow) {
  TempDir dir;
  const std::string store = dir.file("e.db");
  write_csv(dir.file("k.csv"), random_keys(5, 3, 41));
  ASSERT_EQ(run(dir, "memory create " + store + " --memory m --dim 3 --C 0.05").code, 0);
  const CliRun v0 = run(dir, "memory verify " + store);
  EXPECT_EQ(v0.code, 0) << v0.out << v0.err;
  ASSERT_EQ(run(dir, "memory add " + store + " --memory m --record 0 --keys " + dir.file("k.csv"))
                .code,
            0);
  const CliRun sp = run(dir, "memory suspend " + store + " --memory m --record 0");
  ASSERT_EQ(sp.code, 0) << sp.err;
  const CliRun v1 = run(dir, "memory verify " + store);
  EXPECT_EQ(v1.code, 0) << v1.out << v1.err;
  ASSERT_EQ(run(dir, "memory resume " + store + " --memory m --record 0").code, 0);
  const CliRun f = run(dir, "memory forget " + store + " --memory m --record 0 --json");
  ASSERT_EQ(f.code, 0) << f.err;
  EXPECT_EQ(nlohmann::json::parse(f.out).at("certificate").at("after").at("n"), 0);
  const CliRun v2 = run(dir, "memory verify " + store);
  EXPECT_EQ(v2.code, 0) << v2.out << v2.err;
  const CliRun sh = run(dir, "memory show " + store + " --memory m");
  EXPECT_EQ(sh.code, 0) << sh.err;
  const CliRun q = run(dir, "memory query " + store + " --memory m --queries " + dir.file("k.csv"));
  EXPECT_EQ(q.code, 0) << q.err;
  const CliRun fc = run(dir, "forget-check --keys " + dir.file("k.csv") + " --remove 0-4 --C 0.05");
  EXPECT_EQ(fc.code, 0) << fc.out << fc.err;
}

}  // namespace
}  // namespace svattn
