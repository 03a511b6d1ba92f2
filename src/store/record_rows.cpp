// The record rows (record_rows.h): the records table and the tokens table by record.
#include "record_rows.h"

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

// ------------------------------------------------------------------------------------- tokens

std::vector<TokenId> RecordRows::token_ids(std::int64_t memory_id, std::int64_t record) {
  std::vector<TokenId> ids;
  Statement q(db_.handle(),
              "SELECT token_id FROM tokens WHERE memory_id = ?1 AND token_id BETWEEN ?2 AND ?3 "
              "ORDER BY token_id");
  q.bind(1, memory_id).bind(2, record_lo(record)).bind(3, record_hi(record));
  while (q.step()) ids.push_back(q.int64(0));
  return ids;
}

std::vector<TokenId> RecordRows::active_token_ids(std::int64_t memory_id) {
  std::vector<TokenId> ids;
  Statement q(db_.handle(),
              "SELECT t.token_id FROM tokens t JOIN records r ON r.memory_id = t.memory_id AND "
              "r.record = t.record WHERE t.memory_id = ?1 AND r.suspended = 0 ORDER BY t.token_id");
  q.bind(1, memory_id);
  while (q.step()) ids.push_back(q.int64(0));
  return ids;
}

// Index-only counts (no join over the token rows): all rows, and the suspended records' rows
// found by token_id range.
std::pair<std::int64_t, std::int64_t> RecordRows::token_row_counts(std::int64_t memory_id) {
  Statement q(db_.handle(), "SELECT count(*) FROM tokens WHERE memory_id = ?1");
  q.bind(1, memory_id);
  q.step();
  const std::int64_t all = q.int64(0);
  Statement sq(db_.handle(),
               "SELECT coalesce(sum((SELECT count(*) FROM tokens t WHERE t.memory_id = "
               "r.memory_id AND t.token_id BETWEEN (r.record << 23) AND ((r.record << 23) | "
               "8388607))), 0) FROM records r WHERE r.memory_id = ?1 AND r.suspended = 1");
  sq.bind(1, memory_id);
  sq.step();
  return {all, sq.int64(0)};
}

std::int64_t RecordRows::token_rows(std::int64_t memory_id, std::int64_t record) {
  Statement c(db_.handle(),
              "SELECT count(*) FROM tokens WHERE memory_id = ?1 AND token_id BETWEEN ?2 AND ?3");
  c.bind(1, memory_id).bind(2, record_lo(record)).bind(3, record_hi(record));
  c.step();
  return c.int64(0);
}

void RecordRows::delete_tokens(std::int64_t memory_id, std::int64_t record) {
  Statement del(db_.handle(),
                "DELETE FROM tokens WHERE memory_id = ?1 AND token_id BETWEEN ?2 AND ?3");
  del.bind(1, memory_id).bind(2, record_lo(record)).bind(3, record_hi(record)).run();
}

}  // namespace svattn::store_detail
