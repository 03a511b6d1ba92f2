// The screening bounds (screening_bounds.cpp, screening_bounds_blobs.cpp; docs/store.md
// "Components", "Persisted screening", "Bounds groups"): owns the `screening` table (one head row
// per memory: the state its bounds belong to, how many tokens, the epoch, the checksum, the
// support digest) and the `bounds_groups` table (each group's counts, its key and spare, and the
// blob of its active records' bounds, sealed under the group's key in an encrypted store). Keys
// come from the key vault; which records are active and in which group is the caller's to say
// (the records table is not read here). Private to the store.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bounds_codec.h"
#include "crypto.h"
#include "db/database.h"
#include "key_vault.h"
#include "payload_reader.h"
#include "svattn/store.h"

namespace svattn::store_detail {

class ScreeningBounds {
 public:
  ScreeningBounds(Database& db, KeyVault& vault) : db_(db), vault_(vault) {}
  ScreeningBounds(const ScreeningBounds&) = delete;
  ScreeningBounds& operator=(const ScreeningBounds&) = delete;

  // ------------------------------------------------------------------------------ the head
  ScreeningHead read_head(std::int64_t memory_id);
  /// The head is bound to `state_sha256` and passes its checksum.
  static bool head_intact(std::int64_t memory_id, const std::string& state_sha256,
                          const ScreeningHead& h);
  /// The head of a memory whose bounds may be read for `n` active tokens (bound to
  /// `state_sha256`, checksum intact, tokens > 0 and = n); otherwise false, with `problem`
  /// saying why when the head exists but fails a check.
  bool usable_head(std::int64_t memory_id, const std::string& state_sha256, std::size_t n,
                   ScreeningHead* h, std::string* problem);
  /// Inserts or replaces the head row (its checksum computed here; no bounds in the row).
  void write_head(std::int64_t memory_id, const std::string& state_sha256, std::int64_t tokens,
                  std::int64_t epoch, const std::string& support_sha256);
  /// The support digest of the head when it is bound to `state_sha256` (empty: none).
  std::string support_digest_of(std::int64_t memory_id, const std::string& state_sha256);
  /// The head row as a schema 2-5 file has it (every bound in `bounds` up to schema 4).
  struct LegacyHead {
    bool present = false;
    std::string state_sha256, checksum, support_sha256;
    std::int64_t tokens = 0;
    std::vector<std::uint8_t> bounds;
  };
  LegacyHead read_legacy_head(std::int64_t memory_id);
  /// A schema 2-4 head of state `from` re-bound to state `to` (the upgrade to hash version 2):
  /// same bounds, checksum and support digest recomputed over `to`; a head of another state is
  /// left (it fails its check).
  /// `support` computes the support digest of `to` (only when there is a head to re-bind).
  void rebind_legacy_head(std::int64_t memory_id, const std::string& from, const std::string& to,
                          const std::function<std::string()>& support);

  // ------------------------------------------------------------------------- membership
  /// Places `records` (ascending, with their token rows) into the memory's groups: each joins
  /// the newest group while it has room (kGroupMaxRecords, kGroupMaxTokens), else starts a new
  /// one (a row without a key yet). Updates the groups' counts; returns the records' groups
  /// (aligned) and appends the new groups to `created`. The caller records each record's group.
  std::vector<std::int64_t> join(std::int64_t memory_id,
                                 const std::vector<std::pair<std::int64_t, std::int64_t>>& records,
                                 std::vector<std::int64_t>* created);
  /// Every group id of the memory (ascending).
  std::vector<std::int64_t> group_ids(std::int64_t memory_id);
  /// How many groups the store holds (every memory).
  std::int64_t group_count();
  /// A forget (or purge) of `record`, `tokens` token rows, from its `group`, inside the
  /// operation's transaction: the group's counts; its blob cleared; in an encrypted store its key
  /// replaced by its spare (or a fresh key) and the old key scheduled for destruction in the key
  /// vault; a group left without records deleted, both its keys scheduled. Fills `se`'s bounds
  /// fields when given (docs/store.md "Bounds groups", Erasure).
  void leave(std::int64_t memory_id, const std::string& memory, std::int64_t record,
             std::int64_t group, std::int64_t tokens, StoreErasure* se);

