// Store::Impl, the state of an open store, shared by the files that implement it (internal). Its
// components with one owner each (docs/store.md "Components"): the connection (db/), the audit
// log (audit_log.h), the key vault (key_vault.h, over key_store.h), the screening bounds
// (screening_bounds.h, codecs in bounds_codec.h), the record rows (record_rows.h: every statement
// on `records` and `tokens`), the payload codec (payload_reader.h, pipelined_open.h) and the
// tables' DDL (schema_ddl.h); the operations over them:
//   store.cpp          Store: construction, read-only views (info, records, query, audit)
//   store_schema.cpp   opening, the schema of a new store, validation (docs/store.md "Schema")
//   migrate/upgrade.cpp  upgrades of older schema versions, one function per version step
//   store_rows.cpp     row I/O: memories, support; the restore over the record rows' cursors
//   store_screening.cpp  the persisted screening bounds after an operation and at a restore:
//                      which records are in which group, what the head and blobs get
//   store_screening_legacy.cpp  the screening layouts of schema 2-5: read-only opens, the upgrade
//   store_ops.cpp      the one skeleton of every mutating operation, and create/add/forget/
//                      suspend/resume/import chunks on it
//   store_import.cpp   bulk import planning and resume (docs/store.md "Operations")
//   store_verify.cpp   Store::verify (docs/store.md "Verification")
//   store_rehash.cpp   the state-hash format of older files: upgrade and read-only checks
//   store_forget_stored.cpp  forgetting a reserve-only record without restoring the memory
//   store_add_stored.cpp     adding a record that stays in reserve without restoring the memory
//   store_shredded.cpp records whose data key is destroyed (docs/store.md "Shredded records")
//   store_encrypt.cpp  encrypt_store: converting a plaintext store (docs/store.md "Encrypting")
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "audit_log.h"
#include "bounds_codec.h"
#include "crypto.h"
#include "db/database.h"
#include "key_store.h"
#include "key_vault.h"
#include "payload_reader.h"
#include "record_rows.h"
#include "screening_bounds.h"
#include "store_rows.h"
#include "svattn/hash.h"
#include "svattn/readout.h"
#include "svattn/store.h"
#include "utc_clock.h"
#include "support/clock.h"

namespace svattn {

namespace store_detail {

extern const char* const kMagic;

/// The operations' timer (steady clock).
using OpClock = support::MonotonicClock;
inline double seconds_since(OpClock::time_point t0) {
  return std::chrono::duration<double>(OpClock::now() - t0).count();
}

/// What the audit chain says of a memory's records (store_verify_chain.cpp).
enum class ChainState;
struct ChainRecord;
struct ImportRange;
struct ChainRecords;

/// The token set of one planned import record (ids from the record, rows in input order).
TokenSet import_record_set(std::int64_t record, const std::vector<Eigen::Index>& rows,
                           const RowMatrix& keys, const RowMatrix& values);

}  // namespace store_detail

struct Store::Impl {
  using Database = store_detail::Database;
  using Statement = store_detail::Statement;
  using Transaction = store_detail::Transaction;
  using MemoryRow = store_detail::MemoryRow;
  using RecordRow = store_detail::RecordRow;
  using Cached = store_detail::Cached;
  using StoredSupport = store_detail::StoredSupport;
  using ImportPlan = store_detail::ImportPlan;
  using StoredSupportRows = store_detail::StoredSupportRows;

