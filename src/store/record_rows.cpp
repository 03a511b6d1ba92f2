// The record rows (record_rows.h): the records table, and the lookups that count a record's
// token rows alongside it; the tokens table's own statements are token_rows.cpp's.
#include "record_rows.h"

#include "db/sqlite.h"

namespace svattn::store_detail {

// ------------------------------------------------------------------------------------ records

RecordRow RecordRows::read(std::int64_t memory_id, std::int64_t record, const Columns& columns) {
  const std::string sql = "SELECT suspended, " + std::string(columns.key_id ? "key_id" : "NULL") +
                          ", " + (columns.bounds_group ? "bounds_group" : "NULL") +
                          " FROM records WHERE memory_id = ?1 AND record = ?2";
  Statement q(db_.handle(), sql.c_str());
  q.bind(1, memory_id).bind(2, record);
  RecordRow r;
  if (q.step()) {
    r.exists = true;
    r.suspended = q.int64(0) != 0;
    if (!q.is_null(1)) r.key_id = q.text(1);
    if (!q.is_null(2)) r.bounds_group = q.int64(2);
  }
  return r;
}

std::int64_t RecordRows::count(std::int64_t memory_id) {
  Statement q(db_.handle(), "SELECT count(*) FROM records WHERE memory_id = ?1");
  q.bind(1, memory_id);
  q.step();
  return q.int64(0);
}

void RecordRows::insert(std::int64_t memory_id, const std::vector<std::int64_t>& records,
                        const std::string& added_utc) {
  Statement rec(db_.handle(),
                "INSERT INTO records(memory_id, record, suspended, added_utc) VALUES (?1, ?2, 0, "
                "?3)");
  for (std::int64_t r : records) {
    rec.bind(1, memory_id).bind(2, r).bind(3, added_utc).run();
    rec.reset();
  }
}

void RecordRows::set_suspended(std::int64_t memory_id, std::int64_t record, bool suspended) {
  Statement up(db_.handle(), suspended
                                 ? "UPDATE records SET suspended = 1 WHERE memory_id = ?1 AND "
                                   "record = ?2"
                                 : "UPDATE records SET suspended = 0 WHERE memory_id = ?1 AND "
                                   "record = ?2");
  up.bind(1, memory_id).bind(2, record).run();
}

void RecordRows::set_keys(std::int64_t memory_id, const std::vector<std::int64_t>& records,
                          const std::vector<std::string>& key_ids) {
  Statement up(db_.handle(), "UPDATE records SET key_id = ?3 WHERE memory_id = ?1 AND record = ?2");
  for (std::size_t k = 0; k < records.size(); ++k) {
    up.bind(1, memory_id).bind(2, records[k]).bind(3, key_ids[k]).run();
    up.reset();
  }
}

void RecordRows::set_groups(std::int64_t memory_id, const std::vector<std::int64_t>& records,
                            const std::vector<std::int64_t>& groups) {
  Statement place(db_.handle(),
                  "UPDATE records SET bounds_group = ?3 WHERE memory_id = ?1 AND record = ?2");
  for (std::size_t i = 0; i < groups.size(); ++i) {
    place.bind(1, memory_id).bind(2, records[i]).bind(3, groups[i]).run();
    place.reset();
  }
}

void RecordRows::set_buckets(std::int64_t memory_id, std::int64_t record,
                             const std::vector<std::uint8_t>& blob) {
  Statement up(db_.handle(),
               "UPDATE records SET buckets = ?3 WHERE memory_id = ?1 AND record = ?2");
  up.bind(1, memory_id).bind(2, record).bind_blob(3, blob.data(), blob.size()).run();
}

std::pair<std::string, std::int64_t> RecordRows::first_keyed_record() {
  Statement q(db_.handle(), "SELECT key_id, record FROM records WHERE key_id IS NOT NULL LIMIT 1");
  if (!q.step()) return {std::string(), -1};
  return {q.text(0), q.int64(1)};
}

std::vector<RecordRows::Summary> RecordRows::summaries(std::int64_t memory_id) {
  std::vector<Summary> out;
  Statement q(db_.handle(),
              "SELECT r.record, r.suspended, (SELECT count(*) FROM tokens t WHERE t.memory_id = "
              "r.memory_id AND t.token_id BETWEEN (r.record << 23) AND ((r.record << 23) | "
              "8388607)) FROM records r WHERE r.memory_id = ?1 ORDER BY r.record");
  q.bind(1, memory_id);
  while (q.step()) out.push_back({q.int64(0), q.int64(1) != 0, q.int64(2)});
  return out;
}

std::map<std::int64_t, bool> RecordRows::suspension(std::int64_t memory_id) {
  std::map<std::int64_t, bool> rows;
  Statement q(db_.handle(), "SELECT record, suspended FROM records WHERE memory_id = ?1");
  q.bind(1, memory_id);
  while (q.step()) rows[q.int64(0)] = q.int64(1) != 0;
  return rows;
}

std::pair<std::int64_t, std::int64_t> RecordRows::record_counts(std::int64_t memory_id) {
  Statement r(db_.handle(),
              "SELECT count(*), coalesce(sum(suspended), 0) FROM records WHERE memory_id = ?1");
  r.bind(1, memory_id);
  r.step();
  return {r.int64(0), r.int64(1)};
}

std::vector<std::pair<std::string, std::int64_t>> RecordRows::keyed_records(
    std::int64_t memory_id) {
  std::vector<std::pair<std::string, std::int64_t>> out;
  Statement q(db_.handle(),
              "SELECT record, key_id FROM records WHERE memory_id = ?1 AND key_id IS NOT NULL");
  q.bind(1, memory_id);
  while (q.step()) out.emplace_back(q.text(1), q.int64(0));
  return out;
}

void RecordRows::delete_row(std::int64_t memory_id, std::int64_t record) {
  Statement delr(db_.handle(), "DELETE FROM records WHERE memory_id = ?1 AND record = ?2");
  delr.bind(1, memory_id).bind(2, record).run();
}

bool RecordRows::key_id_column_exists() { return db_.has_column("records", "key_id"); }

std::vector<RecordRows::RecordKey> RecordRows::record_keys(std::int64_t memory_id,
                                                           const Columns& columns) {
  std::vector<RecordKey> out;
  const std::string sql = "SELECT record, suspended, " +
                          std::string(columns.key_id ? "key_id" : "NULL") +
                          " FROM records WHERE memory_id = ?1";
  Statement q(db_.handle(), sql.c_str());
  q.bind(1, memory_id);
  while (q.step()) {
    out.push_back(
        {q.int64(0), q.int64(1) != 0, !q.is_null(2), q.is_null(2) ? std::string() : q.text(2)});
  }
  return out;
}

std::vector<RecordRows::UnkeyedRecord> RecordRows::unkeyed_records() {
  std::vector<UnkeyedRecord> out;
  Statement q(db_.handle(),
              "SELECT r.memory_id, r.record, m.dim, m.value_dim FROM records r JOIN memories m ON "
              "m.id = r.memory_id WHERE r.key_id IS NULL ORDER BY r.memory_id, r.record");
  while (q.step()) {
    out.push_back(
        {q.int64(0), q.int64(1), static_cast<int>(q.int64(2)), static_cast<int>(q.int64(3))});
  }
  return out;
}

RecordRows::StoredBuckets RecordRows::buckets(std::int64_t memory_id, std::int64_t record,
                                              const Columns& columns) {
  const std::string sql = std::string("SELECT ") + (columns.key_id ? "key_id" : "NULL") +
                          ", buckets FROM records WHERE memory_id = ?1 AND record = ?2";
  Statement q(db_.handle(), sql.c_str());
  q.bind(1, memory_id).bind(2, record);
  StoredBuckets b;
  if (!q.step()) return b;
  b.exists = true;
  b.sealed = !q.is_null(0);
  if (b.sealed) b.key_id = q.text(0);
  b.has_buckets = !q.is_null(1);
  if (b.has_buckets) b.blob = q.blob(1);
  return b;
}

Statement RecordRows::active_record_blobs(std::int64_t memory_id, RecordField field) {
  const std::string sql = std::string("SELECT record, key_id, ") +
                          (field == RecordField::kBuckets ? "buckets" : "bounds") +
                          " FROM records WHERE memory_id = ?1 AND suspended = 0 ORDER BY record";
  Statement q(db_.handle(), sql.c_str());
  q.bind(1, memory_id);
  return q;
}

namespace {

// The lookup of `pairs` (memory, record) primary keys (parameters 1 .. 2 pairs): each record's
// key id, memory name, suspension and token rows.
std::string keyed_lookup_sql(std::size_t pairs) {
  std::string in;
  for (std::size_t i = 0; i < pairs; ++i) {
    in += (i > 0 ? ", (?" : "(?") + std::to_string(2 * i + 1) + ", ?" + std::to_string(2 * i + 2) +
          ")";
  }
  const std::string lo = "r.record * " + std::to_string(record_lo(1));
  return "SELECT r.memory_id, r.record, r.key_id, m.name, r.suspended, (SELECT count(*) FROM "
         "tokens t WHERE t.memory_id = r.memory_id AND t.token_id BETWEEN " +
         lo + " AND " + lo + " + " + std::to_string(kMaxPosition) +
         ") FROM records r JOIN memories m ON m.id = " +
         "r.memory_id WHERE (r.memory_id, r.record) IN (" + in + ") ORDER BY r.memory_id, r.record";
}

}  // namespace

std::vector<RecordRows::KeyedRecord> RecordRows::lookup_keyed(
    const std::vector<std::pair<std::int64_t, std::int64_t>>& pairs) {
  std::vector<KeyedRecord> out;
  if (pairs.empty()) return out;
  Statement q(db_.handle(), keyed_lookup_sql(pairs.size()).c_str());
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    q.bind(static_cast<int>(2 * i + 1), pairs[i].first)
        .bind(static_cast<int>(2 * i + 2), pairs[i].second);
  }
  while (q.step()) {
    if (q.is_null(2)) continue;
    out.push_back({q.int64(0), q.int64(1), q.text(2), q.text(3), q.int64(4) != 0, q.int64(5)});
  }
  return out;
}

