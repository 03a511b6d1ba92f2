// Encryption and erasure on every backend (docs/store.md "PostgreSQL", "Keys in a separate
// PostgreSQL database"): kill -9 during forgets never leaves a record whose data key is destroyed
// but whose tokens are still in a memory, or the reverse; two processes (one forgetting, one
// querying) see consistent states; tampered or moved ciphertext is refused naming the record; a
// wrong or missing master key is a clear error (CLI exit 2) that writes nothing; a forget
// destroys the key where the key store keeps it; `memory encrypt` converts a plaintext store.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "backend_test_util.h"

namespace svattn {
namespace {

using store_test::add_records;
using store_test::random_keys;
using store_test::rbf_settings;
using store_test::StoreOnBackends;
using store_test::TempDir;

constexpr int kDim = 6;
constexpr int kPerRecord = 8;

StoreOptions create_opts(bool encrypt = true) {
  StoreOptions o;
  o.create = true;
  o.encrypt = encrypt;
  return o;
}

class StoreBackendsCrypto : public StoreOnBackends {};
class StoreBackendsCryptoSlow : public StoreOnBackends {};

// ------------------------------------------------------------------ kill -9 during forgets

// `trials` kills at random points of a sequence of forgets (the delay is a random fraction of an
// uninterrupted run of the same sequence): a record whose data key is destroyed has no rows left
// (so it is in no memory), and after reopening a key is destroyed exactly when its record is gone.
void kill_during_forgets(store_test::Stores& stores, int trials, std::uint64_t seed) {
  constexpr int kRecords = 10;
  std::mt19937_64 gen(seed);
  std::vector<std::int64_t> ids;
  for (int r = 0; r < kRecords; ++r) ids.push_back(r);
  double full_ms = 0;
  int partial = 0;
  for (int trial = -1; trial < trials; ++trial) {  // trial -1 times an uninterrupted run
    const std::string name = "t" + std::to_string(trial + 1);
    const std::string at = stores.at(name);
    {
      Store s(at, create_opts());
      s.create_memory("m", rbf_settings(0.05, 1.5), 4, 4);
      add_records(s, "m", ids, 6, 4);
    }
    std::map<std::int64_t, std::string> key_of;
    for (std::int64_t r : ids) {
      key_of[r] =
          stores.raw_text(name, "SELECT key_id FROM records WHERE record = " + std::to_string(r));
    }
    // The child reports through a pipe once its store is open, so the kill lands at a random
    // point of the forget sequence itself, not of the open (whose time varies with the backend
    // and the machine's load and would otherwise swallow most kills).
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(ready[0]);
      ::_exit([&] {
        try {
          Store s(at);
          const char opened = 'o';
          if (::write(ready[1], &opened, 1) != 1) return 97;
          for (std::int64_t r : ids) s.forget_record("m", r);
          return 0;
        } catch (...) {
          return 98;
        }
      }());
    }
    ::close(ready[1]);
    char opened = 0;
    const bool child_opened = ::read(ready[0], &opened, 1) == 1;
    ::close(ready[0]);
    const auto t0 = std::chrono::steady_clock::now();
    int status = 0;
    if (trial >= 0 && child_opened) {
      std::this_thread::sleep_for(std::chrono::microseconds(
          static_cast<std::int64_t>(1000 * full_ms * static_cast<double>(gen() % 1000) / 1000.0)));
      ::kill(pid, SIGKILL);
    }
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(child_opened) << "trial " << trial << ": the child did not open the store";
    if (trial < 0) {
      full_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      continue;
    }
    ASSERT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 98) << "child failed";
    int shredded = 0;
    {  // the store as the crash left it, before any open completes anything
      const auto ks = stores.key_store(name);
      for (std::int64_t r : ids) {
        if (!ks->get(key_of[r]).shredded()) continue;
        ++shredded;
        const std::string rs = std::to_string(r);
        EXPECT_EQ(stores.raw_int(name, "SELECT count(*) FROM records WHERE record = " + rs), 0)
            << "trial " << trial << ": record " << r << " is shredded but still in the store";
        EXPECT_EQ(stores.raw_int(name, "SELECT count(*) FROM tokens WHERE record = " + rs), 0);
      }
    }
    partial += shredded > 0 && shredded < kRecords ? 1 : 0;
    Store s(at);  // completes pending destructions
    const auto recs = s.records("m");
    const auto ks = stores.key_store(name);
    for (std::int64_t r : ids) {
      const bool present = std::any_of(recs.begin(), recs.end(),
                                       [&](const RecordInfo& ri) { return ri.record == r; });
      EXPECT_EQ(ks->get(key_of[r]).shredded(), !present) << "trial " << trial << " record " << r;
    }
    EXPECT_EQ(stores.raw_int(name, "SELECT count(*) FROM pending_shreds"), 0);
    EXPECT_EQ(s.memory("m").size(), static_cast<int>(recs.size()) * 6);
    EXPECT_TRUE(s.verify().ok()) << "trial " << trial;
  }
  std::printf("uninterrupted forget sequence (after the open) %.0f ms; trials with a partial sequence: %d of %d\n",
              full_ms, partial, trials);
  // The kills landed inside the sequence, not all before or after it.
  EXPECT_GE(partial, trials / 6);
}

