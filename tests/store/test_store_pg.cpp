// The store's operations on both backends (docs/store.md "PostgreSQL"): the same tests on an
// SQLite file and on a PostgreSQL schema give the same hashes, audit chain, certificates and
// errors (encryption, kill -9 and two-process tests on every backend:
// test_store_backends_crypto.cpp). The PostgreSQL instances need a server (pg_test_util.h).
#include <signal.h>
#include <sys/wait.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "backend_test_util.h"
#include "store/db/postgres.h"
#include "support/clock.h"

namespace svattn {
namespace {

using store_test::add_records;
using store_test::PgSchema;
using store_test::random_keys;
using store_test::RawDb;
using store_test::RawPg;
using store_test::rbf_settings;
using store_test::TempDir;

constexpr int kDim = 6;

constexpr int kPerRecord = 8;

StoreOptions create_opts(bool encrypt = true) {
  StoreOptions o;
  o.create = true;
  o.encrypt = encrypt;
  return o;
}

class StoreBackends : public store_test::StoreOnBackends {};

TEST_P(StoreBackends, CreateAddSuspendResumeReopenRestoresTheSameState) {
  const std::string at = stores().at("s");
  const RowMatrix queries = random_keys(5, kDim, 99);
  std::string hash;
  RowMatrix readouts;
  {
    Store store(at, create_opts());
    store.create_memory("m", rbf_settings(0.05), kDim, kDim);
    add_records(store, "m", {4, 1, 7, 2}, kPerRecord, kDim);
    hash = store.memory("m").state_sha256();
    store.suspend_record("m", 7);
    EXPECT_NE(store.memory("m").state_sha256(), hash);
    EXPECT_EQ(store.memory_info("m").suspended_records, 1);
    store.resume_record("m", 7);
    EXPECT_EQ(store.memory("m").state_sha256(), hash);
    EXPECT_EQ(store.memory_info("m").state_sha256, hash);
    EXPECT_EQ(store.memory_info("m").tokens, 4 * kPerRecord);
    readouts = store.query("m", queries);
  }
  Store store(at);
  EXPECT_EQ(store.encryption(), "aes-256-gcm");
  EXPECT_EQ(store.memory_names(), std::vector<std::string>{"m"});
  EXPECT_EQ(store.memory("m").state_sha256(), hash);
  EXPECT_EQ(store.stored_state("m").state_sha256, hash);
  const RowMatrix again = store.query("m", queries);
  EXPECT_EQ(0, std::memcmp(again.data(), readouts.data(), sizeof(double) * again.size()));
  BatchSettings bs;
  bs.problem = rbf_settings(0.05).problem;
  EXPECT_EQ(solve_batch(store.memory("m").tokens(), bs).state.state_sha256, hash);
  const auto recs = store.records("m");
  ASSERT_EQ(recs.size(), 4u);
  EXPECT_EQ(recs[0].record, 1);
  EXPECT_EQ(recs[0].tokens, kPerRecord);
  const StoreVerification v = store.verify();
  EXPECT_TRUE(v.ok()) << (v.problems.empty() ? "" : v.problems[0]);
  EXPECT_TRUE(v.chain_ok);
  EXPECT_EQ(v.audit_entries, 1 + 4 + 2);
}

// The same operations give the same state hashes and audit sequence on both backends.
TEST_P(StoreBackends, HashesEqualTheSqliteStoreOfTheSameOperations) {
  TempDir ref_dir;
  Store ref(ref_dir.file("ref.db"), create_opts());
  Store s(stores().at("s"), create_opts());
  for (Store* x : {&ref, &s}) {
    x->create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
    add_records(*x, "m", {3, 9, 1, 4}, kPerRecord, kDim);
    x->suspend_record("m", 9);
    x->forget_record("m", 1);
    RowMatrix keys = random_keys(24, kDim, 77);
    std::vector<std::int64_t> recs;
    for (int i = 0; i < 24; ++i) recs.push_back(100 + i % 3);
    x->import_records("m", recs, keys);
  }
  EXPECT_EQ(s.memory("m").state_sha256(), ref.memory("m").state_sha256());
  EXPECT_EQ(s.memory_info("m").state_sha256, ref.memory_info("m").state_sha256);
  const auto a = s.audit();
  const auto b = ref.audit();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].operation, b[i].operation);
    EXPECT_EQ(a[i].state_after, b[i].state_after) << "entry " << i;
  }
}

