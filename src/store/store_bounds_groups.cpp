// Bounds groups (docs/store.md "Bounds groups"; schema 6): the screening bounds of a memory's
// records kept per group of up to kGroupMaxRecords records, one blob per group sealed under the
// group's own key. Placing new records into groups, the blob format, the groups' keys, and the
// rotation that erasure needs: when a record is forgotten its group's key is replaced and the old
// one destroyed with the record's data key, so every blob that ever held the record's bounds, in
// the file or in any copy of it, was sealed under a key that no longer exists.
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>

#include "db/dialect.h"
#include "store_impl.h"

namespace svattn {

using namespace store_detail;

namespace {

constexpr std::size_t kDigestBytes = 32;
constexpr std::size_t kHeadBytes = 16;   // epoch, entry count
constexpr std::size_t kEntryBytes = 16;  // record, count

// SHA-256("svattn-group-bounds-v1\n" MEMORY "\n" GROUP "\n" EPOCH "\n" M "\n" ENTRIES BOUNDS).
std::array<std::uint8_t, kDigestBytes> group_digest(std::int64_t memory_id, std::int64_t group,
                                                    std::int64_t epoch, std::size_t m,
                                                    const std::uint8_t* body, std::size_t n) {
  const std::string head = "svattn-group-bounds-v1\n" + std::to_string(memory_id) + "\n" +
                           std::to_string(group) + "\n" + std::to_string(epoch) + "\n" +
                           std::to_string(m) + "\n";
  std::array<std::uint8_t, kDigestBytes> out{};
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned int len = 0;
  const bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx, head.data(), head.size()) == 1 &&
                  EVP_DigestUpdate(ctx, body, n) == 1 &&
                  EVP_DigestFinal_ex(ctx, out.data(), &len) == 1 && len == kDigestBytes;
  EVP_MD_CTX_free(ctx);
  if (!ok) throw StoreError("SHA-256 failed (OpenSSL EVP_Digest)");
  return out;
}

void put_i64(std::uint8_t* p, std::int64_t v) { std::memcpy(p, &v, 8); }  // little-endian host
std::int64_t get_i64(const std::uint8_t* p) {
  std::int64_t v = 0;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

std::vector<std::uint8_t> store_detail::encode_group_bounds(std::int64_t memory_id,
                                                            std::int64_t group,
                                                            const GroupBounds& g) {
  const std::size_t m = g.entries.size();
  const std::size_t body = m * kEntryBytes + g.bounds.size() * sizeof(double);
  std::vector<std::uint8_t> out(kHeadBytes + body + kDigestBytes);
  put_i64(out.data(), g.epoch);
  put_i64(out.data() + 8, static_cast<std::int64_t>(m));
  std::uint8_t* p = out.data() + kHeadBytes;
  for (const GroupEntry& e : g.entries) {
    put_i64(p, e.record);
    put_i64(p + 8, e.count);
    p += kEntryBytes;
  }
  if (!g.bounds.empty()) std::memcpy(p, g.bounds.data(), g.bounds.size() * sizeof(double));
  const auto dg = group_digest(memory_id, group, g.epoch, m, out.data() + kHeadBytes, body);
  std::memcpy(out.data() + kHeadBytes + body, dg.data(), kDigestBytes);
  return out;
}

std::string store_detail::decode_group_bounds(std::int64_t memory_id, std::int64_t group,
                                              const std::uint8_t* p, std::size_t n,
                                              GroupBounds* out) {
  const std::string who = "bounds group " + std::to_string(group) + ": ";
  if (n < kHeadBytes + kDigestBytes) return who + "its blob is truncated";
  const std::int64_t m = get_i64(p + 8);
  const std::size_t room = n - kHeadBytes - kDigestBytes;
  if (m < 0 || static_cast<std::uint64_t>(m) > room / kEntryBytes)
    return who + "its blob lists " + std::to_string(m) + " records";
  GroupBounds g;
  g.epoch = get_i64(p);
  std::size_t total = 0;
  const std::uint8_t* e = p + kHeadBytes;
  for (std::int64_t k = 0; k < m; ++k, e += kEntryBytes) {
    const GroupEntry entry{get_i64(e), get_i64(e + 8)};
    if (entry.count < 1 || static_cast<std::uint64_t>(entry.count) > room / sizeof(double) ||
        (!g.entries.empty() && entry.record <= g.entries.back().record))
      return who + "its blob has a malformed entry (record " + std::to_string(entry.record) + ")";
    total += static_cast<std::size_t>(entry.count);
    g.entries.push_back(entry);
  }
  const std::size_t body = static_cast<std::size_t>(m) * kEntryBytes + total * sizeof(double);
  if (total > room / sizeof(double) || body != room) {
    return who + "its blob has " + std::to_string(n) + " bytes, not the " +
           std::to_string(kHeadBytes + body + kDigestBytes) + " of its " + std::to_string(m) +
           " records";
  }
  g.bounds.resize(total);
  if (total > 0) std::memcpy(g.bounds.data(), e, total * sizeof(double));
  const auto dg =
      group_digest(memory_id, group, g.epoch, static_cast<std::size_t>(m), p + kHeadBytes, body);
  if (std::memcmp(dg.data(), p + kHeadBytes + body, kDigestBytes) != 0)
    return "checksum mismatch (bounds group " + std::to_string(group) + ")";
  *out = std::move(g);
  return {};
}

// --------------------------------------------------------------------------------- membership

std::vector<std::int64_t> Store::Impl::join_bounds_groups(
    std::int64_t memory_id, const std::vector<std::pair<std::int64_t, std::int64_t>>& records,
    std::vector<std::int64_t>* created) {
  std::vector<std::int64_t> out;
  if (records.empty()) return out;
  std::int64_t g = -1, members = 0, tokens = 0;
  {
    Statement q(db.handle(),
                "SELECT group_id, member_records, member_tokens FROM bounds_groups WHERE "
                "memory_id = ?1 ORDER BY group_id DESC LIMIT 1");
    q.bind(1, memory_id);
    if (q.step()) {
      g = q.int64(0);
      members = q.int64(1);
      tokens = q.int64(2);
    }
  }
  Statement counts(db.handle(),
                   "UPDATE bounds_groups SET member_records = ?3, member_tokens = ?4 WHERE "
                   "memory_id = ?1 AND group_id = ?2");
  Statement start(db.handle(),
                  "INSERT INTO bounds_groups(memory_id, group_id, key_id, next_key_id, "
                  "member_records, member_tokens, bounds) VALUES (?1, ?2, NULL, NULL, 0, 0, NULL)");
  Statement place(db.handle(),
                  "UPDATE records SET bounds_group = ?3 WHERE memory_id = ?1 AND record = ?2");
  const auto save = [&] {
    counts.bind(1, memory_id).bind(2, g).bind(3, members).bind(4, tokens).run();
    counts.reset();
  };
  bool changed = false;
  for (const auto& [record, k] : records) {
    const bool room =
        g >= 0 && members < kGroupMaxRecords && (members == 0 || tokens + k <= kGroupMaxTokens);
    if (!room) {
      if (changed) save();
      ++g;  // a group's id may be one of a group whose records are all gone (its key destroyed)
      start.bind(1, memory_id).bind(2, g).run();
      start.reset();
      if (created != nullptr) created->push_back(g);
      members = tokens = 0;
    }
    ++members;
    tokens += k;
    changed = true;
    place.bind(1, memory_id).bind(2, record).bind(3, g).run();
    place.reset();
    out.push_back(g);
  }
  save();
  return out;
}

void Store::Impl::place_unplaced_records(std::int64_t memory_id) {
  std::vector<std::pair<std::int64_t, std::int64_t>> recs;  // (record, token rows)
  {
    Statement q(db.handle(),
                "SELECT record FROM records WHERE memory_id = ?1 AND bounds_group IS NULL ORDER BY "
                "record");
    q.bind(1, memory_id);
    while (q.step()) recs.emplace_back(q.int64(0), 0);
  }
  if (recs.empty()) return;
  Statement c(db.handle(),
              "SELECT count(*) FROM tokens WHERE memory_id = ?1 AND token_id BETWEEN ?2 AND ?3");
  for (auto& [record, tokens] : recs) {
    c.bind(1, memory_id).bind(2, record_lo(record)).bind(3, record_hi(record));
    c.step();
    tokens = c.int64(0);
    c.reset();
  }
  join_bounds_groups(memory_id, recs, nullptr);
}

void Store::Impl::set_group_key(std::int64_t memory_id, std::int64_t group,
                                const std::string& key_id, const std::string& spare_id) {
  Statement up(db.handle(),
               spare_id.empty()
                   ? "UPDATE bounds_groups SET key_id = ?3 WHERE memory_id = ?1 AND group_id = ?2"
                   : "UPDATE bounds_groups SET key_id = ?3, next_key_id = ?4 WHERE memory_id = ?1 "
                     "AND group_id = ?2");
  up.bind(1, memory_id).bind(2, group).bind(3, key_id);
  if (!spare_id.empty()) up.bind(4, spare_id);
  up.run();
}

std::vector<std::int64_t> Store::Impl::group_members(std::int64_t memory_id, std::int64_t group) {
  std::vector<std::int64_t> out;
  Statement q(db.handle(),
              "SELECT record FROM records WHERE memory_id = ?1 AND bounds_group = ?2 AND "
              "suspended = 0 ORDER BY record");
  q.bind(1, memory_id).bind(2, group);
  while (q.step()) out.push_back(q.int64(0));
  return out;
}

// ------------------------------------------------------------------------------------- keys

std::map<std::int64_t, SecretKey> Store::Impl::group_keys(std::int64_t memory_id,
                                                          const std::vector<std::int64_t>& groups) {
  std::map<std::int64_t, SecretKey> out;
  if (!vault.enabled() || groups.empty()) return out;
  std::vector<std::string> ids;  // the key id each group's row names (empty: none)
  {
    Statement q(db.handle(),
                "SELECT key_id FROM bounds_groups WHERE memory_id = ?1 AND group_id = ?2");
    for (std::int64_t g : groups) {
      q.bind(1, memory_id).bind(2, g);
      ids.push_back(q.step() && !q.is_null(0) ? q.text(0) : std::string());
      q.reset();
    }
  }
  std::vector<std::int64_t> need;
  vault.group_keys(memory_id, groups, ids, out, need);
  if (need.empty()) return out;
  std::vector<KeyOwner> owners;
  for (std::int64_t g : need) owners.push_back(KeyOwner::bounds_group(memory_id, g));
  std::vector<NewDataKey> made = vault.create_keys(owners);
  for (std::size_t i = 0; i < need.size(); ++i) {
    set_group_key(memory_id, need[i], made[i].key_id);
    out.emplace(need[i], std::move(made[i].key));
  }
  return out;
}

std::vector<KeyOwner> Store::Impl::groups_without_spare() {
  std::vector<KeyOwner> out;
  Statement q(db.handle(),
              "SELECT memory_id, group_id FROM bounds_groups WHERE key_id IS NOT NULL AND "
              "next_key_id IS NULL ORDER BY memory_id, group_id");
  while (q.step()) out.push_back(KeyOwner::bounds_group(q.int64(0), q.int64(1)));
  return out;
}

void Store::Impl::set_spare_keys(const std::vector<KeyOwner>& groups,
                                 const std::vector<NewDataKey>& made) {
  Statement spare(db.handle(),
                  "UPDATE bounds_groups SET next_key_id = ?3 WHERE memory_id = ?1 AND group_id = "
                  "?2 AND next_key_id IS NULL AND key_id IS NOT NULL");
  for (std::size_t i = 0; i < made.size(); ++i) {
    spare.bind(1, groups[i].memory_id).bind(2, groups[i].group()).bind(3, made[i].key_id).defer();
    spare.reset();
  }
}

void Store::Impl::leave_bounds_group(const MemoryRow& row, std::int64_t record, std::int64_t group,
                                     std::int64_t tokens, StoreErasure* se) {
  if (group < 0) return;
  if (se != nullptr) se->bounds_group = group;
  std::string old_key, spare;
  std::int64_t members = 0, member_tokens = 0;
  {
    Statement q(db.handle(),
                "SELECT key_id, next_key_id, member_records, member_tokens FROM bounds_groups "
                "WHERE memory_id = ?1 AND group_id = ?2");
    q.bind(1, row.id).bind(2, group);
    if (!q.step()) return;  // a records row naming no group (damaged): no blob holds its bounds
    if (!q.is_null(0)) old_key = q.text(0);
    if (!q.is_null(1)) spare = q.text(1);
    members = q.int64(2) - 1;
    member_tokens = std::max<std::int64_t>(0, q.int64(3) - tokens);
  }
  if (members <= 0) {  // the group goes, with both its keys
    Statement del(db.handle(), "DELETE FROM bounds_groups WHERE memory_id = ?1 AND group_id = ?2");
    del.bind(1, row.id).bind(2, group).run();
    if (!spare.empty()) vault.schedule_group_key(row.name, record, spare, nullptr);
  } else {
    std::string key_id;
    if (vault.enabled()) key_id = vault.replacement_group_key(row.id, group, spare);
    Statement up(db.handle(),
                 "UPDATE bounds_groups SET member_records = ?3, member_tokens = ?4, bounds = NULL, "
                 "key_id = NULLIF(?5, ''), next_key_id = NULL WHERE memory_id = ?1 AND "
                 "group_id = ?2");
    up.bind(1, row.id).bind(2, group).bind(3, members).bind(4, member_tokens).bind(5, key_id);
    up.run();
  }
  if (old_key.empty() || !vault.enabled()) return;
  if (se != nullptr) se->bounds_key_id = old_key;
  vault.schedule_group_key(row.name, record, old_key, se);
}

// ------------------------------------------------------------------------------------- blobs

std::string Store::Impl::read_group_blob(std::int64_t memory_id, std::int64_t group,
                                         GroupBounds* out, bool* absent) {
  const std::string who = "bounds group " + std::to_string(group);
  Statement q(db.handle(),
              "SELECT key_id, bounds FROM bounds_groups WHERE memory_id = ?1 AND group_id = ?2");
  q.bind(1, memory_id).bind(2, group);
  if (!q.step()) return who + " does not exist";
  if (q.is_null(1)) {
    if (absent != nullptr) *absent = true;
    return who + " has no bounds";
  }
  const auto* blob = static_cast<const std::uint8_t*>(q.blob_data(1));
  const auto n = static_cast<std::size_t>(q.bytes(1));
  if (q.is_null(0)) return decode_group_bounds(memory_id, group, blob, n, out);
  if (!vault.enabled()) return who + " is sealed, but the store has no key store";
  const std::vector<std::uint8_t> sealed(blob, blob + n);
  const std::string key_id = q.text(0);
  q.reset();
  const RecordAad aad{memory_id, group, -1, RecordField::kBoundsGroup};
  std::vector<std::uint8_t> plain;
  try {
    const KeyLookup k = vault.keys().get(key_id);
    const KeyOwner own = KeyOwner::bounds_group(memory_id, group);
    if (k.shredded()) return who + ": its key " + key_id + " was destroyed at " + k.destroyed_utc;
    if (k.owner.memory_id != own.memory_id || k.owner.record_id != own.record_id)
      return who + ": its key " + key_id + " belongs to another owner";
    plain.resize(opened_size(aad, sealed.size()));
    Opener(k.key).open_into(aad, sealed.data(), sealed.size(), plain.data(), plain.size());
  } catch (const NotFound& e) {
    return who + ": " + e.what();
  } catch (const FormatError& e) {  // tampered or moved
    return who + ": " + e.what();
  }
  return decode_group_bounds(memory_id, group, plain.data(), plain.size(), out);
}

void Store::Impl::rewrite_group_entry(const MemoryRow& row, std::int64_t group, GroupBounds g,
                                      std::int64_t record, const std::vector<double>& bounds) {
  std::size_t at = 0, k = 0;  // the entry's place and the offset of its bounds
  for (; k < g.entries.size() && g.entries[k].record < record; ++k)
    at += static_cast<std::size_t>(g.entries[k].count);
  if (k < g.entries.size() && g.entries[k].record == record) {
    const auto n = static_cast<std::ptrdiff_t>(g.entries[k].count);
    g.bounds.erase(g.bounds.begin() + static_cast<std::ptrdiff_t>(at),
                   g.bounds.begin() + static_cast<std::ptrdiff_t>(at) + n);
    g.entries.erase(g.entries.begin() + static_cast<std::ptrdiff_t>(k));
  }
  if (!bounds.empty()) {
    g.entries.insert(g.entries.begin() + static_cast<std::ptrdiff_t>(k),
                     {record, static_cast<std::int64_t>(bounds.size())});
    g.bounds.insert(g.bounds.begin() + static_cast<std::ptrdiff_t>(at), bounds.begin(),
                    bounds.end());
  }
  GroupWriter writer(*this, row.id);
  if (g.entries.empty()) {
    writer.clear(group);
    return;
  }
  const std::map<std::int64_t, SecretKey> keys = group_keys(row.id, {group});
  const auto key = keys.find(group);
  writer.write(group, g, key == keys.end() ? nullptr : &key->second);
  writer.flush();
}

// PostgreSQL only (the SQLite dialect has no arrays): the batch's groups, 1-based offsets and
// lengths into one bytea of every blob back to back; one statement whatever the batch's size.
Store::Impl::GroupWriter::GroupWriter(Impl& impl, std::int64_t memory_id)
    : impl_(impl),
      memory_id_(memory_id),
      batched_(impl.db.postgres()),
      update_(impl.db.handle(),
              batched_ ? "UPDATE bounds_groups SET bounds = substring(?2::bytea FROM u.off FOR "
                         "u.len) FROM unnest(?3::bigint[], ?4::int[], ?5::int[]) AS u(grp, off, "
                         "len) WHERE bounds_groups.memory_id = ?1 AND bounds_groups.group_id = "
                         "u.grp"
                       : "UPDATE bounds_groups SET bounds = ?3 WHERE memory_id = ?1 AND "
                         "group_id = ?2") {}

Store::Impl::GroupWriter::~GroupWriter() noexcept(false) {
  if (std::uncaught_exceptions() == 0)
    SVATTN_ASSERT(groups_.empty(), "GroupWriter destroyed with blobs not flushed");
}

void Store::Impl::GroupWriter::write(std::int64_t group, const GroupBounds& g,
                                     const SecretKey* key) {
  const std::vector<std::uint8_t> plain = encode_group_bounds(memory_id_, group, g);
  if (key == nullptr) return put(group, plain);
  if (sealer_ == nullptr)
    sealer_ = std::make_unique<Sealer>(*key);
  else
    sealer_->rekey(*key);
  sealer_->seal_into({memory_id_, group, -1, RecordField::kBoundsGroup}, plain.data(), plain.size(),
                     sealed_);
  put(group, sealed_);
}

void Store::Impl::GroupWriter::clear(std::int64_t group) {
  Statement up(impl_.db.handle(),
               "UPDATE bounds_groups SET bounds = NULL WHERE memory_id = ?1 AND group_id = ?2 "
               "AND bounds IS NOT NULL");
  up.bind(1, memory_id_).bind(2, group).run();
}

void Store::Impl::GroupWriter::put(std::int64_t group, const std::vector<std::uint8_t>& blob) {
  if (!batched_) {
    update_.bind(1, memory_id_).bind(2, group).bind_blob(3, blob.data(), blob.size()).run();
    update_.reset();
    return;
  }
  groups_.push_back(group);
  offsets_.push_back(static_cast<std::int64_t>(blobs_.size()) + 1);
  lengths_.push_back(static_cast<std::int64_t>(blob.size()));
  blobs_.insert(blobs_.end(), blob.begin(), blob.end());
  if (groups_.size() == kBatch) flush();
}

void Store::Impl::GroupWriter::flush() {
  if (groups_.empty()) return;
  update_.bind(1, memory_id_).bind_blob(2, blobs_.data(), blobs_.size());
  update_.bind(3, pg_array(groups_)).bind(4, pg_array(offsets_)).bind(5, pg_array(lengths_));
  update_.run();
  update_.reset();
  SVATTN_ASSERT(impl_.db.changes() == static_cast<std::int64_t>(groups_.size()),
                "the batched bounds UPDATE matched one row per group");
  groups_.clear();
  offsets_.clear();
  lengths_.clear();
  blobs_.clear();
}

}  // namespace svattn
