// The persisted screening bounds (docs/store.md "Persisted screening"): one head row per memory
// (the state it belongs to, how many tokens, the epoch, a checksum, the support digest) and, from
// schema 6, the bounds of each bounds group's active records in the group's blob (sealed under the
// group's key in an encrypted store; store_bounds_groups.cpp). An operation that moves no
// coefficient and not b rewrites only the groups it touched and the head; one that does starts a
// new epoch and rewrites every group. The layouts of schema 2-5 are read by
// store_screening_legacy.cpp.
#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>

#include "store_impl.h"
#include "svattn/hash.h"

namespace svattn {

using namespace store_detail;

namespace {

std::vector<std::uint8_t> head_bytes(std::int64_t memory_id, const std::string& state_sha256,
                                     std::int64_t tokens, std::int64_t epoch) {
  const std::string head = "svattn-screening-v2\n" + std::to_string(memory_id) + "\n" +
                           state_sha256 + "\n" + std::to_string(tokens) + "\n" +
                           std::to_string(epoch) + "\n";
  return {head.begin(), head.end()};
}

// The range of `ids` (ascending) holding `record`'s tokens: [first, first + count).
std::pair<std::size_t, std::size_t> record_span(const std::vector<TokenId>& ids,
                                                std::int64_t record) {
  const auto lo = std::lower_bound(ids.begin(), ids.end(), record_lo(record));
  const auto hi = std::upper_bound(lo, ids.end(), record_hi(record));
  return {static_cast<std::size_t>(lo - ids.begin()), static_cast<std::size_t>(hi - lo)};
}

}  // namespace

std::vector<RecordRange> store_detail::record_ranges(const std::vector<TokenId>& ids) {
  std::vector<RecordRange> out;
  for (std::size_t t = 0; t < ids.size(); ++t) {
    const std::int64_t r = record_of(ids[t]);
    if (out.empty() || out.back().record != r) out.push_back({r, t, 0});
    ++out.back().count;
  }
  return out;
}

std::string store_detail::screening_head_checksum(std::int64_t memory_id,
                                                  const std::string& state_sha256,
                                                  std::int64_t tokens, std::int64_t epoch) {
  return sha256_hex(head_bytes(memory_id, state_sha256, tokens, epoch));
}

// ----------------------------------------------------------------------------------- the head

ScreeningHead Store::Impl::read_screening_head(std::int64_t memory_id) {
  ScreeningHead h;
  Statement q(db.handle(),
              "SELECT state_sha256, tokens, checksum, epoch FROM screening WHERE memory_id = ?1");
  q.bind(1, memory_id);
  if (!q.step()) return h;
  h.present = true;
  h.state_sha256 = q.text(0);
  h.tokens = q.int64(1);
  h.checksum = q.text(2);
  h.epoch = q.int64(3);
  return h;
}

bool Store::Impl::head_intact(const MemoryRow& row, const ScreeningHead& h) const {
  return h.present && h.state_sha256 == row.state_sha256 &&
         h.checksum == screening_head_checksum(row.id, h.state_sha256, h.tokens, h.epoch);
}

void Store::Impl::write_screening_head(std::int64_t memory_id, const std::string& state_sha256,
                                       std::int64_t tokens, std::int64_t epoch,
                                       const std::string& support_sha256) {
  Statement put(db.handle(),
                "INSERT INTO screening(memory_id, state_sha256, tokens, bounds, checksum, "
                "support_sha256, epoch) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(memory_id) "
                "DO UPDATE SET state_sha256 = excluded.state_sha256, tokens = excluded.tokens, "
                "bounds = excluded.bounds, checksum = excluded.checksum, support_sha256 = "
                "excluded.support_sha256, epoch = excluded.epoch");
  put.bind(1, memory_id)
      .bind(2, state_sha256)
      .bind(3, tokens)
      .bind_blob(4, nullptr, 0)
      .bind(5, screening_head_checksum(memory_id, state_sha256, tokens, epoch))
      .bind(6, support_sha256)
      .bind(7, epoch)
      .run();
}

std::int64_t Store::Impl::update_screening_head(const MemoryRow& row,
                                                const std::string& state_sha256,
                                                std::int64_t tokens_before,
                                                std::int64_t tokens_after) {
  const ScreeningHead h = read_screening_head(row.id);
  const bool keep = head_intact(row, h) && h.tokens > 0 && h.tokens == tokens_before;
  const std::int64_t epoch = h.present ? h.epoch + (keep ? 0 : 1) : 1;
  const std::string support =
      support_digest(row.id, row.dim, row.value_dim, state_sha256, row.b, nullptr);
  write_screening_head(row.id, state_sha256, keep ? tokens_after : 0, epoch, support);
  return keep ? epoch : -1;
}

// ------------------------------------------------------------------------------------ writing

std::map<std::int64_t, std::vector<std::int64_t>> Store::Impl::all_group_members(
    std::int64_t memory_id) {
  place_unplaced_records(memory_id);
  std::map<std::int64_t, std::vector<std::int64_t>> out;
  {
    Statement q(db.handle(), "SELECT group_id FROM bounds_groups WHERE memory_id = ?1");
    q.bind(1, memory_id);
    while (q.step()) out[q.int64(0)];
  }
  Statement q(db.handle(),
              "SELECT record, bounds_group FROM records WHERE memory_id = ?1 AND suspended = 0 "
              "ORDER BY record");
  q.bind(1, memory_id);
  while (q.step()) out[q.int64(1)].push_back(q.int64(0));
  return out;
}

void Store::Impl::write_groups(const MemoryRow& row, const std::vector<TokenId>& ids,
                               std::int64_t epoch,
                               const std::map<std::int64_t, std::vector<std::int64_t>>& members,
                               const BoundsSource& bounds_of) {
  const auto has_tokens = [&](std::int64_t r) { return record_span(ids, r).second > 0; };
  std::vector<std::int64_t> filled;  // groups with an entry: their keys in one batch
  for (const auto& [g, recs] : members)
    if (std::any_of(recs.begin(), recs.end(), has_tokens)) filled.push_back(g);
  const std::map<std::int64_t, SecretKey> keys = group_keys(row.id, filled);
  GroupWriter writer(*this, row.id);
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
    SVATTN_ASSERT(gb.bounds.size() == static_cast<std::size_t>(std::accumulate(
                                          gb.entries.begin(), gb.entries.end(), std::int64_t{0},
                                          [](std::int64_t a, const GroupEntry& e) {
                                            return a + e.count;
                                          })),
                  "one screening bound per token of a group");
    const auto key = keys.find(g);
    writer.write(g, gb, key == keys.end() ? nullptr : &key->second);
  }
  writer.flush();
}