// 20 trials per backend run in the fast labels (10-20 s each on the 2-core VM);
// the slow label runs 60 more.
TEST_P(StoreBackendsCrypto, KillNineDuringForgetsNeverLeavesAShreddedRecordInAMemory) {
  kill_during_forgets(stores(), 20, 2026);
}

TEST_P(StoreBackendsCryptoSlow, KillNineDuringForgetsManyTrials) {
  kill_during_forgets(stores(), 60, 2027);
}

// ------------------------------------------------------------------ two processes

// Precomputed states of a forget sequence: after k forgets, the hash and a readout.
struct Expected {
  std::vector<std::string> hash;
  std::vector<RowMatrix> readout;
};

// One process forgets records one by one while another queries: every state the querying
// process sees is one of the states of the sequence, with matching token count and readout.
TEST_P(StoreBackendsCrypto, TwoProcessesOneForgettingOneQueryingSeeConsistentStates) {
  constexpr int kRecords = 8;
  const std::string at = stores().at("s");
  std::vector<std::int64_t> ids;
  for (int r = 0; r < kRecords; ++r) ids.push_back(r);
  const RowMatrix probes = random_keys(3, kDim, 5);
  Expected ex;
  {
    Store ref(stores().dir().file("ref.db"), create_opts(false));
    ref.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
    add_records(ref, "m", ids, kPerRecord, kDim);
    for (int k = 0; k <= kRecords; ++k) {
      ex.hash.push_back(ref.memory_info("m").state_sha256);
      ex.readout.push_back(ref.query("m", probes));
      if (k < kRecords) ref.forget_record("m", k);
    }
    Store s(at, create_opts());
    s.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
    add_records(s, "m", ids, kPerRecord, kDim);
  }
  // The forgetter starts once the querier has opened the store and seen the first state, so
  // the two overlap however slow the querier's open is (CI once saw only the final state).
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t forgetter = ::fork();
  if (forgetter == 0) {
    ::close(ready[1]);
    ::_exit([&] {
      try {
        Store s(at);
        char byte = 0;
        if (::read(ready[0], &byte, 1) != 1) return 1;
        for (std::int64_t r : ids) s.forget_record("m", r);
        return 0;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "forgetter: %s\n", e.what());
        return 1;
      }
    }());
  }
  const pid_t querier = ::fork();
  if (querier == 0) {
    ::close(ready[0]);
    ::_exit([&] {
      try {
        Store s(at, StoreOptions{});
        std::set<int> seen;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
        while (seen.count(kRecords) == 0 && std::chrono::steady_clock::now() < deadline) {
          const MemoryInfo info = s.memory_info("m");
          const int k = kRecords - info.tokens / kPerRecord;
          if (k < 0 || k > kRecords || info.state_sha256 != ex.hash[k]) return 2;
          const RowMatrix q = s.query("m", probes);
          bool match = false;  // the query may see a later state than memory_info
          for (int j = k; j <= kRecords && !match; ++j)
            match = std::memcmp(q.data(), ex.readout[j].data(), sizeof(double) * q.size()) == 0;
          if (!match) return 3;
          if (seen.empty() && ::write(ready[1], "g", 1) != 1) return 1;
          seen.insert(k);
        }
        std::printf("querier saw %zu of %d states\n", seen.size(), kRecords + 1);
        std::fflush(stdout);
        return seen.size() >= 2 ? 0 : 4;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "querier: %s\n", e.what());
        return 1;
      }
    }());
  }
  ::close(ready[0]);
  ::close(ready[1]);
  int sf = 0, sq = 0;
  ::waitpid(forgetter, &sf, 0);
  ::waitpid(querier, &sq, 0);
  EXPECT_TRUE(WIFEXITED(sf) && WEXITSTATUS(sf) == 0) << "forgetter status " << sf;
  EXPECT_TRUE(WIFEXITED(sq) && WEXITSTATUS(sq) == 0)
      << "querier status " << WEXITSTATUS(sq)
      << " (2: hash/token mismatch, 3: readout, 4: too few states)";
  Store s(at);
  EXPECT_EQ(s.memory_info("m").state_sha256, ex.hash[kRecords]);
  EXPECT_TRUE(s.verify().ok());
}