  std::string path;         // the file, or a postgresql:// URI without its password
  std::string pg_conninfo;  // PostgreSQL: the URI for libpq (empty: an SQLite file)
  std::string keys_path;    // PostgreSQL: keys= of the URI (a key store file or key database)
  StoreOptions options;
  Database db;
  store_detail::AuditLog audit{db};  // the audit table and its head anchor (audit_log.h)
  std::map<std::string, Cached> cache;
  std::map<std::string, StoredSupport> supports;
  std::map<std::string, RestoreReport> restores;  // the last restore of each memory
  std::int64_t schema_version = 0;                // of the open file (1: no screening table)
  std::string encryption = "none";                // meta 'encryption' (v3; "none" before)
  bool has_key_id_column = false;                 // records.key_id exists (v3)
  /// The key store, the keys of the open transaction and the shred log (key_vault.h); a key
  /// store is attached iff encryption != "none".
  store_detail::KeyVault vault{db};
  /// The screening heads and the bounds groups (screening_bounds.h).
  store_detail::ScreeningBounds screening_bounds{db, vault};
  /// The records table and the token rows by record (record_rows.h).
  store_detail::RecordRows record_rows{db};
  bool converting = false;  // encrypt_store: a master key is accepted for a plaintext store
  // Shredded records still in the file (memory id -> record -> index into shredded_found).
  std::map<std::int64_t, std::map<std::int64_t, std::size_t>> shredded;
  std::vector<ShreddedRecord> shredded_found;  // what this open found (Store::shredded_records)
  std::vector<AuditEntry> purge_log;           // the "purge" entries this open appended
  /// Each memory's create entry (seq, certificate) as read by require_settings_bound: the audit
  /// log is append-only, so it is read once per memory and open (seq 0: none).
  std::map<std::string, AuditEntry> create_entries;

  /// Sets path (and, for a postgresql:// URI, pg_conninfo and keys_path; store.cpp).
  /// InvalidArgument when keys= names the store's own database and schema.
  void set_location(const std::string& location);
  // ------------------------------------------------------------------ store_schema.cpp
  void open();
  /// Opens the SQLite file; true when it is new (empty or created).
  bool open_file();
  /// Connects to the PostgreSQL store (docs/store.md "PostgreSQL"); true when it has no tables yet.
  bool open_postgres();
  bool cannot_share_wal() const;
  void require_writable() const;
  void initialise_schema();
  void validate_existing();
  void checkpoint(bool* truncated);
  /// What an erasure rests on for this backend (StoreErasure::secure_delete, erasure_basis).
  void describe_erasure(StoreErasure& se) const;

  // ------------------------------------------------------------------ migrate/upgrade.cpp
  /// Upgrades an older store in place (docs/store.md "Schema versions and upgrade").
  void upgrade_schema();
  void upgrade_schema_in_transaction();
  struct Upgrade;
  /// One function per version step: its tables (DDL), then, where the version changed rows, them.
  void upgrade_tables_v2(Upgrade& u);
  void upgrade_tables_v3(Upgrade& u);
  void upgrade_tables_v4(Upgrade& u);
  void upgrade_tables_v5(Upgrade& u);
  void upgrade_tables_v6(Upgrade& u);
  void upgrade_rows_v2(Upgrade& u);
  void upgrade_rows_v4(Upgrade& u);
  void upgrade_rows_v6(Upgrade& u);
  void log_upgrade(const Upgrade& u);

  // ------------------------------------------------------------------ store_payload.cpp
  /// Opens (fresh: creates) the key store of an encrypted store.
  void open_key_store(bool fresh);
  /// Sets foreign_key_store when the key store does not hold a key the store names.
  void check_key_store_is_ours();
  /// Non-empty: the key store belongs to another store (what is wrong). Every write refuses the
  /// store (nothing may be sealed under foreign keys) and verify reports it.
  std::string foreign_key_store;
  /// The key store: STORE.keys beside an SQLite file, keys= of a PostgreSQL URI (a file, or a key
  /// database's URI without its password).
  std::string key_store_path() const;
  /// The optional records columns of the open file (key_id from schema 3, bounds_group from 6).
  store_detail::RecordRows::Columns record_columns() const;
  store_detail::PayloadReader payload_reader(std::int64_t memory_id) {
    return store_detail::PayloadReader(vault.key_store(), path, memory_id);
  }
  /// Destroys every key in pending_shreds, logging each destruction as an audit entry "shred" and
  /// removing its row in one transaction; `done` (optional) receives the destructions.
  void complete_shreds(std::vector<store_detail::KeyDestruction>* done);

