// Faults: files that are not stores, newer schemas, truncation and corruption, disk full, locks
// (SQLite files), and on every backend (backend_test_util.h) two writer processes, an import and
// forgets at once, and kill -9 at random points during large adds and forgets.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <thread>

#include "backend_test_util.h"
#include "support/clock.h"
#include "support/random.h"

namespace svattn {
namespace {

using store_test::add_records;
using store_test::file_sha;
using store_test::random_keys;
using store_test::RawDb;
using store_test::rbf_settings;
using store_test::read_bytes;
using store_test::TempDir;
using store_test::write_bytes;

constexpr int kDim = 6;

std::string make_store(const TempDir& dir, const std::string& name, int records, int per_record) {
  const std::string path = dir.file(name);
  StoreOptions o;
  o.create = true;
  // Plaintext: these tests copy data files byte for byte (without a key store) and search them
  // for plaintext doubles; encrypted stores are covered by test_store_encryption.cpp.
  o.encrypt = false;
  Store store(path, o);
  store.create_memory("m", rbf_settings(0.03), kDim, kDim);
  std::vector<std::int64_t> ids;
  for (int r = 0; r < records; ++r) ids.push_back(r);
  add_records(store, "m", ids, per_record, kDim);
  return path;
}

/// A store with memory 'm' of `records` records on the test's backend: plaintext on SQLite (the
/// crash trials copy its file byte for byte), encrypted on PostgreSQL (keys in the backend's key
/// store).
std::string make_store_on(store_test::Stores& st, const std::string& name, int records,
                          int per_record) {
  const std::string at = st.pg() ? st.at(name) : st.at_without_keys(name);
  StoreOptions o;
  o.create = true;
  o.encrypt = st.pg();
  Store store(at, o);
  store.create_memory("m", rbf_settings(0.03), kDim, kDim);
  std::vector<std::int64_t> ids;
  for (int r = 0; r < records; ++r) ids.push_back(r);
  add_records(store, "m", ids, per_record, kDim);
  return at;
}

class StoreFaultsOn : public store_test::StoreOnBackends {};
class StoreFaultsOnSlow : public store_test::StoreOnBackends {};

/// Runs `body` in a forked child; returns its exit status (or 128 + signal).
int in_child(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 99;
    try {
      rc = body();
    } catch (...) {
      rc = 98;
    }
    std::fflush(nullptr);
    ::_exit(rc);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

template <class E>
void expect_open_fails(const std::string& path, const std::string& fragment) {
  const std::string before = file_sha(path);
  try {
    Store s(path);
    ADD_FAILURE() << "opening " << path << " did not throw";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
  EXPECT_EQ(file_sha(path), before) << "the file changed";
}

TEST(StoreFaults, FilesThatAreNotStores) {
  TempDir dir;
  // Missing file without create.
  EXPECT_THROW(Store(dir.file("missing.db")), IoError);
  // Text file.
  write_bytes(dir.file("text.db"), std::vector<std::uint8_t>(300, 'x'));
  expect_open_fails<FormatError>(dir.file("text.db"), "not a svattn store");
  // Random bytes.
  std::vector<std::uint8_t> noise(8192);
  svattn::support::Rng gen(7);
  for (auto& b : noise) b = static_cast<std::uint8_t>(gen.next());
  write_bytes(dir.file("noise.db"), noise);
  expect_open_fails<FormatError>(dir.file("noise.db"), "not a svattn store");
  // A tiny file.
  write_bytes(dir.file("tiny.db"), std::vector<std::uint8_t>(10, 0));
  expect_open_fails<FormatError>(dir.file("tiny.db"), "not a svattn store");
  // Empty file without create.
  write_bytes(dir.file("empty.db"), {});
  expect_open_fails<FormatError>(dir.file("empty.db"), "empty");
  // Another application's SQLite database, even in create mode.
  {
    RawDb db(dir.file("other.db"), true);
    ASSERT_EQ(db.exec("CREATE TABLE patients(id INTEGER, name TEXT); INSERT INTO patients "
                      "VALUES (1, 'x');"),
              SQLITE_OK);
  }
  expect_open_fails<FormatError>(dir.file("other.db"), "application_id");
  const std::string before = file_sha(dir.file("other.db"));
  StoreOptions create;
  create.create = true;
  EXPECT_THROW(Store(dir.file("other.db"), create), FormatError);
  EXPECT_EQ(file_sha(dir.file("other.db")), before);
  // A directory.
  EXPECT_THROW(Store(dir.path()), IoError);
}

TEST(StoreFaults, NewerSchemaVersionIsRefused) {
  TempDir dir;
  const std::string path = make_store(dir, "s.db", 2, 10);
  {
    RawDb db(path);
    ASSERT_EQ(db.exec("PRAGMA user_version = " + std::to_string(kStoreSchemaVersion + 1)),
              SQLITE_OK);
  }
  expect_open_fails<FormatError>(path, "newer");
}

TEST(StoreFaults, TruncatedFilesAreRefused) {
  TempDir dir;
  const std::string path = make_store(dir, "s.db", 20, 40);
  const std::vector<std::uint8_t> full = read_bytes(path);
  ASSERT_GT(full.size(), 100000u);
  for (double frac : {0.9, 0.5, 0.2}) {
    const std::string p = dir.file("trunc" + std::to_string(static_cast<int>(frac * 100)) + ".db");
    write_bytes(p, std::vector<std::uint8_t>(full.begin(),
                                             full.begin() + static_cast<long>(full.size() * frac)));
    expect_open_fails<FormatError>(p, "corrupted or truncated");
  }
  write_bytes(dir.file("t60.db"), std::vector<std::uint8_t>(full.begin(), full.begin() + 60));
  expect_open_fails<FormatError>(dir.file("t60.db"), "not a svattn store");
}

TEST(StoreFaults, CorruptedFilesAreRefusedOrDetected) {
  TempDir dir;
  const std::string path = make_store(dir, "s.db", 20, 40);
  std::vector<std::uint8_t> bytes = read_bytes(path);
  // Structural corruption: b-tree pages overwritten.
  {
    std::vector<std::uint8_t> b = bytes;
    for (std::size_t i = 4096; i < 4 * 4096 && i < b.size(); ++i) b[i] = 0xA5;
    write_bytes(dir.file("btree.db"), b);
    try {
      Store s(dir.file("btree.db"));
      ADD_FAILURE() << "opened a store with garbage b-tree pages";
    } catch (const FormatError&) {
    }
  }
  // Header corruption.
  {
    std::vector<std::uint8_t> b = bytes;
    b[3] = 'X';
    write_bytes(dir.file("header.db"), b);
    expect_open_fails<FormatError>(dir.file("header.db"), "not a svattn store");
  }
  // Content corruption inside a key blob: structurally valid, so it opens; using the memory raises
  // FormatError and verify reports the mismatch.
  {
    std::vector<std::uint8_t> b = bytes;
    const RowMatrix k = random_keys(40, kDim, 1000 + 7);
    double v = k(3, 2);
    std::uint8_t pat[8];
    std::memcpy(pat, &v, 8);
    auto it = std::search(b.begin(), b.end(), pat, pat + 8);
    ASSERT_NE(it, b.end());
    it[3] ^= 0x10;
    write_bytes(dir.file("blob.db"), b);
    Store s(dir.file("blob.db"));
    EXPECT_THROW(s.memory("m"), FormatError);
    EXPECT_FALSE(s.verify().ok());
  }
}

TEST(StoreFaults, DiskFullRollsBackAndKeepsTheObjectUsable) {
  TempDir dir;
  const std::string path = make_store(dir, "s.db", 4, 24);
  const std::string hash = Store(path).memory_info("m").state_sha256;
  const auto n_audit = Store(path).audit().size();
  // A large add under a 64 KiB file-size limit (forked child: the limit is per process).
  const int add_rc = in_child([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    Store store(path);
    const std::string before = store.memory("m").state_sha256();
    struct rlimit lim {};
    ::getrlimit(RLIMIT_FSIZE, &lim);
    const rlim_t old = lim.rlim_cur;
    lim.rlim_cur = 64 * 1024;
    ::setrlimit(RLIMIT_FSIZE, &lim);
    int rc = 12;
    try {
      store.add_record("m", 100, random_keys(3000, kDim, 100));
    } catch (const StoreFull&) {
      rc = 10;
    } catch (const Error& e) {
      std::fprintf(stderr, "unexpected error: %s\n", e.what());
      rc = 11;
    }
    lim.rlim_cur = old;
    ::setrlimit(RLIMIT_FSIZE, &lim);
    if (store.memory("m").state_sha256() != before) return 13;  // object unchanged
    store.add_record("m", 101, random_keys(10, kDim, 101));     // and still usable
    store.forget_record("m", 101);
    return store.memory("m").state_sha256() == before ? rc : 14;
  });
  EXPECT_EQ(add_rc, 10);
  // A forget under a limit that the WAL frames exceed.
  const int forget_rc = in_child([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    Store store(path);
    const std::string before = store.memory("m").state_sha256();
    struct rlimit lim {};
    ::getrlimit(RLIMIT_FSIZE, &lim);
    lim.rlim_cur = 6000;
    ::setrlimit(RLIMIT_FSIZE, &lim);
    try {
      store.forget_record("m", 2);
    } catch (const StoreFull&) {
      return store.memory("m").state_sha256() == before ? 10 : 13;
    } catch (const Error& e) {
      std::fprintf(stderr, "unexpected error: %s\n", e.what());
      return 11;
    }
    return 12;
  });
  EXPECT_EQ(forget_rc, 10);
  Store store(path);
  EXPECT_EQ(store.memory("m").state_sha256(), hash);
  EXPECT_EQ(store.audit().size(), n_audit + 2);  // the child's add + forget of record 101
  EXPECT_EQ(store.records("m").size(), 4u);
  EXPECT_TRUE(store.verify().ok());
}

TEST(StoreFaults, LockedStoreGivesStoreBusyAfterTheTimeout) {
  TempDir dir;
  const std::string path = make_store(dir, "s.db", 2, 10);
  StoreOptions o;
  o.busy_timeout_ms = 150;
  Store store(path, o);
  const std::string hash = store.memory("m").state_sha256();
  RawDb holder(path);
  ASSERT_EQ(holder.exec("BEGIN IMMEDIATE"), SQLITE_OK);
  const svattn::support::Stopwatch watch;
  try {
    store.add_record("m", 5, random_keys(10, kDim, 5));
    ADD_FAILURE() << "add succeeded on a locked store";
  } catch (const StoreBusy& e) {
    EXPECT_NE(std::string(e.what()).find("locked"), std::string::npos);
  }
  const double waited = watch.seconds();
  EXPECT_GE(waited, 0.1);
  EXPECT_THROW(store.forget_record("m", 0), StoreBusy);
  // Readers are not blocked by a writer in WAL mode.
  EXPECT_EQ(store.memory("m").state_sha256(), hash);
  ASSERT_EQ(holder.exec("COMMIT"), SQLITE_OK);
  store.add_record("m", 5, random_keys(10, kDim, 5));
  EXPECT_TRUE(store.verify().ok());
}

TEST_P(StoreFaultsOn, TwoWriterProcessesNeverCorruptTheStore) {
  const TempDir& dir = stores().dir();
  const std::string path = make_store_on(stores(), "s", 2, 12);
  auto writer = [&](std::int64_t base) {
    return [path, base] {
      Store store(path);
      for (int i = 0; i < 12; ++i) {
        store.add_record("m", base + i,
                         random_keys(12, kDim, 1000 + static_cast<std::uint64_t>(base + i)));
        if (i % 4 == 3) store.forget_record("m", base + i - 1);
      }
      return 0;
    };
  };
  const pid_t a = ::fork();
  if (a == 0)
    ::_exit([&] {
      try {
        return writer(100)();
      } catch (...) {
        return 98;
      }
    }());
  const pid_t b = ::fork();
  if (b == 0)
    ::_exit([&] {
      try {
        return writer(200)();
      } catch (...) {
        return 98;
      }
    }());
  int sa = 0;
  int sb = 0;
  ::waitpid(a, &sa, 0);
  ::waitpid(b, &sb, 0);
  ASSERT_TRUE(WIFEXITED(sa) && WEXITSTATUS(sa) == 0);
  ASSERT_TRUE(WIFEXITED(sb) && WEXITSTATUS(sb) == 0);
  Store store(path);
  const StoreVerification v = store.verify();
  EXPECT_TRUE(v.ok()) << verification_to_json(v).dump(2);
  std::vector<std::int64_t> expect = {0, 1};
  for (std::int64_t base : {100, 200}) {
    for (int i = 0; i < 12; ++i) {
      if (i % 4 != 2) expect.push_back(base + i);
    }
  }
  std::vector<std::int64_t> have;
  for (const RecordInfo& r : store.records("m")) have.push_back(r.record);
  EXPECT_EQ(have, expect);
  // Same state as a store that received the surviving records in one process.
  StoreOptions o;
  o.create = true;
  Store ref(dir.file("ref.db"), o);
  ref.create_memory("m", rbf_settings(0.03), kDim, kDim);
  add_records(ref, "m", expect, 12, kDim);
  // Records 0 and 1 of make_store have 12 tokens here, as in the reference.
  EXPECT_EQ(store.memory("m").state_sha256(), ref.memory("m").state_sha256());
}

// An import and a stream of forgets on one store at once. Each chunk and each
// forget commits or reports StoreBusy; nothing is lost or corrupted.
TEST_P(StoreFaultsOn, ImportAndForgetProcessesAtOnce) {
  const std::string path = make_store_on(stores(), "s", 8, 12);  // records 0..7
  const pid_t a = ::fork();
  if (a == 0) {
    ::_exit([&] {
      try {
        Store store(path);
        std::vector<std::int64_t> rec;
        RowMatrix keys(40 * 6, kDim);
        for (int r = 0; r < 40; ++r) {
          keys.middleRows(6 * r, 6) = random_keys(6, kDim, 5000 + static_cast<std::uint64_t>(r));
          for (int p = 0; p < 6; ++p) rec.push_back(300 + r);
        }
        ImportOptions io;
        io.chunk_records = 4;
        store.import_records("m", rec, keys, nullptr, io);
        return 0;
      } catch (...) {
        return 98;
      }
    }());
  }
  const pid_t b = ::fork();
  if (b == 0) {
    ::_exit([&] {
      try {
        Store store(path);
        for (std::int64_t r = 0; r < 8; r += 2) store.forget_record("m", r);
        return 0;
      } catch (...) {
        return 98;
      }
    }());
  }
  int sa = 0, sb = 0;
  ::waitpid(a, &sa, 0);
  ::waitpid(b, &sb, 0);
  ASSERT_TRUE(WIFEXITED(sa) && WEXITSTATUS(sa) == 0);
  ASSERT_TRUE(WIFEXITED(sb) && WEXITSTATUS(sb) == 0);
  Store store(path);
  const StoreVerification v = store.verify();
  EXPECT_TRUE(v.ok()) << verification_to_json(v).dump(2);
  std::vector<std::int64_t> have;
  for (const RecordInfo& r : store.records("m")) {
    have.push_back(r.record);
    EXPECT_EQ(r.tokens, r.record >= 300 ? 6 : 12) << "record " << r.record;
  }
  std::vector<std::int64_t> expect = {1, 3, 5, 7};
  for (int r = 0; r < 40; ++r) expect.push_back(300 + r);
  EXPECT_EQ(have, expect);
}

// ------------------------------------------------------------------------------- kill -9

/// The operation sequence of the crash trials: large adds, with a forget after every second add.
struct CrashScript {
  struct Op {
    bool forget;
    std::int64_t record;
    int tokens;
  };
  std::vector<Op> ops;
  std::vector<std::string> hashes;  // hashes[k] = memory state after the first k ops
};

CrashScript make_script(const std::string& base_path, int n_ops, int tokens_per_add) {
  CrashScript s;
  std::int64_t next = 100;
  for (int k = 0; k < n_ops; ++k) {
    if (k % 3 == 2) {
      s.ops.push_back({true, next - 2, 0});
    } else {
      s.ops.push_back({false, next++, tokens_per_add});
    }
  }
  // Reference hashes: replay the script on an in-RAM memory.
  Store base(base_path);
  Memory mem = base.memory("m");
  s.hashes.push_back(mem.state_sha256());
  for (const auto& op : s.ops) {
    if (op.forget) {
      std::vector<TokenId> ids;
      for (int i = 0; i < tokens_per_add; ++i) ids.push_back(store_token_id(op.record, i));
      mem.remove_batch(ids);
    } else {
      TokenSet ts;
      ts.keys = random_keys(op.tokens, kDim, 1000 + static_cast<std::uint64_t>(op.record));
      ts.values = ts.keys;
      for (int i = 0; i < op.tokens; ++i) ts.ids.push_back(store_token_id(op.record, i));
      mem.add_batch(ts);
    }
    s.hashes.push_back(mem.state_sha256());
  }
  return s;
}

int run_script(const std::string& path, const CrashScript& s) {
  Store store(path);
  for (const auto& op : s.ops) {
    if (op.forget) {
      store.forget_record("m", op.record);
    } else {
      store.add_record("m", op.record,
                       random_keys(op.tokens, kDim, 1000 + static_cast<std::uint64_t>(op.record)));
    }
  }
  return 0;
}

// Audit entries of memory operations (not the store-level "shred" entries that follow each
// forget of an encrypted record).
std::size_t memory_ops(const Store& store) {
  std::size_t n = 0;
  for (const AuditEntry& e : store.audit()) n += e.operation == "shred" ? 0 : 1;
  return n;
}

// On SQLite every trial starts from a byte copy of one base file; on PostgreSQL from a store built
// the same way in a fresh schema (same records, so the same hashes).
void crash_trials(store_test::Stores& st, int trials, int n_ops, int tokens_per_add,
                  std::uint64_t seed) {
  const std::string base = make_store_on(st, "base", 4, 50);
  const std::size_t base_entries = memory_ops(Store(base));
  const CrashScript script = make_script(base, n_ops, tokens_per_add);
  const std::vector<std::uint8_t> base_bytes = st.pg() ? std::vector<std::uint8_t>{}
                                                       : read_bytes(base);
  auto fresh = [&](const std::string& name) {
    if (st.pg()) return make_store_on(st, name, 4, 50);
    const std::string p = st.at_without_keys(name);
    write_bytes(p, base_bytes);
    return p;
  };
  // Time of an uninterrupted run, to draw kill delays over the whole script.
  const std::string timing = fresh("timing");
  const svattn::support::Stopwatch watch;
  ASSERT_EQ(in_child([&] { return run_script(timing, script); }), 0);
  const double full = watch.seconds();
  EXPECT_EQ(Store(timing).memory_info("m").state_sha256, script.hashes.back());
  svattn::support::Rng gen(seed);
  std::set<std::size_t> outcomes;
  for (int t = 0; t < trials; ++t) {
    const std::string p = fresh("crash" + std::to_string(t));
    const double delay = full * gen.uniform();
    const pid_t pid = ::fork();
    if (pid == 0)
      ::_exit([&] {
        try {
          return run_script(p, script);
        } catch (...) {
          return 98;
        }
      }());
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    Store store(p);
    const StoreVerification v = store.verify();
    EXPECT_TRUE(v.ok()) << "trial " << t << ": " << verification_to_json(v).dump(2);
    const std::size_t done = memory_ops(store) - base_entries;
    ASSERT_LE(done, script.ops.size());
    EXPECT_EQ(store.memory_info("m").state_sha256, script.hashes[done])
        << "trial " << t << " after " << done << " operations";
    EXPECT_EQ(store.memory("m").state_sha256(), script.hashes[done]);
    outcomes.insert(done);
    // The store keeps working after the crash.
    store.add_record("m", 999999, random_keys(5, kDim, 999999));
    EXPECT_TRUE(store.verify().ok());
  }
  // The kills landed at different points of the script (not all before the first commit).
  EXPECT_GE(outcomes.size(), 2u);
}

// 20 trials on SQLite; 8 on PostgreSQL, where each trial builds its store anew (20 took 45 s per
// instance on the 2-core VM at load 7); the slow label runs 60 on every backend.
TEST_P(StoreFaultsOn, KillNineDuringLargeAddsAndForgetsLeavesOldOrNewState) {
  crash_trials(stores(), pg() ? 8 : 20, 9, 300, 20240501);
}

TEST_P(StoreFaultsOnSlow, KillNineManyTrials) { crash_trials(stores(), 60, 15, 400, 777); }

SVATTN_ON_ALL_BACKENDS(StoreFaultsOn);
SVATTN_ON_ALL_BACKENDS(StoreFaultsOnSlow);

}  // namespace
}  // namespace svattn
