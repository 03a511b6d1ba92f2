// The backend-neutral front end of the store's connection (db/database.h): Statement, Database,
// RelaxedCommit and Transaction, forwarding to the backend of the open connection.
#include "database.h"

namespace svattn::store_detail {

Statement::Statement(DbHandle db, const char* sql) : s_(db.database().impl().prepare(sql)) {}

Statement& Statement::bind(int index, std::int64_t v) {
  s_->bind_int64(index, v);
  return *this;
}
Statement& Statement::bind(int index, double v) {
  s_->bind_double(index, v);
  return *this;
}
Statement& Statement::bind(int index, const std::string& v) {
  s_->bind_text(index, v);
  return *this;
}
Statement& Statement::bind_blob(int index, const void* data, std::size_t bytes) {
  s_->bind_blob(index, data, bytes);
  return *this;
}

void Statement::run() {
  while (step()) {
  }
}

std::vector<std::uint8_t> Statement::blob(int col) const {
  const auto* p = static_cast<const std::uint8_t*>(blob_data(col));
  const int n = bytes(col);
  if (p == nullptr || n <= 0) return {};
  return std::vector<std::uint8_t>(p, p + n);
}

Backend Database::backend() const { return impl().kind(); }

DatabaseBackend& Database::impl() const {
  if (impl_ == nullptr) throw StoreError("the store's connection is closed");
  return *impl_;
}

void Database::exec(const std::string& sql) { impl().exec(sql); }

std::int64_t Database::query_int(const std::string& sql) {
  Statement s(handle(), sql.c_str());
  if (!s.step()) throw StoreError("query returned no row: " + sql);
  return s.int64(0);
}

std::string Database::query_text(const std::string& sql) {
  Statement s(handle(), sql.c_str());
  if (!s.step()) throw StoreError("query returned no row: " + sql);
  return s.text(0);
}

std::unique_ptr<StatementBackend> prepare_bound(DatabaseBackend& db, const char* sql,
                                                const std::vector<std::string>& params) {
  std::unique_ptr<StatementBackend> s = db.prepare(sql);
  for (std::size_t i = 0; i < params.size(); ++i) s->bind_text(static_cast<int>(i) + 1, params[i]);
  return s;
}

std::vector<std::string> query_column(DatabaseBackend& db, const char* sql,
                                      const std::vector<std::string>& params) {
  const std::unique_ptr<StatementBackend> s = prepare_bound(db, sql, params);
  std::vector<std::string> out;
  while (s->step()) out.push_back(s->text(0));
  return out;
}

RelaxedCommit::RelaxedCommit(Database& db, bool unsynced) : db_(db) {
  db_.impl().relax_connection(unsynced);
}

RelaxedCommit::~RelaxedCommit() {
  if (!db_.is_open()) return;
  try {
    db_.impl().restore_connection();
  } catch (...) {  // the connection's next commits would still be written, only synced later
  }
}

void RelaxedCommit::in_transaction() {
  if (db_.postgres()) db_.impl().relax_commit();
}

Transaction::Transaction(Database& db, bool immediate, const std::string& store_path,
                         int busy_timeout_ms)
    : db_(db) {
  db.impl().begin(immediate, store_path, busy_timeout_ms);
  open_ = true;
}

Transaction::~Transaction() { rollback(); }

void Transaction::commit() {
  try {
    db_.impl().commit();
  } catch (...) {
    rollback();
    throw;
  }
  open_ = false;
}

void Transaction::rollback() noexcept {
  if (open_) {
    if (db_.is_open()) db_.impl().rollback();
    open_ = false;
  }
}

}  // namespace svattn::store_detail
