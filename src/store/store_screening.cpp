// The persisted screening bounds as the operations use them (docs/store.md "Persisted
// screening"): which records are in which bounds group (the records table), what the head row and
// the group blobs get after an operation, and reading them at a restore. The rows themselves are
// the screening bounds component's (screening_bounds.h). An operation that moves no coefficient
// and not b rewrites only the groups it touched and the head; one that does starts a new epoch and
// rewrites every group. The layouts of schema 2-5 are read by store_screening_legacy.cpp.
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

// ----------------------------------------------------------------------------------- the head

std::int64_t Store::Impl::update_screening_head(const MemoryRow& row,
                                                const std::string& state_sha256,
                                                std::int64_t tokens_before,
                                                std::int64_t tokens_after) {
  const ScreeningHead h = screening_bounds.read_head(row.id);
  const bool keep = ScreeningBounds::head_intact(row.id, row.state_sha256, h) && h.tokens > 0 &&
                    h.tokens == tokens_before;
  const std::int64_t epoch = h.present ? h.epoch + (keep ? 0 : 1) : 1;
  const std::string support =
      support_digest(row.id, row.dim, row.value_dim, state_sha256, row.b, nullptr);
  screening_bounds.write_head(row.id, state_sha256, keep ? tokens_after : 0, epoch, support);
  return keep ? epoch : -1;
}

// ---------------------------------------------------------------------------------- membership

std::vector<std::int64_t> Store::Impl::join_bounds_groups(
    std::int64_t memory_id, const std::vector<std::pair<std::int64_t, std::int64_t>>& records,
    std::vector<std::int64_t>* created) {
  const std::vector<std::int64_t> groups = screening_bounds.join(memory_id, records, created);
  std::vector<std::int64_t> ids;
  for (const auto& [record, rows] : records) ids.push_back(record);
  record_rows.set_groups(memory_id, ids, groups);
  return groups;
}

void Store::Impl::place_unplaced_records(std::int64_t memory_id) {
  const std::vector<std::pair<std::int64_t, std::int64_t>> recs = record_rows.unplaced(memory_id);
  if (!recs.empty()) join_bounds_groups(memory_id, recs, nullptr);
}

std::vector<std::int64_t> Store::Impl::group_members(std::int64_t memory_id, std::int64_t group) {
  return record_rows.group_members(memory_id, group);
}

std::map<std::int64_t, std::vector<std::int64_t>> Store::Impl::all_group_members(
    std::int64_t memory_id) {
  place_unplaced_records(memory_id);
  std::map<std::int64_t, std::vector<std::int64_t>> out;
  for (std::int64_t g : screening_bounds.group_ids(memory_id)) out[g];
  for (const auto& [record, group] : record_rows.active_groups(memory_id))
    out[group].push_back(record);
  return out;
}

void Store::Impl::write_screening(const MemoryRow& row, const Memory& mem, bool moved,
                                  const std::vector<std::int64_t>& touched, bool defer,
                                  const std::vector<std::int64_t>& touched_groups) {
  const State& st = mem.state();
  const std::string support = memory_support_digest(row.id, mem, st);
  const auto n = static_cast<std::int64_t>(st.ids.size());
  const ScreeningHead h = screening_bounds.read_head(row.id);
  // Memory::gradient_lower_bounds() is empty exactly then.
  const bool optimal = n > 0 && st.status == Status::kOptimal && !st.warmup;
  const bool same_epoch = !moved && optimal &&
                          ScreeningBounds::head_intact(row.id, row.state_sha256, h) && h.tokens > 0;
  const bool has_bounds = optimal && (same_epoch || !defer);
  const std::int64_t epoch = h.present ? h.epoch + (same_epoch ? 0 : 1) : 1;
  screening_bounds.write_head(row.id, st.state_sha256, has_bounds ? n : 0, epoch, support);
  if (!has_bounds) return;  // stale group blobs fail the epoch check
  if (!same_epoch) {        // every group, from every token's bound (O(n))
    const std::vector<double> bounds = mem.gradient_lower_bounds();
    SVATTN_ASSERT(bounds.size() == st.ids.size(), "one screening bound per token");
    screening_bounds.write_groups(
        row.id, st.ids, epoch, all_group_members(row.id),
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
  screening_bounds.write_groups(
      row.id, st.ids, epoch, members,
      [&](std::size_t first, std::size_t count, std::vector<double>& out) {
        const std::vector<TokenId> part(
            st.ids.begin() + static_cast<std::ptrdiff_t>(first),
            st.ids.begin() + static_cast<std::ptrdiff_t>(first + count));
        const std::vector<double> b = mem.gradient_lower_bounds(part);
        out.insert(out.end(), b.begin(), b.end());
      });
}

// ---------------------------------------------------------------------------------- reading

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
  if (!screening_bounds.usable_head(row.id, row.state_sha256, ids.size(), &h, problem)) return {};
  std::vector<double> bounds(ids.size());
  PayloadReader own = payload_reader(row.id);
  *problem = read_group_screening(row, ids, h.epoch, reader != nullptr ? *reader : own, bounds);
  if (!problem->empty()) return {};
  return bounds;
}

std::string Store::Impl::read_group_screening(const MemoryRow& row,
                                              const std::vector<TokenId>& ids, std::int64_t epoch,
                                              PayloadReader& pr, std::vector<double>& bounds) {
  const std::unordered_map<std::int64_t, std::int64_t> group_of =
      record_rows.group_of_active(row.id);  // active record -> group (-1: none)
  return screening_bounds.read_bounds(row.id, ids, epoch, group_of, pr, bounds);
}

}  // namespace svattn
