// The state-hash format of older store files (docs/store.md "Schema", docs/math.md §6): files of
// schema version <= 3 record version-1 state hashes. Opened for writing, a file is upgraded once,
// every memory's hash is checked in the old format and replaced by the current one (one audit entry
// "rehash" per memory); read-only, an old file is read as it is, its hashes checked in the format
// they use.
#include <cstring>

#include "store_impl.h"
#include "svattn/hash.h"

namespace svattn {

using namespace store_detail;

namespace {

CanonicalRow row_of(const TokenSet& t, std::size_t r) {
  const auto i = static_cast<Eigen::Index>(r);
  return CanonicalRow{t.ids[r], t.keys.row(i).data(), t.values.row(i).data()};
}

}  // namespace

std::string Store::Impl::legacy_state_hash(const MemoryRow& row, const TokenSet& tokens,
                                           const std::vector<double>& alpha, double b) const {
  return canonical_sha256_v1(
      row.settings.problem, tokens.ids.size(), static_cast<int>(tokens.keys.cols()),
      static_cast<int>(tokens.values.cols()), [&](std::size_t r) { return row_of(tokens, r); },
      alpha, b);
}

bool Store::Impl::stored_hash_matches(const MemoryRow& row, const TokenSet& tokens,
                                      const std::vector<double>& alpha, double b,
                                      const std::string& current) const {
  if (current == row.state_sha256) return true;
  return schema_version < kFirstSchemaWithHashV2 &&
         legacy_state_hash(row, tokens, alpha, b) == row.state_sha256;
}

void Store::Impl::adopt_current_hash(const MemoryRow& row, const TokenSet& tokens, State& state) {
  if (schema_version >= kFirstSchemaWithHashV2) return;
  if (legacy_state_hash(row, tokens, state.alpha, state.b) != row.state_sha256) return;
  std::vector<int> order(tokens.ids.size());
  for (std::size_t t = 0; t < order.size(); ++t) order[t] = static_cast<int>(t);
  state.state_sha256 =
      canonical_sha256(row.settings.problem, tokens, order, state.alpha, state.b);
}

// One memory of an upgrade, inside its transaction. Returns false when the stored hash is neither
// format's hash of the stored tokens (left as it is: the next restore re-solves and says so).
bool Store::Impl::rehash_memory(const MemoryRow& row, std::int64_t old_schema) {
  const TokenSet tokens = load_active_tokens(row);
  State state = load_state(row, tokens.ids);
  state.state_sha256 = row.state_sha256;
  std::vector<int> order(tokens.ids.size());
  for (std::size_t t = 0; t < order.size(); ++t) order[t] = static_cast<int>(t);
  const std::string now =
      canonical_sha256(row.settings.problem, tokens, order, state.alpha, state.b);
  if (now == row.state_sha256) return true;  // written in the current format already
  if (legacy_state_hash(row, tokens, state.alpha, state.b) != row.state_sha256) return false;
  AuditEntry e;
  e.operation = "rehash";
  e.memory = row.name;
  e.record = -1;
  e.token_count = static_cast<std::int64_t>(tokens.ids.size());
  e.state_before = row.state_sha256;
  e.state_after = now;
  e.certificate = nlohmann::json{{"operation", "rehash"},
                                 {"from_state_hash_version", 1},
                                 {"to_state_hash_version", 2},
                                 {"checked", "the version-1 hash of the stored tokens and "
                                             "coefficients equals the recorded hash"},
                                 {"tokens", tokens.ids.size()}}
                      .dump();
  audit.append(e);
  write_state_hash(row.id, now, e.seq);
  if (old_schema >= 2) rebind_screening(row, now);
  return true;
}

// The screening row of `row` re-bound to the memory's new hash: same bounds, checksum and support
// digest recomputed over the new hash (a row of another state is left; it fails its check).
void Store::Impl::rebind_screening(const MemoryRow& row, const std::string& now) {
  screening_bounds.rebind_legacy_head(row.id, row.state_sha256, now, [&] {
    return support_digest(row.id, row.dim, row.value_dim, now, row.b, nullptr);
  });
}

// records.buckets of every record of an audit-mode memory (a bounded memory evicts tokens from
// its records, so it keeps none and always forgets through a restore).
void Store::Impl::fill_record_buckets(const MemoryRow& row) {
  if (row.settings.mode != MemoryMode::kAudit) return;
  // key_id exists: the schema-3 step of the upgrade (migrate/upgrade.cpp) added it before this
  for (const RecordRows::RecordKey& r : record_rows.record_keys(row.id, {})) {
    const std::int64_t record = r.record;
    std::unique_ptr<Sealer> sealer;
    if (!r.key_id.empty()) {
      KeyLookup k = vault.keys().get(r.key_id);
      if (k.shredded()) continue;  // its rows cannot be read; it never enters a memory
      sealer = std::make_unique<Sealer>(k.key);
    }
    write_record_buckets(row.id, record, record_tokens(row, record), sealer.get());
  }
}

std::int64_t Store::Impl::rehash_states(std::int64_t old_schema,
                                        std::vector<std::string>* unverified) {
  std::int64_t done = 0;
  for (const MemoryRow& row : all_memory_rows()) {
    if (rehash_memory(row, old_schema)) {
      ++done;
      fill_record_buckets(row);
    } else {
      unverified->push_back(row.name);
    }
  }
  return done;
}

}  // namespace svattn
