// `svattn memory ...`: the audited memory store (docs/store.md). Each invocation opens the store,
// runs one operation (one transaction) and closes it. Exit codes: 0 ok, 1 verify found a mismatch,
// 2 bad input / unknown memory or record / not a store / locked / disk full.
#include <fmt/core.h>

#include <cmath>
#include <cstdio>

#include "cli_common.h"
#include "commands.h"
#include "memory_options.h"
#include "record_ids.h"
#include "svattn/io.h"
#include "svattn/store.h"

namespace svattn::cli {
namespace {

struct CreateOptions {
  Common common;
  int dim = 0;
  int value_dim = 0;
  bool value_dim_given = false;  // --value-dim appeared on the command line
  ProblemOptions problem;
  std::string mode = "audit";
  long long budget = 0;
  bool plaintext = false;  // a new store keeps token payloads unencrypted
};

struct AddOptions {
  Common common;
  long long record = -1;
  std::string keys;
  std::string values;
};

struct ImportCliOptions {
  Common common;
  std::string keys;
  std::string values;
  std::string records;
  long long chunk = 128;
};

struct RecordOptions {
  Common common;
  long long record = -1;
  bool no_check = false;
  bool resolve = false;
  int probes = 8;
};

struct ShowOptions {
  Common common;
  bool full = false;
};

struct QueryOptions {
  Common common;
  std::string queries;
};

void print_entry_line(const AuditEntry& e) {
  fmt::print("audit       entry {} ({}), hash {}\n", e.seq, e.time_utc, e.entry_hash);
}

int run_create(const CreateOptions& o) {
  if (o.dim < 1) throw InvalidArgument("--dim must be >= 1, got " + std::to_string(o.dim));
  if (o.value_dim_given && o.value_dim < 1)
    throw InvalidArgument("--value-dim must be >= 1, got " + std::to_string(o.value_dim));
  MemorySettings s;
  s.problem = o.problem.build();
  s.mode = memory_mode_from_string(o.mode);
  if (o.budget < 0) throw InvalidArgument("--budget must be >= 0, got " + std::to_string(o.budget));
  if (o.budget > 0 && s.mode != MemoryMode::kBounded) {
    throw InvalidArgument("--budget applies to --mode bounded only");
  }
  s.token_budget = static_cast<std::size_t>(o.budget);
  s.validate();
  Store::validate_memory_name(o.common.memory);  // before the store file is created
  const int value_dim = o.value_dim_given ? o.value_dim : o.dim;
  StoreOptions so = store_options(o.common, true);
  so.encrypt = !o.plaintext;
  Store store(o.common.store, so);
  if (o.plaintext && store.encryption() != "none") {
    throw InvalidArgument("--plaintext applies to a new store; store '" + store.path() +
                          "' exists and is encrypted (" + store.encryption() + ")");
  }
  const OpResult r = store.create_memory(o.common.memory, s, o.dim, value_dim);
  if (o.common.json) {
    print_json({{"store", store.path()},  // a PostgreSQL URI without its password
                {"memory", o.common.memory},
                {"dim", o.dim},
                {"value_dim", value_dim},
                {"settings", memory_settings_to_json(s)},
                {"encryption", store.encryption()},
                {"state_sha256", r.entry.state_after},
                {"audit", audit_entry_to_json(r.entry)}});
  } else {
    fmt::print(
        "created     memory '{}' in {} (dim {}, value dim {}, {} kernel, C = {}, "
        "ridge = {}, {} mode)\n",
        o.common.memory, store.path(), o.dim, value_dim, o.problem.kernel, s.problem.C,
        s.problem.ridge, o.mode);
    fmt::print("sha256      {}\n", r.entry.state_after);
    fmt::print("encryption  {}{}\n", store.encryption(),
               store.encryption() == "none"
                   ? " (plaintext store: token keys and values are stored unencrypted)"
                   : " (per-record data keys in " + store.key_store_path() +
                         (store.key_wrapping() == "aes-256-gcm" ? ", wrapped by the master key)"
                                                                : ", not wrapped)"));
    print_entry_line(r.entry);
  }
  return 0;
}

int run_add(const AddOptions& o) {
  const RowMatrix keys = read_matrix(o.keys);
  RowMatrix values;
  if (!o.values.empty()) {
    values = read_matrix(o.values);
    if (values.rows() != keys.rows()) {
      throw FormatError("'" + o.keys + "' has " + std::to_string(keys.rows()) + " rows but '" +
                        o.values + "' has " + std::to_string(values.rows()));
    }
  }
  Store store(o.common.store, store_options(o.common));
  const OpResult r =
      store.add_record(o.common.memory, o.record, keys, o.values.empty() ? nullptr : &values);
  // Everything printed below comes from the committed operation's result: nothing after the
  // commit can fail.
  if (o.common.json) {
    print_json({{"memory", o.common.memory},
                {"record", o.record},
                {"tokens", keys.rows()},
                {"memory_tokens", r.memory_tokens},
                {"state_before", r.entry.state_before},
                {"state_sha256", r.entry.state_after},
                {"seconds", {{"memory", r.memory_seconds}, {"total", r.total_seconds}}},
                {"audit", audit_entry_to_json(r.entry)}});
  } else {
    fmt::print(
        "added       record {} to memory '{}': {} tokens (memory now {} tokens, {} records)\n",
        o.record, o.common.memory, keys.rows(), r.memory_tokens, r.memory_records);
    fmt::print("sha256      {} -> {}\n", r.entry.state_before, r.entry.state_after);
    fmt::print("time        {:.4f} s in memory, {:.4f} s total\n", r.memory_seconds,
               r.total_seconds);
    print_entry_line(r.entry);
  }
  return 0;
}

void print_import_progress(const ImportProgress& p, double* last_print) {
  const bool done = p.records_done + p.records_skipped >= p.records_total;
  if (!done && p.seconds - *last_print < 1.0) return;
  *last_print = p.seconds;
  const double rate = p.seconds > 0 ? static_cast<double>(p.records_done) / p.seconds : 0.0;
  const double left = static_cast<double>(p.records_total - p.records_skipped - p.records_done);
  std::fprintf(stderr, "import: %lld/%lld records, %lld tokens, %.1f records/s, ETA %.0f s\n",
               static_cast<long long>(p.records_done + p.records_skipped),
               static_cast<long long>(p.records_total), static_cast<long long>(p.tokens_done), rate,
               rate > 0 ? left / rate : 0.0);
}

int run_import(const ImportCliOptions& o) {
  if (o.chunk < 1) throw InvalidArgument("--chunk must be >= 1, got " + std::to_string(o.chunk));
  const RowMatrix keys = read_matrix(o.keys);
  RowMatrix values;
  if (!o.values.empty()) {
    values = read_matrix(o.values);
    if (values.rows() != keys.rows()) {
      throw FormatError("'" + o.values + "' has " + std::to_string(values.rows()) + " rows but '" +
                        o.keys + "' has " + std::to_string(keys.rows()));
    }
  }
  const std::vector<std::int64_t> ids = read_record_ids(o.records, keys.rows(), o.keys);
  Store store(o.common.store, store_options(o.common));
  ImportOptions io;
  io.chunk_records = o.chunk;
  double last_print = -1e9;
  io.progress = [&](const ImportProgress& p) { print_import_progress(p, &last_print); };
  ImportResult r;
  try {
    r = store.import_records(o.common.memory, ids, keys, o.values.empty() ? nullptr : &values, io);
  } catch (const AlreadyExists& e) {
    throw AlreadyExists("'" + o.records + "': " + e.what());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument("'" + o.records + "': " + e.what());
  }
  if (o.common.json) {
    nlohmann::json entries = nlohmann::json::array();
    for (const AuditEntry& e : r.entries) entries.push_back(audit_entry_to_json(e));
    print_json({{"memory", o.common.memory},
                {"records", r.totals.records_total},
                {"records_imported", r.totals.records_done},
                {"records_skipped", r.totals.records_skipped},
                {"tokens_imported", r.totals.tokens_done},
                {"chunks", r.chunks},
                {"seconds", r.totals.seconds},
                {"state_sha256", r.state_sha256},
                {"audit", entries}});
  } else {
    fmt::print("imported    {} records ({} tokens) into memory '{}' in {} chunks, {:.2f} s\n",
               r.totals.records_done, r.totals.tokens_done, o.common.memory, r.chunks,
               r.totals.seconds);
    if (r.totals.records_skipped > 0) {
      fmt::print("skipped     {} records already in the memory with identical tokens\n",
                 r.totals.records_skipped);
    }
    fmt::print("sha256      {}\n", r.state_sha256);
  }
  return 0;
}

int run_forget(const RecordOptions& o) {
  StoreOptions so = store_options(o.common);
  so.certificate_check = !o.no_check;
  so.certificate_resolve = o.resolve;
  so.certificate_probes = o.probes;
  Store store(o.common.store, so);
  const ForgetResult r = store.forget_record(o.common.memory, o.record);
  if (!r.wal_truncated && r.certificate.store && r.certificate.store->erasure_basis.empty()) {
    std::fprintf(stderr,
                 "svattn: warning: the WAL checkpoint could not complete (another connection is "
                 "reading); the erased bytes leave the -wal file at its next checkpoint\n");
  }
  if (o.common.json) {
    print_json({{"memory", o.common.memory},
                {"record", o.record},
                {"tokens_erased", r.entry.token_count},
                {"state_before", r.entry.state_before},
                {"state_sha256", r.entry.state_after},
                {"wal_truncated", r.wal_truncated},
                {"seconds",
                 {{"memory", r.memory_seconds},
                  {"certificate", r.certificate_seconds},
                  {"total", r.total_seconds}}},
                {"certificate", r.certificate.to_json()},
                {"audit", audit_entry_to_json(r.entry)}});
  } else {
    fmt::print("forgot      record {} of memory '{}': {} tokens erased\n", o.record,
               o.common.memory, r.entry.token_count);
    fmt::print("sha256      {} -> {}\n", r.entry.state_before, r.entry.state_after);
    fmt::print("time        {:.4f} s decrement, {:.4f} s certificate, {:.4f} s total\n",
               r.memory_seconds, r.certificate_seconds, r.total_seconds);
    print_entry_line(r.entry);
    fmt::print("certificate\n{}\n", r.certificate.to_json().dump(2));
  }
  return 0;
}

int run_suspend_resume(const RecordOptions& o, bool suspend) {
  Store store(o.common.store, store_options(o.common));
  const OpResult r = suspend ? store.suspend_record(o.common.memory, o.record)
                             : store.resume_record(o.common.memory, o.record);
  if (o.common.json) {
    print_json({{"memory", o.common.memory},
                {"record", o.record},
                {"operation", suspend ? "suspend" : "resume"},
                {"tokens", r.entry.token_count},
                {"state_before", r.entry.state_before},
                {"state_sha256", r.entry.state_after},
                {"audit", audit_entry_to_json(r.entry)}});
  } else {
    fmt::print("{}   record {} of memory '{}' ({} tokens{})\n", suspend ? "suspended" : "resumed  ",
               o.record, o.common.memory, r.entry.token_count,
               suspend ? ", kept in the store, excluded from the memory" : "");
    fmt::print("sha256      {} -> {}\n", r.entry.state_before, r.entry.state_after);
    print_entry_line(r.entry);
  }
  return 0;
}

// The summary reads the memory row and index counts only (no token data); --full and --json read
// the whole stored state.
void print_show_summary(const MemoryInfo& info, const std::string& store) {
  fmt::print("memory      '{}' in {} ({} mode)\n", info.name, store, to_string(info.settings.mode));
  fmt::print("tokens      {} (dim {}, value dim {}), margin {}, error {}, reserve {}\n",
             info.tokens, info.dim, info.value_dim, info.margin, info.error,
             info.tokens - info.margin - info.error);
  fmt::print("status      {}{}, b = {:.17g}\n", to_string(info.status),
             info.warmup ? " (warm-up)" : "", info.b + 0.0);
  fmt::print("sha256      {}\n", info.state_sha256);
  fmt::print("records     {} ({} suspended), {} token rows stored, last audit entry {}\n",
             info.records, info.suspended_records, info.stored_tokens, info.last_audit_seq);
  if (info.shredded_records > 0) {
    fmt::print(
        "shredded    {} records: their data keys were destroyed (erased after this copy was "
        "made); they cannot be decrypted and are excluded (sha256 above is the memory without "
        "them; the file's row says {}; a writing command purges them)\n",
        info.shredded_records, info.file_state_sha256);
  }
}

int run_show(const ShowOptions& so) {
  const Common& o = so.common;
  Store store(o.store, read_only_options(o, false));
  const MemoryInfo info = store.memory_info(o.memory);
  if (!o.json && !so.full) {
    print_show_summary(info, store.path());
    fmt::print(
        "            (--full lists every record and support coefficient; --json everything)\n");
    return 0;
  }
  const State state = store.stored_state(o.memory);
  const std::vector<RecordInfo> recs = store.records(o.memory);
  if (o.json) {
    nlohmann::json j = state_to_json(state);
    j["memory"] = info.name;
    j["memory_settings"] = memory_settings_to_json(info.settings);
    nlohmann::json rj = nlohmann::json::array();
    for (const RecordInfo& r : recs) {
      rj.push_back({{"record", r.record},
                    {"tokens", r.tokens},
                    {"suspended", r.suspended},
                    {"shredded", r.shredded}});
    }
    j["records"] = rj;
    j["stored_tokens"] = info.stored_tokens;
    j["shredded_records"] = info.shredded_records;
    j["file_state_sha256"] = info.file_state_sha256;
    j["last_audit_seq"] = info.last_audit_seq;
    print_json(j);
    return 0;
  }
  print_show_summary(info, store.path());
  print_state_summary(state);
  for (std::size_t t = 0; t < state.ids.size(); ++t) {
    if (state.alpha[t] != 0) {
      fmt::print("  token {:>20}  alpha {:.17g}\n", state.ids[t], state.alpha[t]);
    }
  }
  for (const RecordInfo& r : recs) {
    fmt::print("  record {:>12}  {:>7} tokens{}{}\n", r.record, r.tokens,
               r.suspended ? "  (suspended)" : "", r.shredded ? "  (shredded: key destroyed)" : "");
  }
  return 0;
}

int run_query(const QueryOptions& o) {
  const RowMatrix queries = read_matrix(o.queries);
  Store store(o.common.store, read_only_options(o.common, false));
  const RowMatrix out = store.query(o.common.memory, queries);
  const std::vector<double> f = store.decision(o.common.memory, queries);
  const MemoryInfo info = store.memory_info(o.common.memory);
  const std::string& sha = info.state_sha256;
  if (info.shredded_records > 0) {
    std::fprintf(stderr,
                 "svattn: note: memory '%s' has %d shredded records (data keys destroyed); they "
                 "are excluded and the readouts are those of the memory without them\n",
                 o.common.memory.c_str(), info.shredded_records);
  }
  if (o.common.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (Eigen::Index i = 0; i < out.rows(); ++i) {
      std::vector<double> r(out.row(i).data(), out.row(i).data() + out.cols());
      rows.push_back(r);
    }
    print_json({{"memory", o.common.memory},
                {"state_sha256", sha},
                {"shredded_records", info.shredded_records},
                {"n", out.rows()},
                {"value_dim", out.cols()},
                {"readouts", rows},
                {"decision", f}});
  } else {
    fmt::print("# memory '{}', state {}\n# query  decision  readout[0..{}]\n", o.common.memory, sha,
               out.cols() - 1);
    for (Eigen::Index i = 0; i < out.rows(); ++i) {
      fmt::print("{:>7}  {:>+.6e}", i, f[static_cast<std::size_t>(i)]);
      for (Eigen::Index k = 0; k < out.cols(); ++k) fmt::print("  {:.10g}", out(i, k));
      fmt::print("\n");
    }
  }
  return 0;
}

// The re-solve column of a memory's verify line.
std::string resolve_word(const MemoryVerification& m) {
  if (!m.shredded_records.empty())
    return fmt::format("without {} shredded record(s)", m.shredded_records.size());
  return m.resolve_equal ? "equal" : "DIFFERENT";
}

// --repair opens the store for writing first: pending key destructions are completed and shredded
// records purged (docs/store.md "Shredded records"), then the file is verified.
int run_verify(const Common& o, bool repair) {
  Store store(o.store, repair ? store_options(o) : read_only_options(o));
  const StoreVerification v = store.verify();
  if (o.json) {
    print_json(verification_to_json(v));
  } else {
    for (const ShreddedRecord& r : store.shredded_records()) {
      fmt::print("shredded    record {} of memory '{}' (data key {} destroyed {}){}\n", r.record,
                 r.memory, r.key_id, r.destroyed_utc,
                 r.purged ? ": purged now (audit entry 'purge')" : ": excluded");
    }
    fmt::print("integrity   {}\n", !v.integrity_checked ? "not checked (PostgreSQL)"
                                    : v.integrity_ok       ? "ok"
                                                           : "FAILED");
    fmt::print("audit chain {} ({} entries, head {})\n", v.chain_ok ? "ok" : "BROKEN",
               v.audit_entries, v.audit_head);
    for (const MemoryVerification& m : v.memories) {
      fmt::print("memory      '{}': {} ({} tokens, stored {}, re-solve {}, verify_state {})\n",
                 m.name, m.ok() ? "ok" : "MISMATCH", m.tokens, m.stored_sha256.substr(0, 16),
                 resolve_word(m), m.report.ok() ? "ok" : "FAILED");
    }
    for (const std::string& p : v.problems) fmt::print("problem     {}\n", p);
    for (const std::string& n : v.notes) fmt::print("note        {}\n", n);
    fmt::print("result      {}\n", v.ok() ? "ok" : "MISMATCH");
  }
  std::fflush(stdout);
  return v.ok() ? 0 : 1;
}

int run_encrypt(const Common& o) {
  const StoreEncryptionResult r = encrypt_store(o.store, store_options(o));
  if (o.json) {
    print_json(encryption_result_to_json(r));
    return 0;
  }
  if (r.converted) {
    fmt::print(
        "encrypted   {}: {} records ({} token rows) sealed under fresh data keys in {}"
        " (key wrapping: {})\n",
        r.path, r.records, r.tokens, r.key_store, r.wrapping);
    if (r.residual.empty()) {
      fmt::print("scrubbed    free pages rebuilt (VACUUM), WAL {}\n",
                 r.wal_truncated ? "truncated" : "NOT truncated (another connection is reading)");
    } else {
      fmt::print("scrubbed    tables rewritten (VACUUM FULL)\nwarning     {}\n", r.residual);
    }
    print_entry_line(r.entry);
  } else {
    fmt::print("encrypted   {} was already encrypted: nothing to convert{}\n", r.path,
               r.scrubbed ? "; the interrupted free-space scrub was completed" : "");
  }
  for (const auto& [name, sha] : r.state_sha256.items()) {
    fmt::print("memory      '{}' sha256 {} (unchanged)\n", name, sha.get<std::string>());
  }
  return 0;
}

int run_backup(const Common& o, const std::string& destination) {
  const StoreBackup b = backup_store(o.store, destination);
  if (o.json) {
    print_json(backup_to_json(b));
  } else {
    fmt::print("backup      {} ({} bytes, sha256 {}, integrity {}, {:.3f} s)\n", b.destination,
               b.bytes, b.sha256, b.integrity_ok ? "ok" : "FAILED", b.seconds);
    fmt::print("keys        {}\n", b.note);
  }
  return b.integrity_ok ? 0 : 1;
}

int run_audit(const Common& o) {
  Store store(o.store, read_only_options(o));
  const std::vector<AuditEntry> entries = store.audit();
  if (o.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const AuditEntry& e : entries) arr.push_back(audit_entry_to_json(e));
    print_json({{"store", store.path()}, {"entries", arr}});
  } else {
    fmt::print(
        "# seq  time_utc                  operation  memory  record  tokens  "
        "state_before -> state_after  entry_hash\n");
    for (const AuditEntry& e : entries) {
      fmt::print("{:>5}  {}  {:<9}  {}  {}  {}  {} -> {}  {}\n", e.seq, e.time_utc, e.operation,
                 e.memory, e.record >= 0 ? std::to_string(e.record) : std::string("-"),
                 e.token_count,
                 e.state_before.empty() ? std::string("-") : e.state_before.substr(0, 16),
                 e.state_after.substr(0, 16), e.entry_hash);
    }
  }
  return 0;
}

Registrar reg("memory", [](CLI::App& app, int& exit_code) {
  auto* mem = app.add_subcommand(
      "memory", "Audited persistent memories: records in, queries out, erasure with certificates");
  mem->require_subcommand(1);

  static CreateOptions create;
  auto* c = mem->add_subcommand("create", "Create a memory (and the store file if missing)");
  add_store_arg(c, create.common, true);
  c->add_option("--dim", create.dim, "key dimension (>= 1)")->required();
  CLI::Option* value_dim =
      c->add_option("--value-dim", create.value_dim, "value dimension (>= 1; default: --dim)");
  add_problem_options(c, create.problem);
  c->add_option("--mode", create.mode, "audit (keep every token) | bounded (evict reserve tokens)")
      ->capture_default_str()
      ->check(CLI::IsMember({"audit", "bounded"}));
  c->add_option("--budget", create.budget,
                "bounded mode: evict reserve tokens only while the memory holds more (0 = always)");
  c->add_flag("--plaintext", create.plaintext,
              "a new store keeps token keys and values unencrypted (default: AES-256-GCM per "
              "record, data keys in STORE.keys)");
  c->callback([&exit_code, value_dim] {
    create.value_dim_given = value_dim->count() > 0;
    exit_code = run_create(create);
  });

  static AddOptions add;
  auto* a = mem->add_subcommand("add", "Add a record's tokens (position = row index)");
  add_store_arg(a, add.common, true);
  a->add_option("--record", add.record, "record id in [0, 2^40)")->required();
  a->add_option("--keys", add.keys, "keys: .csv or .npy")->required();
  a->add_option("--values", add.values, "values (same rows); default: the keys");
  a->callback([&exit_code] { exit_code = run_add(add); });

  static ImportCliOptions import;
  auto* im = mem->add_subcommand(
      "import",
      "Bulk import: keys with one record id per row, one transaction per chunk, resumable");
  add_store_arg(im, import.common, true);
  im->add_option("--keys", import.keys, "keys: .csv or .npy")->required();
  im->add_option("--values", import.values, "values (same rows); default: the keys");
  im->add_option("--records", import.records,
                 "record id of each key row: .csv or .npy, one column (a record's positions are "
                 "its rows in file order)")
      ->required();
  im->add_option("--chunk", import.chunk, "records per transaction")->capture_default_str();
  im->callback([&exit_code] { exit_code = run_import(import); });

  static RecordOptions forget;
  auto* f = mem->add_subcommand("forget",
                                "Erase a record: decrement, certificate, secure delete; in an "
                                "encrypted store its data key is destroyed");
  add_store_arg(f, forget.common, true);
  f->add_option("--record", forget.record, "record id")->required();
  f->add_flag("--no-check", forget.no_check,
              "skip the certificate's independent optimality check of the state after removal");
  f->add_flag("--resolve", forget.resolve,
              "also compare with a from-scratch batch re-solve on the remaining tokens (one full "
              "solve)");
  f->add_option("--probes", forget.probes, "probe queries of the --resolve readout comparison")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  f->callback([&exit_code] { exit_code = run_forget(forget); });

  static RecordOptions suspend;
  auto* s = mem->add_subcommand("suspend", "Exclude a record from the memory, keeping its data");
  add_store_arg(s, suspend.common, true);
  s->add_option("--record", suspend.record, "record id")->required();
  s->callback([&exit_code] { exit_code = run_suspend_resume(suspend, true); });

  static RecordOptions resume;
  auto* r = mem->add_subcommand("resume", "Add a suspended record back to the memory");
  add_store_arg(r, resume.common, true);
  r->add_option("--record", resume.record, "record id")->required();
  r->callback([&exit_code] { exit_code = run_suspend_resume(resume, false); });

  static ShowOptions show;
  auto* sh = mem->add_subcommand("show", "Print a summary of a memory's stored canonical state");
  add_store_arg(sh, show.common, true);
  sh->add_flag("--full", show.full, "also list every record and support coefficient (alpha)");
  sh->callback([&exit_code] { exit_code = run_show(show); });

  static QueryOptions query;
  auto* q = mem->add_subcommand("query", "Readouts o(q) of query rows");
  add_store_arg(q, query.common, true);
  q->add_option("--queries", query.queries, "queries: .csv or .npy")->required();
  q->callback([&exit_code] { exit_code = run_query(query); });

  static Common verify;
  static bool repair = false;
  auto* v = mem->add_subcommand(
      "verify",
      "Check the audit chain and every memory against a from-scratch solve (exit 1 on "
      "a mismatch)");
  add_store_arg(v, verify, false);
  v->add_flag("--repair", repair,
              "open for writing first: complete pending key destructions and purge shredded "
              "records (a restored backup), logged in the audit chain");
  v->callback([&exit_code] { exit_code = run_verify(verify, repair); });

  static Common encrypt;
  auto* en = mem->add_subcommand(
      "encrypt",
      "Encrypt a plaintext store in place (fresh data key per record, rows rewritten, file "
      "rebuilt, WAL truncated; on PostgreSQL the tables are rewritten with VACUUM FULL and a "
      "warning says what may persist); a no-op on an encrypted store");
  add_store_arg(en, encrypt, false);
  en->callback([&exit_code] { exit_code = run_encrypt(encrypt); });

  static Common audit;
  static Common backup;
  static std::string backup_dest;
  auto* bk = mem->add_subcommand(
      "backup", "Consistent online copy of the store's data file to DEST (keys not included)");
  add_store_arg(bk, backup, false, false);
  bk->add_option("DEST", backup_dest, "new file for the copy (must not exist)")->required();
  bk->callback([&exit_code] { exit_code = run_backup(backup, backup_dest); });
  auto* au = mem->add_subcommand("audit", "Print the audit log");
  add_store_arg(au, audit, false);
  au->callback([&exit_code] { exit_code = run_audit(audit); });
});

}  // namespace
}  // namespace svattn::cli