  // ------------------------------------------------------------------ store_shredded.cpp
  /// Records whose key_id names a key the key store has destroyed (its tombstones), with their
  /// memory's name and token count; fills `shredded` and `shredded_found`. Encrypted stores only.
  void find_shredded();
  /// Writable open: for every memory with shredded records, one transaction deletes their rows,
  /// re-solves the memory from its remaining active tokens (batch solve), writes the state and
  /// appends the audit entry "purge". Then truncates the WAL.
  void purge_shredded();
  /// One memory's purge transaction; false if another process purged the records meanwhile.
  bool purge_memory(std::int64_t memory_id, const std::vector<const ShreddedRecord*>& found);
  bool purge_memory_in_transaction(std::int64_t memory_id,
                                   const std::vector<const ShreddedRecord*>& found);
  bool has_shredded(std::int64_t memory_id) const { return shredded.count(memory_id) > 0; }
  bool is_shredded(std::int64_t memory_id, std::int64_t record) const;
  /// The in-RAM memory of a memory with shredded records (read-only open): the batch re-solve of
  /// its active tokens without them (not checked against the stored state, which includes them).
  Cached& load_without_shredded(const MemoryRow& row);
  /// memory_info of a memory with shredded records: the state without them (see MemoryInfo).
  void describe_without_shredded(const MemoryRow& row, MemoryInfo& info);
  /// verify of a memory with shredded records: the state without them, checked by verify_state.
  MemoryVerification verify_shredded(const MemoryRow& row,
                                     const std::pair<std::string, std::int64_t>* last_audit,
                                     std::vector<std::string>& problems,
                                     std::vector<std::string>& notes);

  // ------------------------------------------------------------------ store_encrypt.cpp
  /// meta 'encrypt_scrub_pending': a conversion committed but its VACUUM did not finish.
  bool scrub_pending();
  /// VACUUM (rebuilds every page from the current rows), clears the pending flag, truncates the
  /// WAL; returns whether the WAL is empty.
  bool scrub_free_space();
  /// The conversion transaction of a plaintext store (keys created, rows sealed, meta, audit).
  void convert_to_encrypted(StoreEncryptionResult& res);

