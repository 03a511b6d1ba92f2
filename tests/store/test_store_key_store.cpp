// The key store STORE.keys (docs/store.md "Encryption at rest (building blocks)"): create/get/
// destroy, master-key checks, tampered rows, and byte scans proving a destroyed key's bytes (raw
// and wrapped) are gone from the file and its WAL.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "store/key_store.h"
#include "store_test_util.h"
#include "support/clock.h"
#include "support/random_libstdcxx.h"

namespace svattn::store_detail {
namespace {

using store_test::count_occurrences;
using store_test::read_bytes;
using store_test::TempDir;

KeyStoreOptions create_opts(const MasterKeySource& m = {}) {
  KeyStoreOptions o;
  o.create = true;
  o.master = m;
  return o;
}

// A master key in an environment variable set for this test process.
MasterKeySource env_master(const char* var, const SecretKey& key) {
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (std::size_t i = 0; i < kKeyBytes; ++i) {
    hex.push_back(kHex[key.data()[i] >> 4]);
    hex.push_back(kHex[key.data()[i] & 15]);
  }
  ::setenv(var, hex.c_str(), 1);
  MasterKeySource s;
  s.kind = MasterKeySource::Kind::kEnvironment;
  s.env_var = var;
  return s;
}

bool same_key(const SecretKey& a, const SecretKey& b) {
  return std::memcmp(a.data(), b.data(), kKeyBytes) == 0;
}

// The stored (raw or wrapped) bytes of every live key, read from outside.
std::map<std::string, std::vector<std::uint8_t>> stored_blobs(const std::string& path) {
  store_test::RawDb db(path);
  std::map<std::string, std::vector<std::uint8_t>> out;
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db.handle(), "SELECT key_id, stored FROM data_keys WHERE live = 1", -1, &s,
                     nullptr);
  while (sqlite3_step(s) == SQLITE_ROW) {
    const auto* p = static_cast<const std::uint8_t*>(sqlite3_column_blob(s, 1));
    out[reinterpret_cast<const char*>(sqlite3_column_text(s, 0))] =
        std::vector<std::uint8_t>(p, p + sqlite3_column_bytes(s, 1));
  }
  sqlite3_finalize(s);
  return out;
}

// Occurrences of `pattern` in the key store file, its -wal and -shm; where each one is, in `where`
// (file, offset, page and that page's b-tree type byte) for the failure message.
std::size_t found_in_files(const std::string& path, const std::uint8_t* pattern, std::size_t n,
                           std::string* where = nullptr) {
  std::size_t c = 0;
  for (const std::string& f : {path, path + "-wal", path + "-shm", path + "-journal"}) {
    const std::vector<std::uint8_t> bytes = read_bytes(f);
    c += count_occurrences(bytes, pattern, n);
    if (where == nullptr) continue;
    auto it = bytes.begin();
    while ((it = std::search(it, bytes.end(), pattern, pattern + n)) != bytes.end()) {
      const std::size_t off = static_cast<std::size_t>(it - bytes.begin());
      const std::size_t page = off / 4096;
      const std::size_t head = page * 4096 + (page == 0 ? 100 : 0);
      *where += f.substr(path.size()) + "@" + std::to_string(off) + " page " +
                std::to_string(page + 1) + " type " + std::to_string(bytes[head]) + "; ";
      ++it;
    }
  }
  return c;
}

TEST(KeyStore, CreateGetRoundTripWithoutMasterKey) {
  TempDir dir;
  const std::string path = KeyStore::path_for(dir.file("s.db"));
  EXPECT_EQ(path, dir.file("s.db.keys"));
  KeyStore ks(path, create_opts());
  EXPECT_EQ(ks.wrapping(), "none");
  const NewDataKey k = ks.create_key({3, 42});
  EXPECT_EQ(k.key_id.size(), 32u);
  const KeyLookup got = ks.get(k.key_id);
  EXPECT_EQ(got.state, KeyState::kLive);
  EXPECT_TRUE(same_key(got.key, k.key));
  EXPECT_EQ(got.owner.memory_id, 3);
  EXPECT_EQ(got.owner.record_id, 42);
  EXPECT_EQ(got.wrapped_sha256, k.wrapped_sha256);
  EXPECT_EQ(got.to_json().dump().find("\"key\""), std::string::npos);  // JSON never holds the key
  const auto blobs = stored_blobs(path);
  EXPECT_EQ(KeyStore::wrapped_sha256(k.key_id, blobs.at(k.key_id)), k.wrapped_sha256);
  EXPECT_EQ(ks.live_keys(), 1);
}

TEST(KeyStore, BatchCreationGivesDistinctKeys) {
  TempDir dir;
  KeyStore ks(dir.file("s.keys"), create_opts());
  std::vector<KeyOwner> owners;
  for (int r = 0; r < 50; ++r) owners.push_back({1, r});
  const std::vector<NewDataKey> keys = ks.create_keys(owners);
  ASSERT_EQ(keys.size(), 50u);
  std::set<std::string> ids;
  for (int r = 0; r < 50; ++r) {
    ids.insert(keys[r].key_id);
    const KeyLookup g = ks.get(keys[r].key_id);
    EXPECT_TRUE(same_key(g.key, keys[r].key));
    EXPECT_EQ(g.owner.record_id, r);
    for (int q = 0; q < r; ++q) EXPECT_FALSE(same_key(keys[q].key, keys[r].key));
  }
  EXPECT_EQ(ids.size(), 50u);
  EXPECT_EQ(ks.live_keys(), 50);
}

TEST(KeyStore, DestroyAnswersShreddedAndIsIdempotent) {
  TempDir dir;
  const std::string path = dir.file("s.keys");
  KeyStore ks(path, create_opts());
  const NewDataKey k = ks.create_key({1, 5});
  const NewDataKey keep = ks.create_key({1, 6});
  const KeyDestruction d = ks.destroy(k.key_id);
  EXPECT_FALSE(d.already_shredded);
  EXPECT_TRUE(d.wal_truncated);
  EXPECT_EQ(d.wrapped_sha256, k.wrapped_sha256);
  EXPECT_EQ(d.owner.record_id, 5);
  EXPECT_FALSE(d.destroyed_utc.empty());
  EXPECT_EQ(read_bytes(path + "-wal").size(), 0u);
  const KeyLookup g = ks.get(k.key_id);
  EXPECT_TRUE(g.shredded());
  EXPECT_EQ(g.destroyed_utc, d.destroyed_utc);
  EXPECT_EQ(g.wrapped_sha256, k.wrapped_sha256);
  const SecretKey zero;
  EXPECT_TRUE(same_key(g.key, zero));
  const KeyDestruction again = ks.destroy(k.key_id);
  EXPECT_TRUE(again.already_shredded);
  EXPECT_EQ(again.destroyed_utc, d.destroyed_utc);
  EXPECT_EQ(again.to_json()["wrapped_sha256"], k.wrapped_sha256);
  EXPECT_THROW(ks.destroy("0123"), NotFound);
  EXPECT_THROW(ks.get("0123"), NotFound);
  EXPECT_TRUE(same_key(ks.get(keep.key_id).key, keep.key));
  EXPECT_EQ(ks.live_keys(), 1);
  EXPECT_EQ(ks.shredded_keys(), 1);
}

TEST(KeyStore, MasterKeyMustMatchTheKeyStore) {
  TempDir dir;
  const std::string path = dir.file("s.keys");
  const SecretKey master = SecretKey::random();
  const MasterKeySource src = env_master("SVATTN_TEST_KS_MASTER", master);
  std::string id;
  SecretKey data;
  {
    KeyStore ks(path, create_opts(src));
    EXPECT_EQ(ks.wrapping(), "aes-256-gcm");
    NewDataKey k = ks.create_key({1, 1});
    id = k.key_id;
    data = std::move(k.key);
  }
  EXPECT_EQ(stored_blobs(path).at(id).size(), kWrappedKeyBytes);
  {
    KeyStoreOptions o;
    o.master = src;
    KeyStore ks(path, o);
    EXPECT_TRUE(same_key(ks.get(id).key, data));
  }
  KeyStoreOptions none;  // no master key for a wrapped store
  try {
    KeyStore ks(path, none);
    ADD_FAILURE() << "opened without its master key";
  } catch (const MasterKeyError& e) {
    EXPECT_NE(std::string(e.what()).find("none was given"), std::string::npos) << e.what();
  }
  KeyStoreOptions wrong;
  wrong.master = env_master("SVATTN_TEST_KS_WRONG", SecretKey::random());
  try {
    KeyStore ks(path, wrong);
    ADD_FAILURE() << "opened with a wrong master key";
  } catch (const MasterKeyError& e) {
    EXPECT_NE(std::string(e.what()).find("SVATTN_TEST_KS_WRONG"), std::string::npos) << e.what();
  }
  ::unsetenv("SVATTN_TEST_KS_MASTER");
  KeyStoreOptions unset;
  unset.master = src;  // the variable is gone
  EXPECT_THROW(KeyStore(path, unset), MasterKeyError);
  // A master key given to a store created without one.
  const std::string plain = dir.file("p.keys");
  { KeyStore ks(plain, create_opts()); }
  EXPECT_THROW(KeyStore(plain, wrong), MasterKeyError);
  // The failed opens wrote nothing.
  const std::string sha = store_test::file_sha(path);
  EXPECT_THROW(KeyStore(path, none), MasterKeyError);
  EXPECT_EQ(store_test::file_sha(path), sha);
}

TEST(KeyStore, TamperedOrSwappedWrappedKeysAreRefused) {
  TempDir dir;
  const std::string path = dir.file("s.keys");
  KeyStoreOptions o = create_opts(env_master("SVATTN_TEST_KS_TAMPER", SecretKey::random()));
  std::string a;
  std::string b;
  {
    KeyStore ks(path, o);
    a = ks.create_key({1, 1}).key_id;
    b = ks.create_key({1, 2}).key_id;
  }
  {
    store_test::RawDb db(path);
    // Swap the two wrapped keys between their rows.
    const auto blobs = stored_blobs(path);
    auto hex = [](const std::vector<std::uint8_t>& v) {
      std::string h;
      char b2[3];
      for (std::uint8_t x : v) {
        std::snprintf(b2, sizeof b2, "%02x", x);
        h += b2;
      }
      return h;
    };
    ASSERT_EQ(db.exec("UPDATE data_keys SET stored = x'" + hex(blobs.at(b)) + "' WHERE key_id = '" +
                      a + "'"),
              SQLITE_OK);
    ASSERT_EQ(db.exec("UPDATE data_keys SET stored = x'" + hex(blobs.at(a)) + "' WHERE key_id = '" +
                      b + "'"),
              SQLITE_OK);
    ASSERT_NE(stored_blobs(path).at(a), blobs.at(a));
  }
  KeyStore ks(path, o);
  EXPECT_THROW(ks.get(a), FormatError);
  EXPECT_THROW(ks.get(b), FormatError);
  {
    store_test::RawDb db(path);
    ASSERT_EQ(db.exec("UPDATE data_keys SET stored = zeroblob(61) WHERE key_id = '" + a + "'"),
              SQLITE_OK);
  }
  try {
    ks.get(a);
    ADD_FAILURE() << "a zeroed wrapped key was accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(a), std::string::npos) << e.what();
  }
}

TEST(KeyStore, OpenRefusesMissingAndForeignFiles) {
  TempDir dir;
  KeyStoreOptions o;
  EXPECT_THROW(KeyStore(dir.file("none.keys"), o), NotFound);
  EXPECT_FALSE(store_test::file_exists(dir.file("none.keys")));
  store_test::write_bytes(dir.file("junk.keys"), std::vector<std::uint8_t>(4096, 0x5a));
  EXPECT_THROW(KeyStore(dir.file("junk.keys"), o), FormatError);
  {
    store_test::RawDb db(dir.file("other.db"), true);
    db.exec("CREATE TABLE t(x)");
  }
  EXPECT_THROW(KeyStore(dir.file("other.db"), o), FormatError);
  // An empty file (creation interrupted before the schema): refused, or initialised with create.
  store_test::write_bytes(dir.file("empty.keys"), {});
  EXPECT_THROW(KeyStore(dir.file("empty.keys"), o), FormatError);
  {
    KeyStore ks(dir.file("empty.keys"), create_opts());
    EXPECT_EQ(ks.wrapping(), "none");
  }
  EXPECT_NO_THROW(KeyStore(dir.file("empty.keys"), o));
  o.busy_timeout_ms = -1;
  EXPECT_THROW(o.validate(), InvalidArgument);
}

// Three rounds of: create n/3 keys in one transaction, then destroy 40 % of the live keys in a
// random order. Then scans the key store's files for the raw and the stored form of every key:
// destroyed keys are gone, live ones are found (so the scan can fail).
void scan_after_destroy(const KeyStoreOptions& opts, int n, std::uint64_t seed) {
  TempDir dir;
  const std::string path = dir.file("s.keys");
  KeyStore ks(path, opts);
  svattn::support::Rng gen(seed);
  std::vector<NewDataKey> keys;
  std::map<std::string, std::vector<std::uint8_t>> stored;
  std::vector<bool> destroyed;
  for (int round = 0; round < 3; ++round) {
    std::vector<KeyOwner> owners;
    for (int r = 0; r < n / 3; ++r) owners.push_back({1, static_cast<int>(keys.size()) + r});
    for (NewDataKey& k : ks.create_keys(owners)) keys.push_back(std::move(k));
    destroyed.resize(keys.size(), false);
    for (const auto& [id, blob] : stored_blobs(path)) stored[id] = blob;
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (!destroyed[i] && gen.next() % 10 < 4) order.push_back(i);
    }
    svattn::support::libstdcxx::shuffle(order.begin(), order.end(), gen);
    for (std::size_t i : order) {
      ASSERT_TRUE(ks.destroy(keys[i].key_id).wal_truncated);
      destroyed[i] = true;
    }
  }
  const bool wrapped = ks.wrapping() != "none";
  std::size_t live = 0;
  for (std::size_t r = 0; r < keys.size(); ++r) {
    const std::vector<std::uint8_t>& s = stored.at(keys[r].key_id);
    std::string where;
    const std::size_t raw = found_in_files(path, keys[r].key.data(), kKeyBytes, &where);
    const std::size_t st = found_in_files(path, s.data(), s.size(), &where);
    const std::size_t raw_half = found_in_files(path, keys[r].key.data() + 8, 16);
    if (destroyed[r]) {
      EXPECT_EQ(raw, 0u) << "destroyed key " << r << " found raw at " << where;
      EXPECT_EQ(raw_half, 0u) << "16 bytes of destroyed key " << r << " found";
      EXPECT_EQ(st, 0u) << "destroyed key " << r << " found in its stored form at " << where;
    } else {
      ++live;
      EXPECT_GE(st, 1u) << "live key " << r << " not found: the scan would not see a leak";
      EXPECT_EQ(raw, wrapped ? 0u : st) << r;
    }
  }
  EXPECT_EQ(ks.live_keys(), static_cast<std::int64_t>(live));
  EXPECT_GT(live, keys.size() / 10);
  EXPECT_LT(live, keys.size() * 9 / 10);
  EXPECT_EQ(read_bytes(path + "-wal").size(), 0u);
}

