// `erasure_receipt`: what a data-protection officer files for one erased record, gathered from the
// audit chain, the recorded certificate, the key store and the named backups, with checks of its
// own (docs/audit.md "Erasure receipt"). Rendering is in store_receipt_render.cpp.
#include <filesystem>

#include "db/pg_uri.h"
#include "receipt_checks.h"
#include "db/postgres.h"
#include "db/sqlite.h"
#include "svattn/errors.h"
#include "svattn/hash.h"
#include "svattn/io.h"
#include "svattn/store_evidence.h"
#include "utc_clock.h"

namespace svattn {
namespace {

const std::string kZeroHash(64, '0');

// The head anchor the store keeps in meta (docs/store.md "Audit log"), read without the Store.
std::string read_anchor(const std::string& store_path, int busy_timeout_ms) {
  using store_detail::Database;
  Database db;
  if (store_detail::is_postgres_uri(store_path)) {
    const store_detail::PgLocation loc = store_detail::parse_postgres_uri(store_path);
    db = store_detail::open_postgres(loc.conninfo, loc.display, busy_timeout_ms);
  } else {
    store_detail::SqliteOpen how;
    how.read_only = true;
    db = store_detail::open_sqlite(store_path, how);
  }
  return db.query_text("SELECT value FROM meta WHERE key = 'audit_head_hash'");
}

// The chain: sequence 1..N, prev links, recomputed entry hashes, and the anchor in meta.
ReceiptCheck check_chain(const std::vector<AuditEntry>& entries, ErasureReceipt& r,
                         const std::string& store_path, int busy_timeout_ms) {
  ReceiptCheck c{"audit_chain", true, ""};
  std::string prev = kZeroHash;
  std::int64_t seq = 1;
  for (const AuditEntry& e : entries) {
    std::string bad;
    if (e.seq != seq)
      bad = "sequence number " + std::to_string(e.seq) + " where " + std::to_string(seq) +
            " was expected";
    else if (e.prev_hash != prev)
      bad = "prev_hash does not match the previous entry";
    else if (sha256_hex(canonical_audit_bytes(e)) != e.entry_hash)
      bad = "entry hash does not match its contents";
    if (!bad.empty()) {
      c.ok = false;
      c.detail = "entry " + std::to_string(e.seq) + ": " + bad;
      return c;
    }
    prev = e.entry_hash;
    seq = e.seq + 1;
  }
  r.audit_head_seq = entries.empty() ? 0 : entries.back().seq;
  r.audit_head_hash = entries.empty() ? kZeroHash : entries.back().entry_hash;
  r.anchor_hash = read_anchor(store_path, busy_timeout_ms);
  if (r.anchor_hash != r.audit_head_hash) {
    c.ok = false;
    c.detail = "the head anchor in meta (" + r.anchor_hash.substr(0, 16) +
               "…) is not the last entry's hash (" + r.audit_head_hash.substr(0, 16) + "…)";
    return c;
  }
  c.detail = std::to_string(entries.size()) +
             " entries linked, hashes recomputed, head anchor "
             "equals entry " +
             std::to_string(r.audit_head_seq);
  return c;
}

// The last forget of (memory, record) in the chain.
ReceiptCheck find_forget(const std::vector<AuditEntry>& entries, ErasureReceipt& r) {
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (it->operation == "forget" && it->memory == r.memory && it->record == r.record) {
      r.forget = *it;
      return {"forget_entry", true,
              "entry " + std::to_string(it->seq) + " at " + it->time_utc + " (" +
                  std::to_string(it->token_count) + " tokens)"};
    }
  }
  return {"forget_entry", false,
          "no forget entry for record " + std::to_string(r.record) + " of memory '" + r.memory +
              "' in the audit chain: the record was not erased by svattn (rows deleted by hand, "
              "or never erased)"};
}

// The record's rows are gone (or the record was added again after the erasure).
ReceiptCheck check_absent(Store& store, const std::vector<AuditEntry>& entries,
                          const ErasureReceipt& r) {
  bool present = false;
  for (const RecordInfo& ri : store.records(r.memory)) present = present || ri.record == r.record;
  if (!present)
    return {"record_absent", true, "no row of record " + std::to_string(r.record) + " remains"};
  for (const AuditEntry& e : entries) {
    if (e.seq > r.forget.seq && e.memory == r.memory && e.record == r.record &&
        (e.operation == "add" || e.operation == "import")) {
      return {"record_absent", true,
              "the record id was added again by entry " + std::to_string(e.seq) +
                  " after the erasure; those are new tokens"};
    }
  }
  return {"record_absent", false,
          "record " + std::to_string(r.record) + " still has rows in memory '" + r.memory + "'"};
}

// The memory's stored hash is the state its last audit entry recorded.
ReceiptCheck check_current_state(const std::vector<AuditEntry>& entries, const MemoryInfo& info,
                                 ErasureReceipt& r) {
  std::string last;
  for (const AuditEntry& e : entries)
    if (e.memory == r.memory && !e.state_after.empty()) last = e.state_after;
  r.current_state_sha256 =
      info.file_state_sha256.empty() ? info.state_sha256 : info.file_state_sha256;
  if (last == r.current_state_sha256)
    return {"state_recorded", true, "the stored state is the last state the chain recorded"};
  return {"state_recorded", false,
          "the stored state " + r.current_state_sha256.substr(0, 16) +
              "… is not the last state the audit chain recorded (" + last.substr(0, 16) + "…)"};
}

void check_erasure(Store& store, const std::vector<AuditEntry>& entries, const StoreOptions& o,
                   const std::vector<std::string>& backups, ErasureReceipt& r) {
  RemovalCertificate cert;
  try {
    cert = RemovalCertificate::from_json(nlohmann::json::parse(r.forget.certificate));
  } catch (const std::exception& e) {
    r.checks.push_back({"certificate", false,
                        std::string("the forget entry's certificate does not parse: ") + e.what()});
    return;
  }
  if (cert.store) {
    r.token_rows_erased = cert.store->token_rows_erased;
    r.tokens_removed = cert.store->tokens_removed_from_memory;
  } else {
    r.tokens_removed = static_cast<std::int64_t>(cert.removed_ids.size());
  }
  r.checks.push_back(check_absent(store, entries, r));
  r.checks.push_back(store_detail::receipt_check_certificate(cert, r));
  r.checks.push_back(store_detail::receipt_check_key(cert, entries, o, store.key_store_path(), r));
  store_detail::receipt_check_backups(backups, entries, r);
}

}  // namespace