  // ------------------------------------------------------------------ store_rows.cpp
  MemoryRow read_memory_row(const std::string& name);
  std::vector<MemoryRow> all_memory_rows();
  /// Tokens of the memory's active (not suspended) records, ascending id. `reader` (optional)
  /// keeps the records' openers for a later read of their blobs in the same operation (a restore
  /// then looks up each data key once, not once per pass).
  TokenSet load_active_tokens(const MemoryRow& row, store_detail::PayloadReader* reader = nullptr);
  /// The state as stored: ids from the active tokens, alpha/partition from the support table.
  State load_state(const MemoryRow& row, const std::vector<TokenId>& ids);
  /// The in-RAM memory of `row`, restored from the file when absent or stale.
  Cached& ensure_loaded(const MemoryRow& row);
  /// PostgreSQL after a bulk import of `tokens_added` token rows into memory `memory_id`: when they
  /// are at least 1000 and a tenth of the memory's tokens, ANALYZE the tables the store's joins
  /// read, so that the planner does not take the new memory's rows for a handful (docs/store.md
  /// "PostgreSQL": a query's join then re-scanned every token of the memory per support row,
  /// 270–380 ms instead of 8 ms at 20k). Nothing on SQLite, whose plans come from the schema.
  void refresh_planner_statistics(std::int64_t memory_id, std::int64_t tokens_added);
  /// Deletes the support rows of `gone` and upserts (token, part, alpha) rows (write_state's diff).
  void write_support_diff(std::int64_t memory_id, const std::vector<std::int64_t>& gone,
                          const std::vector<std::int64_t>& ids,
                          const std::vector<std::int64_t>& parts, const std::vector<double>& alpha);
  /// Writes the support diff between `before` and `after` and the memories row of `after`; true
  /// when a coefficient, a set or b moved (the screening bounds then start a new epoch).
  bool write_state(std::int64_t memory_id, const State& before, const State& after,
                   std::int64_t seq, const std::string& memory);
  /// Inserts the token rows of `ts` that `mem` retained (store_payload.cpp); in an encrypted store
  /// each record of `ts` first gets a data key (one key-store transaction) and its payloads are
  /// sealed (docs/store.md "Encryption at rest").
  void insert_tokens(std::int64_t memory_id, const TokenSet& ts, const Memory& mem);
  /// The same for callers without a memory: `retained(id)` says which tokens to write, and
  /// `audit_mode` whether the records' bucket digests are written.
  void insert_tokens(std::int64_t memory_id, const TokenSet& ts,
                     const std::function<bool(TokenId)>& retained, bool audit_mode);
  /// Bounded mode: tokens that were in the memory before (and not removed on purpose) but are no
  /// longer retained are deleted from the file. Returns how many.
  std::int64_t delete_evicted(std::int64_t memory_id, const State& before, const Memory& mem,
                              const std::vector<TokenId>& removed_on_purpose);
  RecordRow read_record(std::int64_t memory_id, std::int64_t record);
  // ------------------------------------------------------------------ store_screening.cpp
  /// Schema 5 is the first with per-record screening bounds (records.bounds), schema 6 the first
  /// with bounds groups (docs/store.md "Bounds groups").
  static constexpr std::int64_t kFirstSchemaWithRecordBounds = 5;
  static constexpr std::int64_t kFirstSchemaWithBoundsGroups = 6;
  /// Writes the screening of `row`'s memory after an operation: mem.gradient_lower_bounds() (none
  /// while the memory is empty or in warm-up) and the digest of its support. When nothing `moved`
  /// and the head is intact only the groups of the `touched` records and the `touched_groups` are
  /// rewritten (same epoch); otherwise a new epoch and every group. With `defer` (an import chunk
  /// that is not the last) a new epoch writes the head without bounds and no blob: the last chunk
  /// writes them once, instead of every chunk rewriting every group
  /// (docs/store.md "Persisted screening").
  /// `row` is the memories row before.
  void write_screening(const MemoryRow& row, const Memory& mem, bool moved,
                       const std::vector<std::int64_t>& touched, bool defer = false,
                       const std::vector<std::int64_t>& touched_groups = {});
  /// The head after an operation that moved nothing, from the stored rows: bound to
  /// `state_sha256` with `tokens_after` tokens when it was intact for row's state with
  /// `tokens_before`; otherwise it holds none (new epoch). Returns the epoch kept, or -1.
  std::int64_t update_screening_head(const MemoryRow& row, const std::string& state_sha256,
                                     std::int64_t tokens_before, std::int64_t tokens_after);
  /// Every group of the memory with its active records (ascending); groups without one map to an
  /// empty list. Records without a group are placed into groups first, so that every active
  /// record is covered.
  std::map<std::int64_t, std::vector<std::int64_t>> all_group_members(std::int64_t memory_id);
  /// The persisted bounds of `row` for `ids` when present and intact; otherwise empty, with
  /// `problem` saying why when a row exists but fails its check.
  std::vector<double> read_screening(const MemoryRow& row, const std::vector<TokenId>& ids,
                                     std::string* problem,
                                     store_detail::PayloadReader* reader = nullptr);
  /// Schema 6: the bounds of `ids` from the group blobs of epoch `epoch` into `bounds`; empty, or
  /// the first problem.
  std::string read_group_screening(const MemoryRow& row, const std::vector<TokenId>& ids,
                                   std::int64_t epoch, store_detail::PayloadReader& reader,
                                   std::vector<double>& bounds);

  // ------------------------------------------------------------------ store_screening_legacy.cpp
  /// Schema 2-4: every bound in the head row.
  std::vector<double> read_screening_v1(const MemoryRow& row, std::size_t n, std::string* problem);
  /// Schema 5: each record's bounds in records.bounds.
  std::vector<double> read_screening_v5(const MemoryRow& row, const std::vector<TokenId>& ids,
                                        std::string* problem, store_detail::PayloadReader* reader);
  /// Upgrade from schema `from` (2-5) to 6, inside its transaction: the memory's intact bounds
  /// (the head row's, or the records' blobs) written into its groups' blobs, same epoch; bounds
  /// that fail their check leave the memory without bounds (the next restore re-derives them).
  void regroup_screening(const MemoryRow& row, std::int64_t from);