void Store::Impl::write_screening(const MemoryRow& row, const Memory& mem, bool moved,
                                  const std::vector<std::int64_t>& touched, bool defer,
                                  const std::vector<std::int64_t>& touched_groups) {
  const State& st = mem.state();
  const std::string support = memory_support_digest(row.id, mem, st);
  const auto n = static_cast<std::int64_t>(st.ids.size());
  const ScreeningHead h = read_screening_head(row.id);
  // Memory::gradient_lower_bounds() is empty exactly then.
  const bool optimal = n > 0 && st.status == Status::kOptimal && !st.warmup;
  const bool same_epoch = !moved && optimal && head_intact(row, h) && h.tokens > 0;
  const bool has_bounds = optimal && (same_epoch || !defer);
  const std::int64_t epoch = h.present ? h.epoch + (same_epoch ? 0 : 1) : 1;
  write_screening_head(row.id, st.state_sha256, has_bounds ? n : 0, epoch, support);
  if (!has_bounds) return;  // stale group blobs fail the epoch check
  if (!same_epoch) {        // every group, from every token's bound (O(n))
    const std::vector<double> bounds = mem.gradient_lower_bounds();
    SVATTN_ASSERT(bounds.size() == st.ids.size(), "one screening bound per token");
    write_groups(row, st.ids, epoch, all_group_members(row.id),
                 [&](std::size_t first, std::size_t count, std::vector<double>& out) {
                   out.insert(out.end(), bounds.begin() + static_cast<std::ptrdiff_t>(first),
                              bounds.begin() + static_cast<std::ptrdiff_t>(first + count));
                 });
    return;
  }
  // Same epoch: the groups of the touched records and the given ones, each from its own tokens'
  // bounds (O(group), not O(n)).
  std::set<std::int64_t> groups(touched_groups.begin(), touched_groups.end());
  for (std::int64_t r : std::set<std::int64_t>(touched.begin(), touched.end())) {
    const RecordRow rr = read_record(row.id, r);
    if (rr.exists && rr.bounds_group >= 0) groups.insert(rr.bounds_group);
  }
  std::map<std::int64_t, std::vector<std::int64_t>> members;
  for (std::int64_t g : groups) members[g] = group_members(row.id, g);
  write_groups(row, st.ids, epoch, members,
               [&](std::size_t first, std::size_t count, std::vector<double>& out) {
                 const std::vector<TokenId> part(
                     st.ids.begin() + static_cast<std::ptrdiff_t>(first),
                     st.ids.begin() + static_cast<std::ptrdiff_t>(first + count));
                 const std::vector<double> b = mem.gradient_lower_bounds(part);
                 out.insert(out.end(), b.begin(), b.end());
               });
}

