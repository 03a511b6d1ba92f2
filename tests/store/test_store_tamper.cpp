// What verify derives from the audit chain, on every backend (docs/store.md "What verify
// checks"): records erased by hand, suspended records altered, inserted or resumed after an edit,
// settings edited outside the store, and erasures whose key destruction could not be done. Each
// tamper is made from outside with raw SQL; verify must name it and the operations must refuse it.
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "backend_test_util.h"

namespace svattn {
namespace {

using store_test::random_keys;
using store_test::StoreOnBackends;

constexpr int kDim = 3;
constexpr int kPerRecord = 5;

class StoreTamper : public StoreOnBackends {
 protected:
  // A small store: 6 records of 5 tokens, dim 3, RBF sigma 2, C 0.1.
  std::string make(const std::string& name, bool encrypt) {
    const std::string at = stores().at(name);
    StoreOptions o;
    o.create = true;
    o.encrypt = encrypt;
    Store s(at, o);
    MemorySettings ms = store_test::rbf_settings(0.1, 2.0);
    s.create_memory("m", ms, kDim, kDim);
    for (std::int64_t r = 0; r < 6; ++r)
      s.add_record("m", r, random_keys(kPerRecord, kDim, 500 + static_cast<std::uint64_t>(r)));
    return at;
  }
  static bool mentions(const StoreVerification& v, const std::string& what) {
    for (const std::string& p : v.problems)
      if (p.find(what) != std::string::npos) return true;
    return false;
  }
  static std::string all(const StoreVerification& v) {
    std::string s;
    for (const std::string& p : v.problems) s += p + "\n";
    return s;
  }
  StoreVerification verify(const std::string& at) {
    StoreOptions o;
    o.read_only = true;
    return Store(at, o).verify();
  }
  // A token's key (or its ciphertext) overwritten with zeros of the same length.
  std::string zero_sql(std::int64_t record) const {
    const std::string where = " WHERE record = " + std::to_string(record) + " AND position = 0";
    return pg() ? "UPDATE tokens SET key = decode(repeat('00', length(key)), 'hex')" + where
                : "UPDATE tokens SET key = zeroblob(length(key))" + where;
  }
};

// Suspend a record, then delete its rows by hand: the chain says it is suspended, not forgotten.
TEST_P(StoreTamper, ForgedErasureOfASuspendedRecordIsReported) {
  for (bool encrypt : {false, true}) {
    const std::string name = encrypt ? "enc" : "plain";
    const std::string at = make(name, encrypt);
    Store(at).suspend_record("m", 2);
    ASSERT_TRUE(verify(at).ok()) << all(verify(at));
    ASSERT_EQ(stores().raw_exec(name, "DELETE FROM tokens WHERE record = 2"), "");
    ASSERT_EQ(stores().raw_exec(name, "DELETE FROM records WHERE record = 2"), "");
    const StoreVerification v = verify(at);
    EXPECT_FALSE(v.ok());
    EXPECT_TRUE(mentions(v, "record 2 is suspended per audit entry")) << all(v);
  }
}

// An active record's rows deleted by hand (with its bounds group left): also reported.
TEST_P(StoreTamper, ForgedErasureOfAnActiveRecordIsReported) {
  const std::string at = make("s", false);
  ASSERT_EQ(stores().raw_exec("s", "DELETE FROM tokens WHERE record = 4"), "");
  ASSERT_EQ(stores().raw_exec("s", "DELETE FROM records WHERE record = 4"), "");
  const StoreVerification v = verify(at);
  EXPECT_TRUE(mentions(v, "record 4 is active per audit entry")) << all(v);
}

// A suspended record's token altered: verify names it and resume refuses it (plaintext: its
// digests; encrypted: the ciphertext no longer opens).
TEST_P(StoreTamper, AlteredSuspendedTokenIsReportedAndNotResumed) {
  for (bool encrypt : {false, true}) {
    const std::string name = encrypt ? "enc" : "plain";
    const std::string at = make(name, encrypt);
    Store(at).suspend_record("m", 3);
    ASSERT_EQ(stores().raw_exec(name, zero_sql(3)), "");
    const StoreVerification v = verify(at);
    EXPECT_TRUE(mentions(v, "suspended record 3")) << all(v);
    Store s(at);
    EXPECT_THROW(s.resume_record("m", 3), FormatError);
    EXPECT_TRUE(s.records("m")[3].suspended);
  }
}

// Rows inserted by hand as a new suspended record (a copy of record 1 as record 9): no audit
// entry added or suspended it.
TEST_P(StoreTamper, InsertedSuspendedRecordIsReportedAndNotResumed) {
  const std::string at = make("s", false);
  const std::int64_t shift = std::int64_t{8} << 23;  // token ids of record 9 from record 1's
  ASSERT_EQ(stores().raw_exec(
                "s",
                "INSERT INTO records(memory_id, record, suspended, added_utc, buckets, "
                "bounds_group) SELECT memory_id, 9, 1, added_utc, buckets, bounds_group FROM "
                "records WHERE record = 1"),
            "");
  ASSERT_EQ(stores().raw_exec("s",
                              "INSERT INTO tokens(memory_id, token_id, record, position, "
                              "key, value) SELECT memory_id, token_id + " +
                                  std::to_string(shift) +
                                  ", 9, position, key, value FROM tokens WHERE record = 1"),
            "");
  const StoreVerification v = verify(at);
  EXPECT_TRUE(mentions(v, "record 9 is suspended but no audit entry suspended it")) << all(v);
  Store s(at);
  EXPECT_THROW(s.resume_record("m", 9), FormatError);
  EXPECT_EQ(s.memory_info("m").tokens, 6 * kPerRecord);
}

// One settings field edited in the memories row: verify names it, and every operation refuses the
// memory (the edit to bounded mode would otherwise let the next add evict other records' tokens).
TEST_P(StoreTamper, SettingsEditIsReportedAndRefused) {
  const std::vector<std::pair<std::string, nlohmann::json>> edits = {
      {"mode", "bounded"}, {"alpha_tol", 1e-6}, {"kkt_tol", 1e-9}, {"token_budget", 12}};
  int n = 0;
  for (const auto& [field, value] : edits) {
    const std::string name = "s" + std::to_string(n++);
    const std::string at = make(name, false);
    nlohmann::json j =
        nlohmann::json::parse(stores().raw_text(name, "SELECT settings FROM memories"));
    j[field] = value;
    if (field == "token_budget") j["mode"] = "audit";  // a budget alone, still audit mode
    ASSERT_EQ(stores().raw_exec(name, "UPDATE memories SET settings = '" + j.dump() + "'"), "");
    const StoreVerification v = verify(at);
    EXPECT_TRUE(mentions(v, "stored settings differ from those of its create entry")) << all(v);
    EXPECT_TRUE(mentions(v, field)) << all(v);
    const std::int64_t rows = stores().raw_int(name, "SELECT count(*) FROM tokens");
    Store s(at);
    EXPECT_THROW(s.add_record("m", 7, random_keys(12, kDim, 77)), FormatError) << field;
    EXPECT_THROW(s.forget_record("m", 1), FormatError) << field;
    EXPECT_THROW(s.suspend_record("m", 1), FormatError) << field;
    EXPECT_THROW(s.query("m", random_keys(1, kDim, 3)), FormatError) << field;
    EXPECT_EQ(stores().raw_int(name, "SELECT count(*) FROM tokens"), rows) << field;
  }
}

// Settings edited to a value no memory may have: verify reports the memory (exit 1, not an error
// of verify itself) and operations refuse it.
TEST_P(StoreTamper, InvalidSettingsEditIsReported) {
  const std::string at = make("s", false);
  nlohmann::json j = nlohmann::json::parse(stores().raw_text("s", "SELECT settings FROM memories"));
  j["alpha_tol"] = 0.5;
  ASSERT_EQ(stores().raw_exec("s", "UPDATE memories SET settings = '" + j.dump() + "'"), "");
  StoreVerification v;
  ASSERT_NO_THROW(v = verify(at));
  EXPECT_TRUE(mentions(v, "memory 'm': its row does not read")) << all(v);
  Store s(at);
  EXPECT_THROW(s.add_record("m", 7, random_keys(3, kDim, 7)), Error);
}

// The data key of a forgotten record made live again is not possible from outside; but a key that
// stays live because its destruction could not run is reported until a writable open completes it.
TEST_P(StoreTamper, PendingKeyDestructionIsReportedUntilCompleted) {
  const std::string at = make("s", true);
  {
    // Another writer holds the key store: reads go on, the keys' destruction waits and times out.
    std::unique_ptr<store_test::RawDb> file_lock;
#ifdef SVATTN_TEST_POSTGRES
    std::unique_ptr<store_test::RawPg> table_lock;
    if (stores().key_db()) {
      table_lock = stores().raw_keys("s");
      ASSERT_EQ(table_lock->exec("BEGIN"), "");
      ASSERT_EQ(table_lock->exec("LOCK TABLE data_keys IN EXCLUSIVE MODE"), "");
    }
#endif
    if (!stores().key_db()) {
      file_lock = std::make_unique<store_test::RawDb>(stores().keys("s"));
      ASSERT_EQ(file_lock->exec("BEGIN IMMEDIATE"), SQLITE_OK);
    }
    StoreOptions o;
    o.busy_timeout_ms = 50;
    Store s(at, o);
    try {  // committed; the keys could not die: the error says both
      s.forget_record("m", 5);
      ADD_FAILURE() << "the keys were destroyed under another writer's lock";
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find("was erased"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("pending"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(stores().raw_int("s", "SELECT count(*) FROM records WHERE record = 5"), 0);
  const StoreVerification v = verify(at);
  EXPECT_TRUE(mentions(v, "(erasure of record 5) is pending")) << all(v);
  { Store s(at); }  // a writable open destroys the keys
  EXPECT_TRUE(verify(at).ok()) << all(verify(at));
}

// A key store that cannot destroy keys: the forget does not start (nothing written), and works
// once the key store is writable again.
TEST_P(StoreTamper, ForgetWithAReadOnlyKeyStoreDoesNotStart) {
  const std::string at = make("s", true);
  if (stores().key_db()) {  // the key database opened read-only (default_transaction_read_only)
#ifdef SVATTN_TEST_POSTGRES
    const std::string before = stores().digest("s");
    std::string ro = at;
    ro.replace(ro.find("&keys="), std::string::npos,
               "&keys=" + store_test::percent_encode(stores().keys("s") +
                                                     "%20-cdefault_transaction_read_only%3Don"));
    {
      Store s(ro);
      EXPECT_THROW(s.forget_record("m", 2), StoreError);
    }
    EXPECT_EQ(stores().digest("s"), before);
    EXPECT_TRUE(verify(at).ok()) << all(verify(at));
    Store s(at);
    EXPECT_NO_THROW(s.forget_record("m", 2));
#endif
    return;
  }
  const std::string keys = stores().keys("s");
  const std::string before = stores().digest("s");
  // Root ignores permission bits: the immutable attribute makes the file read-only for it too.
  const bool root = ::geteuid() == 0;
  const std::string lock = root ? "chattr +i '" + keys + "' 2>/dev/null" : "";
  if (root ? std::system(lock.c_str()) != 0 : ::chmod(keys.c_str(), 0444) != 0)
    GTEST_SKIP() << "cannot make the key store read-only here";
  {
    Store s(at);
    try {
      s.forget_record("m", 2);
      ADD_FAILURE() << "the forget ran";
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find(keys), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("nothing was changed"), std::string::npos) << e.what();
    }
  }
  if (root) {
    EXPECT_EQ(std::system(("chattr -i '" + keys + "'").c_str()), 0);
  } else {
    ::chmod(keys.c_str(), 0644);
  }
  EXPECT_EQ(stores().digest("s"), before);
  EXPECT_TRUE(verify(at).ok()) << all(verify(at));
  Store s(at);
  EXPECT_NO_THROW(s.forget_record("m", 2));
  EXPECT_TRUE(verify(at).ok()) << all(verify(at));
}

// Another store's key store in place of this one's: recognised as foreign (verify reports it,
// every write refuses, nothing is sealed under its keys); a truncated one is an error naming it.
TEST_P(StoreTamper, ForeignOrTruncatedKeyStoreIsNamed) {
  const std::string at = make("a", true);
  make("b", true);
  if (stores().key_db()) {
    // No file to swap or truncate: store a's URI names store b's key schema in keys= instead.
    const std::string foreign = stores().at_with_keys_of("a", "b");
    const StoreVerification v = verify(foreign);
    EXPECT_TRUE(mentions(v, "is not the key store of store")) << all(v);
    const std::int64_t live_b = stores().keys_int("b", "SELECT count(*) FROM data_keys");
    {
      Store s(foreign);
      try {
        s.add_record("m", 9, random_keys(kPerRecord, kDim, 9));
        ADD_FAILURE() << "a record was sealed under another store's key store";
      } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("is not the key store of store"), std::string::npos)
            << e.what();
      }
    }
    EXPECT_EQ(stores().keys_int("b", "SELECT count(*) FROM data_keys"), live_b);
    EXPECT_TRUE(verify(at).ok()) << all(verify(at));
    return;
  }
  const std::string keys = stores().keys("a");
  const std::vector<std::uint8_t> own = store_test::read_bytes(keys);
  store_test::write_bytes(keys, store_test::read_bytes(stores().keys("b")));
  ::unlink((keys + "-wal").c_str());
  ::unlink((keys + "-shm").c_str());
  const StoreVerification v = verify(at);
  EXPECT_TRUE(mentions(v, "is not the key store of store")) << all(v);
  const std::int64_t live_b = stores().keys_int("b", "SELECT count(*) FROM data_keys");
  {
    Store s(at);
    try {
      s.add_record("m", 9, random_keys(kPerRecord, kDim, 9));
      ADD_FAILURE() << "a record was sealed under another store's key store";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(keys), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(store_test::RawDb(keys).query_int("SELECT count(*) FROM data_keys"), live_b);
  store_test::write_bytes(keys,
                          std::vector<std::uint8_t>(own.begin(), own.begin() + own.size() / 2));
  try {
    Store s(at);
    s.query("m", random_keys(1, kDim, 4));
    ADD_FAILURE() << "a truncated key store opened";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(keys), std::string::npos) << e.what();
  }
  store_test::write_bytes(keys, own);
  EXPECT_TRUE(verify(at).ok()) << all(verify(at));
}

SVATTN_ON_ALL_BACKENDS(StoreTamper);

}  // namespace
}  // namespace svattn
