// Forgetting a reserve-only record without restoring the memory (docs/store.md "Forget without a
// restore"). When every token of the record has alpha = 0 in the stored state, removing it leaves
// the coefficients, b and partition unchanged (docs/math.md §4): the state after is the stored
// support over the remaining tokens, its hash follows from the records' persisted bucket digests
// (docs/math.md §6), and the certificate argues by reference. Nothing reads or decrypts a token
// payload; the cost is O(records + |S u E| d) instead of a restore's O(n d). Any condition this
// path cannot establish from the stored rows sends the forget down the ordinary path.
#include <chrono>
#include <cstring>

#include "store_impl.h"
#include "svattn/hash.h"

namespace svattn {

using namespace store_detail;

void Store::Impl::write_record_buckets(std::int64_t memory_id, std::int64_t record,
                                       const TokenSet& retained, Sealer* sealer) {
  const std::vector<std::uint8_t> plain = encode_buckets(record_buckets(retained));
  std::vector<std::uint8_t> sealed;
  if (sealer != nullptr) {
    sealer->seal_into({memory_id, record, -1, RecordField::kBuckets}, plain.data(), plain.size(),
                      sealed);
  }
  const std::vector<std::uint8_t>& blob = sealer != nullptr ? sealed : plain;
  record_rows.set_buckets(memory_id, record, blob);
}

std::string Store::Impl::read_record_blobs(const MemoryRow& row, RecordField field,
                                           const std::function<bool(std::int64_t)>& wanted,
                                           const RecordBlobFn& use, PayloadReader* reader) {
  Statement q = record_rows.active_record_blobs(row.id, field);  // record, key_id, blob
  PayloadReader own = payload_reader(row.id);
  PayloadReader& pr = reader != nullptr ? *reader : own;
  const KeyStore::ReadScope keys_read(vault.key_store());
  pr.prefetch_keys();  // every record's key in one scan
  std::vector<std::uint8_t> plain;
  while (q.step()) {
    const std::int64_t r = q.int64(0);
    if (!wanted(r)) continue;
    const std::string who = "record " + std::to_string(r);
    if (q.is_null(2)) return who + " has no " + to_string(field);
    const auto* blob = static_cast<const std::uint8_t*>(q.blob_data(2));
    auto n = static_cast<std::size_t>(q.bytes(2));
    if (!q.is_null(1)) {
      const RecordAad aad{row.id, r, -1, field};
      try {
        plain.resize(opened_size(aad, n));
        pr.opener(q.text(1), r).open_into(aad, blob, n, plain.data(), plain.size());
      } catch (const FormatError& e) {  // tampered, moved or shredded
        return who + ": " + e.what();
      }
      blob = plain.data();
      n = plain.size();
    }
    std::string problem;
    if (!use(r, blob, n, problem)) return problem;
  }
  return {};
}

// The persisted bucket digests of every active record, ascending; false when one is missing or
// does not open (the ordinary path then restores and re-derives).
bool Store::Impl::read_active_buckets(const MemoryRow& row, std::int64_t record,
                                      std::vector<BucketDigest>& all, std::size_t& first,
                                      std::size_t& count) {
  first = count = 0;
  bool found = false;
  const std::string problem = read_record_blobs(
      row, RecordField::kBuckets,
      [&](std::int64_t r) {  // a shredded record is not in the memory (docs/store.md)
        return !is_shredded(row.id, r);
      },
      [&](std::int64_t r, const std::uint8_t* p, std::size_t n, std::string& why) {
        const std::size_t at = all.size();
        if (!decode_buckets(p, n, all)) {
          why = "record " + std::to_string(r) + ": malformed bucket digests";
          return false;
        }
        if (r == record) {
          found = true;
          first = at;
          count = all.size() - at;
        }
        return true;
      });
  return problem.empty() && (record < 0 || found);
}

namespace {

StateSummary summary(std::size_t n, const StoredSupportRows& s, const std::string& sha,
                     const MemoryRow& row) {
  StateSummary m;
  m.n = n;
  m.margin = s.margin;
  m.error = s.error;
  m.reserve = n - s.margin - s.error;
  m.state_sha256 = sha;
  m.status = row.status;
  m.kkt = row.kkt;
  return m;
}

}  // namespace

// ------------------------------------------------------------------ shared by the stored-rows
// operations (this file and store_add_stored.cpp)

bool Store::Impl::stored_rows_usable(const MemoryRow& row) const {
  const auto it = cache.find(row.name);
  if (it != cache.end() && it->second.id == row.id && it->second.seq == row.last_audit_seq)
    return false;  // the memory is at hand: the ordinary path costs no restore
  return row.settings.mode == MemoryMode::kAudit && row.status == Status::kOptimal && !row.warmup &&
         !has_shredded(row.id);
}

StoredSupportRows Store::Impl::read_support_rows(std::int64_t memory_id) {
  StoredSupportRows s;
  Statement q(db.handle(),
              "SELECT token_id, part, alpha FROM support WHERE memory_id = ?1 ORDER BY token_id");
  q.bind(1, memory_id);
  while (q.step()) {
    s.ids.push_back(q.int64(0));
    const bool err = q.int64(1) == kPartError;
    s.is_error.push_back(err ? 1 : 0);
    s.alpha.push_back(q.real(2));
    (err ? s.error : s.margin) += 1;
  }
  return s;
}

std::optional<StateHashParts> Store::Impl::checked_hash_parts(
    const MemoryRow& row, const StoredSupportRows& sup, const std::vector<BucketDigest>& buckets) {
  StateHashParts parts;
  for (const BucketDigest& b : buckets) parts.n += b.count;
  parts.d = row.dim;
  parts.dv = row.value_dim;
  parts.b = row.b;
  for (std::size_t k = 0; k < sup.ids.size(); ++k)
    parts.nonzero_alpha.emplace_back(sup.ids[k], sup.alpha[k]);
  if (state_sha256_from_parts(row.settings.problem, parts, buckets) != row.state_sha256)
    return std::nullopt;
  return parts;
}

void Store::Impl::write_state_hash(std::int64_t memory_id, const std::string& state_sha256,
                                   std::int64_t seq) {
  Statement up(db.handle(),
               "UPDATE memories SET state_sha256 = ?2, last_audit_seq = ?3 WHERE id = ?1");
  up.bind(1, memory_id).bind(2, state_sha256).bind(3, seq).run();
}

// The checks and the state after, inside the forget's transaction; nullopt when a condition fails.
std::optional<Store::Impl::StoredForget> Store::Impl::plan_stored_forget(const MemoryRow& row,
                                                                         std::int64_t record) {
  if (!stored_rows_usable(row)) return std::nullopt;
  const ProblemSettings& p = row.settings.problem;
  const RecordRow rr = read_record(row.id, record);
  if (!rr.exists || rr.suspended) return std::nullopt;  // the ordinary path reports or handles it
  StoredForget f;
  f.group = rr.bounds_group;
  f.key_id = rr.key_id;
  StoredSupportRows sup = read_support_rows(row.id);
  for (TokenId id : sup.ids)
    if (record_of(id) == record) return std::nullopt;  // a support token: the path must move
  std::size_t first = 0, count = 0;
  if (!read_active_buckets(row, record, f.buckets, first, count)) return std::nullopt;
  std::optional<StateHashParts> checked = checked_hash_parts(row, sup, f.buckets);
  if (!checked) return std::nullopt;
  StateHashParts& parts = *checked;
  std::size_t removed = 0;
  for (std::size_t k = first; k < first + count; ++k) removed += f.buckets[k].count;
  f.ids = record_token_ids(row, record);
  const std::size_t n_after = parts.n - removed;
  if (f.ids.size() != removed || n_after == 0 ||
      static_cast<double>(n_after) * p.C <= 1.0 + 1e-9)  // the state after would be warm-up
    return std::nullopt;
  const std::size_t n_before = parts.n;
  f.buckets.erase(f.buckets.begin() + static_cast<std::ptrdiff_t>(first),
                  f.buckets.begin() + static_cast<std::ptrdiff_t>(first + count));
  parts.n = n_after;
  f.after_sha256 = state_sha256_from_parts(p, parts, f.buckets);
  StoredReserveRemoval sr;
  sr.settings = row.settings;
  sr.record_id = std::to_string(record);
  sr.removed_ids = f.ids;
  sr.before = summary(n_before, sup, row.state_sha256, row);
  sr.after = summary(n_after, sup, f.after_sha256, row);
  sr.support_ids = std::move(sup.ids);
  sr.support_alpha = std::move(sup.alpha);
  sr.support_is_error = std::move(sup.is_error);
  f.removal = std::move(sr);
  return f;
}

// Rows of the forget: tokens and record deleted, the key scheduled for destruction, the record's
// bounds group without its bounds (under a fresh key), the screening head bound to the new hash,
// the audit entry, the memories row.
void Store::Impl::write_stored_forget(const MemoryRow& row, std::int64_t record, StoredForget& f,
                                      ForgetResult& fr) {
  const auto s0 = OpClock::now();
  GroupBounds group;  // the group's blob, read under its key before leave_bounds_group replaces it
  const bool carried = f.group >= 0 && screening_bounds.read_blob(row.id, f.group, &group).empty();
  double screening = seconds_since(s0);
  StoreErasure se;
  se.path = path;
  se.memory = row.name;
  se.record = record;
  se.token_rows_erased = static_cast<std::int64_t>(f.ids.size());
  se.tokens_removed_from_memory = static_cast<std::int64_t>(f.ids.size());
  se.encryption = encryption;
  describe_erasure(se);  // PostgreSQL: what the erasure rests on, as on the ordinary path
  record_rows.delete_tokens(row.id, record);
  if (vault.enabled()) vault.schedule_record_key(row.name, record, f.key_id, se);
  record_rows.delete_row(row.id, record);
  const auto s1 = OpClock::now();
  screening_bounds.leave(row.id, row.name, record, f.group, static_cast<std::int64_t>(f.ids.size()),
                         &se);
  fr.certificate.store = se;
  // The other records' bounds hold as they are (no coefficient and not b moved): the group's blob
  // is written again without the record's, and the head is re-bound to the state after.
  const std::int64_t epoch =
      update_screening_head(row, f.after_sha256, static_cast<std::int64_t>(f.removal.before.n),
                            static_cast<std::int64_t>(f.removal.after.n));
  if (epoch >= 0 && carried && group.epoch == epoch)
    screening_bounds.rewrite_entry(row.id, f.group, std::move(group), record, {});
  fr.screening_seconds = screening + seconds_since(s1);
  AuditEntry& e = fr.entry;
  e.operation = "forget";
  e.memory = row.name;
  e.record = record;
  e.token_count = static_cast<std::int64_t>(f.ids.size());
  e.state_before = row.state_sha256;
  e.state_after = f.after_sha256;
  e.certificate = fr.certificate.to_json().dump();
  audit.append(e);
  write_state_hash(row.id, f.after_sha256, e.seq);
}

std::optional<ForgetResult> Store::Impl::forget_stored(const MemoryRow& row, std::int64_t record,
                                                       Transaction& t) {
  if (options.read_only || !options.without_restore || !options.certificate_check ||
      !options.certificate_reference || options.certificate_resolve ||
      schema_version < kFirstSchemaWithHashV2)
    return std::nullopt;
  ForgetResult fr;
  std::optional<StoredForget> f = plan_stored_forget(row, record);
  if (!f) return std::nullopt;  // nothing was written
  const auto c0 = OpClock::now();
  fr.certificate = removal_certificate(f->removal);
  fr.certificate.verify.from_stored_rows = true;
  fr.certificate_seconds = seconds_since(c0);
  if (!fr.certificate.verify.ok()) return std::nullopt;  // the ordinary path re-derives
  write_stored_forget(row, record, *f, fr);
  fr.memory_tokens = static_cast<int>(f->removal.after.n);
  commit_op(row.id, t, fr);  // the bounds group's fresh key is referenced now
  return fr;
}

// After the forget's commit: the truncating checkpoint (the erased rows leave the WAL), then the
// keys' destruction, whose log (its `shred` entries) starts the emptied WAL without a sync.
void Store::Impl::finish_forget(ForgetResult& fr) {
  const auto c0 = OpClock::now();
  checkpoint(&fr.wal_truncated);
  fr.checkpoint_seconds = seconds_since(c0);
  const auto k0 = OpClock::now();
  std::vector<KeyDestruction> done;
  try {
    complete_shreds(&done);  // the key dies only once the tokens are out of the memory
  } catch (const Error& e) {
    // The erasure committed: say so, and that its keys are pending (not a retryable failure).
    const StoreErasure* se = fr.certificate.store ? &*fr.certificate.store : nullptr;
    throw StoreError(
        "store '" + path + "': record " + (se != nullptr ? std::to_string(se->record) : "?") +
        " of memory '" + (se != nullptr ? se->memory : "?") + "' was erased (audit entry " +
        std::to_string(fr.entry.seq) + "), but destroying its keys failed: " + e.what() +
        "; the destruction is pending: the next writable open completes it, and `svattn memory "
        "verify` reports it until then");
  }
  for (const KeyDestruction& d : done) {
    if (!fr.certificate.store) break;
    StoreErasure& se = *fr.certificate.store;
    if (d.key_id == se.data_key_id) se.data_key_destroyed = true;
    if (!se.bounds_key_id.empty() && d.key_id == se.bounds_key_id) se.bounds_key_destroyed = true;
  }
  fr.shred_seconds = seconds_since(k0);
}

}  // namespace svattn