  /// Places `records` (ascending; with their token rows) of memory `memory_id` into its bounds
  /// groups (docs/store.md "Bounds groups"; ScreeningBounds::join) and writes records.bounds_group;
  /// a new group's row has no key yet. Returns the records' groups (aligned) and appends the new
  /// groups to `created`.
  std::vector<std::int64_t> join_bounds_groups(
      std::int64_t memory_id, const std::vector<std::pair<std::int64_t, std::int64_t>>& records,
      std::vector<std::int64_t>* created);
  /// Places the memory's records that have no bounds group (an upgraded file, a damaged row) into
  /// groups, ascending, with their token rows counted.
  void place_unplaced_records(std::int64_t memory_id);
  /// The active records of `group` (ascending).
  std::vector<std::int64_t> group_members(std::int64_t memory_id, std::int64_t group);
  /// The stored support of memory `memory_id` (support rows joined with their token rows, alpha > 0
  /// in `out`) and its digest bound to `state_sha256` and `b` (docs/store.md "Persisted
  /// screening"). O(|S u E| d).
  std::string support_digest(std::int64_t memory_id, int dim, int value_dim,
                             const std::string& state_sha256, double b, Support* out);
  /// Token rows of a record (ascending id) with their keys and values.
  TokenSet record_tokens(const MemoryRow& row, std::int64_t record);
  /// Token ids of a record (ascending), no key/value bytes read.
  std::vector<TokenId> record_token_ids(const MemoryRow& row, std::int64_t record);
  /// The support of the stored state, for queries (no restore when the hash checks).
  const StoredSupport& stored_support(const std::string& name);

  // ------------------------------------------------------------------ store_ops.cpp
  struct OpContext;
  template <class Result>
  struct OpSteps;
  struct AddOp;
  struct ForgetOp;
  struct SuspendOp;
  struct ResumeOp;
  struct ImportChunkOp;
  /// The skeleton of every mutating operation (docs/store.md "Operations").
  template <class Op>
  auto run_op(const std::string& name, Op& op) -> decltype(op.make_result());
  /// An operation's last steps in its write transaction: the memory's record count into `out`,
  /// the commit (timed); the keys made in the transaction are referenced from then on.
  void commit_op(std::int64_t memory_id, store_detail::Transaction& t, OpResult& out);
  AuditEntry import_chunk(const std::string& name, const ImportPlan& plan,
                          const std::vector<std::size_t>& chunk, const RowMatrix& keys,
                          const RowMatrix& vals, ImportProgress& totals, bool last);