// ------------------------------------------------------------------ tampering, keys, erasure

TEST_P(StoreBackendsCrypto, TamperedOrMovedCiphertextIsRefusedNamingTheRecord) {
  const std::string at = stores().at("s");
  {
    Store s(at, create_opts());
    s.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
    add_records(s, "m", {1, 2}, kPerRecord, kDim);
  }
  // Record 2's first key blob moved onto record 1's first token (valid ciphertext, wrong AAD).
  ASSERT_EQ(stores().raw_exec("s",
                              "UPDATE tokens SET key = (SELECT key FROM tokens WHERE record = 2 "
                              "AND position = 0) WHERE record = 1 AND position = 0"),
            "");
  {
    Store s(at);
    try {
      s.query("m", random_keys(1, kDim, 3));
      ADD_FAILURE() << "moved ciphertext was accepted";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find("record 1"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(s.verify().ok());
  }
  // A changed byte in record 2's ciphertext (a second store: tampered, not moved).
  {
    Store t(stores().at("t"), create_opts());
    t.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
    add_records(t, "m", {1, 2}, kPerRecord, kDim);
  }
  const std::string flip =
      pg() ? "UPDATE tokens SET value = set_byte(value, 20, get_byte(value, 20) # 1) WHERE "
             "record = 2 AND position = 3"
           : "UPDATE tokens SET value = randomblob(length(value)) WHERE record = 2 AND "
             "position = 3";
  ASSERT_EQ(stores().raw_exec("t", flip), "");
  Store t(stores().at("t"));
  try {
    t.query("m", random_keys(1, kDim, 3));
    ADD_FAILURE() << "tampered ciphertext was accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("record 2"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(t.verify().ok());
}

// A forget destroys the record's data key where the key store keeps it: the key's bytes are gone
// from the key store file (a byte scan), or its row in the key database holds none; the
// certificate says what the erasure rests on.
TEST_P(StoreBackendsCrypto, ForgetDestroysTheDataKeyInTheKeyStore) {
  const std::string at = stores().at("s");
  Store s(at, create_opts());
  s.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
  add_records(s, "m", {1, 2, 3}, kPerRecord, kDim);
  const std::string key_id = stores().raw_text("s", "SELECT key_id FROM records WHERE record = 2");
  auto before = stores().key_store("s");
  // Unwrapped (no master key): the stored bytes are the key itself.
  const store_detail::KeyLookup live = before->get(key_id);
  before.reset();
  const std::uint8_t* key = live.key.data();
  const std::size_t kb = store_detail::kKeyBytes;
  const std::string kf = stores().keys_file("s");
  auto found = [&](const std::string& f) {
    return store_test::count_occurrences(store_test::read_bytes(f), key, kb);
  };
  if (!kf.empty()) EXPECT_GE(found(kf) + found(kf + "-wal"), 1u);
  const ForgetResult f = s.forget_record("m", 2);
  ASSERT_TRUE(f.certificate.store.has_value());
  const StoreErasure& se = *f.certificate.store;
  EXPECT_TRUE(se.data_key_destroyed);
  EXPECT_EQ(se.data_key_id, key_id);
  if (pg()) {
    EXPECT_EQ(se.erasure_basis.rfind("key destruction", 0), 0u) << se.erasure_basis;
    EXPECT_EQ(se.erasure_basis.find("key database") != std::string::npos, stores().key_db())
        << se.erasure_basis;
  } else {
    EXPECT_TRUE(se.secure_delete);
  }
  if (!kf.empty()) {  // a key store file: the key's bytes are nowhere in it or its WAL
    EXPECT_EQ(found(kf), 0u);
    EXPECT_EQ(found(kf + "-wal"), 0u);
  }
  // The live row is zeroed in place and a tombstone records the destruction. Live: records 1 and
  // 3, their bounds group's key (its former spare) and a new spare; the old group key is
  // destroyed too.
  EXPECT_EQ(stores().keys_int("s", "SELECT count(*) FROM data_keys WHERE live = 1"), 4);
  EXPECT_EQ(stores().keys_int("s", "SELECT count(*) FROM shredded_keys WHERE record_id < 0"), 1);
  EXPECT_EQ(stores().keys_int("s", "SELECT count(*) FROM shredded_keys WHERE key_id = '" +
                                       key_id + "'"),
            1);
  EXPECT_EQ(stores().keys_int("s", "SELECT count(*) FROM data_keys WHERE key_id = '" + key_id +
                                       "' AND stored <> " +
                                       (stores().key_db()
                                            ? "decode(repeat('00', length(stored)), 'hex')"
                                            : "zeroblob(length(stored))")),
            0);
  const auto ks = stores().key_store("s");
  EXPECT_TRUE(ks->get(key_id).shredded());
  ASSERT_EQ(se.bounds_key_id.size(), 32u);
  EXPECT_TRUE(se.bounds_key_destroyed);
  EXPECT_TRUE(ks->get(se.bounds_key_id).shredded());
  EXPECT_TRUE(s.verify().ok());
}

// A store whose keys= names its own database and schema is refused before anything is written;
// a key database URI's password never shows in the store's path.
TEST(StoreKeyDbPg, KeyDatabaseUriIsCheckedAndItsPasswordHidden) {
  SVATTN_BACKEND_REQUIRE_PG();
  store_test::Stores st(store_test::BackendKind::kPostgresKeyDb);
  store_test::Stores& stores = st;
  const std::string own = stores.at_without_keys("s");
  const std::string self = own + "&keys=" + store_test::percent_encode(own);
  EXPECT_THROW(Store(self, create_opts()), InvalidArgument);
  EXPECT_EQ(stores.raw_int("s", "SELECT count(*) FROM pg_tables WHERE schemaname = "
                                  "current_schema()"),
            0);
  const std::string hidden =
      own + "&keys=" + store_test::percent_encode("postgresql://u:secret@/nodb?host=/nonexistent");
  try {
    Store(hidden, create_opts());
    ADD_FAILURE() << "opened with an unreachable key database";
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()).find("secret"), std::string::npos) << e.what();
  }
  Store s(stores.at("s"), create_opts());
  EXPECT_EQ(s.key_store_path().rfind("postgresql://", 0), 0u);
  EXPECT_EQ(s.path().find("secret"), std::string::npos);
}

// encrypt_store on every backend: the plaintext rows are rewritten sealed under fresh keys, the
// hashes do not change, and the result says what the scrub cannot promise (PostgreSQL).
TEST_P(StoreBackendsCrypto, EncryptConvertsAPlaintextStore) {
  const std::string plain_at = stores().at_without_keys("s");
  std::string hash;
  {
    Store s(plain_at, create_opts(false));
    s.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
    add_records(s, "m", {0, 1, 2}, kPerRecord, kDim);
    s.suspend_record("m", 1);
    hash = s.memory_info("m").state_sha256;
  }
  if (pg()) EXPECT_THROW(encrypt_store(plain_at), InvalidArgument);  // no keys= to put keys in
  const StoreEncryptionResult r = encrypt_store(stores().at("s"));
  EXPECT_TRUE(r.converted);
  EXPECT_TRUE(r.scrubbed);
  EXPECT_EQ(r.records, 3);
  EXPECT_EQ(r.tokens, 3 * kPerRecord);
  EXPECT_EQ(r.state_sha256["m"], hash);
  EXPECT_EQ(r.residual.empty(), !pg());
  EXPECT_EQ(r.wal_truncated, !pg());
  const nlohmann::json j = encryption_result_to_json(r);
  EXPECT_EQ(j.contains("residual"), pg());
  EXPECT_EQ(stores().raw_int("s", "SELECT count(*) FROM records WHERE key_id IS NULL"), 0);
  // Every row a token message (docs/store.md "Token messages").
  EXPECT_EQ(stores().raw_int("s", "SELECT count(*) FROM tokens WHERE length(key) <> " +
                                      std::to_string(kDim * 8 + store_detail::kTokenKeyOverhead) +
                                      " OR length(value) <> " +
                                      std::to_string(kDim * 8 + store_detail::kTokenValueOverhead)),
            0);
  // Three records' data keys and their bounds group's key (docs/store.md "Bounds groups").
  EXPECT_EQ(stores().keys_int("s", "SELECT count(*) FROM data_keys WHERE live = 1"), 4);
  EXPECT_EQ(stores().raw_int("s", "SELECT count(*) FROM bounds_groups WHERE key_id IS NULL"), 0);
  EXPECT_EQ(stores().raw_int("s", "SELECT count(*) FROM meta WHERE key = "
                                  "'encrypt_scrub_pending'"),
            0);
  Store s(stores().at("s"));
  EXPECT_EQ(s.encryption(), "aes-256-gcm");
  EXPECT_EQ(s.memory("m").state_sha256(), hash);
  s.resume_record("m", 1);
  const ForgetResult f = s.forget_record("m", 1);
  EXPECT_TRUE(f.certificate.store->data_key_destroyed);
  EXPECT_TRUE(s.verify().ok());
  EXPECT_TRUE(encrypt_store(stores().at("s")).already_encrypted);
}

SVATTN_ON_ALL_BACKENDS(StoreBackendsCrypto);
SVATTN_ON_ALL_BACKENDS(StoreBackendsCryptoSlow);

// ------------------------------------------------------------------ the CLI's master key

#ifdef SVATTN_CLI
struct CliResult {
  int code = -1;
  std::string out, err;
};

// Runs the CLI with `env` (assignments) in its environment only.
CliResult cli(const TempDir& dir, const std::string& args, const std::string& env = "") {
  const std::string out = dir.file("o.txt"), err = dir.file("e.txt");
  const std::string cmd = "env -u SVATTN_MASTER_KEY -u SVATTN_MASTER_KEY_FILE " + env + " " +
                          std::string(SVATTN_CLI) + " " + args + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  const auto o = store_test::read_bytes(out), e = store_test::read_bytes(err);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, std::string(o.begin(), o.end()),
          std::string(e.begin(), e.end())};
}

