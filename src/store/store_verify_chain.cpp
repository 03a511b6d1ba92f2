// What the audit chain says must exist, against the rows (docs/store.md "Verification"):
// each memory's records as its entries leave them (added, imported, suspended, resumed, forgotten,
// purged) and its settings at create; every suspended record's tokens against its persisted bucket
// digests and the digest its suspend entry recorded; every live data key against a record; and
// the key destructions still pending. Also the checks the operations share: the settings bound to
// the create entry, and a resume's record against its suspend entry.
#include <map>

#include "store_impl.h"

namespace svattn {

using namespace store_detail;

enum class store_detail::ChainState { kActive, kSuspended, kErased };

namespace {}  // namespace

struct store_detail::ChainRecord {
  ChainState state = ChainState::kActive;
  std::int64_t seq = 0;        // the entry that left it so
  std::string time_utc;        // ... and its time
  std::string buckets_sha256;  // the suspend entry's digest of the record's bucket digests
};

// An import entry written before its certificate listed its records: only the range is known.
struct store_detail::ImportRange {
  std::int64_t first = 0, last = 0, seq = 0;
};

struct store_detail::ChainRecords {
  std::map<std::int64_t, ChainRecord> records;
  std::vector<ImportRange> legacy_imports;
  bool in_legacy_import(std::int64_t r) const {
    for (const ImportRange& i : legacy_imports)
      if (r >= i.first && r <= i.last) return true;
    return false;
  }
};

namespace {

nlohmann::json certificate_json(const AuditEntry& e) {
  nlohmann::json j = nlohmann::json::parse(e.certificate, nullptr, false);
  return j.is_object() ? j : nlohmann::json::object();
}

// Replays the memory's entries in order.
ChainRecords derive_records(const std::vector<AuditEntry>& entries, const std::string& memory) {
  ChainRecords c;
  for (const AuditEntry& e : entries) {
    if (e.memory != memory) continue;
    auto set = [&](std::int64_t r, ChainState s) {
      ChainRecord& cr = c.records[r];
      cr.state = s;
      cr.seq = e.seq;
      cr.time_utc = e.time_utc;
      cr.buckets_sha256.clear();
    };
    if (e.operation == "add" || e.operation == "resume") {
      set(e.record, ChainState::kActive);
    } else if (e.operation == "suspend") {
      set(e.record, ChainState::kSuspended);
      const nlohmann::json j = certificate_json(e);
      if (j.contains("buckets_sha256") && j["buckets_sha256"].is_string())
        c.records[e.record].buckets_sha256 = j["buckets_sha256"].get<std::string>();
    } else if (e.operation == "forget") {
      set(e.record, ChainState::kErased);
    } else if (e.operation == "import") {
      const nlohmann::json j = certificate_json(e);
      if (j.contains("record_ids") && j["record_ids"].is_array()) {
        for (const auto& r : j["record_ids"])
          if (r.is_number_integer()) set(r.get<std::int64_t>(), ChainState::kActive);
      } else {
        const std::int64_t last = j.contains("last_record") && j["last_record"].is_number_integer()
                                      ? j["last_record"].get<std::int64_t>()
                                      : e.record;
        c.legacy_imports.push_back({e.record, last, e.seq});
      }
    } else if (e.operation == "purge") {
      const nlohmann::json j = certificate_json(e);
      if (j.contains("records") && j["records"].is_array()) {
        for (const auto& r : j["records"])
          if (r.is_object() && r.contains("record") && r["record"].is_number_integer())
            set(r["record"].get<std::int64_t>(), ChainState::kErased);
      }
    }
  }
  return c;
}

const char* state_name(ChainState s) {
  return s == ChainState::kActive ? "active" : s == ChainState::kSuspended ? "suspended" : "erased";
}

}  // namespace

std::string Store::Impl::settings_mismatch(const MemoryRow& row, const AuditEntry& create) {
  const nlohmann::json j = certificate_json(create);
  if (!j.contains("settings") || !j["settings"].is_object())
    return "its create entry (audit seq " + std::to_string(create.seq) + ") holds no settings";
  nlohmann::json want;
  try {
    want = memory_settings_to_json(memory_settings_from_json(j["settings"]));
  } catch (const Error& e) {
    return std::string("its create entry's settings do not parse (") + e.what() + ")";
  }
  const nlohmann::json have = memory_settings_to_json(row.settings);
  std::string diff;
  for (const auto& [field, value] : want.items()) {
    if (have.contains(field) && have[field] == value) continue;
    diff += (diff.empty() ? "" : ", ") + field + " " +
            (have.contains(field) ? have[field].dump() : "missing") +
            " (create entry: " + value.dump() + ")";
  }
  for (const char* dim : {"dim", "value_dim"}) {
    const int stored = std::string(dim) == "dim" ? row.dim : row.value_dim;
    if (j.contains(dim) && j[dim].is_number_integer() && j[dim].get<int>() != stored) {
      diff += (diff.empty() ? "" : ", ") + std::string(dim) + " " + std::to_string(stored) +
              " (create entry: " + j[dim].dump() + ")";
    }
  }
  if (diff.empty()) return {};
  return "stored settings differ from those of its create entry (audit seq " +
         std::to_string(create.seq) + "): " + diff;
}

void Store::Impl::require_settings_bound(const MemoryRow& row) {
  auto it = create_entries.find(row.name);
  if (it == create_entries.end()) {
    // The create entry never changes (append-only): read once per memory and open.
    Statement q(db.handle(),
                "SELECT seq, certificate FROM audit WHERE operation = 'create' AND memory = ?1 "
                "ORDER BY seq LIMIT 1");
    q.bind(1, row.name);
    AuditEntry e;
    if (q.step()) {
      e.seq = q.int64(0);
      e.certificate = q.text(1);
    }
    it = create_entries.emplace(row.name, std::move(e)).first;
  }
  if (it->second.seq == 0) {
    throw FormatError("store '" + path + "': memory '" + row.name +
                      "' has no create entry in the audit log; run `svattn memory verify`");
  }
  const std::string m = settings_mismatch(row, it->second);
  if (!m.empty()) {
    throw FormatError("store '" + path + "': memory '" + row.name + "': " + m +
                      "; refused (run `svattn memory verify`)");
  }
}

// The stored bucket digests of one record, opened (any suspension state); empty, or the problem.
std::string Store::Impl::read_record_buckets(const MemoryRow& row, std::int64_t record,
                                             std::vector<std::uint8_t>& plain) {
  RecordRows::StoredBuckets b = record_rows.buckets(row.id, record, record_columns());
  if (!b.exists) return "record " + std::to_string(record) + " has no row";
  if (!b.has_buckets) return "record " + std::to_string(record) + " has no bucket digests";
  if (!b.sealed) {
    plain = std::move(b.blob);
    return {};
  }
  const RecordAad aad{row.id, record, -1, RecordField::kBuckets};
  try {
    PayloadReader pr = payload_reader(row.id);
    plain.resize(opened_size(aad, b.blob.size()));
    pr.opener(b.key_id, record)
        .open_into(aad, b.blob.data(), b.blob.size(), plain.data(), plain.size());
  } catch (const FormatError& e) {
    return "record " + std::to_string(record) + ": bucket digests: " + e.what();
  }
  return {};
}

// A suspended record's tokens: they open (encrypted), their digests are the persisted ones, and
// those are the ones its suspend entry recorded.
std::string Store::Impl::check_suspended_record(const MemoryRow& row, std::int64_t record,
                                                const std::string& suspend_sha256) {
  const std::string who = "suspended record " + std::to_string(record);
  TokenSet ts;
  try {
    ts = record_tokens(row, record);
  } catch (const FormatError& e) {
    return who + ": " + e.what();
  }
  // A bounded memory may have evicted all of a record's tokens and keeps no digests; neither
  // does a file older than schema 4.
  if (schema_version < kFirstSchemaWithHashV2 || row.settings.mode != MemoryMode::kAudit) return {};
  if (ts.size() == 0) return who + " has no token rows";
  std::vector<std::uint8_t> plain;
  const std::string problem = read_record_buckets(row, record, plain);
  if (!problem.empty()) return who + ": " + problem;
  std::vector<BucketDigest> stored;
  if (!decode_buckets(plain.data(), plain.size(), stored))
    return who + ": malformed bucket digests";
  if (!suspend_sha256.empty() && sha256_hex(plain) != suspend_sha256)
    return who + ": its bucket digests are not those its suspend entry recorded";
  if (stored != record_buckets(ts))
    return who + ": its tokens do not match its persisted bucket digests (altered while suspended)";
  return {};
}

// Every records row against the chain's account, and every account against a row.
void Store::Impl::check_chain_records(const MemoryRow& row, const std::vector<AuditEntry>& entries,
                                      std::vector<std::string>& problems) {
  const std::string m = "memory '" + row.name + "': ";
  for (const AuditEntry& e : entries) {
    if (e.operation != "create" || e.memory != row.name) continue;
    const std::string s = settings_mismatch(row, e);
    if (!s.empty()) problems.push_back(m + s);
    break;
  }
  const ChainRecords chain = derive_records(entries, row.name);
  const std::map<std::int64_t, bool> rows = record_rows.suspension(row.id);  // record -> suspended
  for (const auto& [r, suspended] : rows) {
    const std::string who = "record " + std::to_string(r);
    const auto it = chain.records.find(r);
    if (it == chain.records.end()) {
      if (suspended) {
        problems.push_back(m + who +
                           " is suspended but no audit entry suspended it (rows inserted)");
      } else if (!chain.in_legacy_import(r)) {
        problems.push_back(m + who + " has rows but no audit entry added it (rows inserted)");
      }
      continue;
    }
    const ChainRecord& cr = it->second;
    const ChainState have = suspended ? ChainState::kSuspended : ChainState::kActive;
    if (cr.state == have) continue;
    problems.push_back(m + who + " is " + state_name(have) + " in the records table but " +
                       state_name(cr.state) + " per audit entry " + std::to_string(cr.seq) +
                       (cr.state == ChainState::kErased ? " (its rows should be gone)" : ""));
  }
  for (const auto& [r, cr] : chain.records) {
    if (cr.state == ChainState::kErased || rows.count(r) != 0) continue;
    problems.push_back(m + "record " + std::to_string(r) + " is " + state_name(cr.state) +
                       " per audit entry " + std::to_string(cr.seq) +
                       " but has no row (erased without a forget entry)");
  }
  for (const auto& [r, suspended] : rows) {
    if (!suspended || is_shredded(row.id, r)) continue;
    const auto it = chain.records.find(r);
    const std::string p = check_suspended_record(
        row, r, it == chain.records.end() ? std::string() : it->second.buckets_sha256);
    if (!p.empty()) problems.push_back(m + p);
  }
  check_live_keys(row, chain, problems);
}

// Every live data key of the memory belongs to a record that has a row naming it; a key of a
// record the chain erased is an unfinished erasure unless it was made after that forget (an add
// of the same record id that did not commit).
void Store::Impl::check_live_keys(const MemoryRow& row, const ChainRecords& chain,
                                  std::vector<std::string>& problems) {
  if (!vault.enabled()) return;
  std::map<std::string, std::int64_t> named;  // key id -> record
  for (const auto& [key_id, record] : record_rows.keyed_records(row.id)) named[key_id] = record;
  // a pending destruction is reported by check_pending_shreds
  for (const KeyVault::PendingShred& p : vault.pending_shreds(row.name)) named[p.key_id] = p.record;
  for (const KeyLookup& k : vault.keys().live_keys_of(row.id)) {
    if (k.owner.is_bounds_group() || named.count(k.key_id) != 0) continue;
    const std::int64_t r = k.owner.record_id;
    const auto it = chain.records.find(r);
    if (it == chain.records.end() || it->second.state != ChainState::kErased) continue;
    if (k.created_utc > it->second.time_utc) continue;  // made later, by an add that rolled back
    problems.push_back("memory '" + row.name + "': the data key " + k.key_id + " of record " +
                       std::to_string(r) + ", forgotten at audit entry " +
                       std::to_string(it->second.seq) +
                       ", is still live and not scheduled for destruction (erasure incomplete)");
  }
}

// A forget committed but its keys' destruction did not complete (a crash, or a key store that
// refused the write): the record is gone from the data, but its key still opens its ciphertext in
// every copy until the next writable open destroys it.
void Store::Impl::check_pending_shreds(std::vector<std::string>& problems) {
  if (schema_version < 3) return;
  for (const KeyVault::PendingShred& p : vault.pending_shreds()) {
    problems.push_back("memory '" + p.memory + "': the destruction of key " + p.key_id +
                       " (erasure of record " + std::to_string(p.record) +
                       ") is pending: the erasure is incomplete until a writable open of the "
                       "store completes it");
  }
}

void Store::Impl::require_resumable(const MemoryRow& row, std::int64_t record,
                                    const TokenSet& tokens) {
  const std::string who =
      "store '" + path + "': memory '" + row.name + "': record " + std::to_string(record);
  Statement q(db.handle(),
              "SELECT seq, operation, certificate FROM audit WHERE memory = ?1 AND record = ?2 AND "
              "operation IN ('add', 'import', 'suspend', 'resume', 'forget') ORDER BY seq DESC "
              "LIMIT 1");
  q.bind(1, row.name).bind(2, record);
  if (!q.step() || q.text(1) != "suspend") {
    throw FormatError(who +
                      " is suspended in the records table, but no audit entry suspended it "
                      "(rows inserted or edited); not resumed (run `svattn memory verify`)");
  }
  AuditEntry e;
  e.certificate = q.text(2);
  const nlohmann::json j = certificate_json(e);
  const std::string recorded = j.contains("buckets_sha256") && j["buckets_sha256"].is_string()
                                   ? j["buckets_sha256"].get<std::string>()
                                   : "";
  if (schema_version < kFirstSchemaWithHashV2 || row.settings.mode != MemoryMode::kAudit) return;
  std::vector<std::uint8_t> plain;
  std::vector<BucketDigest> stored;
  const std::string problem = read_record_buckets(row, record, plain);
  if (!problem.empty()) throw FormatError(who + ": " + problem + "; not resumed");
  if (!decode_buckets(plain.data(), plain.size(), stored) ||
      (!recorded.empty() && sha256_hex(plain) != recorded) || stored != record_buckets(tokens)) {
    throw FormatError(who +
                      ": its tokens do not match the bucket digests recorded when it was "
                      "suspended (altered while suspended); not resumed (run `svattn "
                      "memory verify`)");
  }
}

}  // namespace svattn
