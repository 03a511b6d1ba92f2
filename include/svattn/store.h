// The audited memory store (docs/store.md): a SQLite file holding named support-vector memories,
// their tokens grouped by record, each memory's canonical state, and an append-only hash-chained
// audit log. Records can be erased (exact decremental forgetting + certificate + secure deletion of
// the bytes from every file of the store) or suspended (reversible exclusion, data kept).
//
// Every operation is one SQLite transaction (BEGIN IMMEDIATE): a crash at any point leaves the old
// or the new state. The in-RAM memory of a Store object is updated only together with a successful
// commit; on any failure the transaction is rolled back and the memory is reloaded from the file,
// so an exception leaves both the file and the object as they were.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "svattn/certificate.h"
#include "svattn/errors.h"
#include "svattn/memory.h"
#include "svattn/store_errors.h"
#include "svattn/types.h"

namespace svattn {

// ---------------------------------------------------------------------------------------- token
// ids

/// Token identity is (record id, position in record): id = (record << kPositionBits) | position.
/// Ascending ids order tokens by (record, position), so the canonical state of a memory does not
/// depend on the order in which records were inserted.
constexpr int kPositionBits = 23;
constexpr int kRecordBits = 40;
constexpr std::int64_t kMaxRecordId = (std::int64_t{1} << kRecordBits) - 1;
constexpr std::int64_t kMaxPosition = (std::int64_t{1} << kPositionBits) - 1;

/// Throws InvalidArgument when record or position is out of range.
TokenId store_token_id(std::int64_t record, std::int64_t position);
inline std::int64_t record_of(TokenId id) { return id >> kPositionBits; }
inline std::int64_t position_of(TokenId id) { return id & kMaxPosition; }

/// Store schema version written to PRAGMA user_version and the meta table. Version 2 added the
/// persisted screening bounds, 3 per-record encryption, 4 the version-2 state hash (docs/math.md
/// §6), 5 per-record screening bounds, 6 the bounds groups (screening bounds sealed per group of
/// records under a group key), 7 token messages (a token's key and value sealed as one message);
/// an older file is upgraded in place when opened for writing (docs/store.md "Schema").
constexpr int kStoreSchemaVersion = 7;
/// PRAGMA application_id of a store file: ASCII "SVAT".
constexpr std::int32_t kStoreApplicationId = 0x53564154;

// --------------------------------------------------------------------------------------- settings

/// MemorySettings <-> the JSON kept in the store (every field, doubles round-trip exactly).
nlohmann::json memory_settings_to_json(const MemorySettings& s);
/// Throws FormatError naming the missing/bad field.
MemorySettings memory_settings_from_json(const nlohmann::json& j);

struct StoreOptions {
  /// Create an empty store when the file does not exist (or is empty). Otherwise a missing file is
  /// an IoError.
  bool create = false;
  /// SQLite busy timeout: how long a connection waits for another one's lock before StoreBusy.
  int busy_timeout_ms = 5000;
  /// Run PRAGMA quick_check when opening: reads the whole file (O(file), 9 % of a forget at 200k
  /// tokens), so it is off by default; `Store::verify` and `svattn memory verify` run the full
  /// PRAGMA integrity_check. Without it, open still checks the header, schema version and magic,
  /// and every page SQLite reads is checked as it is read; a memory's first use checks its state
  /// against its tokens (docs/store.md "Opening").
  bool check_on_open = false;
  /// Open the file read-only (SQLITE_OPEN_READONLY): nothing is ever written, not even the WAL
  /// checkpoint on close, so read commands work on files the user cannot write. Mutations throw
  /// InvalidArgument. Incompatible with create.
  bool read_only = false;
  /// Forget: the certificate's independent optimality check of the state after removal
  /// (feasibility, KKT signs on every remaining token, uniqueness, the after hash; O(n |S u E|
  /// d)), or the O(n) reference argument when the removal moved no coefficient (see
  /// certificate_reference). docs/store.md "Certificates".
  bool certificate_check = true;
  /// Forget: a removal whose removed tokens all had alpha = 0 and that left every other coefficient
  /// and b bit-identical is certified by reference to the previous state (whose hash the audit
  /// chain holds) instead of the O(n |S u E| d) check. `memory verify` re-establishes the chain.
  bool certificate_reference = true;
  /// Forget: also compare with a from-scratch batch re-solve on the remaining tokens (`--resolve`).
  /// Costs one full solve per forget.
  bool certificate_resolve = false;
  /// Forget: number of probe queries (removed keys first, then retained support keys) on which the
  /// certificate compares readouts. Only the maximal deviation enters the certificate.
  /// Operations that move no coefficient run from the stored rows alone when this Store has not
  /// restored the memory: forgetting a reserve-only record (every token alpha = 0), whose hash
  /// after follows from the records' persisted bucket digests and whose certificate argues by
  /// reference (needs certificate_check and certificate_reference, no resolve), and adding a record
  /// whose every token lies strictly inside the description (g > 0 against the stored support)
  /// (docs/store.md "Operations without a restore"). Any condition they cannot establish falls
  /// back to the ordinary path. false: always restore.
  bool without_restore = true;
  int certificate_probes = 8;
  /// A store created by this open encrypts every record's token keys and values at rest with
  /// AES-256-GCM under a data key of its own, kept in the key store STORE.keys (docs/store.md
  /// "Encryption at rest"). false: a plaintext store (`memory create --plaintext`). Recorded in
  /// the store when it is created; ignored when opening an existing store.
  bool encrypt = true;
  /// Master key wrapping the data keys in STORE.keys (docs/store.md "Master key"): the name of an
  /// environment variable holding it as 64 hexadecimal digits (e.g. "SVATTN_MASTER_KEY"), or
  /// master_key_file: a file holding those digits, readable by its owner only (mode 0600/0400).
  /// At most one of the two; both empty (default): no master key. A key store created with a
  /// master key must be opened with it; one created without it refuses a master key, and so does
  /// a plaintext store (except encrypt_store, which creates the key store wrapped). MasterKeyError.
  std::string master_key_env;
  std::string master_key_file;
};

// ------------------------------------------------------------------------------------ descriptions

struct RecordInfo {
  std::int64_t record = 0;
  int tokens = 0;  ///< token rows held for the record
  bool suspended = false;
  /// Its data key was destroyed (a restored copy; docs/store.md "Shredded records"): the rows
  /// cannot be decrypted and the record is excluded from the memory.
  bool shredded = false;
};

/// A record whose ciphertext is in the file but whose data key the key store has destroyed: a
/// copy of the data file from before the record's erasure (docs/store.md "Shredded records").
struct ShreddedRecord {
  std::string memory;
  std::int64_t record = 0;
  std::string key_id;
  std::string destroyed_utc;  ///< when the key was destroyed (from the key store's tombstone)
  std::int64_t tokens = 0;    ///< its token rows in the file when the store was opened
  bool suspended = false;
  /// A writable open deleted its rows and re-solved the memory without it (audit entry "purge");
  /// false on a read-only open, which excludes it in RAM only.
  bool purged = false;
};
nlohmann::json shredded_record_to_json(const ShreddedRecord& r);

/// How a Store object last restored a memory from the file (Store::last_restore).
struct RestoreReport {
  bool restored = false;          ///< this object restored the memory (false: never loaded)
  bool screening_used = false;    ///< persisted screening bounds seeded the restore
  std::string screening_problem;  ///< why persisted bounds were refused ("" when absent or used)
  bool resolved = false;          ///< the stored state did not check and was re-solved
  long kernel_evaluations = 0;    ///< kernel values the restore computed
  double seconds = 0;             ///< reading the rows, restoring, the hash check
};

struct MemoryInfo {
  std::string name;
  MemorySettings settings;
  int dim = 0;
  int value_dim = 0;
  int tokens = 0;         ///< tokens in the memory (active records)
  int stored_tokens = 0;  ///< token rows in the file (active + suspended)
  int records = 0;
  int suspended_records = 0;
  std::string state_sha256;
  std::int64_t last_audit_seq = 0;
  /// The stored state's summary (read from the memories and support rows, not re-derived).
  int margin = 0;
  int error = 0;
  double b = 0;
  Status status = Status::kEmpty;
  bool warmup = false;
  /// Records excluded because their data key was destroyed (read-only open of a restored copy).
  /// While > 0, state_sha256, b, status, margin, error and warmup describe the memory without
  /// them (batch re-solve of the remaining tokens) and tokens excludes their rows.
  int shredded_records = 0;
  /// The state hash the file's memories row holds (equals state_sha256 unless shredded_records).
  std::string file_state_sha256;
};

/// One row of the audit log. The entry hash is SHA-256 over canonical_audit_bytes(entry), which
/// covers every field but entry_hash itself, prev_hash included (docs/store.md).
struct AuditEntry {
  std::int64_t seq = 0;
  std::string time_utc;   ///< ISO-8601, e.g. 2024-05-01T12:00:00.123Z
  std::string operation;  ///< create | add | forget | suspend | resume
  std::string memory;
  std::int64_t record = -1;  ///< -1 when the operation concerns no record (create)
  std::int64_t token_count = 0;
  std::string state_before;  ///< state_sha256 before (empty for create)
  std::string state_after;
  std::string certificate;  ///< compact JSON text (never keys or values)
  std::string prev_hash;    ///< entry_hash of seq - 1; 64 zeros for seq 1
  std::string entry_hash;
};
std::vector<std::uint8_t> canonical_audit_bytes(const AuditEntry& e);
nlohmann::json audit_entry_to_json(const AuditEntry& e);

struct OpResult {
  AuditEntry entry;                 ///< the audit row written
  OpDiagnostics diagnostics;        ///< of the memory operation
  double memory_seconds = 0;        ///< in-RAM memory update (path + canonical refinement)
  double total_seconds = 0;         ///< whole operation: memory, transaction, commit, checkpoint
  double screening_seconds = 0;     ///< the persisted screening bounds: head row and blobs written
  double commit_seconds = 0;        ///< COMMIT (WAL append + fsync)
  double shred_seconds = 0;         ///< forget: the data key's destruction after the commit
  double checkpoint_seconds = 0;    ///< forget: wal_checkpoint(TRUNCATE) after the commit
  bool wal_truncated = true;        ///< forget: the WAL checkpoint(TRUNCATE) completed
  int memory_tokens = 0;            ///< tokens in the memory after the operation
  std::int64_t memory_records = 0;  ///< records of the memory after the operation (incl. suspended)
};

struct ForgetResult : OpResult {
  RemovalCertificate certificate;
  double certificate_seconds = 0;  ///< certificate (and its batch re-solve when enabled)
};

/// Progress of Store::import_records after each committed chunk.
struct ImportProgress {
  std::int64_t records_total = 0;    ///< distinct records in the input
  std::int64_t records_skipped = 0;  ///< already in the memory with identical tokens (resume)
  std::int64_t records_done = 0;     ///< committed by this call so far
  std::int64_t tokens_done = 0;
  double seconds = 0;  ///< since the call started
};

struct ImportOptions {
  /// Records per transaction (one audit entry "import" per chunk). >= 1.
  std::int64_t chunk_records = 128;
  /// Called after every committed chunk (e.g. a progress line). May be empty.
  std::function<void(const ImportProgress&)> progress;
};

struct ImportResult {
  ImportProgress totals;
  std::int64_t chunks = 0;
  std::string state_sha256;         ///< after the import
  std::vector<AuditEntry> entries;  ///< one per committed chunk
};

/// Per-memory part of a verification.
struct MemoryVerification {
  std::string name;
  int tokens = 0;
  std::string stored_sha256;
  std::string resolved_sha256;    ///< batch re-solve of the stored tokens
  bool resolve_equal = false;     ///< resolved_sha256 == stored_sha256
  VerifyReport report;            ///< verify_state on the stored state (no re-solve)
  bool audit_consistent = false;  ///< last audit state_after of this memory == stored hash
  /// Ridge 0 with duplicate keys (or a linear/poly kernel): the stored state passes verify_state
  /// but the re-solve found another, equally optimal one. Reported in notes, not a problem.
  bool uniqueness_not_established = false;
  /// No problem at all for this memory: every stored field (b, status, warmup, kkt_*, created_utc,
  /// token rows) agrees with the re-derived state and the audit log.
  bool fields_ok = false;
  /// Records of this memory whose data key is destroyed (a restored copy, read-only open): they
  /// are excluded, resolved_sha256 is the state without them and report checks that state.
  std::vector<std::int64_t> shredded_records;
  bool ok() const {
    return (resolve_equal || uniqueness_not_established || !shredded_records.empty()) &&
           report.ok() && audit_consistent && fields_ok;
  }
};

struct StoreVerification {
  bool integrity_ok = false;  ///< PRAGMA integrity_check found nothing (SQLite)
  /// false on PostgreSQL: no page-level check ran (integrity_ok then false too; see notes)
  bool integrity_checked = true;
  bool chain_ok = false;      ///< audit hash chain, sequence and head anchor
  std::int64_t audit_entries = 0;
  std::string audit_head;  ///< entry_hash of the last entry
  std::vector<MemoryVerification> memories;
  std::vector<std::string> problems;  ///< one line per mismatch found
  std::vector<std::string> notes;     ///< informational, e.g. "uniqueness not established"
  bool ok() const { return problems.empty(); }
};
nlohmann::json verification_to_json(const StoreVerification& v);

// ------------------------------------------------------------------------------------------ backup

/// A consistent online copy of a store's data file (docs/store.md "Backups").
struct StoreBackup {
  std::string source;
  std::string destination;
  std::string encryption;     ///< the store's: "aes-256-gcm" or "none" (plaintext)
  std::int64_t bytes = 0;     ///< size of the copy
  std::string sha256;         ///< of the copy
  bool integrity_ok = false;  ///< PRAGMA quick_check of the copy
  bool keys_included = false; ///< always false: the data keys stay in SOURCE.keys
  std::string note;           ///< what the copy does and does not hold, for the user
  double seconds = 0;
};
nlohmann::json backup_to_json(const StoreBackup& b);

/// Copies the data file of the store at `store_path` (committed contents, WAL included, while
/// other connections keep working) to `destination`, which must not exist (AlreadyExists, nothing
/// written); the copy appears complete or not at all. The data keys are never copied: a record of
/// an encrypted store erased after the backup stays unreadable in the copy. A plaintext store's
/// copy holds its records' bytes, and erasing a record later does not remove them from it.
/// Throws like Store's constructor for a missing or foreign file.
StoreBackup backup_store(const std::string& store_path, const std::string& destination);

// ---------------------------------------------------------------------------------------- encrypt

/// What encrypt_store did (docs/store.md "Encrypting an existing store").
struct StoreEncryptionResult {
  std::string path;
  bool converted = false;          ///< this call encrypted the store's records
  bool already_encrypted = false;  ///< the store was encrypted before this call (nothing sealed)
  /// The free-space scrub (VACUUM + WAL truncation) ran: after a conversion, or to finish one
  /// that was interrupted after its commit (meta 'encrypt_scrub_pending').
  bool scrubbed = false;
  bool wal_truncated = false;   ///< the final wal_checkpoint(TRUNCATE) completed
  std::string wrapping;         ///< the key store's: "aes-256-gcm" (master key) or "none"
  /// Where the data keys are: STORE.keys, or the keys= of a PostgreSQL URI (no password).
  std::string key_store;
  /// What the scrub cannot promise, in words (PostgreSQL: old plaintext tuples may stay in the
  /// server's files and WAL archives; docs/store.md "Encrypting an existing store"); empty on
  /// SQLite, whose scrub leaves no plaintext in the store's files.
  std::string residual;
  std::int64_t records = 0;     ///< records sealed under fresh data keys
  std::int64_t tokens = 0;      ///< token rows rewritten
  nlohmann::json state_sha256;  ///< memory name -> state hash (unchanged by the conversion)
  AuditEntry entry;             ///< the store-level audit entry "encrypt" (seq 0 if none)
  double seconds = 0;
};
nlohmann::json encryption_result_to_json(const StoreEncryptionResult& r);

/// Converts the plaintext store at `path` in place: every record (active and suspended) gets a
/// fresh data key in STORE.keys (wrapped when options names a master key), all its token rows are
/// rewritten sealed, meta 'encryption' becomes aes-256-gcm, a store-level audit entry "encrypt" is
/// appended, all in one transaction; then VACUUM rebuilds the file (no freed page or cell keeps
/// plaintext) and the WAL is truncated. On PostgreSQL (a postgresql://...?keys=... URI) the keys
/// go to the URI's key store and the scrub is VACUUM FULL of the store's tables (`residual` says
/// what it cannot remove). State hashes do not change. On an encrypted store it only
/// finishes an interrupted scrub, else does nothing (already_encrypted). Throws like Store's
/// constructor (options.read_only and options.create must be false).
StoreEncryptionResult encrypt_store(const std::string& path, const StoreOptions& options = {});

// ------------------------------------------------------------------------------------------- store

class Store {
 public:
  /// Opens (or with options.create, creates) a store. Throws IoError (missing/unreadable),
  /// FormatError (not a store, newer schema, corrupted or truncated), StoreBusy, StoreError.
  /// Nothing is written to a file that fails these checks. `path` is an SQLite file or a
  /// PostgreSQL URI "postgresql://...[?keys=PATH]" (docs/store.md "PostgreSQL"; InvalidArgument
  /// when this build has no libpq, or for a new encrypted store without keys=).
  explicit Store(const std::string& path, const StoreOptions& options = {});
  ~Store();  ///< checkpoints the WAL (TRUNCATE) and closes
  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& path() const;
  const StoreOptions& options() const;
  /// "aes-256-gcm" (token payloads encrypted per record) or "none" (a plaintext store).
  const std::string& encryption() const;
  /// "aes-256-gcm" when the data keys are wrapped by a master key, "none" when they are not, ""
  /// for a plaintext store (no key store).
  std::string key_wrapping() const;
  /// Records found shredded when this object opened the store (docs/store.md "Shredded
  /// records"): a writable open purged them (purged = true, audit entry "purge" per memory); a
  /// read-only open excludes them from every view and query.
  const std::vector<ShreddedRecord>& shredded_records() const;
  /// The "purge" audit entries this object's open appended (one per memory; writable opens only).
  const std::vector<AuditEntry>& purge_entries() const;
  /// The key store file of an encrypted store: STORE.keys beside an SQLite file, the keys=PATH of
  /// a postgresql:// URI (docs/store.md "PostgreSQL").
  std::string key_store_path() const;

