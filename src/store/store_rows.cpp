// Row I/O of the store (docs/store.md "Schema"): the memories row and the support table; restoring
// a memory from the record rows' token cursors (record_rows.h) and writing a state's diff back.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "db/dialect.h"
#include "store_impl.h"
#include "svattn/hash.h"
#include "support/clock.h"

namespace svattn {

using namespace store_detail;

namespace {

/// Support coefficients of a state: id -> (part, alpha) for margin and error tokens.
std::map<TokenId, std::pair<int, double>> support_map(const State& s) {
  std::map<TokenId, std::pair<int, double>> m;
  auto alpha_of = [&](TokenId id) {
    const auto it = std::lower_bound(s.ids.begin(), s.ids.end(), id);
    SVATTN_ASSERT(it != s.ids.end() && *it == id, "support id missing from state ids");
    return s.alpha[static_cast<std::size_t>(it - s.ids.begin())];
  };
  for (TokenId id : s.partition.margin) m[id] = {kPartMargin, alpha_of(id)};
  for (TokenId id : s.partition.error) m[id] = {kPartError, alpha_of(id)};
  return m;
}

// Every number that enters the memories/support rows must be finite (NOT NULL REAL columns take a
// NaN as NULL): a non-finite b or alpha means the kernel is not representable for these settings.
void check_finite_state(const std::string& memory, const State& s) {
  bool finite = std::isfinite(s.b);
  for (double a : s.alpha) finite = finite && std::isfinite(a);
  if (!finite) {
    throw InvalidArgument(
        "memory '" + memory +
        "': the operation produced a non-finite state (b = " + std::to_string(s.b) +
        "); the kernel is not representable for these settings (check "
        "--bandwidth); nothing was written");
  }
}
}  // namespace

MemoryRow Store::Impl::read_memory_row(const std::string& name) {
  Statement q(db.handle(),
              "SELECT id, name, settings, dim, value_dim, b, status, warmup, kkt_max_violation, "
              "kkt_sum_error, kkt_box_violation, state_sha256, last_audit_seq FROM memories "
              "WHERE name = ?1");
  q.bind(1, name);
  if (!q.step()) throw NotFound("store '" + path + "' has no memory '" + name + "'");
  MemoryRow r;
  r.id = q.int64(0);
  r.name = q.text(1);
  const nlohmann::json sj = nlohmann::json::parse(q.text(2), nullptr, false);
  if (sj.is_discarded()) throw FormatError("memory '" + name + "': settings are not JSON");
  r.settings = memory_settings_from_json(sj);
  r.dim = static_cast<int>(q.int64(3));
  r.value_dim = static_cast<int>(q.int64(4));
  r.b = q.real(5);
  r.status = status_from_string(q.text(6));
  r.warmup = q.int64(7) != 0;
  r.kkt.max_violation = q.real(8);
  r.kkt.sum_error = q.real(9);
  r.kkt.box_violation = q.real(10);
  r.state_sha256 = q.text(11);
  r.last_audit_seq = q.int64(12);
  return r;
}

std::vector<MemoryRow> Store::Impl::all_memory_rows() {
  std::vector<std::string> names;
  Statement q(db.handle(), "SELECT name FROM memories ORDER BY name");
  while (q.step()) names.push_back(q.text(0));
  std::vector<MemoryRow> rows;
  for (const std::string& n : names) rows.push_back(read_memory_row(n));
  return rows;
}

// One pass over the memory's token rows in token-id order (the UNIQUE(memory_id, token_id)
// index), each key and value blob decoded straight into its row of the matrices by the payload
// reader (store_payload.cpp). No join: a token's record is its id's high bits, so the records'
// suspension flags and key ids are read first (one row per record) and each token row finds its
// record's entry (consecutive rows share it). The rows are sized from a count over that index.
TokenSet Store::Impl::load_active_tokens(const MemoryRow& row, PayloadReader* reader) {
  struct RecordEntry {
    bool suspended;
    bool sealed;
    std::string key_id;
  };
  std::unordered_map<std::int64_t, RecordEntry> records;
  for (RecordRows::RecordKey& r : record_rows.record_keys(row.id, record_columns())) {
    // a shredded record is excluded like a suspended one (store_shredded.cpp)
    const bool excluded = r.suspended || is_shredded(row.id, r.record);
    records[r.record] = {excluded, r.sealed, std::move(r.key_id)};
  }
  const std::int64_t rows = record_rows.token_count(row.id);
  TokenSet ts;
  ts.ids.reserve(static_cast<std::size_t>(rows));
  ts.keys.resize(rows, row.dim);
  ts.values.resize(rows, row.value_dim);
  Statement q = record_rows.stream_tokens(row.id);  // token_id, key, value
  PayloadReader own = payload_reader(row.id);
  PayloadReader& pr = reader != nullptr ? *reader : own;
  const KeyStore::ReadScope keys_read(vault.key_store());
  pr.prefetch_keys();  // every record's key in one scan
  Eigen::Index i = 0;
  std::int64_t last_record = -1;
  const RecordEntry* rec = nullptr;
  Opener* op = nullptr;  // the current record's (nullptr: plaintext), looked up once per record
  PipelinedOpen pipe;    // declared after ts: destroyed (waiting for its worker) before it
  const auto read_rows = [&] {
    while (q.step()) {
      const TokenId id = q.int64(0);
      if (record_of(id) != last_record || rec == nullptr) {
        last_record = record_of(id);
        const auto it = records.find(last_record);
        if (it == records.end()) {
          throw FormatError("store '" + path + "': token " + std::to_string(id) + " of memory '" +
                            row.name + "' belongs to no record (corrupted store)");
        }
        rec = &it->second;
        op = rec->sealed && !rec->suspended ? &pr.opener(rec->key_id, last_record) : nullptr;
      }
      if (rec->suspended) continue;
      if (i >= rows) throw StoreError("store '" + path + "': token count changed while reading");
      ts.ids.push_back(id);
      pr.read_token_queued(pipe, q, {1, 2, row.dim, row.value_dim}, op, ts.keys.row(i).data(),
                           ts.values.row(i).data(), id);
      ++i;
    }
    pipe.finish();
  };
  try {
    read_rows();
  } catch (...) {
    pipe.finish();  // a failure of an earlier token (queued or in the worker) is the one reported
    throw;
  }
  if (i < rows) {  // suspended tokens were counted above
    ts.keys.conservativeResize(i, row.dim);
    ts.values.conservativeResize(i, row.value_dim);
  }
  return ts;
}

State Store::Impl::load_state(const MemoryRow& row, const std::vector<TokenId>& ids) {
  State s;
  s.settings = row.settings.problem;
  s.dim = row.dim;
  s.value_dim = row.value_dim;
  s.ids = ids;
  s.alpha.assign(ids.size(), 0.0);
  s.b = row.b;
  s.kkt = row.kkt;
  s.status = row.status;
  s.warmup = row.warmup;
  s.state_sha256 = row.state_sha256;
  std::vector<char> in_support(ids.size(), 0);
  Statement q(db.handle(),
              "SELECT token_id, part, alpha FROM support WHERE memory_id = ?1 ORDER BY token_id");
  q.bind(1, row.id);
  while (q.step()) {
    const TokenId id = q.int64(0);
    const auto it = std::lower_bound(ids.begin(), ids.end(), id);
    if (it == ids.end() || *it != id) {
      throw FormatError("memory '" + row.name + "': support token " + std::to_string(id) +
                        " is not an active token of the memory (corrupted store)");
    }
    const std::size_t k = static_cast<std::size_t>(it - ids.begin());
    s.alpha[k] = q.real(2);
    in_support[k] = 1;
    const std::int64_t part = q.int64(1);
    if (part == kPartMargin) {
      s.partition.margin.push_back(id);
    } else if (part == kPartError) {
      s.partition.error.push_back(id);
    } else {
      throw FormatError("memory '" + row.name + "': bad partition code " + std::to_string(part));
    }
  }
  for (std::size_t k = 0; k < ids.size(); ++k) {
    if (in_support[k] == 0) s.partition.reserve.push_back(ids[k]);
  }
  return s;
}

Cached& Store::Impl::ensure_loaded(const MemoryRow& row) {
  auto it = cache.find(row.name);
  if (it != cache.end() && it->second.id == row.id && it->second.seq == row.last_audit_seq) {
    return it->second;
  }
  if (has_shredded(row.id)) return load_without_shredded(row);  // read-only open of a restored copy
  cache.erase(row.name);
  const support::Stopwatch watch;
  RestoreReport rep;
  rep.restored = true;
  std::unique_ptr<Memory> mem;
  std::string expected;
  {
    // One key-store read and one opener per record for both passes (tokens, then bounds).
    const KeyStore::ReadScope keys_read(vault.key_store());
    PayloadReader reader = payload_reader(row.id);
    const TokenSet tokens = load_active_tokens(row, &reader);
    State state = load_state(row, tokens.ids);
    adopt_current_hash(row, tokens, state);  // a file older than schema 4 (read-only)
    expected = state.state_sha256;
    const std::vector<double> bounds =
        read_screening(row, tokens.ids, &rep.screening_problem, &reader);
    if (!rep.screening_problem.empty()) {
      std::fprintf(stderr,
                   "svattn: warning: memory '%s': the persisted screening bounds fail their check "
                   "(%s); they are not used, the gradients are re-derived from the tokens\n",
                   row.name.c_str(), rep.screening_problem.c_str());
    }
    rep.screening_used = !bounds.empty();
    OpDiagnostics diag;
    try {
      mem = std::make_unique<Memory>(
          Memory::restore(row.settings, tokens, state, &diag, bounds.empty() ? nullptr : &bounds));
    } catch (const InvalidArgument& e) {
      throw FormatError("memory '" + row.name + "': stored state cannot be restored: " + e.what());
    }
    rep.kernel_evaluations = diag.kernel_evaluations;
    rep.resolved = diag.batch_fallbacks > 0;
  }  // the loaded rows are freed before the hash is computed
  if (rep.resolved) {
    std::fprintf(stderr,
                 "svattn: warning: memory '%s': the stored state did not check against its "
                 "tokens; it was re-solved from the tokens (not used)\n",
                 row.name.c_str());
  }
  const std::string restored = mem->state_sha256();
  if (restored != expected) {
    throw FormatError("memory '" + row.name + "' in store '" + path +
                      "': the stored state does not match its tokens (stored " +
                      row.state_sha256.substr(0, 16) + "…, tokens give " + restored.substr(0, 16) +
                      "…); the store is corrupted, run `svattn memory verify`");
  }
  rep.seconds = watch.seconds();
  restores[row.name] = rep;
  Cached c;
  c.id = row.id;
  c.seq = row.last_audit_seq;
  c.memory = std::move(mem);
  return cache[row.name] = std::move(c);
}

namespace {

// The digest of a stored support (docs/store.md "Persisted screening"): SHA-256 over a header
// binding the memory and its state hash, then (id, alpha, key, value) of every support row in
// ascending id, then b. Fed from the file's rows (support_digest) or from the memory that wrote
// them (write_screening): the same bytes either way.
class SupportDigest {
 public:
  SupportDigest(std::int64_t memory_id, const std::string& state_sha256) {
    const std::string head =
        "svattn-support-v1\n" + std::to_string(memory_id) + "\n" + state_sha256 + "\n";
    bytes_.assign(head.begin(), head.end());
  }
  void row(TokenId id, double alpha, const double* key, int dim, const double* value,
           int value_dim) {
    put(&id, sizeof id);
    put(&alpha, sizeof alpha);
    put(key, static_cast<std::size_t>(dim) * sizeof(double));
    put(value, static_cast<std::size_t>(value_dim) * sizeof(double));
  }
  std::string finish(double b) {
    put(&b, sizeof b);
    return sha256_hex(bytes_);
  }

