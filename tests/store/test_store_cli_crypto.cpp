// `svattn memory ...` with encryption through the real binary: the master
// key from --master-key-file and the environment (wrong, missing or unexpected: exit 2, one line,
// nothing written), `memory encrypt`, and a backup restored after a forget (the erased record is
// reported shredded by show/verify, and the memory equals a store that never saw it).
#include <gtest/gtest.h>
#include <sys/stat.h>
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

using store_test::file_sha;
using store_test::random_keys;
using store_test::read_bytes;
using store_test::TempDir;
using store_test::write_bytes;

struct CliResult {
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs the CLI with `env` (assignments, e.g. "SVATTN_MASTER_KEY=...") in its environment only.
CliResult cli(const TempDir& dir, const std::string& args, const std::string& env = "") {
  const std::string out = dir.file("o.txt"), err = dir.file("e.txt");
  const std::string cmd = "env -u SVATTN_MASTER_KEY -u SVATTN_MASTER_KEY_FILE " + env + " " +
                          std::string(SVATTN_CLI) + " " + args + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

std::string sha_of(const std::string& show_out) {
  const std::size_t at = show_out.find("sha256      ");
  return at == std::string::npos ? "" : show_out.substr(at + 12, 64);
}

class StoreCliCrypto : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int r = 0; r < 5; ++r) {
      write_csv(dir_.file("k" + std::to_string(r) + ".csv"), random_keys(12, 4, 2000 + r));
    }
    key_ = dir_.file("master.hex");
    std::ofstream(key_) << std::string(64, '7') << "\n";
    ::chmod(key_.c_str(), 0600);
  }
  // A memory 'm' with records `recs` in `store`; `extra` goes on every command line, `create`
  // on the create command's only.
  void make(const std::string& store, const std::vector<int>& recs, const std::string& extra,
            const std::string& create = "") {
    const CliResult c = cli(
        dir_, "memory create " + store + " --memory m --dim 4 --C 0.05 " + extra + " " + create);
    ASSERT_EQ(c.code, 0) << c.err;
    for (int r : recs) {
      const CliResult a =
          cli(dir_, "memory add " + store + " --memory m --record " + std::to_string(r) +
                        " --keys " + dir_.file("k" + std::to_string(r) + ".csv") + " " + extra);
      ASSERT_EQ(a.code, 0) << a.err;
    }
  }
  TempDir dir_;
  std::string key_;
};

TEST_F(StoreCliCrypto, MasterKeyFromFileOrEnvironmentAndClearErrors) {
  const std::string s = dir_.file("w.db");
  make(s, {0, 1}, "--master-key-file " + key_);
  const std::string db0 = file_sha(s), keys0 = file_sha(s + ".keys");
  const std::string add =
      "memory add " + s + " --memory m --record 3 --keys " + dir_.file("k3.csv");
  const std::string wrong = "SVATTN_MASTER_KEY=" + std::string(64, '8');
  for (const std::string& env : {std::string(), wrong, std::string("SVATTN_MASTER_KEY=")}) {
    const CliResult r = cli(dir_, add, env);
    EXPECT_EQ(r.code, 2) << env;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("master key"), std::string::npos) << r.err;
  }
  EXPECT_EQ(cli(dir_, "memory show " + s + " --memory m", wrong).code, 2);
  EXPECT_EQ(file_sha(s), db0);
  EXPECT_EQ(file_sha(s + ".keys"), keys0);
  // The right key from the environment (the key itself, or the file it names) works.
  EXPECT_EQ(cli(dir_, add, "SVATTN_MASTER_KEY=" + std::string(64, '7')).code, 0);
  EXPECT_EQ(cli(dir_, "memory verify " + s, "SVATTN_MASTER_KEY_FILE=" + key_).code, 0);
  // A master key for an unwrapped or plaintext store is refused, naming the store.
  const std::string u = dir_.file("u.db"), p = dir_.file("p.db");
  make(u, {0}, "");
  make(p, {0}, "", "--plaintext");
  for (const std::string& st : {u, p}) {
    const CliResult r = cli(dir_, "memory show " + st + " --memory m --master-key-file " + key_);
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(st), std::string::npos) << r.err;
  }
  const CliResult np =
      cli(dir_, "memory create " + dir_.file("new.db") +
                    " --memory m --dim 4 --C 0.05 --plaintext --master-key-file " + key_);
  EXPECT_EQ(np.code, 2);
  EXPECT_FALSE(store_test::file_exists(dir_.file("new.db")));
}