bool RecordRows::backup_record_key(ReadOnlyDb& db, const std::string& memory, std::int64_t record,
                                   std::string& key_id) {
  const auto rows = db.rows(
      "SELECT coalesce(r.key_id, '') FROM records r JOIN memories m ON m.id = r.memory_id "
      "WHERE m.name = ?1 AND r.record = CAST(?2 AS INTEGER)",
      {memory, std::to_string(record)});
  if (rows.empty()) return false;
  key_id = rows.front()[0];
  return true;
}

std::pair<std::int64_t, std::int64_t> RecordRows::orphan_rows() {
  std::int64_t n[2] = {0, 0};
  const char* const tables[2] = {"records", "tokens"};
  for (int k = 0; k < 2; ++k) {
    n[k] = db_.query_int(std::string("SELECT count(*) FROM ") + tables[k] +
                         " WHERE memory_id NOT IN (SELECT id FROM memories)");
  }
  return {n[0], n[1]};
}

std::int64_t RecordRows::records_without_group() {
  return db_.query_int(
      "SELECT count(*) FROM records r WHERE r.bounds_group IS NULL OR NOT EXISTS (SELECT 1 FROM "
      "bounds_groups g WHERE g.memory_id = r.memory_id AND g.group_id = r.bounds_group)");
}