// A wrong, empty or missing master key: exit 2, one line naming the master key, nothing written
// (on every backend; the key store wraps its keys under the master key).
TEST_P(StoreBackendsCrypto, WrongOrMissingMasterKeyExitsTwoAndWritesNothing) {
  const TempDir& dir = stores().dir();
  const std::string key = dir.file("master.hex");
  std::ofstream(key) << std::string(64, '7') << "\n";
  ::chmod(key.c_str(), 0600);
  std::string csv;
  const RowMatrix x = random_keys(12, 4, 3);
  for (int i = 0; i < 12; ++i) {
    for (int k = 0; k < 4; ++k) csv += (k ? "," : "") + std::to_string(x(i, k));
    csv += "\n";
  }
  store_test::write_bytes(dir.file("k.csv"), std::vector<std::uint8_t>(csv.begin(), csv.end()));
  const std::string at = "'" + stores().at("s") + "'";
  const std::string mk = " --master-key-file " + key;
  CliResult r = cli(dir, "memory create " + at + " --memory m --dim 4 --C 0.05" + mk);
  ASSERT_EQ(r.code, 0) << r.err;
  for (int rec : {0, 1}) {
    r = cli(dir, "memory add " + at + " --memory m --record " + std::to_string(rec) + " --keys " +
                     dir.file("k.csv") + mk);
    ASSERT_EQ(r.code, 0) << r.err;
  }
  const std::string before = stores().digest("s");
  const std::string wrong = "SVATTN_MASTER_KEY=" + std::string(64, '8');
  const std::vector<std::string> cmds = {
      "memory add " + at + " --memory m --record 3 --keys " + dir.file("k.csv"),
      "memory forget " + at + " --memory m --record 1", "memory show " + at + " --memory m"};
  for (const std::string& c : cmds) {
    for (const std::string& env : {std::string(), wrong, std::string("SVATTN_MASTER_KEY=")}) {
      r = cli(dir, c, env);
      EXPECT_EQ(r.code, 2) << c << " " << env << ": " << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
      EXPECT_NE(r.err.find("master key"), std::string::npos) << r.err;
    }
  }
  EXPECT_EQ(stores().digest("s"), before);
  r = cli(dir, "memory forget " + at + " --memory m --record 1" + mk);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(stores().digest("s"), before);
}

