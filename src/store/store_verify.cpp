// Store::verify (docs/store.md "Verification"): SQLite structure, the audit chain, and every
// memory's stored state against a batch re-solve of its stored tokens and verify_state.
#include <cmath>
#include <map>

#include "store_impl.h"
#include "svattn/batch_solver.h"
#include "svattn/kernel.h"

namespace svattn {

using namespace store_detail;

StoreVerification Store::verify() const {
  Impl& im = *impl_;
  StoreVerification v;
  im.read([&] {
    if (!im.tables_present(v.problems)) return 0;             // nothing further can be read
    const std::vector<AuditEntry> entries = im.audit.read();  // same snapshot as the memories
    // 1. SQLite structure (on PostgreSQL page integrity is the server's: not checked here).
    if (im.db.postgres()) {
      v.integrity_checked = false;
      v.notes.push_back(
          "integrity: not checked (a PostgreSQL store has no PRAGMA integrity_check; the server's "
          "page checksums and pg_amcheck cover it)");
    } else {
      const std::string first = im.db.integrity_check(false);
      v.integrity_ok = first == "ok";
      if (!v.integrity_ok) v.problems.push_back("integrity_check: " + first);
    }
    for (const char* trig : {"audit_no_update", "audit_no_delete"}) {
      if (!im.db.has_trigger(trig))
        v.problems.push_back(std::string("audit protection trigger '") + trig + "' is missing");
    }
    // 2. The audit chain.
    std::map<std::string, std::pair<std::string, std::int64_t>>
        last_state;  // memory -> (hash, seq)
    im.audit.check(entries, v, last_state);
    if (!im.foreign_key_store.empty()) {  // no memory's sealed rows can be read
      v.problems.push_back(im.foreign_key_store);
      return 0;
    }
    // 3. Every memory: stored state vs batch re-solve of the stored tokens, and verify_state.
    std::vector<std::string> names;
    {
      Statement q(im.db.handle(), "SELECT name FROM memories ORDER BY name");
      while (q.step()) names.push_back(q.text(0));
    }
    for (const std::string& name : names) {
      MemoryRow row;
      try {  // an edited row (settings that are not valid) is a finding, not a failure of verify
        row = im.read_memory_row(name);
      } catch (const InvalidArgument& e) {
        v.problems.push_back("memory '" + name + "': its row does not read: " + e.what());
        continue;
      } catch (const FormatError& e) {
        v.problems.push_back("memory '" + name + "': its row does not read: " + e.what());
        continue;
      }
      const auto it = last_state.find(row.name);
      v.memories.push_back(im.verify_memory(row, it == last_state.end() ? nullptr : &it->second,
                                            entries, v.problems, v.notes));
      // What the chain says must exist: settings, records, suspended tokens, live keys.
      const std::size_t before = v.problems.size();
      im.check_chain_records(row, entries, v.problems);
      if (v.problems.size() != before) v.memories.back().fields_ok = false;
    }
    im.check_pending_shreds(v.problems);
    im.check_orphans(v.problems);
    if (im.scrub_pending()) {
      v.notes.push_back(
          "an encryption conversion committed but its free-space scrub did not "
          "finish: freed pages may still hold plaintext; run `svattn memory "
          "encrypt` again to finish it");
    }
    for (const auto& [mem_name, st] : last_state) {
      Statement q(im.db.handle(), "SELECT 1 FROM memories WHERE name = ?1");
      q.bind(1, mem_name);
      if (!q.step())
        v.problems.push_back("audit log mentions memory '" + mem_name + "' which is missing");
    }
    return 0;
  });
  return v;
}

bool Store::Impl::tables_present(std::vector<std::string>& problems) {
  bool all = true;
  std::vector<const char*> tables = {"meta", "memories", "records", "tokens", "support", "audit"};
  if (schema_version >= 2) tables.push_back("screening");
  if (schema_version >= kFirstSchemaWithBoundsGroups) tables.push_back("bounds_groups");
  for (const char* table : tables) {
    if (!db.has_table(table)) {
      problems.push_back(std::string("table '") + table + "' is missing");
      all = false;
    }
  }
  return all;
}

void Store::Impl::check_orphans(std::vector<std::string>& problems) {
  const auto [record_orphans, token_orphans] = record_rows.orphan_rows();
  std::vector<std::pair<const char*, std::int64_t>> orphans = {{"records", record_orphans},
                                                               {"tokens", token_orphans}};
  std::vector<const char*> tables = {"support"};
  if (schema_version >= 2) tables.push_back("screening");
  if (schema_version >= kFirstSchemaWithBoundsGroups) tables.push_back("bounds_groups");
  for (const char* table : tables) {
    const std::string sql = std::string("SELECT count(*) FROM ") + table +
                            " WHERE memory_id NOT IN (SELECT id FROM memories)";
    orphans.emplace_back(table, db.query_int(sql));
  }
  for (const auto& [table, n] : orphans) {
    if (n != 0) {
      problems.push_back(std::to_string(n) + " row(s) of table '" + table +
                         "' belong to no memory (memories.id edited or rows inserted)");
    }
  }
  if (schema_version < kFirstSchemaWithBoundsGroups) return;
  // Every record in a bounds group that exists, and no group without a record (docs/store.md
  // "Bounds groups": a group is deleted with its last record).
  const std::int64_t unplaced = record_rows.records_without_group();
  if (unplaced != 0) {
    problems.push_back(std::to_string(unplaced) +
                       " record(s) have no bounds group, or name one that does not exist");
  }
  const std::int64_t empty = record_rows.groups_without_record();
  if (empty != 0)
    problems.push_back(std::to_string(empty) + " bounds group(s) have no record");
}

namespace {

// Every stored field of the memories row against the re-derived state.
void compare_fields(const MemoryRow& row, const State& derived, bool exact,
                    std::vector<std::string>& out) {
  const std::string m = "memory '" + row.name + "': stored ";
  auto bits = [&](const char* field, double stored, double want) {
    if (!same_bits(stored, want)) {
      out.push_back(m + field + " " + std::to_string(stored) + " differs from the re-derived " +
                    std::to_string(want));
    }
  };
  if (row.warmup != derived.warmup) out.push_back(m + "warmup differs from the re-derived state");
  if (!exact) return;  // non-unique optimum: only the hash chain and verify_state speak
  if (row.status != derived.status) {
    out.push_back(m + "status '" + to_string(row.status) + "' differs from the re-derived '" +
                  to_string(derived.status) + "'");
  }
  bits("b", row.b, derived.b);
  bits("kkt_max_violation", row.kkt.max_violation, derived.kkt.max_violation);
  bits("kkt_sum_error", row.kkt.sum_error, derived.kkt.sum_error);
  bits("kkt_box_violation", row.kkt.box_violation, derived.kkt.box_violation);
}

}  // namespace

// The persisted screening bounds (docs/store.md "Persisted screening"): intact, and a lower bound
// of every reserve token's exact gradient g_i = sum_j a_j k(x_i, x_j) - k(x_i, x_i) / 2 + b.
void Store::Impl::check_screening(const MemoryRow& row, const TokenSet& tokens, const State& stored,
                                  std::vector<std::string>& problems) {
  std::string problem;
  const std::vector<double> bounds = read_screening(row, tokens.ids, &problem);
  if (!problem.empty()) {
    problems.push_back("memory '" + row.name + "': persisted screening bounds: " + problem);
    return;
  }
  if (bounds.empty()) return;
  const KernelSettings& ks = row.settings.problem.kernel;
  std::vector<Eigen::Index> support;
  for (std::size_t t = 0; t < stored.alpha.size(); ++t)
    if (stored.alpha[t] != 0.0) support.push_back(static_cast<Eigen::Index>(t));
  const double scale = 1.0 + std::abs(stored.b);
  for (Eigen::Index i = 0; i < tokens.size(); ++i) {
    if (stored.alpha[static_cast<std::size_t>(i)] != 0.0) continue;
    const double* xi = tokens.keys.row(i).data();
    double g = stored.b - kernel(ks, xi, xi, row.dim) / 2;
    for (Eigen::Index j : support)
      g += stored.alpha[static_cast<std::size_t>(j)] *
           kernel(ks, xi, tokens.keys.row(j).data(), row.dim);
    if (bounds[static_cast<std::size_t>(i)] > g + 1e-9 * scale) {
      problems.push_back("memory '" + row.name + "': persisted screening bound of token " +
                         std::to_string(tokens.ids[static_cast<std::size_t>(i)]) + " (" +
                         std::to_string(bounds[static_cast<std::size_t>(i)]) +
                         ") exceeds its gradient " + std::to_string(g));
      return;
    }
  }
}

// The persisted bucket digests of the active records (docs/store.md "Forget without a restore")
// are those of the stored tokens (schema >= 4, audit mode).
void Store::Impl::check_buckets(const MemoryRow& row, const TokenSet& tokens,
                                std::vector<std::string>& problems) {
  if (schema_version < kFirstSchemaWithHashV2 || row.settings.mode != MemoryMode::kAudit) return;
  std::vector<BucketDigest> stored;
  std::size_t first = 0, count = 0;
  bool ok = false;
  try {
    ok = read_active_buckets(row, -1, stored, first, count);
  } catch (const FormatError& e) {
    problems.push_back("memory '" + row.name + "': persisted bucket digests: " + e.what());
    return;
  }
  if (!ok) {
    problems.push_back("memory '" + row.name +
                       "': a record's persisted bucket digests are missing or malformed");
  } else if (stored != record_buckets(tokens)) {
    problems.push_back("memory '" + row.name +
                       "': the persisted bucket digests do not match the stored tokens");
  }
}

void Store::Impl::check_token_rows(const MemoryRow& row, const std::vector<AuditEntry>& entries,
                                   std::vector<std::string>& problems) {
  const std::int64_t inconsistent = record_rows.inconsistent_token_rows(row.id);
  if (inconsistent != 0) {
    problems.push_back("memory '" + row.name + "': " + std::to_string(inconsistent) +
                       " token rows with inconsistent record/position/id");
  }
  for (const AuditEntry& e : entries) {
    if (e.operation == "create" && e.memory == row.name) {
      Statement q(db.handle(), "SELECT created_utc FROM memories WHERE id = ?1");
      q.bind(1, row.id);
      if (q.step() && q.text(0) != e.time_utc) {
        problems.push_back("memory '" + row.name + "': stored created_utc '" + q.text(0) +
                           "' is not the time of its create entry '" + e.time_utc + "'");
      }
      break;
    }
  }
}

MemoryVerification Store::Impl::verify_memory(
    const MemoryRow& row, const std::pair<std::string, std::int64_t>* last_audit,
    const std::vector<AuditEntry>& entries, std::vector<std::string>& problems,
    std::vector<std::string>& notes) {
  if (has_shredded(row.id)) return verify_shredded(row, last_audit, problems, notes);
  MemoryVerification mv;
  mv.name = row.name;
  mv.stored_sha256 = row.state_sha256;
  const std::size_t problems_before = problems.size();
  TokenSet tokens;
  try {
    tokens = load_active_tokens(row);
  } catch (const FormatError& e) {  // a payload that fails authentication or has a wrong size
    problems.push_back("memory '" + row.name + "': " + e.what());
    return mv;
  }
  mv.tokens = tokens.size();
  check_token_rows(row, entries, problems);
  State stored;
  try {
    stored = load_state(row, tokens.ids);
  } catch (const FormatError& e) {
    problems.push_back(e.what());  // load_state names the memory
    return mv;
  }
  adopt_current_hash(row, tokens, stored);  // a file older than schema 4 (read-only)
  BatchSettings bs;
  bs.problem = row.settings.problem;
  bs.tolerances = row.settings.tolerances;
  const BatchResult br = solve_batch(tokens, bs);
  mv.resolved_sha256 = br.state.state_sha256;
  mv.resolve_equal = br.state.state_sha256 == stored.state_sha256;
  mv.report = verify_state(tokens, stored, row.settings.tolerances, false);
  mv.audit_consistent = last_audit != nullptr && last_audit->first == row.state_sha256 &&
                        last_audit->second == row.last_audit_seq;
  // Ridge 0 with duplicate keys: a verified-optimal stored state may differ from the re-solve's
  // equally optimal one. That is "uniqueness not established", not tampering.
  mv.uniqueness_not_established = !mv.resolve_equal && mv.report.ok() && !mv.report.unique;
  if (mv.uniqueness_not_established) {
    notes.push_back("memory '" + row.name + "': uniqueness not established (" +
                    mv.report.uniqueness_reason +
                    "): the stored state is verified optimal but differs from the re-solve " +
                    br.state.state_sha256.substr(0, 16) + "…, which is equally optimal");
  } else if (!mv.resolve_equal) {
    problems.push_back("memory '" + row.name + "': stored state " + row.state_sha256.substr(0, 16) +
                       "… differs from the batch re-solve " + br.state.state_sha256.substr(0, 16) +
                       "… of its stored tokens");
  }
  if (!mv.report.ok()) {
    problems.push_back("memory '" + row.name + "': verify_state failed (feasible " +
                       std::to_string(mv.report.feasible) + ", kkt " +
                       std::to_string(mv.report.kkt_ok) + ", hash " +
                       std::to_string(mv.report.hash_ok) + ")");
  }
  if (!mv.audit_consistent) {
    problems.push_back("memory '" + row.name +
                       "': stored state is not the last state recorded in the audit log");
  }
  compare_fields(row, br.state, mv.resolve_equal, problems);
  check_screening(row, tokens, stored, problems);
  check_buckets(row, tokens, problems);
  mv.fields_ok = problems.size() == problems_before;
  return mv;
}

}  // namespace svattn