std::int64_t RecordRows::groups_without_record() {
  return db_.query_int(
      "SELECT count(*) FROM bounds_groups g WHERE NOT EXISTS (SELECT 1 FROM records r WHERE "
      "r.memory_id = g.memory_id AND r.bounds_group = g.group_id)");
}

// ------------------------------------------------------------------------------ bounds groups

std::vector<std::pair<std::int64_t, std::int64_t>> RecordRows::unplaced(std::int64_t memory_id) {
  std::vector<std::pair<std::int64_t, std::int64_t>> recs;  // (record, token rows)
  {
    Statement q(db_.handle(),
                "SELECT record FROM records WHERE memory_id = ?1 AND bounds_group IS NULL ORDER BY "
                "record");
    q.bind(1, memory_id);
    while (q.step()) recs.emplace_back(q.int64(0), 0);
  }
  if (recs.empty()) return recs;
  Statement c(db_.handle(),
              "SELECT count(*) FROM tokens WHERE memory_id = ?1 AND token_id BETWEEN ?2 AND ?3");
  for (auto& [record, tokens] : recs) {
    c.bind(1, memory_id).bind(2, record_lo(record)).bind(3, record_hi(record));
    c.step();
    tokens = c.int64(0);
    c.reset();
  }
  return recs;
}

std::vector<std::int64_t> RecordRows::group_members(std::int64_t memory_id, std::int64_t group) {
  std::vector<std::int64_t> out;
  Statement q(db_.handle(),
              "SELECT record FROM records WHERE memory_id = ?1 AND bounds_group = ?2 AND "
              "suspended = 0 ORDER BY record");
  q.bind(1, memory_id).bind(2, group);
  while (q.step()) out.push_back(q.int64(0));
  return out;
}

std::vector<std::pair<std::int64_t, std::int64_t>> RecordRows::active_groups(
    std::int64_t memory_id) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  Statement q(db_.handle(),
              "SELECT record, bounds_group FROM records WHERE memory_id = ?1 AND suspended = 0 "
              "ORDER BY record");
  q.bind(1, memory_id);
  while (q.step()) out.emplace_back(q.int64(0), q.is_null(1) ? -1 : q.int64(1));
  return out;
}

std::unordered_map<std::int64_t, std::int64_t> RecordRows::group_of_active(std::int64_t memory_id) {
  std::unordered_map<std::int64_t, std::int64_t> out;
  Statement q(db_.handle(),
              "SELECT record, bounds_group FROM records WHERE memory_id = ?1 AND suspended = 0");
  q.bind(1, memory_id);
  while (q.step()) out[q.int64(0)] = q.is_null(1) ? -1 : q.int64(1);
  return out;
}

}  // namespace svattn::store_detail