TEST(KeyStore, DestroyedRawKeysLeaveNoBytesInTheFileOrWal) {
  scan_after_destroy(create_opts(), 300, 1);
}

TEST(KeyStore, DestroyedWrappedKeysLeaveNoBytesInTheFileOrWal) {
  scan_after_destroy(create_opts(env_master("SVATTN_TEST_KS_SCAN", SecretKey::random())), 300, 2);
}

// 3,000 keys over many leaf and interior pages, several seeds. (With keys deleted from a
// WITHOUT ROWID table instead of zeroed in place, the 300-key version found destroyed keys in
// about half the runs: copies that b-tree rebalancing left in pages' free space, which
// secure_delete does not erase.)
TEST(KeyStoreSlow, DestroyedKeysLeaveNoBytesAtScale) {
  for (std::uint64_t seed = 10; seed < 12; ++seed) scan_after_destroy(create_opts(), 3000, seed);
}

// A child process destroys `keys` in order; returns its exit status. With `kill_after` >= 0 it is
// killed (SIGKILL) that many seconds after the fork.
int destroy_in_child(const std::string& path, const std::vector<NewDataKey>& keys,
                     double kill_after) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::_exit([&] {
      try {
        KeyStore ks(path, KeyStoreOptions{});
        for (const NewDataKey& k : keys) ks.destroy(k.key_id);
        return 0;
      } catch (...) {
        return 98;
      }
    }());
  }
  if (kill_after >= 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(kill_after));
    ::kill(pid, SIGKILL);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(KeyStore, KillNineDuringDestroysLeavesEachKeyLiveOrShredded) {
  TempDir dir;
  std::vector<KeyOwner> owners;
  for (int r = 0; r < 60; ++r) owners.push_back({1, r});
  auto fresh = [&](const std::string& path) {
    KeyStore ks(path, create_opts());
    return ks.create_keys(owners);
  };
  // An uninterrupted run, to draw the kill times over the whole sequence of destroys.
  const std::vector<NewDataKey> timing_keys = fresh(dir.file("timing.keys"));
  const svattn::support::Stopwatch watch;
  ASSERT_EQ(destroy_in_child(dir.file("timing.keys"), timing_keys, -1), 0);
  const double full = watch.seconds();
  svattn::support::Rng gen(4242);
  std::set<std::size_t> outcomes;
  for (int t = 0; t < 20; ++t) {
    const std::string path = dir.file("crash" + std::to_string(t) + ".keys");
    const std::vector<NewDataKey> keys = fresh(path);
    const auto stored = stored_blobs(path);
    destroy_in_child(path, keys, full * gen.uniform());
    KeyStore ks(path, KeyStoreOptions{});  // opening completes an interrupted WAL truncation
    EXPECT_EQ(read_bytes(path + "-wal").size(), 0u) << "trial " << t;
    std::size_t shredded = 0;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const KeyLookup g = ks.get(keys[i].key_id);
      const std::vector<std::uint8_t>& st = stored.at(keys[i].key_id);
      if (g.shredded()) {
        // Destroys commit in order: the shredded keys are exactly the first ones.
        EXPECT_EQ(i, shredded++) << "trial " << t << ": key " << i << " shredded out of order";
        EXPECT_EQ(found_in_files(path, st.data(), st.size()), 0u) << "trial " << t << " key " << i;
      } else {
        EXPECT_TRUE(same_key(g.key, keys[i].key)) << "trial " << t << " key " << i;
        EXPECT_GE(found_in_files(path, st.data(), st.size()), 1u);
      }
    }
    EXPECT_EQ(ks.shredded_keys(), static_cast<std::int64_t>(shredded));
    EXPECT_EQ(ks.live_keys(), static_cast<std::int64_t>(keys.size() - shredded));
    outcomes.insert(shredded);
    // The key store keeps working after the crash.
    EXPECT_TRUE(ks.destroy(keys.back().key_id).wal_truncated);
  }
  // The kills landed at different points (not all before the first destroy or after the last).
  EXPECT_GE(outcomes.size(), 3u);
}