// `svattn memory encrypt` on every backend: exit 0, the key store named, and on PostgreSQL the
// warning of what VACUUM FULL cannot remove (text and JSON).
TEST_P(StoreBackendsCrypto, CliEncryptSaysWhatTheScrubCannotRemove) {
  const TempDir& dir = stores().dir();
  const std::string plain = "'" + stores().at_without_keys("s") + "'";
  const std::string at = "'" + stores().at("s") + "'";
  std::string csv;
  const RowMatrix x = random_keys(12, 4, 4);
  for (int i = 0; i < 12; ++i) {
    for (int k = 0; k < 4; ++k) csv += (k ? "," : "") + std::to_string(x(i, k));
    csv += "\n";
  }
  store_test::write_bytes(dir.file("k.csv"), std::vector<std::uint8_t>(csv.begin(), csv.end()));
  CliResult r = cli(dir, "memory create " + plain + " --memory m --dim 4 --C 0.05 --plaintext");
  ASSERT_EQ(r.code, 0) << r.err;
  r = cli(dir, "memory add " + plain + " --memory m --record 1 --keys " + dir.file("k.csv"));
  ASSERT_EQ(r.code, 0) << r.err;
  r = cli(dir, "memory encrypt " + at);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(stores().key_db() ? "postgresql://" : stores().keys("s")),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("warning     PostgreSQL does not zero freed space") != std::string::npos,
            pg())
      << r.out;
  EXPECT_EQ(r.out.find("VACUUM FULL") != std::string::npos, pg()) << r.out;
  r = cli(dir, "memory encrypt " + at + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out).at("already_encrypted").get<bool>());
  r = cli(dir, "memory show " + at + " --memory m --json");
  EXPECT_EQ(r.code, 0) << r.err;
}
#endif

}  // namespace
}  // namespace svattn