  // ------------------------------------------------------------------ store_forget_stored.cpp
  /// Whether the stored-rows operations may run on `row`: the memory is not in RAM, audit mode,
  /// optimal, out of warm-up, no shredded record.
  bool stored_rows_usable(const MemoryRow& row) const;
  store_detail::StoredSupportRows read_support_rows(std::int64_t memory_id);
  /// The hash parts of the stored state (support, b, persisted bucket digests of the active
  /// records); nullopt unless they hash to the recorded state_sha256.
  std::optional<StateHashParts> checked_hash_parts(const MemoryRow& row,
                                                   const store_detail::StoredSupportRows& sup,
                                                   const std::vector<BucketDigest>& buckets);
  /// memories.state_sha256 and last_audit_seq of an operation that moved no coefficient.
  void write_state_hash(std::int64_t memory_id, const std::string& state_sha256, std::int64_t seq);
  /// What forgetting a reserve-only record without a restore needs (plan_stored_forget).
  struct StoredForget {
    std::vector<BucketDigest> buckets;  // of the active records after the removal
    std::vector<TokenId> ids;           // the record's tokens
    std::string after_sha256;
    StoredReserveRemoval removal;
    std::int64_t group = -1;  // the record's bounds group
    std::string key_id;       // the record's data key (empty: plaintext)
  };
  /// Forget by reference from the stored rows (docs/store.md "Forget without a restore") inside
  /// the forget's write transaction `t` (the memory's row read in it), committed; or nullopt
  /// (nothing written) when a condition fails: the ordinary forget then goes on in `t`.
  std::optional<ForgetResult> forget_stored(const MemoryRow& row, std::int64_t record,
                                            store_detail::Transaction& t);
  std::optional<StoredForget> plan_stored_forget(const MemoryRow& row, std::int64_t record);
  void write_stored_forget(const MemoryRow& row, std::int64_t record, StoredForget& f,
                           ForgetResult& fr);
  /// After a forget's commit: the data key destroyed (and logged), the WAL truncated.
  void finish_forget(ForgetResult& fr);
  /// Writes records.buckets of `record` from its retained tokens (ascending id); sealed with
  /// `sealer` (the record's data key) when not null.
  void write_record_buckets(std::int64_t memory_id, std::int64_t record, const TokenSet& retained,
                            store_detail::Sealer* sealer);
  /// The persisted bucket digests of every active record (ascending) and where `record`'s are;
  /// false when one is missing or malformed, or `record` (unless -1) has none.
  bool read_active_buckets(const MemoryRow& row, std::int64_t record,
                           std::vector<BucketDigest>& all, std::size_t& first, std::size_t& count);
  /// use(record, plaintext, bytes, problem): false stops (with `problem` said).
  using RecordBlobFn =
      std::function<bool(std::int64_t, const std::uint8_t*, std::size_t, std::string&)>;
  /// Every active record (ascending) that `wanted` names, with its records.buckets or
  /// records.bounds blob (`field`) opened under the record's key when sealed; empty, or the first
  /// problem ("record R has no …", "record R: …" when a blob does not open, or use's).
  /// `reader` (optional): the openers of an earlier pass of the same operation.
  std::string read_record_blobs(const MemoryRow& row, store_detail::RecordField field,
                                const std::function<bool(std::int64_t)>& wanted,
                                const RecordBlobFn& use,
                                store_detail::PayloadReader* reader = nullptr);

  // ------------------------------------------------------------------ store_add_stored.cpp
  /// What adding a record without a restore needs (plan_stored_add).
  struct StoredAdd {
    std::vector<BucketDigest> buckets;  // of the active records, the new record's included
    std::vector<double> new_bounds;     // lower bounds of the new tokens' gradients
    std::string after_sha256;
    std::int64_t n_after = 0, support_margin = 0, support_error = 0;
    long kernel_evaluations = 0;
  };
  /// Add from the stored rows when every new token is strictly inside the description, inside
  /// the add's write transaction `t` (the memory's row read in it), committed; or nullopt
  /// (nothing written): the ordinary add then goes on in `t`. `ts` is validated.
  std::optional<OpResult> add_stored(const MemoryRow& row, std::int64_t record, const TokenSet& ts,
                                     store_detail::Transaction& t);
  std::optional<StoredAdd> plan_stored_add(const MemoryRow& row, std::int64_t record,
                                           const TokenSet& ts);
  void write_stored_add(const MemoryRow& row, std::int64_t record, const TokenSet& ts, StoredAdd& a,
                        OpResult& res);

  // ------------------------------------------------------------------ store_rehash.cpp
  /// Schema version 4 is the first whose memories rows hold version-2 state hashes.
  static constexpr std::int64_t kFirstSchemaWithHashV2 = 4;
  /// The version-1 state hash of `tokens` (ascending id) with these coefficients.
  std::string legacy_state_hash(const MemoryRow& row, const TokenSet& tokens,
                                const std::vector<double>& alpha, double b) const;
  /// Whether `current` (the version-2 hash of tokens, alpha, b) is row's stored hash, or, in a
  /// file older than schema 4, the version-1 hash of the same is.
  bool stored_hash_matches(const MemoryRow& row, const TokenSet& tokens,
                           const std::vector<double>& alpha, double b,
                           const std::string& current) const;
  /// Reading a file older than schema 4: when state.state_sha256 (row's hash) is the version-1
  /// hash of these tokens and coefficients, it becomes their version-2 hash.
  void adopt_current_hash(const MemoryRow& row, const TokenSet& tokens, State& state);
  /// Upgrade to schema 4 (inside its transaction): every memory's hash checked and replaced, one
  /// audit entry each; the names whose hash did not check go to `unverified`. Returns how many.
  std::int64_t rehash_states(std::int64_t old_schema, std::vector<std::string>* unverified);
  bool rehash_memory(const MemoryRow& row, std::int64_t old_schema);
  void rebind_screening(const MemoryRow& row, const std::string& now);
  void fill_record_buckets(const MemoryRow& row);