TEST_P(StoreBackends, ErasedStoreHashesLikeOneThatNeverSawTheRecord) {
  Store a(stores().at("a"), create_opts());
  Store b(stores().at("b"), create_opts());
  a.create_memory("m", rbf_settings(0.04), kDim, kDim);
  b.create_memory("m", rbf_settings(0.04), kDim, kDim);
  add_records(a, "m", {0, 1, 2, 3, 4, 5}, kPerRecord, kDim);
  add_records(b, "m", {5, 1, 4, 0, 2}, kPerRecord, kDim);
  const ForgetResult f = a.forget_record("m", 3);
  EXPECT_EQ(f.wal_truncated, !pg());  // PostgreSQL: the server's WAL is not the store's
  EXPECT_EQ(a.memory("m").state_sha256(), b.memory("m").state_sha256());
  EXPECT_EQ(f.entry.state_after, b.memory_info("m").state_sha256);
  ASSERT_TRUE(f.certificate.store.has_value());
  const StoreErasure& se = *f.certificate.store;
  EXPECT_EQ(se.token_rows_erased, kPerRecord);
  EXPECT_TRUE(se.data_key_destroyed);
  EXPECT_FALSE(se.data_key_id.empty());
  EXPECT_EQ(se.secure_delete, !pg());
  const nlohmann::json j = f.certificate.to_json();
  if (pg()) {
    EXPECT_EQ(se.erasure_basis.rfind("key destruction", 0), 0u) << se.erasure_basis;
    EXPECT_EQ(j["store"]["erasure_basis"], se.erasure_basis);
    EXPECT_EQ(RemovalCertificate::from_json(j).store->erasure_basis, se.erasure_basis);
  } else {
    EXPECT_FALSE(j["store"].contains("erasure_basis"));  // SQLite certificates are unchanged
  }
  EXPECT_EQ(stores().raw_int("a", "SELECT count(*) FROM tokens WHERE record = 3"), 0);
  EXPECT_EQ(stores().raw_int("a", "SELECT count(*) FROM pending_shreds"), 0);
  store_detail::KeyStore ks(stores().keys("a"), {});
  EXPECT_TRUE(ks.get(se.data_key_id).shredded());
  a = Store(stores().at("a"));
  EXPECT_EQ(a.memory("m").state_sha256(), b.memory("m").state_sha256());
  EXPECT_TRUE(a.verify().ok());
  EXPECT_TRUE(b.verify().ok());
}

// A forget without a restore (a fresh Store, a reserve-only record; docs/store.md "Operations
// without a restore") certifies the same erasure as the ordinary path: on PostgreSQL that it rests
// on key destruction (a first version left the certificate's erasure basis empty there and
// claimed secure_delete).
TEST_P(StoreBackends, ForgetWithoutARestoreSaysWhatTheErasureRestsOn) {
  std::int64_t reserve_only = -1;
  {
    Store a(stores().at("a"), create_opts());
    a.create_memory("m", rbf_settings(0.05), kDim, kDim);
    std::vector<std::int64_t> ids;
    for (std::int64_t r = 0; r < 80; ++r) ids.push_back(r);
    add_records(a, "m", ids, 2, kDim);  // 160 tokens, far more than the support
    const State st = a.stored_state("m");
    std::map<std::int64_t, bool> support;
    for (std::size_t t = 0; t < st.ids.size(); ++t)
      support[record_of(st.ids[t])] = support[record_of(st.ids[t])] || st.alpha[t] != 0.0;
    for (const auto& [r, has] : support) {
      if (!has && reserve_only < 0) reserve_only = r;
    }
  }
  ASSERT_GE(reserve_only, 0);
  Store a(stores().at("a"));
  const ForgetResult f = a.forget_record("m", reserve_only);
  EXPECT_TRUE(f.certificate.verify.from_stored_rows);
  ASSERT_TRUE(f.certificate.store.has_value());
  const StoreErasure& se = *f.certificate.store;
  EXPECT_TRUE(se.data_key_destroyed);
  EXPECT_EQ(se.secure_delete, !pg());
  if (pg()) {
    EXPECT_EQ(se.erasure_basis.rfind("key destruction", 0), 0u) << se.erasure_basis;
  } else {
    EXPECT_TRUE(se.erasure_basis.empty()) << se.erasure_basis;
  }
  EXPECT_EQ(RemovalCertificate::from_json(f.certificate.to_json()), f.certificate);
}