 private:
  void put(const void* p, std::size_t n) {
    const auto* c = static_cast<const std::uint8_t*>(p);
    bytes_.insert(bytes_.end(), c, c + n);
  }
  std::vector<std::uint8_t> bytes_;
};

}  // namespace

std::string store_detail::memory_support_digest(std::int64_t memory_id, const Memory& mem,
                                                const State& st) {
  std::vector<TokenId> ids(st.partition.margin);
  ids.insert(ids.end(), st.partition.error.begin(), st.partition.error.end());
  std::sort(ids.begin(), ids.end());
  const TokenSet sup = mem.tokens(ids);
  SupportDigest dg(memory_id, st.state_sha256);
  for (std::size_t r = 0; r < ids.size(); ++r) {
    const auto i = static_cast<Eigen::Index>(r);
    dg.row(ids[r], mem.alpha(ids[r]), sup.keys.row(i).data(), st.dim, sup.values.row(i).data(),
           st.value_dim);
  }
  return dg.finish(st.b);
}

std::string Store::Impl::support_digest(std::int64_t memory_id, int dim, int value_dim,
                                        const std::string& state_sha256, double b, Support* out) {
  // token_id, alpha, key, value, key_id
  Statement q = record_rows.support_token_payloads(memory_id, record_columns());
  PayloadReader pr = payload_reader(memory_id);
  std::vector<double> key(static_cast<std::size_t>(dim)),
      value(static_cast<std::size_t>(value_dim));
  SupportDigest dg(memory_id, state_sha256);
  std::vector<double> keys, values, alpha;
  while (q.step()) {
    const TokenId id = q.int64(0);
    const double a = q.real(1);
    pr.read_token(q, {2, 3, dim, value_dim}, 4, key.data(), value.data(), id);  // plaintext digest
    dg.row(id, a, key.data(), dim, value.data(), value_dim);
    if (out != nullptr && a > 0) {
      alpha.push_back(a);
      keys.insert(keys.end(), key.begin(), key.end());
      values.insert(values.end(), value.begin(), value.end());
    }
  }
  if (out != nullptr) {
    const auto m = static_cast<Eigen::Index>(alpha.size());
    out->keys = Eigen::Map<const RowMatrix>(keys.data(), m, dim);
    out->values = Eigen::Map<const RowMatrix>(values.data(), m, value_dim);
    out->alpha = Eigen::Map<const Eigen::VectorXd>(alpha.data(), m);
  }
  return dg.finish(b);
}

bool Store::Impl::write_state(std::int64_t memory_id, const State& before, const State& after,
                              std::int64_t seq, const std::string& memory) {
  check_finite_state(memory, after);
  const auto old_sup = support_map(before);
  const auto new_sup = support_map(after);
  bool moved = !same_bits(before.b, after.b) || before.warmup != after.warmup;
  std::vector<std::int64_t> gone, put_ids, put_parts;  // the support rows' diff
  std::vector<double> put_alpha;
  for (const auto& [id, pa] : old_sup)
    if (new_sup.find(id) == new_sup.end()) gone.push_back(static_cast<std::int64_t>(id));
  for (const auto& [id, pa] : new_sup) {
    const auto it = old_sup.find(id);
    if (it != old_sup.end() && it->second.first == pa.first &&
        same_bits(it->second.second, pa.second)) {
      continue;
    }
    put_ids.push_back(static_cast<std::int64_t>(id));
    put_parts.push_back(static_cast<std::int64_t>(pa.first));
    put_alpha.push_back(pa.second);
  }
  moved = moved || !gone.empty() || !put_ids.empty();
  write_support_diff(memory_id, gone, put_ids, put_parts, put_alpha);
  Statement up(db.handle(),
               "UPDATE memories SET b = ?2, status = ?3, warmup = ?4, kkt_max_violation = ?5, "
               "kkt_sum_error = ?6, kkt_box_violation = ?7, state_sha256 = ?8, "
               "last_audit_seq = ?9 WHERE id = ?1");
  up.bind(1, memory_id)
      .bind(2, after.b)
      .bind(3, to_string(after.status))
      .bind(4, static_cast<std::int64_t>(after.warmup ? 1 : 0))
      .bind(5, after.kkt.max_violation)
      .bind(6, after.kkt.sum_error)
      .bind(7, after.kkt.box_violation)
      .bind(8, after.state_sha256)
      .bind(9, seq)
      .run();
  return moved;
}

void Store::Impl::refresh_planner_statistics(std::int64_t memory_id, std::int64_t tokens_added) {
  if (!db.postgres() || tokens_added < 1000) return;
  if (10 * tokens_added < record_rows.token_count(memory_id)) return;
  // Only the key columns (RecordRows::analyze_key_columns). The import is committed: a lock wait
  // past lock_timeout (an ANALYZE by the autovacuum daemon holds the table) leaves the statistics
  // to that daemon instead of failing the import.
  try {
    record_rows.analyze_key_columns();
  } catch (const StoreBusy&) {
  }
}

// The support rows' diff: one statement per row on SQLite (local calls), two statements in all on
// PostgreSQL (= ANY and unnest over array parameters; docs/store.md "Round trips and plans"), where
// each statement is a round trip to the server and a support forget at 20k changes hundreds of
// rows.
void Store::Impl::write_support_diff(std::int64_t memory_id, const std::vector<std::int64_t>& gone,
                                     const std::vector<std::int64_t>& ids,
                                     const std::vector<std::int64_t>& parts,
                                     const std::vector<double>& alpha) {
  const char* const kUpsert =
      " ON CONFLICT(memory_id, token_id) DO UPDATE SET part = excluded.part, alpha = "
      "excluded.alpha";
  if (db.postgres()) {
    if (!gone.empty()) {
      Statement del(db.handle(),
                    "DELETE FROM support WHERE memory_id = ?1 AND token_id = ANY(?2::bigint[])");
      del.bind(1, memory_id).bind(2, pg_array(gone)).run();
    }
    if (!ids.empty()) {
      Statement put(db.handle(),
                    std::string("INSERT INTO support(memory_id, token_id, part, alpha) SELECT ?1, "
                                "u.t, u.p, u.a FROM unnest(?2::bigint[], ?3::bigint[], "
                                "?4::float8[]) AS u(t, p, a)") +
                        kUpsert);
      put.bind(1, memory_id).bind(2, pg_array(ids)).bind(3, pg_array(parts));
      put.bind(4, pg_array(alpha)).run();
    }
    return;
  }
  Statement del(db.handle(), "DELETE FROM support WHERE memory_id = ?1 AND token_id = ?2");
  for (std::int64_t id : gone) {
    del.bind(1, memory_id).bind(2, id).run();
    del.reset();
  }
  Statement put(db.handle(),
                std::string("INSERT INTO support(memory_id, token_id, part, alpha) VALUES (?1, ?2, "
                            "?3, ?4)") +
                    kUpsert);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    put.bind(1, memory_id).bind(2, ids[i]).bind(3, parts[i]).bind(4, alpha[i]).run();
    put.reset();
  }
}

