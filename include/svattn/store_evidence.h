// Evidence for auditors who do not trust svattn (docs/audit.md): the export of a memory's tokens
// and stored state for an independent verifier, and the erasure receipt a data-protection officer
// files, built from the audit chain and the key store with checks of its own.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "svattn/store.h"

namespace svattn {

// ------------------------------------------------------------------------------------------ export

/// What export_memory wrote (docs/audit.md "Export").
struct MemoryExport {
  std::string directory;
  std::string memory;
  std::int64_t tokens = 0;
  std::int64_t records = 0;
  std::string state_sha256;
  std::vector<std::string> files;  ///< names inside `directory`, manifest.json last
};

/// Writes the memory's remaining tokens (ids, keys, values), its stored state (alpha, b,
/// partition, status, hash), its settings and a manifest (file sizes and SHA-256, the audit head)
/// into `out_dir`, a directory that must not exist or be empty (AlreadyExists otherwise). The
/// files are written to a temporary sibling and renamed into place: on any error nothing is left.
/// Throws like Store's constructor, NotFound for an unknown memory.
MemoryExport export_memory(const std::string& store_path, const StoreOptions& options,
                           const std::string& memory, const std::string& out_dir);

// ----------------------------------------------------------------------------------------- receipt

/// One check the receipt ran: a stable name, its outcome and what it found.
struct ReceiptCheck {
  std::string name;
  bool ok = false;
  std::string detail;
};

/// A backup copy named by the operator, as the receipt found it.
struct ReceiptBackup {
  std::string path;
  std::string sha256;
  std::int64_t bytes = 0;
  std::int64_t audit_head_seq = 0;  ///< the copy's last audit entry (0: none)
  std::string audit_head_time;
  bool taken_before_erasure = false;  ///< its chain ends before the forget entry
  bool chain_prefix = false;          ///< its chain is a prefix of the store's
  bool holds_record = false;          ///< the copy holds the erased record's rows
  std::string key_id;                 ///< the record's data key in the copy ("" plaintext)
  bool covered = false;               ///< the destroyed key is the only key to its rows
  std::string note;
};

/// The erasure receipt of one record (docs/audit.md "Erasure receipt").
struct ErasureReceipt {
  std::string store;
  std::string memory;
  std::int64_t record = 0;
  std::string reason;
  std::string generated_utc;
  nlohmann::json settings;         ///< memory_settings_to_json plus dim, value_dim
  AuditEntry forget;               ///< the forget entry (seq 0: none found)
  std::vector<AuditEntry> shreds;  ///< the shred entries of its keys
  std::int64_t tokens_removed = 0;
  std::int64_t token_rows_erased = 0;
  std::string encryption;
  std::string data_key_id;
  std::string data_key_sha256;  ///< SHA-256 of the stored (wrapped) key, from the certificate
  std::string key_destroyed_utc;
  std::string key_store_state;  ///< "shredded", "live" or "" (plaintext / not looked up)
  std::string bounds_key_id;
  std::string certificate_argument;
  std::vector<ReceiptCheck> certificate_checks;  ///< the certificate's own checks, as recorded
  std::string current_state_sha256;
  std::int64_t audit_head_seq = 0;
  std::string audit_head_hash;  ///< the last entry's hash
  std::string anchor_hash;      ///< meta audit_head_hash
  std::vector<ReceiptBackup> backups;
  std::vector<ReceiptCheck> checks;  ///< the receipt's own checks, in order
  bool ok() const;
  /// The first failing check ("" when ok()).
  std::string first_failure() const;
  nlohmann::json to_json() const;
};

/// Builds the receipt of record `record`'s erasure from memory `memory` of the store at
/// `store_path` (an SQLite file or a postgresql:// URI, opened read-only) and checks it: the audit
/// chain and its anchor, the forget entry, the record's absence, the recorded certificate, the
/// key's destruction in the audit chain and in the key store, and each backup copy (an SQLite
/// file) in `backups`. A failed check is in `checks` (ok() false), never an exception. Throws
/// NotFound for an unknown memory, InvalidArgument for a reason that is not valid UTF-8, and like
/// Store's constructor.
ErasureReceipt erasure_receipt(const std::string& store_path, const StoreOptions& options,
                               const std::string& memory, std::int64_t record,
                               const std::string& reason,
                               const std::vector<std::string>& backups = {});

/// The receipt as one Markdown page / one self-contained HTML page (no script, no external
/// resource).
std::string render_receipt_markdown(const ErasureReceipt& r);
std::string render_receipt_html(const ErasureReceipt& r);

}  // namespace svattn
