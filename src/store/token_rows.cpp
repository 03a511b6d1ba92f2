// The token rows (record_rows.h): the tokens table, by memory, by record and by row, and the
// cursors over its payload columns that the restore and the support digest read.
#include "record_rows.h"

namespace svattn::store_detail {

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

std::int64_t RecordRows::delete_tokens_unless(std::int64_t memory_id,
                                              const std::vector<TokenId>& ids,
                                              const std::function<bool(TokenId)>& keep) {
  Statement del(db_.handle(), "DELETE FROM tokens WHERE memory_id = ?1 AND token_id = ?2");
  std::int64_t n = 0;
  for (TokenId id : ids) {
    if (keep(id)) continue;
    del.bind(1, memory_id).bind(2, static_cast<std::int64_t>(id)).run();
    del.reset();
    ++n;
  }
  return n;
}

std::int64_t RecordRows::token_count(std::int64_t memory_id) {
  Statement c(db_.handle(), "SELECT count(*) FROM tokens WHERE memory_id = ?1");
  c.bind(1, memory_id);
  c.step();
  return c.int64(0);
}

Statement RecordRows::stream_tokens(std::int64_t memory_id) {
  Statement q(db_.handle(),
              "SELECT token_id, key, value FROM tokens WHERE memory_id = ?1 ORDER BY token_id");
  q.bind(1, memory_id).stream();  // rows are read (and queued for opening) as the server sends them
  return q;
}

Statement RecordRows::record_token_payloads(std::int64_t memory_id, std::int64_t record,
                                            const Columns& columns) {
  const std::string sql = "SELECT t.token_id, t.key, t.value, " +
                          std::string(columns.key_id ? "r.key_id" : "NULL") +
                          " FROM tokens t JOIN records r ON r.memory_id = t.memory_id AND "
                          "r.record = t.record WHERE t.memory_id = ?1 AND t.token_id BETWEEN ?2 "
                          "AND ?3 ORDER BY t.token_id";
  Statement q(db_.handle(), sql.c_str());
  q.bind(1, memory_id).bind(2, record_lo(record)).bind(3, record_hi(record));
  return q;
}

Statement RecordRows::support_token_payloads(std::int64_t memory_id, const Columns& columns) {
  const std::string sql = "SELECT s.token_id, s.alpha, t.key, t.value, " +
                          std::string(columns.key_id ? "r.key_id" : "NULL") +
                          " FROM support s JOIN tokens t ON t.memory_id = s.memory_id AND "
                          "t.token_id = s.token_id JOIN records r ON r.memory_id = t.memory_id AND "
                          "r.record = t.record WHERE s.memory_id = ?1 ORDER BY s.token_id";
  Statement q(db_.handle(), sql.c_str());
  q.bind(1, memory_id);
  return q;
}

std::int64_t RecordRows::inconsistent_token_rows(std::int64_t memory_id) {
  Statement q(db_.handle(),
              "SELECT count(*) FROM tokens WHERE memory_id = ?1 AND (record != (token_id >> "
              "23) OR position != (token_id & 8388607) OR record NOT IN (SELECT record FROM "
              "records WHERE memory_id = ?1))");
  q.bind(1, memory_id);
  q.step();
  return q.int64(0);
}

std::vector<RecordRows::TokenBlobs> RecordRows::token_blobs(std::int64_t memory_id,
                                                            std::int64_t record) {
  std::vector<TokenBlobs> out;
  Statement q(db_.handle(),
              "SELECT rowid, token_id, key, value FROM tokens WHERE memory_id = ?1 AND token_id "
              "BETWEEN ?2 AND ?3 ORDER BY token_id");
  q.bind(1, memory_id).bind(2, record_lo(record)).bind(3, record_hi(record));
  while (q.step()) out.push_back({q.int64(0), q.int64(1), q.blob(2), q.blob(3)});
  return out;
}

void RecordRows::set_token_blobs(const std::vector<TokenBlobs>& rows) {
  Statement put(db_.handle(), "UPDATE tokens SET key = ?2, value = ?3 WHERE rowid = ?1");
  for (const TokenBlobs& t : rows) {
    put.bind(1, t.rowid)
        .bind_blob(2, t.key.data(), t.key.size())
        .bind_blob(3, t.value.data(), t.value.size());
    put.run();
    put.reset();
  }
}

RecordRows::TokenWriter::TokenWriter(Database& db, std::int64_t memory_id)
    : ins_(db.handle(),
           "INSERT INTO tokens(memory_id, token_id, record, position, key, value) VALUES "
           "(?1, ?2, ?3, ?4, ?5, ?6)"),
      memory_id_(memory_id) {}

void RecordRows::TokenWriter::add(TokenId id, const void* key, std::size_t key_bytes,
                                  const void* value, std::size_t value_bytes) {
  ins_.bind(1, memory_id_)
      .bind(2, static_cast<std::int64_t>(id))
      .bind(3, record_of(id))
      .bind(4, position_of(id));
  ins_.bind_blob(5, key, key_bytes).bind_blob(6, value, value_bytes);
  ins_.run();
  ins_.reset();
}

// Only the key columns: the payload columns' statistics are never used and cost the most.
void RecordRows::analyze_key_columns() {
  db_.exec("ANALYZE tokens(memory_id, token_id, record), records(memory_id, record), support");
}

}  // namespace svattn::store_detail
