// Records whose data key is destroyed but whose ciphertext is in the file -- a copy of the data
// file from before their erasure, restored next to the current key store (docs/store.md "Shredded
// records"): finding them on open, purging them on a writable open (rows deleted, memory re-solved
// from the remaining tokens, audit entry "purge"), and excluding them on a read-only open.
#include <algorithm>
#include <cstdio>
#include <map>

#include "store_impl.h"
#include "svattn/batch_solver.h"

namespace svattn {

using namespace store_detail;

nlohmann::json shredded_record_to_json(const ShreddedRecord& r) {
  return {{"memory", r.memory}, {"record", r.record},
          {"key_id", r.key_id}, {"destroyed_utc", r.destroyed_utc},
          {"tokens", r.tokens}, {"suspended", r.suspended},
          {"purged", r.purged}};
}

const std::vector<ShreddedRecord>& Store::shredded_records() const { return impl_->shredded_found; }
const std::vector<AuditEntry>& Store::purge_entries() const { return impl_->purge_log; }

namespace {

// The batch re-solve of `tokens` as an in-RAM memory (the state of a store that holds exactly
// these tokens; docs/store.md "Token identity").
std::unique_ptr<Memory> solve_from(const MemoryRow& row, const TokenSet& tokens) {
  if (tokens.size() == 0) return std::make_unique<Memory>(row.settings, row.dim, row.value_dim);
  BatchSettings bs;
  bs.problem = row.settings.problem;
  bs.tolerances = row.settings.tolerances;
  const BatchResult br = solve_batch(tokens, bs);
  return std::make_unique<Memory>(Memory::restore(row.settings, tokens, br.state));
}

}  // namespace

void Store::Impl::find_shredded() {
  shredded.clear();
  shredded_found.clear();
  if (!vault.enabled() || !has_key_id_column) return;
  std::vector<KeyLookup> tombs;
  for (KeyLookup& k : vault.keys().tombstones()) {
    if (!k.owner.is_bounds_group()) tombs.push_back(std::move(k));  // a group seals no rows
  }
  // The tombstones' records, up to kShredQueryChunk per query by their primary key (one round
  // trip per chunk on PostgreSQL, not one per erased record), in ascending (memory, record); the
  // last query asks for exactly the records left, so that a store with a few erasures does not
  // plan and run a 64-pair lookup on every open. A record is shredded when its row names a
  // destroyed key: one re-added after its erasure has a new key.
  constexpr std::size_t kShredQueryChunk = 64;
  // Every tombstone of a record (erased, re-added under a new key, erased again: two).
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<const KeyLookup*>> by_record;
  for (const KeyLookup& k : tombs) by_record[{k.owner.memory_id, k.owner.record_id}].push_back(&k);
  std::vector<std::pair<std::int64_t, std::int64_t>> recs;
  for (const auto& [rec, ks] : by_record) recs.push_back(rec);
  for (std::size_t first = 0; first < recs.size(); first += kShredQueryChunk) {
    const std::size_t chunk = std::min(kShredQueryChunk, recs.size() - first);
    const std::vector<std::pair<std::int64_t, std::int64_t>> pairs(
        recs.begin() + static_cast<std::ptrdiff_t>(first),
        recs.begin() + static_cast<std::ptrdiff_t>(first + chunk));
    for (const RecordRows::KeyedRecord& row : record_rows.lookup_keyed(pairs)) {
      for (const KeyLookup* k : by_record.at({row.memory_id, row.record})) {
        if (k->key_id != row.key_id) continue;
        ShreddedRecord r;
        r.memory = row.memory;
        r.record = k->owner.record_id;
        r.key_id = k->key_id;
        r.destroyed_utc = k->destroyed_utc;
        r.suspended = row.suspended;
        r.tokens = row.token_rows;
        shredded[k->owner.memory_id][r.record] = shredded_found.size();
        shredded_found.push_back(std::move(r));
      }
    }
  }
}

bool Store::Impl::is_shredded(std::int64_t memory_id, std::int64_t record) const {
  const auto it = shredded.find(memory_id);
  return it != shredded.end() && it->second.count(record) > 0;
}

Cached& Store::Impl::load_without_shredded(const MemoryRow& row) {
  auto it = cache.find(row.name);
  if (it != cache.end() && it->second.id == row.id && it->second.seq == row.last_audit_seq) {
    return it->second;
  }
  Cached c;
  c.id = row.id;
  c.seq = row.last_audit_seq;
  c.memory = solve_from(row, load_active_tokens(row));  // excludes the shredded records
  RestoreReport rep;
  rep.restored = true;
  rep.resolved = true;
  restores[row.name] = rep;
  return cache[row.name] = std::move(c);
}

void Store::Impl::describe_without_shredded(const MemoryRow& row, MemoryInfo& info) {
  const State& s = ensure_loaded(row).memory->state();
  for (const auto& [record, index] : shredded.at(row.id)) {
    const ShreddedRecord& r = shredded_found[index];
    ++info.shredded_records;
    if (!r.suspended) info.tokens -= static_cast<int>(r.tokens);
  }
  info.state_sha256 = s.state_sha256;
  info.b = s.b;
  info.status = s.status;
  info.warmup = s.warmup;
  info.margin = static_cast<int>(s.partition.margin.size());
  info.error = static_cast<int>(s.partition.error.size());
}

namespace {

std::string purge_certificate(const std::vector<const ShreddedRecord*>& recs, std::int64_t tokens,
                              std::int64_t removed) {
  nlohmann::json list = nlohmann::json::array();
  for (const ShreddedRecord* r : recs) {
    list.push_back({{"record", r->record},
                    {"data_key_id", r->key_id},
                    {"destroyed_utc", r->destroyed_utc},
                    {"token_rows", r->tokens},
                    {"suspended", r->suspended}});
  }
  return nlohmann::json{{"operation", "purge"},
                        {"reason",
                         "the records' data keys were destroyed (erased after this copy of the "
                         "data file was made); their ciphertext cannot be decrypted"},
                        {"records", list},
                        {"token_rows_deleted", tokens},
                        {"tokens_removed_from_memory", removed},
                        {"method", "batch re-solve of the remaining active tokens"}}
      .dump();
}

}  // namespace

// Deletes the rows of the shredded records still in the file (another process may have purged
// them since they were found); returns the records deleted, with their bounds groups.
static std::vector<std::pair<const ShreddedRecord*, std::int64_t>> delete_shredded_rows(
    RecordRows& rows, std::int64_t memory_id, const std::vector<const ShreddedRecord*>& found) {
  std::vector<std::pair<const ShreddedRecord*, std::int64_t>> done;
  for (const ShreddedRecord* r : found) {
    const RecordRow rr = rows.read(memory_id, r->record, {});
    if (!rr.exists || rr.key_id != r->key_id) continue;
    rows.delete_tokens(memory_id, r->record);
    rows.delete_row(memory_id, r->record);
    done.emplace_back(r, rr.bounds_group);
  }
  return done;
}

bool Store::Impl::purge_memory(std::int64_t memory_id,
                               const std::vector<const ShreddedRecord*>& found) {
  try {
    const bool purged = purge_memory_in_transaction(memory_id, found);
    vault.keys_referenced();  // the bounds groups' fresh keys are referenced now
    return purged;
  } catch (...) {
    vault.discard_new_keys();
    throw;
  }
}

bool Store::Impl::purge_memory_in_transaction(std::int64_t memory_id,
                                              const std::vector<const ShreddedRecord*>& found) {
  Transaction t(db, true, path, options.busy_timeout_ms);
  const MemoryRow row = read_memory_row(found.front()->memory);
  // The active token ids including the shredded records': the ids of the stored state.
  const State before = load_state(row, record_rows.active_token_ids(memory_id));
  const auto deleted = delete_shredded_rows(record_rows, memory_id, found);
  if (deleted.empty()) return false;  // rolled back: nothing left to purge
  std::vector<const ShreddedRecord*> list;
  std::int64_t rows = 0, removed = 0;
  for (const auto& [r, group] : deleted) {
    list.push_back(r);
    rows += r->tokens;
    removed += r->suspended ? 0 : r->tokens;
    screening_bounds.leave(row.id, row.name, r->record, group, r->tokens,
                           nullptr);  // its bounds' group too
  }
  shredded.erase(memory_id);  // the rows are gone: load the remaining tokens as they are
  std::unique_ptr<Memory> mem = solve_from(row, load_active_tokens(row));
  const State after = mem->state();
  AuditEntry e;
  e.operation = "purge";
  e.memory = row.name;
  e.record = list.front()->record;
  e.token_count = rows;
  e.state_before = row.state_sha256;
  e.state_after = after.state_sha256;
  e.certificate = purge_certificate(list, rows, removed);
  audit.append(e);
  write_state(row.id, before, after, e.seq, row.name);
  write_screening(row, *mem, true, {});
  t.commit();
  std::fprintf(stderr,
               "svattn: store '%s': %zu record(s) of memory '%s' are shredded (their data keys "
               "were destroyed); their rows were deleted and the memory re-solved without them "
               "(audit entry %lld 'purge', sha256 %s)\n",
               path.c_str(), list.size(), row.name.c_str(), static_cast<long long>(e.seq),
               after.state_sha256.c_str());
  cache[row.name] = Cached{row.id, e.seq, std::move(mem)};
  purge_log.push_back(std::move(e));
  return true;
}

void Store::Impl::purge_shredded() {
  if (shredded.empty() || options.read_only) return;
  const auto by_memory = shredded;
  for (const auto& [memory_id, recs] : by_memory) {
    std::vector<const ShreddedRecord*> list;
    for (const auto& [record, index] : recs) list.push_back(&shredded_found[index]);
    const bool purged = purge_memory(memory_id, list);
    shredded.erase(memory_id);
    for (const auto& [record, index] : recs) shredded_found[index].purged = purged;
  }
  bool truncated = false;
  checkpoint(&truncated);
}

MemoryVerification Store::Impl::verify_shredded(
    const MemoryRow& row, const std::pair<std::string, std::int64_t>* last_audit,
    std::vector<std::string>& problems, std::vector<std::string>& notes) {
  MemoryVerification mv;
  mv.name = row.name;
  mv.stored_sha256 = row.state_sha256;
  const std::size_t problems_before = problems.size();
  for (const auto& [record, index] : shredded.at(row.id)) {
    const ShreddedRecord& r = shredded_found[index];
    mv.shredded_records.push_back(record);
    notes.push_back("memory '" + row.name + "': record " + std::to_string(record) +
                    " is shredded: its data key " + r.key_id + " was destroyed at " +
                    r.destroyed_utc + ", so its " + std::to_string(r.tokens) +
                    " token rows cannot be decrypted; it is excluded");
  }
  const TokenSet tokens = load_active_tokens(row);  // without the shredded records
  mv.tokens = tokens.size();
  BatchSettings bs;
  bs.problem = row.settings.problem;
  bs.tolerances = row.settings.tolerances;
  const BatchResult br = solve_batch(tokens, bs);
  mv.resolved_sha256 = br.state.state_sha256;
  mv.report = verify_state(tokens, br.state, row.settings.tolerances, false);
  mv.audit_consistent = last_audit != nullptr && last_audit->first == row.state_sha256 &&
                        last_audit->second == row.last_audit_seq;
  notes.push_back("memory '" + row.name + "': without its shredded records it is the state " +
                  br.state.state_sha256 + " of a store that never saw them (the stored state " +
                  row.state_sha256.substr(0, 16) +
                  "… still includes them; a writable open purges them and logs 'purge')");
  if (!mv.report.ok()) {
    problems.push_back("memory '" + row.name +
                       "': verify_state failed on the state without the shredded records");
  }
  if (!mv.audit_consistent) {
    problems.push_back("memory '" + row.name +
                       "': stored state is not the last state recorded in the audit log");
  }
  mv.fields_ok = problems.size() == problems_before;
  return mv;
}

}  // namespace svattn