TEST_P(StoreBackends, AuditChainIsAppendOnlyAndTamperingIsDetected) {
  {
    Store s(stores().at("s"), create_opts());
    s.create_memory("m", rbf_settings(0.05), kDim, kDim);
    add_records(s, "m", {0, 1, 2}, kPerRecord, kDim);
    s.forget_record("m", 1);
    EXPECT_TRUE(s.verify().ok());
  }
  const std::string upd = "UPDATE audit SET certificate = '{}' WHERE seq = 2";
  const std::string err = stores().raw_exec("s", upd);
  EXPECT_NE(err.find("append-only"), std::string::npos) << err;
  EXPECT_NE(stores().raw_exec("s", "DELETE FROM audit WHERE seq = 2").find("append-only"),
            std::string::npos);
  // Around the triggers (as a table owner could), an edited entry breaks the chain.
  const std::string off =
      pg() ? "ALTER TABLE audit DISABLE TRIGGER USER" : "DROP TRIGGER audit_no_update";
  ASSERT_EQ(stores().raw_exec("s", off), "");
  ASSERT_EQ(stores().raw_exec("s", "UPDATE audit SET memory = 'x' WHERE seq = 2"), "");
  Store s(stores().at("s"));
  const StoreVerification v = s.verify();
  EXPECT_FALSE(v.chain_ok);
  EXPECT_FALSE(v.ok());
}

TEST_P(StoreBackends, TwoObjectsOnOneStoreSeeEachOthersChanges) {
  const std::string at = stores().at("s");
  Store a(at, create_opts());
  a.create_memory("m", rbf_settings(0.05), kDim, kDim);
  add_records(a, "m", {0, 1}, kPerRecord, kDim);
  Store b(at);
  EXPECT_EQ(b.memory("m").state_sha256(), a.memory("m").state_sha256());
  add_records(a, "m", {2}, kPerRecord, kDim);
  b.forget_record("m", 0);  // b's in-RAM memory is stale: reloaded inside the transaction
  add_records(a, "m", {3}, kPerRecord, kDim);
  EXPECT_EQ(a.memory("m").state_sha256(), b.memory("m").state_sha256());
  EXPECT_EQ(a.memory("m").size(), 3 * kPerRecord);
  EXPECT_TRUE(a.verify().ok());
}