  // --------------------------------------------------------------------------------- keys
  /// Sets the key id of a group, and its spare when given (made by the caller's create_keys).
  void set_key(std::int64_t memory_id, std::int64_t group, const std::string& key_id,
               const std::string& spare_id = {});
  /// The keys that seal `groups` (encrypted store; empty map otherwise): each group's live key;
  /// a group without one (NULL, or destroyed: a restored copy) gets a fresh key.
  std::map<std::int64_t, SecretKey> keys_for(std::int64_t memory_id,
                                             const std::vector<std::int64_t>& groups);
  /// The groups (every memory, ascending) whose key has no spare.
  std::vector<KeyOwner> groups_without_spare();
  /// The same as one part of a read that spans components: `SELECT tag, memory_id, NULL, NULL,
  /// group_id`; group_from_row decodes one of its rows.
  static std::string groups_without_spare_part(int tag);
  static KeyOwner group_from_row(Statement& q);
  /// next_key_id of `groups[i]` set to `made[i]` where the group still has none (deferred).
  void set_spare_keys(const std::vector<KeyOwner>& groups, const std::vector<NewDataKey>& made);
  /// The groups of a plaintext store (every memory, ascending), for its encryption.
  std::vector<KeyOwner> unsealed_groups();
  /// A plaintext group's blob (if any) sealed under `k`, and `k` made the group's key.
  void seal_group(const KeyOwner& group, const NewDataKey& k);

  // -------------------------------------------------------------------------------- blobs
  /// The group's blob opened and decoded into `out`; empty, or what is wrong ("… has no bounds"
  /// when the blob is NULL, and then `absent`, when given, is set).
  std::string read_blob(std::int64_t memory_id, std::int64_t group, GroupBounds* out,
                        bool* absent = nullptr);
  /// `g` (the group's blob as read) with `record`'s entry removed, then set to `bounds` unless
  /// they are empty, written back under the group's current key (NULL when no entry is left).
  void rewrite_entry(std::int64_t memory_id, std::int64_t group, GroupBounds g, std::int64_t record,
                     const std::vector<double>& bounds);
  /// The bounds of `count` tokens of the memory's active ids from index `first`, appended to
  /// `out`.
  using BoundsSource =
      std::function<void(std::size_t first, std::size_t count, std::vector<double>& out)>;
  /// Writes the blobs of the groups in `members` (group -> its active records, ascending) from
  /// `bounds_of` over the active token ids `ids` (ascending): each member with tokens among `ids`
  /// is an entry; a group without one gets no blob (NULL).
  void write_groups(std::int64_t memory_id, const std::vector<TokenId>& ids, std::int64_t epoch,
                    const std::map<std::int64_t, std::vector<std::int64_t>>& members,
                    const BoundsSource& bounds_of);
  /// The bounds of `ids` (ascending active token ids) from the group blobs of epoch `epoch` into
  /// `bounds` (sized like ids); `group_of` maps each active record to its group (-1: none).
  /// Empty, or the first problem.
  std::string read_bounds(std::int64_t memory_id, const std::vector<TokenId>& ids,
                          std::int64_t epoch,
                          const std::unordered_map<std::int64_t, std::int64_t>& group_of,
                          PayloadReader& reader, std::vector<double>& bounds);

  /// Writes group blobs, each sealed under its group's key (plaintext when none is given); on
  /// PostgreSQL collected and sent by flush() in one UPDATE … FROM unnest(…) per kBatch groups.
  /// Call flush() before anything reads the blobs back or the transaction commits; the destructor
  /// asserts that nothing is left unless an exception unwinds.
  class GroupWriter {
   public:
    GroupWriter(Database& db, std::int64_t memory_id);
    ~GroupWriter() noexcept(false);
    GroupWriter(const GroupWriter&) = delete;
    GroupWriter& operator=(const GroupWriter&) = delete;
    /// The blob of `group`: `g` encoded, sealed under `key` unless null.
    void write(std::int64_t group, const GroupBounds& g, const SecretKey* key);
    /// The blob of `group` set to NULL (no bounds).
    void clear(std::int64_t group);
    /// Sends the collected blobs (PostgreSQL; nothing is collected on SQLite).
    void flush();
    static constexpr std::size_t kBatch = 32;  // groups per batched UPDATE (at most ~1 MB)

   private:
    void put(std::int64_t group, const std::vector<std::uint8_t>& blob);
    Database& db_;
    std::int64_t memory_id_;
    bool batched_;                    // PostgreSQL: collect, then flush()
    Statement update_;                // the per-group or the batched UPDATE
    std::unique_ptr<Sealer> sealer_;  // made at the first sealed group
    std::vector<std::uint8_t> sealed_;
    std::vector<std::int64_t> groups_, offsets_, lengths_;  // the batch (offsets 1-based)
    std::vector<std::uint8_t> blobs_;                       // every blob of it, back to back
  };

 private:
  /// One group blob opened (sealed under `key_id` unless empty) into `plain`; empty, or why not.
  std::string open_blob(std::int64_t memory_id, std::int64_t group, const std::string& key_id,
                        PayloadReader& reader, const std::uint8_t*& blob, std::size_t& n,
                        std::vector<std::uint8_t>& plain);

  Database& db_;
  KeyVault& vault_;
};

}  // namespace svattn::store_detail
