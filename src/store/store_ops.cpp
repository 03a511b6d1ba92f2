// The mutating operations of the store (docs/store.md "Operations"): one skeleton (run_op) that
// every record operation -- add, forget, suspend, resume and an import chunk -- runs on, and the
// operations themselves as the steps the skeleton calls. create_memory has no state before and
// lives here too.
#include <chrono>

#include "store_impl.h"
#include "svattn/hash.h"

namespace svattn {

using namespace store_detail;

// What the steps of an operation see: the memories row, the in-RAM memory and the state before.
struct Store::Impl::OpContext {
  const MemoryRow& row;
  Memory& mem;
  State before;
};

// Defaults of the steps; an operation overrides what it needs. The skeleton calls, in one BEGIN
// IMMEDIATE transaction: without_restore() once the memory's row is read (an add or forget from
// the stored rows: the committed result, or nullopt having written nothing), then, unless it
// committed, check(record, row) for every record of `records`, prepare(), apply() (timed as
// memory_seconds), write() (rows and the certificate), appends the audit entry, writes the state
// and commits; after_commit() runs once the transaction is over. One transaction for both paths:
// on PostgreSQL a fallback costs no second lock and BEGIN.
template <class Result>
struct Store::Impl::OpSteps {
  using ResultType = Result;
  const char* operation = "";
  std::vector<std::int64_t> records;  // looked up before anything else
  std::int64_t audit_record = -1;
  std::int64_t token_count = 0;
  bool defer_bounds = false;  // write_screening(..., defer): import chunks but the last
  std::vector<std::int64_t> bounds_groups;  // groups rewritten besides the records' (a forget's)
  Result make_result() const { return Result{}; }
  std::optional<Result> without_restore(Store::Impl&, const MemoryRow&, Transaction&) {
    return std::nullopt;
  }
  void prepare(Store::Impl&, Store::Impl::OpContext&) {}
  void after_commit(Store::Impl&, Result&) {}
};

static void require_exists(const RecordRow& rr, const std::string& name, std::int64_t record) {
  if (!rr.exists) throw NotFound("memory '" + name + "' has no record " + std::to_string(record));
}

static void check_mode_change(bool suspend, bool currently_suspended, const std::string& name,
                              std::int64_t record) {
  if (suspend && currently_suspended) {
    throw InvalidArgument("record " + std::to_string(record) + " of memory '" + name +
                          "' is already suspended");
  }
  if (!suspend && !currently_suspended) {
    throw InvalidArgument("record " + std::to_string(record) + " of memory '" + name +
                          "' is not suspended");
  }
}

void Store::Impl::commit_op(std::int64_t memory_id, Transaction& t, OpResult& out) {
  out.memory_records = record_rows.count(memory_id);
  const auto k0 = OpClock::now();
  t.commit();
  out.commit_seconds = seconds_since(k0);
  vault.keys_referenced();  // the keys made in the transaction are referenced now
}

template <class Op>
auto Store::Impl::run_op(const std::string& name, Op& op) -> decltype(op.make_result()) {
  require_writable();
  const auto t0 = OpClock::now();
  auto res = [&] {
    Transaction t(db, true, path, options.busy_timeout_ms);
    try {
      const MemoryRow row = read_memory_row(name);
      require_settings_bound(row);  // before anything reads or changes the memory
      if (auto done = op.without_restore(*this, row, t)) return std::move(*done);
      Cached& c = ensure_loaded(row);
      for (std::int64_t r : op.records) op.check(r, read_record(row.id, r));
      OpContext ctx{row, *c.memory, State{}};
      op.prepare(*this, ctx);
      ctx.before = ctx.mem.state();
      auto out = op.make_result();
      const auto m0 = OpClock::now();
      out.diagnostics = op.apply(ctx);
      out.memory_seconds = seconds_since(m0);
      const State& after = ctx.mem.state();  // valid: nothing below changes the memory
      AuditEntry& e = out.entry;
      e.certificate = op.write(*this, ctx, after, out);
      e.operation = op.operation;
      e.memory = name;
      e.record = op.audit_record;
      e.token_count = op.token_count;
      e.state_before = ctx.before.state_sha256;
      e.state_after = after.state_sha256;
      audit.append(e);
      const bool moved = write_state(row.id, ctx.before, after, e.seq, name);
      // A bounded memory evicts tokens of untouched records: every blob is rewritten.
      const auto s0 = OpClock::now();
      write_screening(row, ctx.mem, moved || row.settings.mode != MemoryMode::kAudit, op.records,
                      op.defer_bounds, op.bounds_groups);
      out.screening_seconds = seconds_since(s0);
      out.memory_tokens = ctx.mem.size();
      commit_op(row.id, t, out);
      c.seq = e.seq;
      return out;
    } catch (...) {
      // Neither the file nor the object changes: the memory is restored from the file on next use.
      t.rollback();
      cache.erase(name);
      vault.discard_new_keys();
      throw;
    }
  }();
  op.after_commit(*this, res);
  res.total_seconds = seconds_since(t0);
  return res;
}

// ------------------------------------------------------------------------------------------ add

struct Store::Impl::AddOp : Store::Impl::OpSteps<OpResult> {
  const std::string& name;
  const RowMatrix& keys;
  const RowMatrix* values;
  TokenSet ts;
  const TokenSet* stored = nullptr;  // the validated tokens, for an add from the stored rows
  AddOp(const std::string& n, std::int64_t record, const RowMatrix& k, const RowMatrix* v)
      : name(n), keys(k), values(v) {
    operation = "add";
    records = {record};
    audit_record = record;
  }
  void check(std::int64_t record, const RecordRow& rr) const {
    if (rr.exists) {
      throw AlreadyExists("memory '" + name + "' already has record " + std::to_string(record));
    }
  }
  std::optional<OpResult> without_restore(Store::Impl& im, const MemoryRow& row, Transaction& t) {
    if (stored == nullptr) return std::nullopt;
    return im.add_stored(row, audit_record, *stored, t);
  }
  void prepare(Store::Impl&, Store::Impl::OpContext& ctx);
  OpDiagnostics apply(Store::Impl::OpContext& ctx) { return ctx.mem.add_batch(ts); }
  std::string write(Store::Impl& im, Store::Impl::OpContext& ctx, const State& after,
                    OpResult& res);
};

void Store::Impl::AddOp::prepare(Store::Impl&, Store::Impl::OpContext& ctx) {
  const std::int64_t record = audit_record;
  const MemoryRow& row = ctx.row;
  if (keys.rows() < 1) throw InvalidArgument("record " + std::to_string(record) + " has no tokens");
  if (keys.rows() > kMaxPosition + 1) {
    throw InvalidArgument("record " + std::to_string(record) + " has " +
                          std::to_string(keys.rows()) + " tokens, more than 2^23");
  }
  if (keys.cols() != row.dim) {
    throw InvalidArgument("dimension mismatch: memory '" + name + "' has key dimension " +
                          std::to_string(row.dim) + ", the keys have " +
                          std::to_string(keys.cols()) + " columns");
  }
  const RowMatrix& vals = values != nullptr ? *values : keys;
  if (vals.cols() != row.value_dim) {
    throw InvalidArgument("dimension mismatch: memory '" + name + "' has value dimension " +
                          std::to_string(row.value_dim) + ", the values have " +
                          std::to_string(vals.cols()) + " columns" +
                          (values == nullptr ? " (values default to the keys)" : ""));
  }
  if (vals.rows() != keys.rows()) {
    throw InvalidArgument("keys have " + std::to_string(keys.rows()) + " rows but values have " +
                          std::to_string(vals.rows()));
  }
  ts.keys = keys;
  ts.values = vals;
  for (Eigen::Index i = 0; i < keys.rows(); ++i) ts.ids.push_back(store_token_id(record, i));
  ts.validate();
  token_count = ts.size();
}

std::string Store::Impl::AddOp::write(Store::Impl& im, Store::Impl::OpContext& ctx,
                                      const State& after, OpResult& res) {
  const MemoryRow& row = ctx.row;
  im.record_rows.insert(row.id, {audit_record}, now_utc());
  im.insert_tokens(row.id, ts, ctx.mem);
  const std::int64_t evicted = im.delete_evicted(row.id, ctx.before, ctx.mem, {});
  std::int64_t evicted_new = 0;
  for (TokenId id : ts.ids) evicted_new += ctx.mem.contains(id) ? 0 : 1;
  nlohmann::json cert{
      {"operation", "add"},
      {"record", audit_record},
      {"tokens", ts.size()},
      {"first_token_id", ts.ids.front()},
      {"last_token_id", ts.ids.back()},
      {"encryption", im.encryption},
  };
  add_outcome_fields(cert, ctx.mem, after, res.diagnostics);
  if (row.settings.mode == MemoryMode::kBounded) {
    cert["evicted_on_arrival"] = evicted_new;
    cert["evicted_retained"] = evicted;
  }
  return cert.dump();
}

OpResult Store::add_record(const std::string& name, std::int64_t record, const RowMatrix& keys,
                           const RowMatrix* values) {
  check_record(record);
  const RowMatrix& vals = values != nullptr ? *values : keys;
  Impl::AddOp op(name, record, keys, values);
  TokenSet ts;
  if (keys.rows() >= 1 && keys.rows() <= kMaxPosition + 1 && vals.rows() == keys.rows()) {
    // A record that stays in reserve is added from the stored rows (store_add_stored.cpp); bad
    // input and every other case take the ordinary path, which reports it.
    ts.keys = keys;
    ts.values = vals;
    for (Eigen::Index i = 0; i < keys.rows(); ++i) ts.ids.push_back(store_token_id(record, i));
    try {
      ts.validate();
      op.stored = &ts;
    } catch (const Error&) {  // the ordinary path reports it
    }
  }
  return impl_->run_op(name, op);
}

// --------------------------------------------------------------------------------------- forget

struct Store::Impl::ForgetOp : Store::Impl::OpSteps<ForgetResult> {
  const std::string& name;
  RecordRow rr;
  TokenSet rec;                    // the record's rows (keys: the certificate's probes)
  std::vector<TokenId> in_memory;  // of them, the tokens the memory holds
  ForgetOp(const std::string& n, std::int64_t record) : name(n) {
    operation = "forget";
    records = {record};
    audit_record = record;
  }
  void check(std::int64_t record, const RecordRow& r) {
    require_exists(r, name, record);
    rr = r;
  }
  void prepare(Store::Impl& im, Store::Impl::OpContext& ctx) {
    rec = im.record_tokens(ctx.row, audit_record);
    if (!rr.suspended) {
      for (TokenId id : rec.ids)
        if (ctx.mem.contains(id)) in_memory.push_back(id);
    }
    token_count = rec.size();
  }
  std::optional<ForgetResult> without_restore(Store::Impl& im, const MemoryRow& row,
                                              Transaction& t) {
    return im.forget_stored(row, audit_record, t);
  }
  OpDiagnostics apply(Store::Impl::OpContext& ctx) { return ctx.mem.remove_batch(in_memory); }
  std::string write(Store::Impl& im, Store::Impl::OpContext& ctx, const State& after,
                    ForgetResult& fr);
  void after_commit(Store::Impl& im, ForgetResult& fr) { im.finish_forget(fr); }
};

std::string Store::Impl::ForgetOp::write(Store::Impl& im, Store::Impl::OpContext& ctx, const State&,
                                         ForgetResult& fr) {
  const MemoryRow& row = ctx.row;
  // Probes: the erased keys themselves (where a leftover would show most). Only the maximal
  // readout deviation enters the certificate.
  const Eigen::Index probes_n =
      std::min<Eigen::Index>(rec.size(), std::max(0, im.options.certificate_probes));
  const RowMatrix probes = rec.keys.topRows(probes_n);
  const auto c0 = OpClock::now();
  CertificateOptions co;
  co.optimality_check = im.options.certificate_check;
  co.allow_reference = im.options.certificate_reference;
  co.resolve = im.options.certificate_resolve;
  fr.certificate = removal_certificate(ctx.before, ctx.mem, in_memory, std::to_string(audit_record),
                                       fr.diagnostics, co, probes);
  fr.certificate_seconds = seconds_since(c0);
  StoreErasure se;
  se.path = im.path;
  se.memory = name;
  se.record = audit_record;
  se.record_was_suspended = rr.suspended;
  se.token_rows_erased = rec.size();
  se.tokens_removed_from_memory = static_cast<std::int64_t>(in_memory.size());
  se.encryption = im.encryption;
  im.describe_erasure(se);
  fr.certificate.store = se;
  im.record_rows.delete_tokens(row.id, audit_record);
  if (im.vault.enabled()) im.vault.schedule_record_key(name, audit_record, rr.key_id, se);
  // The record's bounds leave its group: the blob is written again without them (write_screening
  // after this step), under a fresh group key in an encrypted store.
  im.screening_bounds.leave(row.id, row.name, audit_record, rr.bounds_group, rec.size(), &se);
  if (rr.bounds_group >= 0) bounds_groups = {rr.bounds_group};
  fr.certificate.store = se;
  im.record_rows.delete_row(row.id, audit_record);
  im.delete_evicted(row.id, ctx.before, ctx.mem, in_memory);
  return fr.certificate.to_json().dump();
}

ForgetResult Store::forget_record(const std::string& name, std::int64_t record) {
  check_record(record);
  impl_->require_writable();
  // The record's data key and its bounds group's key die after the commit: a key store that
  // cannot destroy them must stop the erasure before it starts (docs/store.md "Erasure by key
  // destruction").
  if (impl_->vault.enabled()) {
    impl_->vault.keys().require_writable("the keys of record " + std::to_string(record) +
                                         " of memory '" + name + "'");
  }
  Impl::ForgetOp op(name, record);
  return impl_->run_op(name, op);
}

// ------------------------------------------------------------------------------ suspend, resume

struct Store::Impl::SuspendOp : Store::Impl::OpSteps<OpResult> {
  const std::string& name;
  std::vector<TokenId> ids;
  SuspendOp(const std::string& n, std::int64_t record) : name(n) {
    operation = "suspend";
    records = {record};
    audit_record = record;
  }
  void check(std::int64_t record, const RecordRow& rr) const {
    require_exists(rr, name, record);
    check_mode_change(true, rr.suspended, name, record);
  }
  std::string buckets_sha256;  // of the record's bucket digests, bound into the suspend entry
  void prepare(Store::Impl& im, Store::Impl::OpContext& ctx) {
    ids = im.record_token_ids(ctx.row, audit_record);
    token_count = static_cast<std::int64_t>(ids.size());
    if (im.schema_version < Store::Impl::kFirstSchemaWithHashV2 ||
        ctx.row.settings.mode != MemoryMode::kAudit)
      return;  // no persisted digests
    std::vector<std::uint8_t> plain;
    if (im.read_record_buckets(ctx.row, audit_record, plain).empty())
      buckets_sha256 = sha256_hex(plain);
  }
  OpDiagnostics apply(Store::Impl::OpContext& ctx) { return ctx.mem.remove_batch(ids); }
  std::string write(Store::Impl& im, Store::Impl::OpContext& ctx, const State& after,
                    OpResult& res) {
    im.record_rows.set_suspended(ctx.row.id, audit_record, true);
    im.delete_evicted(ctx.row.id, ctx.before, ctx.mem, ids);
    nlohmann::json cert{{"operation", "suspend"},
                        {"record", audit_record},
                        {"tokens_excluded", ids.size()},
                        {"data_kept", true}};
    // What verify and resume check the suspended tokens against (docs/store.md "Audit log").
    if (!buckets_sha256.empty()) cert["buckets_sha256"] = buckets_sha256;
    add_outcome_fields(cert, ctx.mem, after, res.diagnostics);
    return cert.dump();
  }
};

struct Store::Impl::ResumeOp : Store::Impl::OpSteps<OpResult> {
  const std::string& name;
  TokenSet ts;
  ResumeOp(const std::string& n, std::int64_t record) : name(n) {
    operation = "resume";
    records = {record};
    audit_record = record;
  }
  void check(std::int64_t record, const RecordRow& rr) const {
    require_exists(rr, name, record);
    check_mode_change(false, rr.suspended, name, record);
  }
  void prepare(Store::Impl& im, Store::Impl::OpContext& ctx) {
    ts = im.record_tokens(ctx.row, audit_record);
    im.require_resumable(ctx.row, audit_record, ts);  // "resume restores the exact state"
    token_count = ts.size();
  }
  OpDiagnostics apply(Store::Impl::OpContext& ctx) { return ctx.mem.add_batch(ts); }
  std::string write(Store::Impl& im, Store::Impl::OpContext& ctx, const State& after,
                    OpResult& res) {
    const MemoryRow& row = ctx.row;
    im.record_rows.set_suspended(row.id, audit_record, false);
    // Bounded mode: resumed tokens evicted on arrival and older evicted tokens leave the file.
    std::int64_t evicted = im.delete_evicted(row.id, ctx.before, ctx.mem, {});
    evicted += im.record_rows.delete_tokens_unless(
        row.id, ts.ids, [&](TokenId id) { return ctx.mem.contains(id); });
    nlohmann::json cert{
        {"operation", "resume"},
        {"record", audit_record},
        {"tokens_restored", ts.size()},
    };
    add_outcome_fields(cert, ctx.mem, after, res.diagnostics);
    if (row.settings.mode == MemoryMode::kBounded) cert["evicted"] = evicted;
    return cert.dump();
  }
};

OpResult Store::suspend_record(const std::string& name, std::int64_t record) {
  check_record(record);
  Impl::SuspendOp op(name, record);
  return impl_->run_op(name, op);
}

OpResult Store::resume_record(const std::string& name, std::int64_t record) {
  check_record(record);
  Impl::ResumeOp op(name, record);
  return impl_->run_op(name, op);
}

// --------------------------------------------------------------------------------- import chunk

static TokenSet record_set(std::int64_t record, const std::vector<Eigen::Index>& rows,
                           const RowMatrix& keys, const RowMatrix& values) {
  TokenSet ts;
  ts.keys.resize(static_cast<Eigen::Index>(rows.size()), keys.cols());
  ts.values.resize(static_cast<Eigen::Index>(rows.size()), values.cols());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    ts.ids.push_back(store_token_id(record, static_cast<std::int64_t>(i)));
    ts.keys.row(static_cast<Eigen::Index>(i)) = keys.row(rows[i]);
    ts.values.row(static_cast<Eigen::Index>(i)) = values.row(rows[i]);
  }
  return ts;
}