// The bounds groups' blobs (docs/store.md "Bounds groups"): PostgreSQL writes them in batched
// UPDATEs of up to GroupWriter::kBatch (32) groups, SQLite one group at a time. With more groups
// than one batch (2,100 records: 33 groups), every plaintext blob equals byte for byte the SQLite
// store's after the same import, a support forget (every group rewritten) and an add (one group);
// a reopened memory, plaintext or encrypted, is seeded from them.
TEST_P(StoreBackends, PersistedBoundsEqualTheSqliteStoresAndSeedTheReopenedMemory) {
  constexpr int kRecords = 2100;
  std::vector<std::int64_t> recs;
  for (int i = 0; i < kRecords; ++i) recs.push_back(i);
  const RowMatrix keys = random_keys(kRecords, kDim, 31);
  const RowMatrix extra = random_keys(kPerRecord, kDim, 32);
  TempDir ref_dir;
  const std::string ref_at = ref_dir.file("ref.db");
  std::int64_t support = -1;
  for (const std::string& at : {ref_at, stores().at("p"), stores().at("e")}) {
    Store x(at, create_opts(at == stores().at("e")));
    x.create_memory("m", rbf_settings(0.05, 1.5), kDim, kDim);
    x.import_records("m", recs, keys);
    if (support < 0) {
      const State st = x.stored_state("m");
      for (std::size_t t = 0; t < st.ids.size() && support < 0; ++t)
        if (st.alpha[t] != 0.0) support = record_of(st.ids[t]);
    }
    ASSERT_TRUE(x.forget_record("m", support).certificate.verify.ok());
    x.add_record("m", 5000, extra);
  }
  RawDb ref(ref_at);
  std::string want;
  {
    sqlite3_stmt* q = nullptr;
    sqlite3_prepare_v2(ref.handle(),
                       "SELECT group_concat(h, ',') FROM (SELECT lower(hex(bounds)) AS h FROM "
                       "bounds_groups ORDER BY group_id)",
                       -1, &q, nullptr);
    ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
    want = reinterpret_cast<const char*>(sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
  }
  EXPECT_EQ(std::count(want.begin(), want.end(), ','), 32);  // 33 groups
  EXPECT_GT(want.size(), 33u * 2 * 100);                      // none of them empty
  const std::string got = stores().raw_text(
      "p", stores().pg() ? "SELECT string_agg(coalesce(encode(bounds, 'hex'), ''), ',' ORDER BY "
                           "group_id) FROM bounds_groups"
                         : "SELECT group_concat(h, ',') FROM (SELECT lower(hex(bounds)) AS h "
                           "FROM bounds_groups ORDER BY group_id)");
  EXPECT_EQ(got, want);
  for (const char* name : {"p", "e"}) {
    Store s(stores().at(name));
    EXPECT_EQ(s.memory("m").state_sha256(), Store(ref_at).memory_info("m").state_sha256) << name;
    EXPECT_TRUE(s.last_restore("m").screening_used) << name;
    EXPECT_EQ(s.last_restore("m").screening_problem, "") << name;
  }
}

TEST_P(StoreBackends, ErrorsHaveTheSameTypes) {
  StoreOptions ro;
  EXPECT_THROW(Store(stores().at("missing"), ro), IoError);
  Store s(stores().at("s"), create_opts());
  s.create_memory("m", rbf_settings(0.05), kDim, kDim);
  EXPECT_THROW(s.memory_info("nope"), NotFound);
  EXPECT_THROW(s.forget_record("m", 5), NotFound);
  EXPECT_THROW(s.create_memory("m", rbf_settings(0.05), kDim, kDim), AlreadyExists);
  EXPECT_THROW(s.add_record("m", 1, random_keys(2, kDim + 1, 1)), InvalidArgument);
  add_records(s, "m", {1}, kPerRecord, kDim);
  EXPECT_THROW(add_records(s, "m", {1}, kPerRecord, kDim), AlreadyExists);
  EXPECT_EQ(s.memory_info("m").records, 1);
}

TEST_P(StoreBackends, LockedStoreGivesStoreBusyAfterTheTimeout) {
  const std::string at = stores().at("s");
  {
    Store s(at, create_opts());
    s.create_memory("m", rbf_settings(0.05), kDim, kDim);
  }
  StoreOptions o;
  o.busy_timeout_ms = 200;
  Store s(at, o);
  // Another connection holds the store's write lock.
  std::unique_ptr<RawDb> lite;
  std::unique_ptr<RawPg> pgc;
  if (pg()) {
    pgc = std::make_unique<RawPg>(stores().raw_text("s", "SELECT current_schema()"));
    ASSERT_EQ(pgc->exec("BEGIN; SELECT pg_advisory_xact_lock(hashtextextended('svattn-store:' || "
                        "current_schema(), 0))"),
              "");
  } else {
    lite = std::make_unique<RawDb>(at);
    ASSERT_EQ(lite->exec("BEGIN IMMEDIATE"), SQLITE_OK);
  }
  const svattn::support::Stopwatch watch;
  EXPECT_THROW(add_records(s, "m", {1}, kPerRecord, kDim), StoreBusy);
  EXPECT_GE(watch.milliseconds(), 150.0);
  EXPECT_EQ(s.memory_info("m").records, 0);  // readers are not blocked
  if (pg()) pgc->exec("ROLLBACK");
  if (!pg()) lite->exec("ROLLBACK");
  add_records(s, "m", {1}, kPerRecord, kDim);
  EXPECT_EQ(s.memory_info("m").records, 1);
}

SVATTN_ON_ALL_BACKENDS(StoreBackends);

// ------------------------------------------------------------------------- PostgreSQL only

class StorePg : public ::testing::Test {
 protected:
  void SetUp() override { SVATTN_REQUIRE_PG(); }
};

TEST_F(StorePg, UriWithoutKeysOrWithABadServerIsAClearError) {
  PgSchema schema;
  EXPECT_THROW(Store(schema.uri(""), create_opts(true)), InvalidArgument);
  Store plain(schema.uri(""), create_opts(false));  // a plaintext store needs no key store
  plain.create_memory("m", rbf_settings(0.05), kDim, kDim);
  add_records(plain, "m", {1, 2}, kPerRecord, kDim);
  const ForgetResult f = plain.forget_record("m", 1);
  EXPECT_EQ(f.certificate.store->erasure_basis.rfind("none", 0), 0u);
  EXPECT_FALSE(f.certificate.store->secure_delete);
  EXPECT_THROW(Store("postgresql://nobody@/nodb?host=/nonexistent-dir&connect_timeout=2"), IoError);
  // The password never appears in the store's path (messages, certificates, audit).
  try {
    Store("postgresql://u:secret@/nodb?host=/nonexistent-dir");
    FAIL();
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()).find("secret"), std::string::npos) << e.what();
  }
}

