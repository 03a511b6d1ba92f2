// The audit log (audit_log.h; docs/store.md "Audit log"): appending entries (sequence, time,
// previous hash, entry hash, head anchor), reading the log, and checking the chain and its anchor.
#include "audit_log.h"

#include <algorithm>

#include "svattn/hash.h"
#include "utc_clock.h"

namespace svattn::store_detail {

AuditLog::Head AuditLog::head() {
  Statement q(db_.handle(), "SELECT seq, entry_hash FROM audit ORDER BY seq DESC LIMIT 1");
  if (q.step()) return {q.int64(0), q.text(1)};
  return {0, kZeroHash};
}

std::string AuditLog::head_part(int tag) {
  return "SELECT " + std::to_string(tag) +
         ", seq, NULL, entry_hash, NULL FROM (SELECT seq, entry_hash FROM audit ORDER BY seq DESC "
         "LIMIT 1) h";
}

AuditLog::Head AuditLog::head_from_row(Statement& q) { return {q.int64(1), q.text(3)}; }

void AuditLog::append(AuditEntry& e) { append({&e}); }

// One read of the chain's head for all the entries, one INSERT per few entries, one update of the
// anchor; the writes are deferred (Statement::defer: on PostgreSQL they travel with the next
// statement that reads, or the COMMIT).
void AuditLog::append(const std::vector<AuditEntry*>& entries, const Head* known) {
  if (entries.empty()) return;
  const Head last = known != nullptr ? *known : this->head();
  std::string head = last.hash;
  std::int64_t seq = last.seq + 1;
  for (AuditEntry* e : entries) {
    e->seq = seq++;
    e->prev_hash = head;
    e->time_utc = now_utc();
    e->entry_hash = sha256_hex(canonical_audit_bytes(*e));
    head = e->entry_hash;
  }
  constexpr std::size_t kPerStatement = 8;
  constexpr int kColumns = 11;
  for (std::size_t at = 0; at < entries.size(); at += kPerStatement) {
    const std::size_t n = std::min(kPerStatement, entries.size() - at);
    std::string sql =
        "INSERT INTO audit(seq, time_utc, operation, memory, record, token_count, state_before, "
        "state_after, certificate, prev_hash, entry_hash) VALUES ";
    for (std::size_t k = 0; k < n; ++k) {
      sql += k == 0 ? "(" : ", (";
      for (int c = 1; c <= kColumns; ++c)
        sql += (c == 1 ? "?" : ", ?") + std::to_string(static_cast<int>(k) * kColumns + c);
      sql += ")";
    }
    Statement ins(db_.handle(), sql);
    for (std::size_t k = 0; k < n; ++k) {
      const AuditEntry& e = *entries[at + k];
      const int b = static_cast<int>(k) * kColumns;
      ins.bind(b + 1, e.seq)
          .bind(b + 2, e.time_utc)
          .bind(b + 3, e.operation)
          .bind(b + 4, e.memory)
          .bind(b + 5, e.record)
          .bind(b + 6, e.token_count)
          .bind(b + 7, e.state_before)
          .bind(b + 8, e.state_after)
          .bind(b + 9, e.certificate)
          .bind(b + 10, e.prev_hash)
          .bind(b + 11, e.entry_hash);
    }
    ins.defer();
  }
  Statement meta(db_.handle(),
                 "UPDATE meta SET value = CASE key WHEN 'audit_head_seq' THEN ?1 ELSE ?2 END "
                 "WHERE key IN ('audit_head_seq', 'audit_head_hash')");
  meta.bind(1, std::to_string(entries.back()->seq)).bind(2, head).defer();
}

std::vector<AuditEntry> AuditLog::read() {
  {
    std::vector<AuditEntry> out;
    Statement q(db_.handle(),
                "SELECT seq, time_utc, operation, memory, record, token_count, state_before, "
                "state_after, certificate, prev_hash, entry_hash FROM audit ORDER BY seq");
    while (q.step()) {
      AuditEntry e;
      e.seq = q.int64(0);
      e.time_utc = q.text(1);
      e.operation = q.text(2);
      e.memory = q.text(3);
      e.record = q.int64(4);
      e.token_count = q.int64(5);
      e.state_before = q.text(6);
      e.state_after = q.text(7);
      e.certificate = q.text(8);
      e.prev_hash = q.text(9);
      e.entry_hash = q.text(10);
      out.push_back(std::move(e));
    }
    return out;
  }
}

void AuditLog::check(const std::vector<AuditEntry>& entries, StoreVerification& v,
                     std::map<std::string, std::pair<std::string, std::int64_t>>& last_state) {
  const std::size_t problems_before_chain = v.problems.size();
  std::string prev = kZeroHash;
  std::int64_t expect_seq = 1;
  for (const AuditEntry& e : entries) {
    const std::string where = "audit entry " + std::to_string(e.seq);
    if (e.seq != expect_seq) {
      v.problems.push_back(where + ": expected sequence number " + std::to_string(expect_seq) +
                           " (a row was deleted, inserted or renumbered)");
    }
    if (e.prev_hash != prev) {
      v.problems.push_back(where +
                           ": prev_hash does not match the previous entry's hash "
                           "(rows edited, deleted or reordered)");
    }
    const std::string recomputed = sha256_hex(canonical_audit_bytes(e));
    if (recomputed != e.entry_hash) {
      v.problems.push_back(where + ": entry hash does not match its contents (row edited)");
    }
    if (e.operation == "upgrade" || e.operation == "shred" ||
        e.operation == "encrypt") {  // store-level: no memory state
      if (!e.memory.empty() || !e.state_before.empty() || !e.state_after.empty()) {
        v.problems.push_back(where + ": an upgrade entry names a memory or a state");
      }
      prev = e.entry_hash;
      expect_seq = e.seq + 1;
      continue;
    }
    auto it = last_state.find(e.memory);
    if (e.operation == "create") {
      if (it != last_state.end()) {
        v.problems.push_back(where + ": memory '" + e.memory + "' created twice");
      }
    } else if (it == last_state.end()) {
      v.problems.push_back(where + ": operation on memory '" + e.memory + "' before its creation");
    } else if (it->second.first != e.state_before) {
      v.problems.push_back(where +
                           ": state_before does not continue the memory's previous "
                           "state_after");
    }
    last_state[e.memory] = {e.state_after, e.seq};
    prev = e.entry_hash;
    expect_seq = e.seq + 1;
  }
  v.audit_entries = static_cast<std::int64_t>(entries.size());
  v.audit_head = entries.empty() ? kZeroHash : entries.back().entry_hash;
  {
    std::string head_seq;
    std::string head_hash;
    Statement q(db_.handle(), "SELECT key, value FROM meta WHERE key LIKE 'audit_head_%'");
    while (q.step()) {
      if (q.text(0) == "audit_head_seq") head_seq = q.text(1);
      if (q.text(0) == "audit_head_hash") head_hash = q.text(1);
    }
    const std::string have_seq = entries.empty() ? "0" : std::to_string(entries.back().seq);
    if (head_seq != have_seq || head_hash != v.audit_head) {
      v.problems.push_back("audit head anchor (meta) says entry " + head_seq + " " +
                           head_hash.substr(0, 16) + "…, the log ends at entry " + have_seq + " " +
                           v.audit_head.substr(0, 16) +
                           "… (entries deleted or appended outside the store)");
    }
  }
  v.chain_ok = v.problems.size() == problems_before_chain;
}

}  // namespace svattn::store_detail
