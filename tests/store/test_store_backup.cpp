// Online backups of a data file with the SQLite backup API (docs/store.md "Encryption at rest
// (building blocks)"): the copy opens and equals the source, never overwrites, excludes keys.
#include <gtest/gtest.h>

#include "store/backup.h"
#include "store_test_util.h"
#include "svattn/certificate.h"

namespace svattn::store_detail {
namespace {

using store_test::file_exists;
using store_test::RawDb;
using store_test::TempDir;

// All rows of table t(k, v), in key order, as one string.
std::string dump(const std::string& path) {
  RawDb db(path);
  std::string out;
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db.handle(), "SELECT k, hex(v) FROM t ORDER BY k", -1, &s, nullptr);
  while (sqlite3_step(s) == SQLITE_ROW) {
    out += std::to_string(sqlite3_column_int64(s, 0)) + ":" +
           reinterpret_cast<const char*>(sqlite3_column_text(s, 1)) + "\n";
  }
  sqlite3_finalize(s);
  return out;
}

// A WAL-mode database whose last rows are only in the WAL (checkpoints off).
void make_source(RawDb& db, int rows) {
  ASSERT_EQ(db.exec("PRAGMA journal_mode=WAL"), SQLITE_OK);
  ASSERT_EQ(db.exec("PRAGMA wal_autocheckpoint=0"), SQLITE_OK);
  ASSERT_EQ(db.exec("CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB)"), SQLITE_OK);
  for (int i = 0; i < rows; ++i) {
    ASSERT_EQ(db.exec("INSERT INTO t VALUES (" + std::to_string(i) + ", randomblob(700))"),
              SQLITE_OK);
  }
}

TEST(StoreBackup, CopyIncludesTheWalAndEqualsTheSource) {
  TempDir dir;
  const std::string src = dir.file("s.db");
  const std::string dst = dir.file("b.db");
  RawDb db(src, true);
  make_source(db, 300);
  ASSERT_GT(store_test::read_bytes(src + "-wal").size(), 0u);  // rows live in the WAL
  const BackupResult r = backup_database(src, dst);
  EXPECT_TRUE(r.integrity_ok);
  EXPECT_FALSE(r.keys_included);
  EXPECT_NE(r.keys_note.find("not included"), std::string::npos);
  EXPECT_NE(r.keys_note.find(src + ".keys"), std::string::npos);
  EXPECT_EQ(r.steps, 1);
  EXPECT_EQ(r.bytes, r.pages * r.page_size);
  EXPECT_EQ(r.sha256, store_test::file_sha(dst));
  EXPECT_EQ(r.to_json()["keys_included"], false);
  EXPECT_EQ(dump(dst), dump(src));
  EXPECT_EQ(dump(dst).size(), dump(src).size());
  EXPECT_FALSE(dump(src).empty());
  EXPECT_FALSE(file_exists(dst + "-journal"));
}

TEST(StoreBackup, OnlineCopyHoldsOnlyCommittedRowsWhileAWriterIsActive) {
  TempDir dir;
  const std::string src = dir.file("s.db");
  RawDb db(src, true);
  make_source(db, 50);
  const std::string committed = dump(src);
  RawDb writer(src);
  ASSERT_EQ(writer.exec("BEGIN IMMEDIATE"), SQLITE_OK);
  ASSERT_EQ(writer.exec("INSERT INTO t VALUES (1000, x'01')"), SQLITE_OK);
  const BackupResult r = backup_database(src, dir.file("b.db"));  // writer still open
  EXPECT_TRUE(r.integrity_ok);
  EXPECT_EQ(dump(dir.file("b.db")), committed);
  ASSERT_EQ(writer.exec("COMMIT"), SQLITE_OK);
  EXPECT_NE(dump(src), committed);
}

TEST(StoreBackup, SteppedCopyEqualsTheSource) {
  TempDir dir;
  const std::string src = dir.file("s.db");
  RawDb db(src, true);
  make_source(db, 200);
  BackupSettings s;
  s.pages_per_step = 8;
  const BackupResult r = backup_database(src, dir.file("b.db"), s);
  EXPECT_GT(r.steps, 5);
  EXPECT_EQ(dump(dir.file("b.db")), dump(src));
}

TEST(StoreBackup, NeverOverwritesAndLeavesNothingOnFailure) {
  TempDir dir;
  const std::string src = dir.file("s.db");
  {
    RawDb db(src, true);
    make_source(db, 5);
  }
  const std::string dst = dir.file("b.db");
  store_test::write_bytes(dst, {'k', 'e', 'e', 'p'});
  EXPECT_THROW(backup_database(src, dst), AlreadyExists);
  EXPECT_EQ(store_test::read_bytes(dst), (std::vector<std::uint8_t>{'k', 'e', 'e', 'p'}));
  EXPECT_THROW(backup_database(src, src), AlreadyExists);
  EXPECT_THROW(backup_database(dir.file("missing.db"), dir.file("c.db")), NotFound);
  store_test::write_bytes(dir.file("junk.db"), std::vector<std::uint8_t>(8192, 0x33));
  EXPECT_THROW(backup_database(dir.file("junk.db"), dir.file("d.db")), FormatError);
  EXPECT_FALSE(file_exists(dir.file("c.db")));
  EXPECT_FALSE(file_exists(dir.file("d.db")));
  EXPECT_THROW(backup_database(src, dir.file("no/such/dir/e.db")), IoError);
  // No temporary file is left behind.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().filename().string().find(".partial-"), std::string::npos) << e.path();
    ++entries;
  }
  EXPECT_GE(entries, 3);
  BackupSettings bad;
  bad.pages_per_step = 0;
  EXPECT_THROW(bad.validate(), InvalidArgument);
  bad.pages_per_step = -2;
  EXPECT_THROW(bad.validate(), InvalidArgument);
  bad = BackupSettings{};
  bad.busy_timeout_ms = -1;
  EXPECT_THROW(bad.validate(), InvalidArgument);
}

TEST(StoreBackup, BackupOfAStoreOpensVerifiesAndHasTheSameStates) {
  TempDir dir;
  const std::string src = dir.file("s.db");
  StoreOptions o;
  o.create = true;
  Store store(src, o);
  store.create_memory("m", store_test::rbf_settings(0.05), 4, 4);
  store_test::add_records(store, "m", {3, 1, 4, 5, 9, 2, 6}, 8, 4);
  store.forget_record("m", 4);
  const BackupResult r = backup_database(src, dir.file("b.db"));  // the store stays open
  // Keys are not in a backup: an encrypted store's copy opens next to a copy of its key store.
  store_test::write_bytes(dir.file("b.db.keys"), store_test::read_bytes(src + ".keys"));
  store_test::write_bytes(dir.file("b.db.keys-wal"), store_test::read_bytes(src + ".keys-wal"));
  ASSERT_TRUE(r.integrity_ok);
  Store copy(dir.file("b.db"));
  EXPECT_EQ(summarize(copy.stored_state("m")).state_sha256,
            summarize(store.stored_state("m")).state_sha256);
  EXPECT_EQ(copy.records("m").size(), store.records("m").size());
  const StoreVerification v = copy.verify();
  EXPECT_TRUE(v.ok()) << (v.problems.empty() ? "" : v.problems.front());
  EXPECT_EQ(v.audit_head, store.verify().audit_head);
}

}  // namespace
}  // namespace svattn::store_detail