std::int64_t Store::Impl::delete_evicted(std::int64_t memory_id, const State& before,
                                         const Memory& mem,
                                         const std::vector<TokenId>& removed_on_purpose) {
  // Only a bounded memory evicts; an audit-mode memory retains every token it was given.
  if (mem.settings().mode == MemoryMode::kAudit && mem.evictions() == 0) return 0;
  return record_rows.delete_tokens_unless(memory_id, before.ids, [&](TokenId id) {
    return mem.contains(id) ||
           std::binary_search(removed_on_purpose.begin(), removed_on_purpose.end(), id);
  });
}

RecordRow Store::Impl::read_record(std::int64_t memory_id, std::int64_t record) {
  return record_rows.read(memory_id, record, record_columns());
}

TokenSet Store::Impl::record_tokens(const MemoryRow& row, std::int64_t record) {
  // token_id, key, value, key_id
  Statement q = record_rows.record_token_payloads(row.id, record, record_columns());
  PayloadReader pr = payload_reader(row.id);
  std::vector<TokenId> ids;
  std::vector<double> keys;
  std::vector<double> values;
  while (q.step()) {
    const TokenId id = q.int64(0);
    ids.push_back(id);
    keys.resize(keys.size() + static_cast<std::size_t>(row.dim));
    values.resize(values.size() + static_cast<std::size_t>(row.value_dim));
    pr.read_token(q, {1, 2, row.dim, row.value_dim}, 3, keys.data() + keys.size() - row.dim,
                  values.data() + values.size() - row.value_dim, id);
  }
  TokenSet ts;
  const auto n = static_cast<Eigen::Index>(ids.size());
  ts.ids = std::move(ids);
  ts.keys = Eigen::Map<const RowMatrix>(keys.data(), n, row.dim);
  ts.values = Eigen::Map<const RowMatrix>(values.data(), n, row.value_dim);
  return ts;
}

std::vector<TokenId> Store::Impl::record_token_ids(const MemoryRow& row, std::int64_t record) {
  return record_rows.token_ids(row.id, record);
}

}  // namespace svattn