TEST(KeyStore, AReaderDelaysWalTruncationUntilItEnds) {
  TempDir dir;
  const std::string path = dir.file("s.keys");
  KeyStoreOptions o = create_opts();
  o.busy_timeout_ms = 50;
  KeyStore ks(path, o);
  const NewDataKey k = ks.create_key({1, 1});
  const NewDataKey other = ks.create_key({1, 2});
  const std::vector<std::uint8_t> stored = stored_blobs(path).at(k.key_id);
  store_test::RawDb reader(path);
  ASSERT_EQ(reader.exec("BEGIN"), SQLITE_OK);
  ASSERT_EQ(reader.query_int("SELECT count(*) FROM data_keys"), 2);  // holds a read snapshot
  const KeyDestruction d = ks.destroy(k.key_id);
  EXPECT_FALSE(d.wal_truncated);  // reported, not hidden
  EXPECT_TRUE(ks.get(k.key_id).shredded());
  ASSERT_EQ(reader.exec("COMMIT"), SQLITE_OK);
  EXPECT_TRUE(ks.truncate_wal());
  EXPECT_EQ(read_bytes(path + "-wal").size(), 0u);
  EXPECT_EQ(found_in_files(path, stored.data(), stored.size()), 0u);
  EXPECT_TRUE(same_key(ks.get(other.key_id).key, other.key));
}

}  // namespace
}  // namespace svattn::store_detail
