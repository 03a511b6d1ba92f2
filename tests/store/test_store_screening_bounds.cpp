// The screening bounds as a component (src/store/screening_bounds.h) on a real connection: an
// SQLite file (unit) or a PostgreSQL schema (label postgres), plaintext and with a key store. The
// head row round-trips and names what is wrong with it, records join groups of at most
// kGroupMaxRecords, group blobs round-trip (sealed under the group's key when there is one), and
// a record leaving its group rotates the group's key and schedules the old one.
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "db_test_util.h"
#include "store/schema_ddl.h"
#include "store/screening_bounds.h"
#include "store/store_rows.h"

namespace svattn {
namespace {

using store_detail::Database;
using store_detail::GroupBounds;
using store_detail::KeyStore;
using store_detail::KeyStoreOptions;
using store_detail::KeyVault;
using store_detail::PayloadReader;
using store_detail::ScreeningBounds;
using store_detail::ScreeningHead;
using store_detail::Transaction;

class ScreeningBoundsBackends : public store_test::StoreOnBackends {
 protected:
  // A fresh database with the store's tables; a key store attached when `sealed`.
  void open(const std::string& name, bool sealed) {
    name_ = name;
    bounds_.reset();
    vault_.reset();
    db_.reset();
    db_ = std::make_unique<Database>(store_test::open_database(stores(), name));
    const store_detail::SchemaDdl& ddl = store_detail::schema_ddl(*db_);
    for (const char* t : {ddl.store_tables, ddl.screening, ddl.pending_shreds, ddl.bounds_groups})
      db_->exec_ddl(t);
    vault_ = std::make_unique<KeyVault>(*db_);
    if (sealed) {
      KeyStoreOptions o;
      o.create = true;
      vault_->attach(std::make_unique<KeyStore>(stores().keys(name), o));
    }
    bounds_ = std::make_unique<ScreeningBounds>(*db_, *vault_);
  }
  Database& db() { return *db_; }
  KeyVault& vault() { return *vault_; }
  ScreeningBounds& bounds() { return *bounds_; }
  template <class F>
  void in_transaction(F&& f) {
    Transaction t(db(), true, name_, 1000);
    f();
    t.commit();
  }
  // Token ids of `records`, `per` tokens each, ascending.
  static std::vector<TokenId> ids_of(const std::vector<std::int64_t>& records, int per) {
    std::vector<TokenId> ids;
    for (std::int64_t r : records)
      for (int p = 0; p < per; ++p) ids.push_back(store_detail::record_lo(r) + p);
    return ids;
  }