ErasureReceipt erasure_receipt(const std::string& store_path, const StoreOptions& options,
                               const std::string& memory, std::int64_t record,
                               const std::string& reason, const std::vector<std::string>& backups) {
  check_utf8(reason, "--reason");
  StoreOptions o = options;
  o.read_only = true;
  o.create = false;
  Store store(store_path, o);
  const MemoryInfo info = store.memory_info(memory);  // NotFound
  ErasureReceipt r;
  r.store = store_detail::is_postgres_uri(store_path)
                ? store.path()  // without a password
                : std::filesystem::absolute(store_path).lexically_normal().string();
  r.memory = memory;
  r.record = record;
  r.reason = reason;
  r.generated_utc = store_detail::now_utc();
  r.encryption = store.encryption();
  r.settings = memory_settings_to_json(info.settings);
  r.settings["dim"] = info.dim;
  r.settings["value_dim"] = info.value_dim;
  const std::vector<AuditEntry> entries = store.audit();
  r.checks.push_back(check_chain(entries, r, store_path, o.busy_timeout_ms));
  r.checks.push_back(check_current_state(entries, info, r));
  r.checks.push_back(find_forget(entries, r));
  if (r.forget.seq > 0) check_erasure(store, entries, o, backups, r);
  return r;
}

bool ErasureReceipt::ok() const { return first_failure().empty(); }

std::string ErasureReceipt::first_failure() const {
  for (const ReceiptCheck& c : checks)
    if (!c.ok) return c.name + ": " + c.detail;
  return "";
}

}  // namespace svattn