  // ------------------------------------------------------------------ store_verify.cpp
  bool tables_present(std::vector<std::string>& problems);
  void check_orphans(std::vector<std::string>& problems);
  void check_screening(const MemoryRow& row, const TokenSet& tokens, const State& stored,
                       std::vector<std::string>& problems);
  void check_buckets(const MemoryRow& row, const TokenSet& tokens,
                     std::vector<std::string>& problems);
  /// Token rows whose record/position disagree with their id or whose record has no row, and a
  /// created_utc that is not the time of the memory's create entry.
  void check_token_rows(const MemoryRow& row, const std::vector<AuditEntry>& entries,
                        std::vector<std::string>& problems);
  // ------------------------------------------------------------------ store_verify_chain.cpp
  /// Empty when row's settings, dim and value_dim are those of its create entry; else the
  /// difference, field by field.
  static std::string settings_mismatch(const MemoryRow& row, const AuditEntry& create);
  /// FormatError unless row's settings are those of its create entry (every operation, before
  /// it reads or changes the memory: a settings edit must not turn the next add into evictions).
  void require_settings_bound(const MemoryRow& row);
  /// The stored bucket digests of `record` opened into `plain`; empty, or the problem.
  std::string read_record_buckets(const MemoryRow& row, std::int64_t record,
                                  std::vector<std::uint8_t>& plain);
  /// A suspended record's tokens against its digests and `suspend_sha256` (the digest of its
  /// bucket digests its suspend entry recorded; empty: none); empty, or the problem.
  std::string check_suspended_record(const MemoryRow& row, std::int64_t record,
                                     const std::string& suspend_sha256);
  /// The memory's settings and records rows against the chain's account of them.
  void check_chain_records(const MemoryRow& row, const std::vector<AuditEntry>& entries,
                           std::vector<std::string>& problems);
  void check_live_keys(const MemoryRow& row, const store_detail::ChainRecords& chain,
                       std::vector<std::string>& problems);
  void check_pending_shreds(std::vector<std::string>& problems);
  /// A resume's record: the last audit entry naming it is its suspend, and its tokens match the
  /// digests recorded then (FormatError otherwise).
  void require_resumable(const MemoryRow& row, std::int64_t record, const TokenSet& tokens);

  MemoryVerification verify_memory(const MemoryRow& row,
                                   const std::pair<std::string, std::int64_t>* last_audit,
                                   const std::vector<AuditEntry>& entries,
                                   std::vector<std::string>& problems,
                                   std::vector<std::string>& notes);

  /// Runs f() in one read transaction (one snapshot). A reader whose snapshot began before a
  /// concurrent forget committed can still see the forgotten record's rows after that forget
  /// destroyed its key (the key store is not part of the snapshot): RecordShredded then means
  /// "erased meanwhile", and f() runs again on a fresh
  /// snapshot (at most 3 times; a record shredded in every snapshot is reported). Nothing
  /// half-loaded is cached (ensure_loaded and stored_support cache only what they finished).
  template <class F>
  auto read(F&& f) {
    for (int attempt = 1;; ++attempt) {
      try {
        Transaction t(db, false, path, options.busy_timeout_ms);
        auto r = f();
        t.commit();
        return r;
      } catch (const store_detail::RecordShredded&) {
        if (attempt >= 3) throw;
      }
    }
  }
};

}  // namespace svattn