struct Store::Impl::ImportChunkOp : Store::Impl::OpSteps<OpResult> {
  const std::string& name;
  const ImportPlan& plan;
  const std::vector<std::size_t>& chunk;
  const RowMatrix& keys;
  const RowMatrix& vals;
  TokenSet ts;
  ImportChunkOp(const std::string& n, const ImportPlan& p, const std::vector<std::size_t>& c,
                const RowMatrix& k, const RowMatrix& v)
      : name(n), plan(p), chunk(c), keys(k), vals(v) {
    operation = "import";
    for (std::size_t i : chunk) records.push_back(plan.records[i]);
    audit_record = records.front();
  }
  void check(std::int64_t record, const RecordRow& rr) const {
    if (rr.exists) {  // another process added it after the resume scan
      throw AlreadyExists("import: memory '" + name + "' already has record " +
                          std::to_string(record));
    }
  }
  void prepare(Store::Impl&, Store::Impl::OpContext& ctx) {
    Eigen::Index n = 0;
    for (std::size_t k : chunk) n += static_cast<Eigen::Index>(plan.rows[k].size());
    ts.keys.resize(n, ctx.row.dim);
    ts.values.resize(n, ctx.row.value_dim);
    Eigen::Index at = 0;
    for (std::size_t k : chunk) {
      const TokenSet part = record_set(plan.records[k], plan.rows[k], keys, vals);
      ts.ids.insert(ts.ids.end(), part.ids.begin(), part.ids.end());
      ts.keys.middleRows(at, part.size()) = part.keys;
      ts.values.middleRows(at, part.size()) = part.values;
      at += part.size();
    }
    ts.validate();
    token_count = ts.size();
  }
  OpDiagnostics apply(Store::Impl::OpContext& ctx) { return ctx.mem.add_batch(ts); }
  std::string write(Store::Impl& im, Store::Impl::OpContext& ctx, const State& after,
                    OpResult& res) {
    im.record_rows.insert(ctx.row.id, records, now_utc());
    im.insert_tokens(ctx.row.id, ts, ctx.mem);
    im.delete_evicted(ctx.row.id, ctx.before, ctx.mem, {});
    nlohmann::json cert{{"operation", "import"},         {"records", records.size()},
                        {"record_ids", records},         {"first_record", records.front()},
                        {"last_record", records.back()}, {"tokens", ts.size()},
                        {"encryption", im.encryption}};
    add_outcome_fields(cert, ctx.mem, after, res.diagnostics);
    return cert.dump();
  }
};

