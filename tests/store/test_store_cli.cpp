// `svattn memory ...` through the real binary: output formats and exit codes.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backend_test_util.h"
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
      const CliRun a =
          run(dir_, "memory add " + store_ + " --memory m --record " + std::to_string(r) +
                        " --keys " + dir_.file("k" + std::to_string(r) + ".csv"));
      ASSERT_EQ(a.code, 0) << a.err;
    }
  }
  TempDir dir_;
  std::string store_;
};

// The same store built on every backend (backend_test_util.h); the location is quoted for the
// shell (a PostgreSQL URI has '&').
class StoreCliOn : public store_test::StoreOnBackends {
 protected:
  void SetUp() override {
    store_test::StoreOnBackends::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    store_ = "'" + stores().at("s") + "'";
    for (int r = 0; r < 4; ++r) {
      write_csv(dir_.file("k" + std::to_string(r) + ".csv"), random_keys(20, 4, 1000 + r));
    }
    write_csv(dir_.file("wide.csv"), random_keys(20, 5, 9));
    write_npy(dir_.file("q.npy"), random_keys(3, 4, 77));
    const CliRun c = run(dir_, "memory create " + store_ +
                                   " --memory m --dim 4 --kernel rbf --bandwidth 1.5 --C 0.05");
    ASSERT_EQ(c.code, 0) << c.err;
    for (int r = 0; r < 3; ++r) {
      const CliRun a =
          run(dir_, "memory add " + store_ + " --memory m --record " + std::to_string(r) +
                        " --keys " + dir_.file("k" + std::to_string(r) + ".csv"));
      ASSERT_EQ(a.code, 0) << a.err;
    }
  }
  TempDir dir_;
  std::string store_;
};

TEST_P(StoreCliOn, ShowQueryForgetVerifyAudit) {
  const CliRun show = run(dir_, "memory show " + store_ + " --memory m --json");
  ASSERT_EQ(show.code, 0) << show.err;
  const nlohmann::json s = nlohmann::json::parse(show.out);
  EXPECT_EQ(s.at("n"), 60);
  EXPECT_EQ(s.at("state_sha256").get<std::string>().size(), 64u);
  EXPECT_TRUE(s.contains("partition"));
  EXPECT_TRUE(s.contains("alpha"));
  EXPECT_EQ(s.at("records").size(), 3u);
  const CliRun q = run(
      dir_, "memory query " + store_ + " --memory m --queries " + dir_.file("q.npy") + " --json");
  ASSERT_EQ(q.code, 0) << q.err;
  const nlohmann::json qj = nlohmann::json::parse(q.out);
  EXPECT_EQ(qj.at("readouts").size(), 3u);
  EXPECT_EQ(qj.at("readouts")[0].size(), 4u);
  EXPECT_EQ(qj.at("state_sha256"), s.at("state_sha256"));
  const CliRun qt =
      run(dir_, "memory query " + store_ + " --memory m --queries " + dir_.file("q.npy"));
  EXPECT_EQ(qt.code, 0);
  EXPECT_EQ(lines(qt.out), 2 + 3);
  const CliRun f = run(dir_, "memory forget " + store_ + " --memory m --record 1 --json");
  ASSERT_EQ(f.code, 0) << f.err;
  const nlohmann::json fj = nlohmann::json::parse(f.out);
  EXPECT_EQ(fj.at("tokens_erased"), 20);
  EXPECT_TRUE(fj.at("certificate").is_object());
  EXPECT_EQ(fj.at("certificate").at("store").at("record"), 1);
  EXPECT_EQ(fj.at("wal_truncated").get<bool>(), !pg());  // PostgreSQL: the server's WAL
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
  // create, 3 adds, 2 forgets (each followed by two store-level "shred": its data key and its
  // bounds group's replaced key), suspend, resume
  ASSERT_EQ(aj.at("entries").size(), 12u);
  EXPECT_EQ(aj.at("entries")[4].at("operation"), "forget");
  EXPECT_EQ(aj.at("entries")[5].at("operation"), "shred");
  EXPECT_EQ(aj.at("entries")[6].at("operation"), "shred");
  const CliRun at = run(dir_, "memory audit " + store_);
  EXPECT_EQ(lines(at.out), 1 + 12);
}