// ---------------------------------------------------------------------------------- reading

bool Store::Impl::usable_screening_head(const MemoryRow& row, std::size_t n, ScreeningHead* h,
                                        std::string* problem) {
  *h = read_screening_head(row.id);
  if (!h->present) return false;
  if (h->state_sha256 != row.state_sha256) {
    *problem = "they belong to state " + h->state_sha256.substr(0, 16) + "…, not the stored state";
    return false;
  }
  if (h->checksum != screening_head_checksum(row.id, h->state_sha256, h->tokens, h->epoch)) {
    *problem = "checksum mismatch (the screening row)";
    return false;
  }
  if (h->tokens == 0) return false;  // the memory had no bounds (empty or in warm-up)
  if (static_cast<std::size_t>(h->tokens) != n) {
    *problem = "they hold " + std::to_string(h->tokens) + " bounds for " + std::to_string(n) +
               " active tokens";
    return false;
  }
  return true;
}

std::vector<double> Store::Impl::read_screening(const MemoryRow& row,
                                                const std::vector<TokenId>& ids,
                                                std::string* problem, PayloadReader* reader) {
  problem->clear();
  if (schema_version < 2) return {};
  if (schema_version < kFirstSchemaWithRecordBounds)
    return read_screening_v1(row, ids.size(), problem);
  if (schema_version < kFirstSchemaWithBoundsGroups)
    return read_screening_v5(row, ids, problem, reader);
  ScreeningHead h;
  if (!usable_screening_head(row, ids.size(), &h, problem)) return {};
  std::vector<double> bounds(ids.size());
  PayloadReader own = payload_reader(row.id);
  *problem = read_group_screening(row, ids, h.epoch, reader != nullptr ? *reader : own, bounds);
  if (!problem->empty()) return {};
  return bounds;
}

std::string Store::Impl::read_group_screening(const MemoryRow& row,
                                              const std::vector<TokenId>& ids, std::int64_t epoch,
                                              PayloadReader& pr, std::vector<double>& bounds) {
  const std::vector<RecordRange> ranges = record_ranges(ids);
  std::unordered_map<std::int64_t, std::int64_t> group_of;  // active record -> group (-1: none)
  {
    Statement q(db.handle(),
                "SELECT record, bounds_group FROM records WHERE memory_id = ?1 AND suspended = 0");
    q.bind(1, row.id);
    while (q.step()) group_of[q.int64(0)] = q.is_null(1) ? -1 : q.int64(1);
  }
  std::map<std::int64_t, std::int64_t> wanted;  // group -> its first record with tokens
  for (const RecordRange& rg : ranges) {
    const auto it = group_of.find(rg.record);
    if (it == group_of.end() || it->second < 0)
      return "record " + std::to_string(rg.record) + " has no bounds group";
    wanted.emplace(it->second, rg.record);
  }
  std::vector<char> done(ranges.size(), 0);
  const KeyStore::ReadScope keys_read(vault.key_store());
  pr.prefetch_keys();  // every key of the memory in one scan (a restore has it already)
  Statement q(db.handle(),
              "SELECT group_id, key_id, bounds FROM bounds_groups WHERE memory_id = ?1 ORDER BY "
              "group_id");
  q.bind(1, row.id);
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
      const RecordAad aad{row.id, g, -1, RecordField::kBoundsGroup};
      try {
        plain.resize(opened_size(aad, n));
        pr.opener(q.text(1), KeyOwner::bounds_group(row.id, g).record_id)
            .open_into(aad, blob, n, plain.data(), plain.size());
      } catch (const FormatError& e) {  // tampered, moved, shredded (a restored copy)
        return who + ": " + e.what();
      } catch (const NotFound& e) {  // a group key lost in a crash before it was synced
        return who + ": " + e.what();
      }
      blob = plain.data();
      n = plain.size();
    }
    std::string why = decode_group_bounds(row.id, g, blob, n, &gb);
    if (!why.empty()) return why;
    if (gb.epoch != epoch) {
      return who + ": its bounds are of epoch " + std::to_string(gb.epoch) +
             ", not the memory's " + std::to_string(epoch);
    }
    std::size_t at = 0;
    for (const GroupEntry& e : gb.entries) {
      const auto it = std::lower_bound(
          ranges.begin(), ranges.end(), e.record,
          [](const RecordRange& rg, std::int64_t r) { return rg.record < r; });
      const auto k = static_cast<std::size_t>(it - ranges.begin());
      const std::string rec = "record " + std::to_string(e.record);
      if (it == ranges.end() || it->record != e.record || group_of[e.record] != g)
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

}  // namespace svattn