TokenSet store_detail::import_record_set(std::int64_t record, const std::vector<Eigen::Index>& rows,
                                         const RowMatrix& keys, const RowMatrix& values) {
  return record_set(record, rows, keys, values);
}

AuditEntry Store::Impl::import_chunk(const std::string& name, const ImportPlan& plan,
                                     const std::vector<std::size_t>& chunk, const RowMatrix& keys,
                                     const RowMatrix& vals, ImportProgress& totals, bool last) {
  Impl::ImportChunkOp op(name, plan, chunk, keys, vals);
  op.defer_bounds = !last;
  const OpResult res = run_op(name, op);
  totals.records_done += static_cast<std::int64_t>(op.records.size());
  totals.tokens_done += op.ts.size();
  return res.entry;
}

// --------------------------------------------------------------------------------------- create

OpResult Store::create_memory(const std::string& name, const MemorySettings& settings, int dim,
                              int value_dim) {
  validate_memory_name(name);
  impl_->require_writable();
  if (dim < 1)
    throw InvalidArgument("key dimension (dim) must be >= 1, got " + std::to_string(dim));
  if (value_dim < 1) {
    throw InvalidArgument("value dimension must be >= 1, got " + std::to_string(value_dim));
  }
  settings.validate();
  settings.problem.validate();
  Impl& im = *impl_;
  const auto t0 = OpClock::now();
  Impl::Transaction t(im.db, true, im.path, im.options.busy_timeout_ms);
  {
    Impl::Statement q(im.db.handle(), "SELECT 1 FROM memories WHERE name = ?1");
    q.bind(1, name);
    if (q.step())
      throw AlreadyExists("store '" + im.path + "' already has a memory '" + name + "'");
  }
  Memory mem(settings, dim, value_dim);
  const State s = mem.state();
  OpResult res;
  AuditEntry& e = res.entry;
  e.operation = "create";
  e.memory = name;
  e.record = -1;
  e.token_count = 0;
  e.state_before = "";
  e.state_after = s.state_sha256;
  e.certificate = nlohmann::json{
      {"settings", memory_settings_to_json(settings)},
      {"dim", dim},
      {"value_dim", value_dim},
      {"encryption",
       im.encryption}}.dump();
  im.audit.append(e);
  Impl::Statement ins(im.db.handle(),
                      "INSERT INTO memories(name, settings, dim, value_dim, b, status, warmup, "
                      "kkt_max_violation, kkt_sum_error, kkt_box_violation, state_sha256, "
                      "last_audit_seq, created_utc) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
                      "?10, ?11, ?12, ?13)");
  ins.bind(1, name)
      .bind(2, memory_settings_to_json(settings).dump())
      .bind(3, static_cast<std::int64_t>(dim))
      .bind(4, static_cast<std::int64_t>(value_dim))
      .bind(5, s.b)
      .bind(6, to_string(s.status))
      .bind(7, static_cast<std::int64_t>(s.warmup ? 1 : 0))
      .bind(8, s.kkt.max_violation)
      .bind(9, s.kkt.sum_error)
      .bind(10, s.kkt.box_violation)
      .bind(11, s.state_sha256)
      .bind(12, e.seq)
      .bind(13, e.time_utc)
      .run();
  t.commit();
  res.total_seconds = seconds_since(t0);
  return res;
}

}  // namespace svattn
