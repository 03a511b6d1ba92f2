// The erasure receipt's checks of the recorded certificate, of the key destruction (audit chain and
// key store) and of the named backups (docs/audit.md "Erasure receipt").
#include <cstdio>

#include "key_store.h"
#include "db/sqlite.h"
#include "master_key.h"
#include "receipt_checks.h"
#include "record_rows.h"
#include "svattn/errors.h"
#include "svattn/hash.h"
#include "svattn/io.h"

namespace svattn::store_detail {

namespace {

// The outcome of each check the certificate lists (docs/store.md "Certificates").
bool certificate_check_ok(const OptimalityCheck& v, const std::string& name) {
  if (name == "feasibility") return v.feasible;
  if (name == "kkt_signs_all_tokens") return v.kkt_ok;
  if (name == "uniqueness") return v.unique;
  if (name == "hash") return v.hash_ok;
  return v.ok();  // removed_alpha_zero, coefficients_unchanged: preconditions of the argument
}

}  // namespace

ReceiptCheck receipt_check_certificate(const RemovalCertificate& cert, ErasureReceipt& r) {
  const OptimalityCheck& v = cert.verify;
  r.certificate_argument = to_string(v.argument);
  for (const std::string& name : v.checks) {
    std::string detail;
    if (name == "uniqueness") detail = v.uniqueness_reason;
    if (name == "kkt_signs_all_tokens") {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.3g", v.max_kkt_violation);
      detail = std::string("max violation ") + buf;
    }
    if (name == "hash" && v.argument == CertificateArgument::kReference)
      detail = "reference state " + v.reference_sha256.substr(0, 16) + "…";
    r.certificate_checks.push_back({name, certificate_check_ok(v, name), detail});
  }
  if (!v.performed) {
    return {"certificate", false,
            "the forget ran without the certificate's optimality check (--no-check); export the "
            "memory and run the independent verifier, or svattn memory verify"};
  }
  if (!v.ok()) {
    return {"certificate", false,
            std::string("the recorded optimality check failed (") +
                (!v.feasible ? "feasibility"
                 : !v.kkt_ok ? "kkt_signs_all_tokens"
                             : "hash") +
                ")"};
  }
  if (cert.before.state_sha256 != r.forget.state_before ||
      cert.after.state_sha256 != r.forget.state_after) {
    return {"certificate", false,
            "the certificate's states are not the forget entry's state_before/state_after"};
  }
  if (!cert.store || cert.store->record != r.record || cert.store->memory != r.memory) {
    return {"certificate", false, "the certificate does not name this record and memory"};
  }
  return {"certificate", true,
          "argument '" + r.certificate_argument + "', " + std::to_string(v.checks.size()) +
              " checks recorded, states match the forget entry"};
}

namespace {

// The shred entry after the forget that destroyed `key_id` (nullptr if none).
const AuditEntry* shred_of(const std::vector<AuditEntry>& all, const ErasureReceipt& r,
                           const std::string& key_id, nlohmann::json& cert) {
  for (const AuditEntry& e : all) {
    if (e.seq <= r.forget.seq || e.operation != "shred" || e.record != r.record) continue;
    try {
      cert = nlohmann::json::parse(e.certificate);
      if (cert.value("key_id", "") == key_id && cert.value("memory", "") == r.memory) return &e;
    } catch (const nlohmann::json::exception&) {
      continue;  // a shred entry whose certificate does not parse names no key
    }
  }
  return nullptr;
}

std::string key_store_state(const std::string& key_id, const StoreOptions& o,
                            const std::string& key_store) {
  KeyStoreOptions ko;
  ko.read_only = true;
  if (master_key_given(o)) ko.master = master_key_source(o);
  KeyStore keys(key_store, ko);
  try {
    return to_string(keys.get(key_id).state);
  } catch (const NotFound&) {
    return "unknown";
  }
}

}  // namespace

ReceiptCheck receipt_check_key(const RemovalCertificate& cert, const std::vector<AuditEntry>& all,
                               const StoreOptions& o, const std::string& key_store,
                               ErasureReceipt& r) {
  if (!cert.store || cert.store->data_key_id.empty()) {
    return {"key_destroyed", true,
            "not applicable: the record was stored in plaintext (no data key); the erasure rests "
            "on the deletion of its rows with secure_delete"};
  }
  r.data_key_id = cert.store->data_key_id;
  r.data_key_sha256 = cert.store->data_key_sha256;
  r.bounds_key_id = cert.store->bounds_key_id;
  for (const std::string& id : {r.data_key_id, r.bounds_key_id}) {
    if (id.empty()) continue;
    nlohmann::json sc;
    const AuditEntry* e = shred_of(all, r, id, sc);
    if (e == nullptr) {
      return {"key_destroyed", false,
              "no shred entry for key " + id + " after forget entry " +
                  std::to_string(r.forget.seq) + ": the key was not destroyed"};
    }
    r.shreds.push_back(*e);
    if (id == r.data_key_id) {
      r.key_destroyed_utc = sc.value("destroyed_utc", "");
      if (sc.value("wrapped_sha256", "") != r.data_key_sha256) {
        return {"key_destroyed", false,
                "shred entry " + std::to_string(e->seq) +
                    " names another wrapped key than the certificate (hash differs)"};
      }
    }
    const std::string state = key_store_state(id, o, key_store);
    if (id == r.data_key_id) r.key_store_state = state;
    if (state != "shredded") {
      return {"key_destroyed", false, "the key store answers '" + state + "' for key " + id};
    }
  }
  return {"key_destroyed", true,
          "shred entry " + std::to_string(r.shreds.front().seq) + ", key store tombstone " +
              r.key_destroyed_utc};
}

namespace {

ReceiptBackup inspect_backup(const std::string& path, const std::vector<AuditEntry>& all,
                             const ErasureReceipt& r) {
  ReceiptBackup b;
  b.path = path;
  const std::vector<char> bytes = read_file(path);
  b.bytes = static_cast<std::int64_t>(bytes.size());
  b.sha256 = sha256_hex(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  ReadOnlyDb db(path);
  std::string head_hash;
  for (const auto& row : db.rows("SELECT seq, entry_hash, time_utc FROM audit ORDER BY seq DESC "
                                 "LIMIT 1")) {
    b.audit_head_seq = std::stoll(row[0]);
    head_hash = row[1];
    b.audit_head_time = row[2];
  }
  for (const AuditEntry& e : all)
    if (e.seq == b.audit_head_seq) b.chain_prefix = e.entry_hash == head_hash;
  b.taken_before_erasure = b.audit_head_seq < r.forget.seq;
  b.holds_record = RecordRows::backup_record_key(db, r.memory, r.record, b.key_id);
  b.covered = b.holds_record && !b.key_id.empty() && b.key_id == r.data_key_id &&
              r.key_store_state == "shredded";
  return b;
}

}  // namespace

void receipt_check_backups(const std::vector<std::string>& paths,
                           const std::vector<AuditEntry>& all, ErasureReceipt& r) {
  for (const std::string& p : paths) {
    ReceiptBackup b = inspect_backup(p, all, r);
    ReceiptCheck c{"backup " + p, false, ""};
    if (!b.chain_prefix) {
      c.detail = "its audit chain is not a prefix of this store's: not a copy of this store";
    } else if (!b.holds_record) {
      c.ok = true;
      c.detail = "does not hold the record";
    } else if (b.key_id.empty()) {
      c.detail = "holds the record's rows in plaintext: the erasure does not reach this copy";
    } else if (!b.covered) {
      c.detail = "holds the record under key " + b.key_id + ", not a destroyed key";
    } else {
      c.ok = true;
      c.detail = "holds the record as ciphertext under the destroyed key " + b.key_id;
    }
    b.note = c.detail;
    r.backups.push_back(b);
    r.checks.push_back(c);
  }
}

}  // namespace svattn::store_detail