TEST_F(StoreCliCrypto, EncryptConvertsAPlaintextStoreAndIsThenANoOp) {
  const std::string p = dir_.file("p.db");
  make(p, {0, 1, 2}, "", "--plaintext");
  const std::string sha0 = sha_of(cli(dir_, "memory show " + p + " --memory m").out);
  const CliResult e = cli(dir_, "memory encrypt " + p + " --master-key-file " + key_);
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.out.find("3 records (36 token rows)"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find(sha0 + " (unchanged)"), std::string::npos) << e.out;
  const CliResult again = cli(dir_, "memory encrypt " + p + " --json --master-key-file " + key_);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.out.find("\"already_encrypted\": true"), std::string::npos) << again.out;
  EXPECT_EQ(cli(dir_, "memory encrypt " + p).code, 2);  // wrapped now: the key is required
  const CliResult show = cli(dir_, "memory show " + p + " --memory m --master-key-file " + key_);
  EXPECT_EQ(sha_of(show.out), sha0);
  EXPECT_EQ(cli(dir_, "memory verify " + p + " --master-key-file " + key_).code, 0);
}

// Through the CLI: backup -> forget -> copy the backup over the store (the current
// STORE.keys stays) -> show / verify report the record as shredded; the memory equals a store that
// never saw it; `verify --repair` purges it.
TEST_F(StoreCliCrypto, RestoredBackupReportsTheShreddedRecord) {
  const std::string s = dir_.file("s.db"), bak = dir_.file("s.bak"), never = dir_.file("n.db");
  make(s, {0, 1, 2, 3}, "");
  make(never, {0, 1, 3}, "");
  const std::string sha_never = sha_of(cli(dir_, "memory show " + never + " --memory m").out);
  ASSERT_EQ(cli(dir_, "memory backup " + s + " " + bak).code, 0);
  ASSERT_EQ(cli(dir_, "memory forget " + s + " --memory m --record 2").code, 0);
  write_bytes(s, read_bytes(bak));
  std::remove((s + "-wal").c_str());
  std::remove((s + "-shm").c_str());
  const CliResult show = cli(dir_, "memory show " + s + " --memory m");
  ASSERT_EQ(show.code, 0) << show.err;
  EXPECT_EQ(sha_of(show.out), sha_never);
  EXPECT_NE(show.out.find("shredded    1 records"), std::string::npos) << show.out;
  write_csv(dir_.file("q.csv"), random_keys(2, 4, 5));
  const CliResult q = cli(dir_, "memory query " + s + " --memory m --queries " + dir_.file("q.csv"));
  EXPECT_EQ(q.code, 0) << q.err;
  EXPECT_NE(q.out.find(sha_never), std::string::npos) << q.out;
  EXPECT_NE(q.err.find("1 shredded records"), std::string::npos) << q.err;
  const CliResult qn =
      cli(dir_, "memory query " + never + " --memory m --queries " + dir_.file("q.csv"));
  EXPECT_EQ(q.out, qn.out) << "readouts differ from the never-seen store";
  const CliResult v = cli(dir_, "memory verify " + s);
  EXPECT_EQ(v.code, 0) << v.out;
  EXPECT_NE(v.out.find("shredded    record 2 of memory 'm'"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find(sha_never + " of a store that never saw them"), std::string::npos) << v.out;
  const CliResult rep = cli(dir_, "memory verify --repair " + s);
  EXPECT_EQ(rep.code, 0) << rep.out << rep.err;
  EXPECT_NE(rep.out.find("purged now"), std::string::npos) << rep.out;
  const CliResult after = cli(dir_, "memory show " + s + " --memory m");
  EXPECT_EQ(sha_of(after.out), sha_never);
  EXPECT_EQ(after.out.find("shredded"), std::string::npos) << after.out;
  EXPECT_NE(cli(dir_, "memory audit " + s).out.find("purge"), std::string::npos);
}

}  // namespace
}  // namespace svattn