// A statement the server cancels (statement_timeout) is reported as such, not as a lock held by
// another connection (StoreBusy, "locked by another connection").
TEST_F(StorePg, StatementTimeoutIsNotReportedAsALock) {
  PgSchema schema;
  {
    Store s(schema.uri(""), create_opts(false));
    s.create_memory("m", rbf_settings(0.05), kDim, kDim);
    add_records(s, "m", {1}, kPerRecord, kDim);
  }
  RawPg blocker(schema.name());
  ASSERT_EQ(blocker.exec("BEGIN"), "");
  ASSERT_EQ(blocker.exec("LOCK TABLE tokens IN ACCESS EXCLUSIVE MODE"), "");
  const std::string timed = schema.uri("") + "%20-cstatement_timeout%3D200";
  try {
    Store s(timed);
    s.query("m", random_keys(1, kDim, 5));
    ADD_FAILURE() << "the query ran under a table lock";
  } catch (const StoreBusy& e) {
    ADD_FAILURE() << "reported as a lock: " << e.what();
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("statement_timeout"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("locked by another"), std::string::npos) << e.what();
  }
  blocker.exec("ROLLBACK");
}

#ifdef SVATTN_CLI
struct Cli {
  int code = -1;
  std::string out, err;
};

Cli cli(const TempDir& dir, const std::string& args) {
  const std::string out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
  const int st =
      std::system((std::string(SVATTN_CLI) + " " + args + " >" + out + " 2>" + err).c_str());
  Cli r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  const auto o = store_test::read_bytes(out), e = store_test::read_bytes(err);
  r.out.assign(o.begin(), o.end());
  r.err.assign(e.begin(), e.end());
  return r;
}

// `svattn memory ...` takes a postgresql:// URI wherever it takes a store file.
// A bulk import refreshes the planner's statistics (docs/store.md "PostgreSQL"): a memory
// imported after the last ANALYZE would be estimated at one row, and the query's join then
// re-scanned all the memory's tokens per support row (270–380 ms at 20k). A small import into a
// large memory does not pay for an ANALYZE.
TEST_F(StorePg, BulkImportRefreshesThePlannersStatistics) {
  PgSchema schema;
  Store s(schema.uri(""), create_opts(false));
  RawPg raw(schema.name());
  const auto last_analyze = [&] {
    return raw.query("SELECT coalesce(last_analyze::text, '') FROM pg_stat_user_tables WHERE "
                     "schemaname = current_schema() AND relname = 'tokens'");
  };
  const auto estimated_rows = [&](const std::string& table, std::int64_t memory_id) {
    const std::string plan = raw.query("EXPLAIN SELECT * FROM " + table +
                                       " WHERE memory_id = " + std::to_string(memory_id));
    return std::stoll(plan.substr(plan.find("rows=") + 5));
  };
  const auto import = [&](const std::string& memory, int records, int per_record, int seed) {
    std::vector<std::int64_t> recs;
    for (int i = 0; i < records * per_record; ++i) recs.push_back(i / per_record);
    s.import_records(memory, recs, random_keys(records * per_record, kDim, seed));
  };
  s.create_memory("a", rbf_settings(0.05, 1.5), kDim, kDim);
  s.create_memory("b", rbf_settings(0.05, 1.5), kDim, kDim);
  import("a", 250, 6, 41);  // 1500 token rows: analysed
  const std::string first = last_analyze();
  EXPECT_NE(first, "");
  import("b", 250, 6, 42);
  const std::int64_t b = raw.query_int("SELECT id FROM memories WHERE name = 'b'");
  EXPECT_GE(estimated_rows("tokens", b), 1000);
  EXPECT_GE(estimated_rows("records", b), 100);
  EXPECT_GE(estimated_rows("support", b), 10);
  const std::string second = last_analyze();
  EXPECT_NE(second, first);
  std::vector<std::int64_t> recs(30, 900);
  s.import_records("a", recs, random_keys(30, kDim, 43));  // 30 rows into 1500: not analysed
  EXPECT_EQ(last_analyze(), second);
}

