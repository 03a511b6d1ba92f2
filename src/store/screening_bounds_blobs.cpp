// The screening bounds component's blobs (screening_bounds.h; docs/store.md "Persisted
// screening", "Bounds groups"): reading and writing the bounds_groups blobs, one per group, sealed
// under the group's key in an encrypted store; on PostgreSQL written in batches.
#include <algorithm>
#include <cstring>
#include <exception>
#include <numeric>

#include "db/dialect.h"
#include "screening_bounds.h"
#include "store_rows.h"
#include "svattn/store.h"

namespace svattn::store_detail {

namespace {

// The range of `ids` (ascending) holding `record`'s tokens: [first, first + count).
std::pair<std::size_t, std::size_t> record_span(const std::vector<TokenId>& ids,
                                                std::int64_t record) {
  const auto lo = std::lower_bound(ids.begin(), ids.end(), record_lo(record));
  const auto hi = std::upper_bound(lo, ids.end(), record_hi(record));
  return {static_cast<std::size_t>(lo - ids.begin()), static_cast<std::size_t>(hi - lo)};
}

}  // namespace

std::string ScreeningBounds::read_blob(std::int64_t memory_id, std::int64_t group, GroupBounds* out,
                                       bool* absent) {
  const std::string who = "bounds group " + std::to_string(group);
  Statement q(db_.handle(),
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
  if (!vault_.enabled()) return who + " is sealed, but the store has no key store";
  const std::vector<std::uint8_t> sealed(blob, blob + n);
  const std::string key_id = q.text(0);
  q.reset();
  const RecordAad aad{memory_id, group, -1, RecordField::kBoundsGroup};
  std::vector<std::uint8_t> plain;
  try {
    const KeyLookup k = vault_.keys().get(key_id);
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

void ScreeningBounds::rewrite_entry(std::int64_t memory_id, std::int64_t group, GroupBounds g,
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
  GroupWriter writer(db_, memory_id);
  if (g.entries.empty()) {
    writer.clear(group);
    return;
  }
  const std::map<std::int64_t, SecretKey> keys = keys_for(memory_id, {group});
  const auto key = keys.find(group);
  writer.write(group, g, key == keys.end() ? nullptr : &key->second);
  writer.flush();
}

void ScreeningBounds::write_groups(std::int64_t memory_id, const std::vector<TokenId>& ids,
                                   std::int64_t epoch,
                                   const std::map<std::int64_t, std::vector<std::int64_t>>& members,
                                   const BoundsSource& bounds_of) {
  const auto has_tokens = [&](std::int64_t r) { return record_span(ids, r).second > 0; };
  std::vector<std::int64_t> filled;  // groups with an entry: their keys in one batch
  for (const auto& [g, recs] : members)
    if (std::any_of(recs.begin(), recs.end(), has_tokens)) filled.push_back(g);
  const std::map<std::int64_t, SecretKey> keys = keys_for(memory_id, filled);
  GroupWriter writer(db_, memory_id);
  for (const auto& [g, recs] : members) {
    GroupBounds gb;
    gb.epoch = epoch;
    for (std::int64_t r : recs) {
      const auto [first, count] = record_span(ids, r);
      if (count == 0) continue;  // every token evicted (bounded mode)
      gb.entries.push_back({r, static_cast<std::int64_t>(count)});
      bounds_of(first, count, gb.bounds);
    }
    if (gb.entries.empty()) {
      writer.clear(g);
      continue;
    }
    SVATTN_ASSERT(
        gb.bounds.size() == static_cast<std::size_t>(std::accumulate(
                                gb.entries.begin(), gb.entries.end(), std::int64_t{0},
                                [](std::int64_t a, const GroupEntry& e) { return a + e.count; })),
        "one screening bound per token of a group");
    const auto key = keys.find(g);
    writer.write(g, gb, key == keys.end() ? nullptr : &key->second);
  }
  writer.flush();
}

std::string ScreeningBounds::read_bounds(
    std::int64_t memory_id, const std::vector<TokenId>& ids, std::int64_t epoch,
    const std::unordered_map<std::int64_t, std::int64_t>& group_of, PayloadReader& pr,
    std::vector<double>& bounds) {
  const std::vector<RecordRange> ranges = record_ranges(ids);
  std::map<std::int64_t, std::int64_t> wanted;  // group -> its first record with tokens
  for (const RecordRange& rg : ranges) {
    const auto it = group_of.find(rg.record);
    if (it == group_of.end() || it->second < 0)
      return "record " + std::to_string(rg.record) + " has no bounds group";
    wanted.emplace(it->second, rg.record);
  }
  std::vector<char> done(ranges.size(), 0);
  const KeyStore::ReadScope keys_read(vault_.key_store());
  pr.prefetch_keys();  // every key of the memory in one scan (a restore has it already)
  Statement q(db_.handle(),
              "SELECT group_id, key_id, bounds FROM bounds_groups WHERE memory_id = ?1 ORDER BY "
              "group_id");
  q.bind(1, memory_id);
  std::vector<std::uint8_t> plain;
  GroupBounds gb;
  while (q.step()) {
    const std::int64_t g = q.int64(0);
    if (wanted.erase(g) == 0) continue;
    const std::string who = "bounds group " + std::to_string(g);
    if (q.is_null(2)) return who + " has no bounds";
    const auto* blob = static_cast<const std::uint8_t*>(q.blob_data(2));
    auto n = static_cast<std::size_t>(q.bytes(2));
    if (!q.is_null(1)) {
      const RecordAad aad{memory_id, g, -1, RecordField::kBoundsGroup};
      try {
        plain.resize(opened_size(aad, n));
        pr.opener(q.text(1), KeyOwner::bounds_group(memory_id, g).record_id)
            .open_into(aad, blob, n, plain.data(), plain.size());
      } catch (const FormatError& e) {  // tampered, moved, shredded (a restored copy)
        return who + ": " + e.what();
      } catch (const NotFound& e) {  // a group key lost in a crash before it was synced
        return who + ": " + e.what();
      }
      blob = plain.data();
      n = plain.size();
    }
    std::string why = decode_group_bounds(memory_id, g, blob, n, &gb);
    if (!why.empty()) return why;
    if (gb.epoch != epoch) {
      return who + ": its bounds are of epoch " + std::to_string(gb.epoch) + ", not the memory's " +
             std::to_string(epoch);
    }
    std::size_t at = 0;
    for (const GroupEntry& e : gb.entries) {
      const auto it =
          std::lower_bound(ranges.begin(), ranges.end(), e.record,
                           [](const RecordRange& rg, std::int64_t r) { return rg.record < r; });
      const auto k = static_cast<std::size_t>(it - ranges.begin());
      const std::string rec = "record " + std::to_string(e.record);
      if (it == ranges.end() || it->record != e.record || group_of.at(e.record) != g)
        return who + ": " + rec + " is not one of its active records";
      if (done[k] != 0 || it->count != static_cast<std::size_t>(e.count)) {
        return who + ": " + rec + " has " + std::to_string(e.count) + " bounds for " +
               std::to_string(it->count) + " active tokens";
      }
      std::memcpy(&bounds[it->first], gb.bounds.data() + at, it->count * sizeof(double));
      at += it->count;
      done[k] = 1;
    }
  }
  if (!wanted.empty()) {
    return "record " + std::to_string(wanted.begin()->second) + ": its bounds group " +
           std::to_string(wanted.begin()->first) + " does not exist";
  }
  for (std::size_t k = 0; k < ranges.size(); ++k)
    if (done[k] == 0) return "record " + std::to_string(ranges[k].record) + " has no bounds";
  return {};
}

// PostgreSQL only (the SQLite dialect has no arrays): the batch's groups, 1-based offsets and
// lengths into one bytea of every blob back to back; one statement whatever the batch's size.
ScreeningBounds::GroupWriter::GroupWriter(Database& db, std::int64_t memory_id)
    : db_(db),
      memory_id_(memory_id),
      batched_(db.postgres()),
      update_(db.handle(),
              batched_ ? "UPDATE bounds_groups SET bounds = substring(?2::bytea FROM u.off FOR "
                         "u.len) FROM unnest(?3::bigint[], ?4::int[], ?5::int[]) AS u(grp, off, "
                         "len) WHERE bounds_groups.memory_id = ?1 AND bounds_groups.group_id = "
                         "u.grp"
                       : "UPDATE bounds_groups SET bounds = ?3 WHERE memory_id = ?1 AND "
                         "group_id = ?2") {}

ScreeningBounds::GroupWriter::~GroupWriter() noexcept(false) {
  if (std::uncaught_exceptions() == 0)
    SVATTN_ASSERT(groups_.empty(), "GroupWriter destroyed with blobs not flushed");
}

void ScreeningBounds::GroupWriter::write(std::int64_t group, const GroupBounds& g,
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

void ScreeningBounds::GroupWriter::clear(std::int64_t group) {
  Statement up(db_.handle(),
               "UPDATE bounds_groups SET bounds = NULL WHERE memory_id = ?1 AND group_id = ?2 "
               "AND bounds IS NOT NULL");
  up.bind(1, memory_id_).bind(2, group).run();
}

void ScreeningBounds::GroupWriter::put(std::int64_t group, const std::vector<std::uint8_t>& blob) {
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

void ScreeningBounds::GroupWriter::flush() {
  if (groups_.empty()) return;
  update_.bind(1, memory_id_).bind_blob(2, blobs_.data(), blobs_.size());
  update_.bind(3, pg_array(groups_)).bind(4, pg_array(offsets_)).bind(5, pg_array(lengths_));
  update_.run();
  update_.reset();
  SVATTN_ASSERT(db_.changes() == static_cast<std::int64_t>(groups_.size()),
                "the batched bounds UPDATE matched one row per group");
  groups_.clear();
  offsets_.clear();
  lengths_.clear();
  blobs_.clear();
}

}  // namespace svattn::store_detail