  /// Throws InvalidArgument unless `name` has 1 to 256 bytes, no control characters and is valid
  /// UTF-8 (names enter the audit log and JSON output).
  static void validate_memory_name(const std::string& name);
  /// Creates an empty memory. Throws AlreadyExists, InvalidArgument (bad settings, dims, name).
  OpResult create_memory(const std::string& name, const MemorySettings& settings, int dim,
                         int value_dim);
  std::vector<std::string> memory_names() const;
  bool has_memory(const std::string& name) const;
  MemoryInfo memory_info(const std::string& name) const;
  std::vector<RecordInfo> records(const std::string& name) const;
  /// The in-RAM memory (restored from the file on first use, reloaded when another connection
  /// changed it). Throws NotFound. The reference is valid until the next operation on this Store
  /// (a failed operation drops the in-RAM memory and reloads it on next use); copy it to keep it.
  const Memory& memory(const std::string& name);
  /// How this object last restored memory `name` (restored == false if it never did).
  RestoreReport last_restore(const std::string& name) const;
  /// The canonical state as stored in the file (not re-derived). Throws NotFound.
  State stored_state(const std::string& name) const;

  /// Adds record `record` with keys (n x dim) and values (n x value_dim; pass nullptr for values =
  /// keys); token positions are the row indices. Throws NotFound, AlreadyExists (record present,
  /// active or suspended), InvalidArgument (dimension mismatch, > 2^23 rows, bad id), FormatError
  /// (NaN/Inf entries, from TokenSet::validate).
  OpResult add_record(const std::string& name, std::int64_t record, const RowMatrix& keys,
                      const RowMatrix* values = nullptr);
  /// Bulk import: row i of keys (and values; nullptr = keys) belongs to record record_of_row[i]; a
  /// record's positions are its rows in input order. Records are imported in ascending id, in
  /// chunks of options.chunk_records, one transaction (and one audit entry "import") per chunk, so
  /// a crash loses at most the chunk in flight. A record already in the memory with bit-identical
  /// tokens is skipped (resuming an interrupted import); with different tokens it is an error.
  /// Everything is checked before the first write: throws InvalidArgument (sizes, dimensions, a
  /// record id out of range or with > 2^23 rows; the message names the row), AlreadyExists (a
  /// record present with other tokens), NotFound. The final state is the one a record-by-record
  /// add would give (the canonical state depends on the token set only).
  ImportResult import_records(const std::string& name,
                              const std::vector<std::int64_t>& record_of_row, const RowMatrix& keys,
                              const RowMatrix* values = nullptr, const ImportOptions& options = {});
  /// Erases the record: decremental removal of its tokens, certificate, rows deleted with
  /// secure_delete, WAL checkpointed (TRUNCATE). A suspended record is erased too (its tokens are
  /// not in the memory, the state is unchanged). Throws NotFound.
  ForgetResult forget_record(const std::string& name, std::int64_t record);
  /// Reversible exclusion: tokens kept in the file, removed from the memory. Throws NotFound,
  /// InvalidArgument when already suspended.
  OpResult suspend_record(const std::string& name, std::int64_t record);
  /// Adds a suspended record's tokens back. Throws NotFound, InvalidArgument when not suspended.
  OpResult resume_record(const std::string& name, std::int64_t record);

  /// Readouts o(q) (rows x value_dim) of the rows of `queries`. Throws InvalidArgument on a
  /// dimension mismatch.
  RowMatrix query(const std::string& name, const RowMatrix& queries);
  /// Decision function f(q) of the rows of `queries`.
  std::vector<double> decision(const std::string& name, const RowMatrix& queries);

  /// Checks everything from the file alone: integrity, the audit chain (edited, deleted, reordered
  /// or inserted rows), and for every memory that the stored state equals a batch re-solve of the
  /// stored tokens and passes verify_state. Does not use the in-RAM memories.
  StoreVerification verify() const;
  std::vector<AuditEntry> audit() const;

 private:
  friend StoreEncryptionResult encrypt_store(const std::string& path, const StoreOptions& options);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace svattn