// The connection lowers random_page_cost to 1.1 when nobody set it (the planner then reads a
// memory's tokens in index order instead of sorting them on disk), and keeps a value given in the
// URI.
TEST_F(StorePg, ConnectionLowersRandomPageCostOnlyFromTheDefault) {
  PgSchema schema;
  const std::string uri = schema.uri("");
  auto db = store_detail::open_postgres(uri, "s", 1000);
  EXPECT_EQ(db.query_text("SELECT current_setting('random_page_cost')"), "1.1");
  const std::string own = uri + "%20-crandom_page_cost%3D2.5";  // appended to options=-c…
  auto kept = store_detail::open_postgres(own, "s", 1000);
  EXPECT_EQ(kept.query_text("SELECT current_setting('random_page_cost')"), "2.5");
}

// A password in the URI (user:PW@ or password=PW) is never printed: create, show, audit and
// verify print the store's location with it masked, as the errors do.
TEST_F(StorePg, CliNeverPrintsThePassword) {
  TempDir dir;
  PgSchema schema;
  const char* user = std::getenv("PGUSER");
  const std::string who = user != nullptr && *user != '\0' ? user : "postgres";
  const std::string base = schema.uri(dir.file("k.keys"));  // postgresql://?options=…&keys=…
  const std::string with_user = "postgresql://" + who + ":hunter2pw@/" + base.substr(13);
  const std::string with_param = base + "&password=hunter2pw";
  for (const std::string& uri : {with_user, with_param}) {
    const std::string at = "'" + uri + "'";
    const std::string mem = uri == with_user ? "a" : "b";
    for (const std::string& args :
         {"memory create " + at + " --memory " + mem + " --dim 4 --C 0.05",
          "memory show " + at + " --memory " + mem,
          "memory show " + at + " --memory " + mem + " --full", "memory audit " + at + " --json",
          "memory audit " + at, "memory verify " + at, "memory verify " + at + " --json"}) {
      const Cli r = cli(dir, args);
      EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
      EXPECT_EQ(r.out.find("hunter2pw"), std::string::npos) << args << "\n" << r.out;
      EXPECT_EQ(r.err.find("hunter2pw"), std::string::npos) << args << "\n" << r.err;
    }
  }
  const Cli r = cli(dir, "memory create '" + with_param + "' --memory c --dim 4 --C 0.05 --json");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("hunter2pw"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("***"), std::string::npos) << r.out;
}

TEST_F(StorePg, CliCommandsTakeAPostgresUri) {
  TempDir dir;
  PgSchema schema;
  const std::string at = "'" + schema.uri(dir.file("k.keys")) + "'";
  std::string keys, recs;
  const RowMatrix x = random_keys(24, 4, 3);
  for (int i = 0; i < 24; ++i) {
    for (int k = 0; k < 4; ++k) keys += (k ? "," : "") + std::to_string(x(i, k));
    keys += "\n";
    recs += std::to_string(i / 4) + "\n";
  }
  store_test::write_bytes(dir.file("k.csv"), std::vector<std::uint8_t>(keys.begin(), keys.end()));
  store_test::write_bytes(dir.file("r.csv"), std::vector<std::uint8_t>(recs.begin(), recs.end()));
  // An encrypted store needs keys=: exit 2, nothing created.
  const Cli bad = cli(dir, "memory create '" + schema.uri("") + "' --memory m --dim 4 --C 0.05");
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("keys=PATH"), std::string::npos) << bad.err;
  EXPECT_EQ(
      RawPg(schema.name())
          .query_int("SELECT count(*) FROM pg_tables WHERE schemaname = '" + schema.name() + "'"),
      0);
  Cli r = cli(dir, "memory create " + at + " --memory m --dim 4 --C 0.05 --bandwidth 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(dir.file("k.keys")), std::string::npos) << r.out;
  r = cli(dir, "memory import " + at + " --memory m --keys " + dir.file("k.csv") + " --records " +
                   dir.file("r.csv"));
  ASSERT_EQ(r.code, 0) << r.err;
  r = cli(dir, "memory forget " + at + " --memory m --record 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");  // no WAL warning on PostgreSQL
  EXPECT_NE(r.out.find("key destruction"), std::string::npos) << r.out;
  r = cli(dir, "memory verify " + at);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  r = cli(dir, "memory show " + at + " --memory m --json");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(nlohmann::json::parse(r.out)["n"], 20);
  r = cli(dir, "memory backup " + at + " " + dir.file("b.db"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("pg_dump"), std::string::npos) << r.err;
  EXPECT_FALSE(store_test::file_exists(dir.file("b.db")));
}
#endif

}  // namespace
}  // namespace svattn