 private:
  std::string name_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<KeyVault> vault_;  // after db_: destroyed before the connection
  std::unique_ptr<ScreeningBounds> bounds_;
};

TEST_P(ScreeningBoundsBackends, TheHeadRoundTripsAndSaysWhatIsWrongWithIt) {
  open("head", false);
  const std::string sha(64, 'a'), other(64, 'b');
  in_transaction([&] { bounds().write_head(3, sha, 10, 2, "support"); });
  const ScreeningHead h = bounds().read_head(3);
  ASSERT_TRUE(h.present);
  EXPECT_EQ(h.tokens, 10);
  EXPECT_EQ(h.epoch, 2);
  EXPECT_TRUE(ScreeningBounds::head_intact(3, sha, h));
  EXPECT_FALSE(ScreeningBounds::head_intact(3, other, h));
  EXPECT_FALSE(ScreeningBounds::head_intact(4, sha, h));  // the checksum names the memory
  EXPECT_FALSE(bounds().read_head(4).present);
  EXPECT_EQ(bounds().support_digest_of(3, sha), "support");
  EXPECT_EQ(bounds().support_digest_of(3, other), "");
  ScreeningHead got;
  std::string problem;
  EXPECT_TRUE(bounds().usable_head(3, sha, 10, &got, &problem)) << problem;
  EXPECT_FALSE(bounds().usable_head(3, sha, 9, &got, &problem));
  EXPECT_EQ(problem, "they hold 10 bounds for 9 active tokens");
  EXPECT_FALSE(bounds().usable_head(3, other, 10, &got, &problem));
  EXPECT_NE(problem.find("not the stored state"), std::string::npos) << problem;
  db().exec("UPDATE screening SET tokens = 11 WHERE memory_id = 3");  // checksum not recomputed
  EXPECT_FALSE(bounds().usable_head(3, sha, 11, &got, &problem));
  EXPECT_EQ(problem, "checksum mismatch (the screening row)");
}

TEST_P(ScreeningBoundsBackends, RecordsJoinGroupsOfAtMostTheirLimit) {
  open("join", false);
  std::vector<std::pair<std::int64_t, std::int64_t>> recs;
  for (std::int64_t r = 0; r < store_detail::kGroupMaxRecords + 6; ++r) recs.emplace_back(r, 1);
  recs.emplace_back(1000, store_detail::kGroupMaxTokens + 1);  // too many rows: a group of its own
  recs.emplace_back(1001, 1);
  std::vector<std::int64_t> created, groups;
  in_transaction([&] { groups = bounds().join(1, recs, &created); });
  ASSERT_EQ(groups.size(), recs.size());
  EXPECT_EQ(groups[0], 0);
  EXPECT_EQ(groups[store_detail::kGroupMaxRecords - 1], 0);
  EXPECT_EQ(groups[store_detail::kGroupMaxRecords], 1);
  EXPECT_EQ(groups[recs.size() - 2], 2);
  EXPECT_EQ(groups[recs.size() - 1], 3);
  EXPECT_EQ(created, (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(bounds().group_ids(1), created);
  EXPECT_EQ(bounds().group_count(), 4);
  std::vector<std::int64_t> more;
  in_transaction([&] { groups = bounds().join(1, {{1002, 1}}, &more); });
  EXPECT_EQ(groups, (std::vector<std::int64_t>{3}));  // the newest group still has room
  EXPECT_TRUE(more.empty());
}

TEST_P(ScreeningBoundsBackends, GroupBlobsRoundTripPlainAndSealed) {
  for (const bool sealed : {false, true}) {
    open(sealed ? "sealed" : "plain", sealed);
    in_transaction([&] { bounds().join(2, {{5, 2}, {6, 2}, {7, 2}}, nullptr); });
    const std::vector<TokenId> ids = ids_of({5, 6, 7}, 2);
    std::vector<double> all{0.5, 1.5, 2.5, 3.5, 4.5, 5.5};
    in_transaction([&] {
      bounds().write_groups(2, ids, 4, {{0, {5, 6, 7}}},
                            [&](std::size_t first, std::size_t count, std::vector<double>& out) {
                              out.insert(out.end(), all.begin() + first,
                                         all.begin() + first + count);
                            });
    });
    EXPECT_EQ(db().query_int("SELECT count(*) FROM bounds_groups WHERE key_id IS NOT NULL"),
              sealed ? 1 : 0);
    GroupBounds g;
    ASSERT_EQ(bounds().read_blob(2, 0, &g), "");
    EXPECT_EQ(g.epoch, 4);
    ASSERT_EQ(g.entries.size(), 3u);
    EXPECT_EQ(g.bounds, all);
    PayloadReader reader(vault().key_store(), "test", 2);
    const std::unordered_map<std::int64_t, std::int64_t> group_of{{5, 0}, {6, 0}, {7, 0}};
    std::vector<double> read(ids.size());
    EXPECT_EQ(bounds().read_bounds(2, ids, 4, group_of, reader, read), "");
    EXPECT_EQ(read, all);
    EXPECT_NE(bounds().read_bounds(2, ids, 5, group_of, reader, read).find("not the memory's 5"),
              std::string::npos);
    // Record 6 leaves the blob: the others' bounds stay, in order.
    in_transaction([&] { bounds().rewrite_entry(2, 0, g, 6, {}); });
    ASSERT_EQ(bounds().read_blob(2, 0, &g), "");
    EXPECT_EQ(g.bounds, (std::vector<double>{0.5, 1.5, 4.5, 5.5}));
    const std::vector<TokenId> left = ids_of({5, 7}, 2);
    std::vector<double> read_left(left.size());
    EXPECT_EQ(bounds().read_bounds(2, left, 4, {{5, 0}, {7, 0}}, reader, read_left), "");
    bool absent = false;
    EXPECT_EQ(bounds().read_blob(2, 9, &g, &absent), "bounds group 9 does not exist");
    EXPECT_FALSE(absent);
  }
}

TEST_P(ScreeningBoundsBackends, ALeavingRecordRotatesItsGroupsKey) {
  open("leave", true);
  std::map<std::int64_t, store_detail::SecretKey> keys;
  in_transaction([&] {
    bounds().join(3, {{1, 4}, {2, 4}}, nullptr);
    keys = bounds().keys_for(3, {0});
  });
  vault().keys_referenced();
  ASSERT_EQ(keys.size(), 1u);
  const std::string first = db().query_text("SELECT key_id FROM bounds_groups");
  StoreErasure se;
  in_transaction([&] { bounds().leave(3, "m", 1, 0, 4, &se); });
  vault().keys_referenced();
  EXPECT_EQ(se.bounds_group, 0);
  EXPECT_EQ(se.bounds_key_id, first);
  const std::string second = db().query_text("SELECT key_id FROM bounds_groups");
  EXPECT_NE(second, first);
  EXPECT_EQ(db().query_int("SELECT member_records FROM bounds_groups"), 1);
  EXPECT_EQ(db().query_int("SELECT member_tokens FROM bounds_groups"), 4);
  std::vector<KeyVault::PendingShred> pending = vault().pending_shreds();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].key_id, first);
  // The groups without a spare get one from the destruction's key-store transaction.
  const std::vector<store_detail::KeyOwner> spares = bounds().groups_without_spare();
  ASSERT_EQ(spares.size(), 1u);
  std::vector<store_detail::NewDataKey> made;
  in_transaction([&] {
    vault().destroy_pending(pending, spares, &made);
    bounds().set_spare_keys(spares, made);
  });
  EXPECT_TRUE(bounds().groups_without_spare().empty());
  // The last record leaves: the group goes, its key and its spare are scheduled.
  in_transaction([&] { bounds().leave(3, "m", 2, 0, 4, nullptr); });
  EXPECT_EQ(bounds().group_count(), 0);
  pending = vault().pending_shreds();
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[0].key_id, made[0].key_id);
  EXPECT_EQ(pending[1].key_id, second);
}

SVATTN_ON_ALL_BACKENDS(ScreeningBoundsBackends);

}  // namespace
}  // namespace svattn
