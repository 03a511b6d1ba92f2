// The audit log as a component (src/store/audit_log.h) on a real connection: an SQLite file
// (unit) and a PostgreSQL schema (label postgres). Appends chain entries and move the head anchor,
// reads return them, the check accepts the chain and names a broken anchor or a broken link.
#include <map>
#include <string>
#include <vector>

#include "db_test_util.h"
#include "store/audit_log.h"
#include "store/schema_ddl.h"
#include "svattn/hash.h"

namespace svattn {
namespace {

using store_detail::AuditLog;
using store_detail::Database;
using store_detail::Transaction;

class AuditLogBackends : public store_test::StoreOnBackends {
 protected:
  // The store's tables and the head anchor rows of a new store, in a fresh database.
  Database open_log(const std::string& name) {
    Database db = store_test::open_database(stores(), name);
    db.exec_ddl(store_detail::schema_ddl(db).store_tables);
    db.exec("INSERT INTO meta(key, value) VALUES ('audit_head_seq', '0'), ('audit_head_hash', '" +
            store_detail::kZeroHash + "')");
    return db;
  }
  static AuditEntry entry(const std::string& op, const std::string& memory, std::int64_t record) {
    AuditEntry e;
    e.operation = op;
    e.memory = memory;
    e.record = record;
    e.token_count = record > 0 ? 24 : 0;
    e.state_before = op == "create" ? "" : std::string(64, 'a');
    e.state_after = std::string(64, 'a');
    e.certificate = "{}";
    return e;
  }
};

TEST_P(AuditLogBackends, AppendsChainEntriesAndMoveTheAnchor) {
  Database db = open_log("a");
  AuditLog log(db);
  EXPECT_EQ(log.head().seq, 0);
  EXPECT_EQ(log.head().hash, store_detail::kZeroHash);
  AuditEntry c = entry("create", "m", -1), a = entry("add", "m", 1), f = entry("forget", "m", 1);
  {
    Transaction t(db, true, "a", 1000);
    log.append(c);
    log.append({&a, &f});
    t.commit();
  }
  EXPECT_EQ(c.seq, 1);
  EXPECT_EQ(c.prev_hash, store_detail::kZeroHash);
  EXPECT_EQ(a.prev_hash, c.entry_hash);
  EXPECT_EQ(f.prev_hash, a.entry_hash);
  EXPECT_EQ(f.entry_hash, sha256_hex(canonical_audit_bytes(f)));
  EXPECT_EQ(log.head().seq, 3);
  EXPECT_EQ(log.head().hash, f.entry_hash);
  EXPECT_EQ(db.query_text("SELECT value FROM meta WHERE key = 'audit_head_hash'"), f.entry_hash);
  const std::vector<AuditEntry> all = log.read();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[1].entry_hash, a.entry_hash);
  StoreVerification v;
  std::map<std::string, std::pair<std::string, std::int64_t>> last;
  log.check(all, v, last);
  EXPECT_TRUE(v.chain_ok) << (v.problems.empty() ? "" : v.problems[0]);
  EXPECT_EQ(v.audit_entries, 3);
  EXPECT_EQ(last.at("m").second, 3);
}

TEST_P(AuditLogBackends, CheckNamesABrokenAnchorAndABrokenLink) {
  Database db = open_log("b");
  AuditLog log(db);
  AuditEntry c = entry("create", "m", -1), a = entry("add", "m", 1);
  {
    Transaction t(db, true, "b", 1000);
    log.append({&c, &a});
    t.commit();
  }
  db.exec("UPDATE meta SET value = '1' WHERE key = 'audit_head_seq'");  // the anchor moved back
  std::vector<AuditEntry> all = log.read();
  StoreVerification v;
  std::map<std::string, std::pair<std::string, std::int64_t>> last;
  log.check(all, v, last);
  EXPECT_FALSE(v.chain_ok);
  ASSERT_EQ(v.problems.size(), 1u);
  EXPECT_NE(v.problems[0].find("audit head anchor"), std::string::npos) << v.problems[0];
  all[1].prev_hash = std::string(64, 'f');  // as if the row had been edited
  StoreVerification w;
  last.clear();
  log.check(all, w, last);
  EXPECT_NE(w.problems[0].find("audit entry 2: prev_hash"), std::string::npos) << w.problems[0];
}

SVATTN_ON_ALL_BACKENDS(AuditLogBackends);

}  // namespace
}  // namespace svattn
