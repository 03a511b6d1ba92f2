// The audit log (audit_log.cpp; docs/store.md "Audit log"): owns the audit table and the head
// anchor in meta (audit_head_seq, audit_head_hash). Appends hash-chained entries inside the
// caller's write transaction, reads the log, and checks the chain and the anchor. Private to the
// store.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "db/database.h"
#include "svattn/store.h"

namespace svattn::store_detail {

extern const std::string kZeroHash;

class AuditLog {
 public:
  /// The chain's last entry: seq 0 and kZeroHash when the log is empty.
  struct Head {
    std::int64_t seq = 0;
    std::string hash;
  };
  explicit AuditLog(Database& db) : db_(db) {}
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  Head head();
  /// The head as one part of a read that spans components (docs/store.md "Round trips and plans"):
  /// `SELECT tag, seq, NULL, entry_hash, NULL` of the last entry (no row: the log is empty);
  /// head_from_row decodes its row.
  static std::string head_part(int tag);
  static Head head_from_row(Statement& q);
  /// Fills seq, time, prev_hash and entry_hash, inserts the row, moves the head anchor.
  void append(AuditEntry& e);
  /// The same for several entries in order, chained to each other (one read of the head).
  /// `known` (optional): the head as the caller read it inside this write transaction; then the
  /// head is not read again. The writes are deferred (Statement::defer).
  void append(const std::vector<AuditEntry*>& entries, const Head* known = nullptr);
  /// Every entry, ascending seq.
  std::vector<AuditEntry> read();
  /// Checks the chain of `entries` (sequence, links, entry hashes, store-level entries) and the
  /// head anchor into `v`; fills the last state and seq of every memory.
  void check(const std::vector<AuditEntry>& entries, StoreVerification& v,
             std::map<std::string, std::pair<std::string, std::int64_t>>& last_state);

 private:
  Database& db_;
};

}  // namespace svattn::store_detail