// `memory backup`: a copy that opens as the same store (same state hash), says that the keys are
// not included, and never overwrites (exit 2, one line, the existing file unchanged).
TEST_F(StoreCli, BackupCopiesTheDataFileWithoutKeysAndNeverOverwrites) {
  const std::string dest = dir_.file("copy.db");
  const CliRun b = run(dir_, "memory backup " + store_ + " " + dest + " --json");
  ASSERT_EQ(b.code, 0) << b.err;
  const nlohmann::json bj = nlohmann::json::parse(b.out);
  EXPECT_FALSE(bj.at("keys_included").get<bool>());
  EXPECT_TRUE(bj.at("integrity_ok").get<bool>());
  EXPECT_EQ(bj.at("encryption"), "aes-256-gcm");
  EXPECT_NE(bj.at("note").get<std::string>().find("not included"), std::string::npos);
  const CliRun orig = run(dir_, "memory show " + store_ + " --memory m --json");
  ASSERT_EQ(orig.code, 0) << orig.err;
  // The copy is read with the source's key store beside it (the keys are never in the copy).
  std::filesystem::copy_file(store_ + ".keys", dest + ".keys");
  const CliRun copy = run(dir_, "memory show " + dest + " --memory m --json");
  ASSERT_EQ(copy.code, 0) << copy.err;
  EXPECT_EQ(nlohmann::json::parse(copy.out).at("state_sha256"),
            nlohmann::json::parse(orig.out).at("state_sha256"));
  const std::string before = slurp(dest);
  const CliRun again = run(dir_, "memory backup " + store_ + " " + dest);
  EXPECT_EQ(again.code, 2);
  EXPECT_EQ(lines(again.err), 1) << again.err;
  EXPECT_EQ(slurp(dest), before);
  const CliRun text = run(dir_, "memory backup " + store_ + " " + dir_.file("copy2.db"));
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("keys        data keys are not included"), std::string::npos);
}

TEST_P(StoreCliOn, BadInputsExitTwoWithOneLine) {
  auto expect2 = [&](const std::string& args, const std::string& fragment) {
    const CliRun r = run(dir_, args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out << r.err;
    EXPECT_EQ(lines(r.err), 1) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << args << "\n" << r.err;
  };
  const std::string k3 = dir_.file("k3.csv");
  const std::string before = stores().digest("s");
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
  EXPECT_EQ(stores().digest("s"), before) << "a failed command changed the store";
  ASSERT_EQ(stores().raw_exec("s", pg() ? "UPDATE svattn_pragma SET value = 99 WHERE name = "
                                          "'user_version'"
                                        : "PRAGMA user_version = 99"),
            "");
  expect2("memory show " + store_ + " --memory m", "newer");
}

SVATTN_ON_ALL_BACKENDS(StoreCliOn);

TEST_F(StoreCli, VerifyExitsOneOnTamperingAndLockedStoreExitsTwo) {
  {
    RawDb db(store_);
    ASSERT_EQ(db.exec("BEGIN IMMEDIATE"), SQLITE_OK);
    const CliRun r = run(dir_, "memory add " + store_ +
                                   " --memory m --record 9 --busy-timeout 100 "
                                   "--keys " +
                                   dir_.file("k3.csv"));
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

// Memories of 0 tokens: these crashed with SIGSEGV in verify_state on zero tokens.
TEST(StoreCliEmpty, VerifyFreshForgetLastAndForgetCheckEveryRow) {
  TempDir dir;
  const std::string store = dir.file("e.db");
  write_csv(dir.file("k.csv"), random_keys(5, 3, 41));
  ASSERT_EQ(run(dir, "memory create " + store + " --memory m --dim 3 --C 0.05").code, 0);
  const CliRun v0 = run(dir, "memory verify " + store);
  EXPECT_EQ(v0.code, 0) << v0.out << v0.err;
  ASSERT_EQ(
      run(dir, "memory add " + store + " --memory m --record 0 --keys " + dir.file("k.csv")).code,
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

// ---------------------------------------------------------------- hostile input, store rows

namespace svattn {
namespace {

class StoreCli18 : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = dir_.file("s.db");
    write_csv(dir_.file("k.csv"), random_keys(12, 3, 5));
    write_csv(dir_.file("q.csv"), random_keys(2, 3, 6));
    ASSERT_EQ(run(dir_, "memory create " + store_ + " --memory m --dim 3 --C 0.2").code, 0);
    ASSERT_EQ(
        run(dir_, "memory add " + store_ + " --memory m --record 0 --keys " + dir_.file("k.csv"))
            .code,
        0);
  }
  void expect2(const std::string& args, const std::string& fragment) {
    const CliRun r = run(dir_, args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out << r.err;
    EXPECT_EQ(lines(r.err), 1) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << args << "\n" << r.err;
  }
  TempDir dir_;
  std::string store_;
};

TEST_F(StoreCli18, NonUtf8MemoryNameIsRefusedAndNothingIsWritten) {
  const std::string before = store_test::file_sha(store_);
  expect2("memory create " + store_ + " --memory \"$(printf '\\377\\376')\" --dim 3 --C 0.2",
          "not valid UTF-8");
  EXPECT_EQ(store_test::file_sha(store_), before);
  const std::string fresh = dir_.file("fresh.db");
  expect2("memory create " + fresh + " --memory \"$(printf '\\377\\376')\" --dim 3 --C 0.2",
          "not valid UTF-8");
  EXPECT_FALSE(std::filesystem::exists(fresh)) << "a refused create made the store file";
  EXPECT_THROW(Store::validate_memory_name("\xff\xfe"), InvalidArgument);
}

TEST_F(StoreCli18, UnrepresentableBandwidthNeverReachesAnInsert) {
  const std::string s2 = dir_.file("tiny.db");
  const CliRun c =
      run(dir_, "memory create " + s2 + " --memory m --dim 3 --C 0.2 --bandwidth 1e-300");
  if (c.code == 0) {  // the settings passed the core's checks: the store must refuse the state
    const std::string before = store_test::file_sha(s2);
    const CliRun a =
        run(dir_, "memory add " + s2 + " --memory m --record 0 --keys " + dir_.file("k.csv"));
    EXPECT_EQ(a.code, 2) << a.err;
    EXPECT_EQ(a.err.find("NOT NULL"), std::string::npos) << a.err;
    EXPECT_NE(a.err.find("bandwidth"), std::string::npos) << a.err;
    EXPECT_EQ(store_test::file_sha(s2), before);
  } else {
    EXPECT_EQ(c.code, 2) << c.err;
    EXPECT_EQ(lines(c.err), 1) << c.err;
  }
}

TEST_F(StoreCli18, RidgeZeroWithDuplicateKeysIsNeverReportedAsTampering) {
  RowMatrix k = random_keys(30, 2, 8);
  for (int i = 0; i < 10; ++i) k.row(10 + i) = k.row(i);
  write_csv(dir_.file("dup.csv"), k);
  const std::string s2 = dir_.file("dup.db");
  ASSERT_EQ(run(dir_, "memory create " + s2 + " --memory m --dim 2 --C 0.1 --ridge 0").code, 0);
  const CliRun a =
      run(dir_, "memory add " + s2 + " --memory m --record 0 --keys " + dir_.file("dup.csv"));
  ASSERT_EQ(a.code, 0) << a.err;
  const CliRun v = run(dir_, "memory verify " + s2);
  EXPECT_EQ(v.out.find("MISMATCH"), std::string::npos) << v.out;
  EXPECT_EQ(v.code, 0) << v.out << v.err;
}

TEST_F(StoreCli18, EveryStoredFieldOfAMemoryIsCheckedByVerify) {
  const std::string base = store_test::file_sha(store_);
  const std::vector<std::string> edits = {
      "status = 'singular'",
      "kkt_box_violation = 3",
      "kkt_max_violation = kkt_max_violation + 1e-3",
      "kkt_sum_error = 0.5",
      "warmup = 1 - warmup",
      "b = b + 1e-9",
      "state_sha256 = '" + std::string(64, 'a') + "'",
      "last_audit_seq = last_audit_seq + 1",
      "created_utc = '2020-01-01T00:00:00.000Z'",
      "name = 'other'",
      "id = id + 7",
      "value_dim = value_dim + 1",
      "dim = dim + 1",
      "settings = replace(settings, '\"C\":0.2', '\"C\":0.25')",
  };
  for (size_t i = 0; i < edits.size(); ++i) {
    const std::string p = dir_.file("t" + std::to_string(i) + ".db");
    store_test::copy_store(store_, p);
    {
      RawDb db(p);
      ASSERT_EQ(db.exec("UPDATE memories SET " + edits[i]), SQLITE_OK) << edits[i];
    }
    const CliRun v = run(dir_, "memory verify " + p);
    EXPECT_NE(v.code, 0) << edits[i] << "\n" << v.out << v.err;
    EXPECT_EQ(v.out.find("result      ok"), std::string::npos) << edits[i] << "\n" << v.out;
  }
  EXPECT_EQ(store_test::file_sha(store_), base);
}

TEST_F(StoreCli18, ReadCommandsWorkOnAReadOnlyFileAndWriteNothing) {
  const std::string ro = dir_.file("ro.db");
  {  // a checkpointed copy: no -wal/-shm files
    Store s(store_);
  }
  store_test::copy_store(store_, ro);
  ASSERT_EQ(::chmod(ro.c_str(), 0444), 0);
  struct stat st0 {};
  ASSERT_EQ(::stat(ro.c_str(), &st0), 0);
  const std::string sha0 = store_test::file_sha(ro);
  for (const std::string& cmd :
       {"memory verify " + ro, "memory show " + ro + " --memory m",
        "memory show " + ro + " --memory m --json", "memory audit " + ro,
        "memory query " + ro + " --memory m --queries " + dir_.file("q.csv")}) {
    const CliRun r = run(dir_, cmd);
    EXPECT_EQ(r.code, 0) << cmd << "\n" << r.err;
  }
  struct stat st1 {};
  ASSERT_EQ(::stat(ro.c_str(), &st1), 0);
  EXPECT_EQ(store_test::file_sha(ro), sha0);
  EXPECT_EQ(st1.st_mtim.tv_sec, st0.st_mtim.tv_sec);
  EXPECT_EQ(st1.st_mtim.tv_nsec, st0.st_mtim.tv_nsec);
  // As a user who can write neither the file nor its directory (file modes bind only off root).
  if (::geteuid() == 0 && std::system("command -v runuser >/dev/null 2>&1") == 0) {
    const std::string locked = dir_.file("locked");
    std::filesystem::create_directory(locked);
    store_test::copy_store(store_, locked + "/s.db");
    ASSERT_EQ(::chmod((locked + "/s.db").c_str(), 0444), 0);
    ASSERT_EQ(::chmod(locked.c_str(), 0555), 0);
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
    for (const std::string& cmd :
         {"memory verify " + locked + "/s.db", "memory show " + locked + "/s.db --memory m",
          "memory audit " + locked + "/s.db"}) {
      const std::string full = "runuser -u nobody -- " + std::string(SVATTN_CLI) + " " + cmd +
                               " >/dev/null 2>" + dir_.file("ro_err.txt");
      EXPECT_EQ(std::system(full.c_str()), 0) << cmd << ": " << slurp(dir_.file("ro_err.txt"));
    }
    ::chmod(locked.c_str(), 0755);
  }
  // Root ignores file modes, so also check that a read-only Store refuses every mutation itself.
  StoreOptions o;
  o.read_only = true;
  Store s(ro, o);
  EXPECT_THROW(s.add_record("m", 9, random_keys(2, 3, 9)), InvalidArgument);
  EXPECT_THROW(s.forget_record("m", 0), InvalidArgument);
  EXPECT_THROW(s.create_memory("z", MemorySettings{}, 3, 3), InvalidArgument);
  EXPECT_TRUE(s.verify().ok());
}

TEST_F(StoreCli18, DroppedTableAndUnknownSchemaVersion) {
  const std::string dropped = dir_.file("dropped.db");
  store_test::copy_store(store_, dropped);
  {
    RawDb db(dropped);
    ASSERT_EQ(db.exec("DROP TABLE support"), SQLITE_OK);
  }
  const CliRun v = run(dir_, "memory verify " + dropped);
  EXPECT_EQ(v.code, 1) << v.out << v.err;
  EXPECT_NE(v.out.find("table 'support' is missing"), std::string::npos) << v.out;
  const std::string v99 = dir_.file("v99.db");
  store_test::copy_store(store_, v99);
  {
    RawDb db(v99);
    ASSERT_EQ(db.exec("UPDATE meta SET value = '99' WHERE key = 'schema_version'"), SQLITE_OK);
  }
  expect2("memory verify " + v99, "unsupported schema version 99");
}

TEST_F(StoreCli18, ProblemLinesNameTheMemoryOnce) {
  const std::string p = dir_.file("orphan.db");
  store_test::copy_store(store_, p);
  {
    RawDb db(p);
    ASSERT_EQ(db.exec("INSERT INTO support(memory_id, token_id, part, alpha) SELECT id, 999999, 1, "
                      "0.5 FROM memories"),
              SQLITE_OK);
  }
  const CliRun v = run(dir_, "memory verify " + p);
  EXPECT_EQ(v.code, 1) << v.out << v.err;
  EXPECT_NE(v.out.find("memory 'm'"), std::string::npos) << v.out;
  EXPECT_EQ(v.out.find("memory 'm': memory 'm'"), std::string::npos) << v.out;
}

}  // namespace
}  // namespace svattn

namespace svattn {
namespace {

// Encryption at rest (docs/store.md "Encryption at rest"): a new store is encrypted by default,
// `--plaintext` opts out and is recorded; asking for it on an existing encrypted store exits 2 and
// writes nothing.
TEST_F(StoreCli, PlaintextOptOutIsRecordedAndRefusedOnAnEncryptedStore) {
  EXPECT_TRUE(store_test::file_exists(store_ + ".keys"));
  const std::string before = store_test::file_sha(store_);
  const CliRun bad = run(dir_, "memory create " + store_ +
                                   " --memory z --dim 4 --kernel rbf --C 0.1 --plaintext");
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("encrypted"), std::string::npos) << bad.err;
  EXPECT_EQ(lines(bad.err), 1) << bad.err;
  EXPECT_EQ(store_test::file_sha(store_), before);
  const std::string p = dir_.file("plain.db");
  const CliRun c =
      run(dir_, "memory create " + p + " --memory m --dim 4 --kernel rbf --C 0.1 --plaintext");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("encryption  none"), std::string::npos) << c.out;
  EXPECT_FALSE(store_test::file_exists(p + ".keys"));
  const CliRun j = run(dir_, "memory create " + dir_.file("e.db") +
                                 " --memory m --dim 4 --kernel rbf --C 0.1 --json");
  ASSERT_EQ(j.code, 0) << j.err;
  EXPECT_EQ(nlohmann::json::parse(j.out).at("encryption"), "aes-256-gcm");
}

}  // namespace
}  // namespace svattn
