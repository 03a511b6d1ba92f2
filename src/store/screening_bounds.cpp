// The screening bounds component (screening_bounds.h): the head rows (`screening`), the groups'
// membership counts and their keys (`bounds_groups`), and the key rotation an erasure needs
// (docs/store.md "Bounds groups"). The blobs are in screening_bounds_blobs.cpp.
#include "screening_bounds.h"

#include <algorithm>
#include <cstring>

namespace svattn::store_detail {

// ---------------------------------------------------------------------------------- the head

ScreeningHead ScreeningBounds::read_head(std::int64_t memory_id) {
  ScreeningHead h;
  Statement q(db_.handle(),
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

bool ScreeningBounds::head_intact(std::int64_t memory_id, const std::string& state_sha256,
                                  const ScreeningHead& h) {
  return h.present && h.state_sha256 == state_sha256 &&
         h.checksum == screening_head_checksum(memory_id, h.state_sha256, h.tokens, h.epoch);
}

bool ScreeningBounds::usable_head(std::int64_t memory_id, const std::string& state_sha256,
                                  std::size_t n, ScreeningHead* h, std::string* problem) {
  *h = read_head(memory_id);
  if (!h->present) return false;
  if (h->state_sha256 != state_sha256) {
    *problem = "they belong to state " + h->state_sha256.substr(0, 16) + "…, not the stored state";
    return false;
  }
  if (h->checksum != screening_head_checksum(memory_id, h->state_sha256, h->tokens, h->epoch)) {
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

void ScreeningBounds::write_head(std::int64_t memory_id, const std::string& state_sha256,
                                 std::int64_t tokens, std::int64_t epoch,
                                 const std::string& support_sha256) {
  Statement put(db_.handle(),
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

std::string ScreeningBounds::support_digest_of(std::int64_t memory_id,
                                               const std::string& state_sha256) {
  Statement q(db_.handle(),
              "SELECT support_sha256 FROM screening WHERE memory_id = ?1 AND state_sha256 = ?2");
  q.bind(1, memory_id).bind(2, state_sha256);
  return q.step() ? q.text(0) : std::string();
}

ScreeningBounds::LegacyHead ScreeningBounds::read_legacy_head(std::int64_t memory_id) {
  LegacyHead h;
  Statement q(db_.handle(),
              "SELECT state_sha256, tokens, bounds, checksum, support_sha256 FROM screening WHERE "
              "memory_id = ?1");
  q.bind(1, memory_id);
  if (!q.step()) return h;
  h.present = true;
  h.state_sha256 = q.text(0);
  h.tokens = q.int64(1);
  h.bounds = q.blob(2);
  h.checksum = q.text(3);
  h.support_sha256 = q.text(4);
  return h;
}

void ScreeningBounds::rebind_legacy_head(std::int64_t memory_id, const std::string& from,
                                         const std::string& to,
                                         const std::function<std::string()>& support) {
  Statement q(db_.handle(),
              "SELECT tokens, bounds FROM screening WHERE memory_id = ?1 AND "
              "state_sha256 = ?2");
  q.bind(1, memory_id).bind(2, from);
  if (!q.step()) return;
  const auto n = static_cast<std::size_t>(q.int64(0));
  std::vector<double> bounds(n);
  if (n > 0 && static_cast<std::size_t>(q.bytes(1)) == n * sizeof(double))
    std::memcpy(bounds.data(), q.blob_data(1), n * sizeof(double));
  q.reset();
  Statement up(db_.handle(),
               "UPDATE screening SET state_sha256 = ?2, checksum = ?3, support_sha256 = ?4 WHERE "
               "memory_id = ?1");
  up.bind(1, memory_id)
      .bind(2, to)
      .bind(3, screening_checksum(memory_id, to, bounds.data(), n))
      .bind(4, support())
      .run();
}

// -------------------------------------------------------------------------------- membership

std::vector<std::int64_t> ScreeningBounds::join(
    std::int64_t memory_id, const std::vector<std::pair<std::int64_t, std::int64_t>>& records,
    std::vector<std::int64_t>* created) {
  std::vector<std::int64_t> out;
  if (records.empty()) return out;
  std::int64_t g = -1, members = 0, tokens = 0;
  {
    Statement q(db_.handle(),
                "SELECT group_id, member_records, member_tokens FROM bounds_groups WHERE "
                "memory_id = ?1 ORDER BY group_id DESC LIMIT 1");
    q.bind(1, memory_id);
    if (q.step()) {
      g = q.int64(0);
      members = q.int64(1);
      tokens = q.int64(2);
    }
  }
  Statement counts(db_.handle(),
                   "UPDATE bounds_groups SET member_records = ?3, member_tokens = ?4 WHERE "
                   "memory_id = ?1 AND group_id = ?2");
  Statement start(db_.handle(),
                  "INSERT INTO bounds_groups(memory_id, group_id, key_id, next_key_id, "
                  "member_records, member_tokens, bounds) VALUES (?1, ?2, NULL, NULL, 0, 0, NULL)");
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
    out.push_back(g);
  }
  save();
  return out;
}

std::vector<std::int64_t> ScreeningBounds::group_ids(std::int64_t memory_id) {
  std::vector<std::int64_t> out;
  Statement q(db_.handle(),
              "SELECT group_id FROM bounds_groups WHERE memory_id = ?1 ORDER BY group_id");
  q.bind(1, memory_id);
  while (q.step()) out.push_back(q.int64(0));
  return out;
}

std::int64_t ScreeningBounds::group_count() {
  return db_.query_int("SELECT count(*) FROM bounds_groups");
}

void ScreeningBounds::leave(std::int64_t memory_id, const std::string& memory, std::int64_t record,
                            std::int64_t group, std::int64_t tokens, StoreErasure* se) {
  if (group < 0) return;
  if (se != nullptr) se->bounds_group = group;
  std::string old_key, spare;
  std::int64_t members = 0, member_tokens = 0;
  {
    Statement q(db_.handle(),
                "SELECT key_id, next_key_id, member_records, member_tokens FROM bounds_groups "
                "WHERE memory_id = ?1 AND group_id = ?2");
    q.bind(1, memory_id).bind(2, group);
    if (!q.step()) return;  // a records row naming no group (damaged): no blob holds its bounds
    if (!q.is_null(0)) old_key = q.text(0);
    if (!q.is_null(1)) spare = q.text(1);
    members = q.int64(2) - 1;
    member_tokens = std::max<std::int64_t>(0, q.int64(3) - tokens);
  }
  if (members <= 0) {  // the group goes, with both its keys
    Statement del(db_.handle(), "DELETE FROM bounds_groups WHERE memory_id = ?1 AND group_id = ?2");
    del.bind(1, memory_id).bind(2, group).run();
    if (!spare.empty()) vault_.schedule_group_key(memory, record, spare, nullptr);
  } else {
    std::string key_id;
    if (vault_.enabled()) key_id = vault_.replacement_group_key(memory_id, group, spare);
    Statement up(db_.handle(),
                 "UPDATE bounds_groups SET member_records = ?3, member_tokens = ?4, bounds = NULL, "
                 "key_id = NULLIF(?5, ''), next_key_id = NULL WHERE memory_id = ?1 AND "
                 "group_id = ?2");
    up.bind(1, memory_id).bind(2, group).bind(3, members).bind(4, member_tokens).bind(5, key_id);
    up.run();
  }
  if (old_key.empty() || !vault_.enabled()) return;
  if (se != nullptr) se->bounds_key_id = old_key;
  vault_.schedule_group_key(memory, record, old_key, se);
}

// ---------------------------------------------------------------------------------------- keys

void ScreeningBounds::set_key(std::int64_t memory_id, std::int64_t group, const std::string& key_id,
                              const std::string& spare_id) {
  Statement up(db_.handle(),
               spare_id.empty()
                   ? "UPDATE bounds_groups SET key_id = ?3 WHERE memory_id = ?1 AND group_id = ?2"
                   : "UPDATE bounds_groups SET key_id = ?3, next_key_id = ?4 WHERE memory_id = ?1 "
                     "AND group_id = ?2");
  up.bind(1, memory_id).bind(2, group).bind(3, key_id);
  if (!spare_id.empty()) up.bind(4, spare_id);
  up.run();
}

std::map<std::int64_t, SecretKey> ScreeningBounds::keys_for(
    std::int64_t memory_id, const std::vector<std::int64_t>& groups) {
  std::map<std::int64_t, SecretKey> out;
  if (!vault_.enabled() || groups.empty()) return out;
  std::vector<std::string> ids;  // the key id each group's row names (empty: none)
  {
    Statement q(db_.handle(),
                "SELECT key_id FROM bounds_groups WHERE memory_id = ?1 AND group_id = ?2");
    for (std::int64_t g : groups) {
      q.bind(1, memory_id).bind(2, g);
      ids.push_back(q.step() && !q.is_null(0) ? q.text(0) : std::string());
      q.reset();
    }
  }
  std::vector<std::int64_t> need;
  vault_.group_keys(memory_id, groups, ids, out, need);
  if (need.empty()) return out;
  std::vector<KeyOwner> owners;
  for (std::int64_t g : need) owners.push_back(KeyOwner::bounds_group(memory_id, g));
  std::vector<NewDataKey> made = vault_.create_keys(owners);
  for (std::size_t i = 0; i < need.size(); ++i) {
    set_key(memory_id, need[i], made[i].key_id);
    out.emplace(need[i], std::move(made[i].key));
  }
  return out;
}

std::vector<KeyOwner> ScreeningBounds::groups_without_spare() {
  std::vector<KeyOwner> out;
  Statement q(db_.handle(),
              "SELECT memory_id, group_id FROM bounds_groups WHERE key_id IS NOT NULL AND "
              "next_key_id IS NULL ORDER BY memory_id, group_id");
  while (q.step()) out.push_back(KeyOwner::bounds_group(q.int64(0), q.int64(1)));
  return out;
}

std::string ScreeningBounds::groups_without_spare_part(int tag) {
  return "SELECT " + std::to_string(tag) +
         ", memory_id, NULL, NULL, group_id FROM bounds_groups WHERE key_id IS NOT NULL AND "
         "next_key_id IS NULL";
}

KeyOwner ScreeningBounds::group_from_row(Statement& q) {
  return KeyOwner::bounds_group(q.int64(1), q.int64(4));
}

void ScreeningBounds::set_spare_keys(const std::vector<KeyOwner>& groups,
                                     const std::vector<NewDataKey>& made) {
  Statement spare(db_.handle(),
                  "UPDATE bounds_groups SET next_key_id = ?3 WHERE memory_id = ?1 AND group_id = "
                  "?2 AND next_key_id IS NULL AND key_id IS NOT NULL");
  for (std::size_t i = 0; i < made.size(); ++i) {
    spare.bind(1, groups[i].memory_id).bind(2, groups[i].group()).bind(3, made[i].key_id).defer();
    spare.reset();
  }
}

std::vector<KeyOwner> ScreeningBounds::unsealed_groups() {
  std::vector<KeyOwner> out;
  Statement q(db_.handle(),
              "SELECT memory_id, group_id FROM bounds_groups WHERE key_id IS NULL ORDER BY "
              "memory_id, group_id");
  while (q.step()) out.push_back(KeyOwner::bounds_group(q.int64(0), q.int64(1)));
  return out;
}

void ScreeningBounds::seal_group(const KeyOwner& g, const NewDataKey& k) {
  Statement q(db_.handle(),
              "SELECT bounds FROM bounds_groups WHERE memory_id = ?1 AND group_id = ?2");
  q.bind(1, g.memory_id).bind(2, g.group());
  std::vector<std::uint8_t> sealed;
  const bool has_blob = q.step() && !q.is_null(0);
  if (has_blob) {
    const std::vector<std::uint8_t> plain = q.blob(0);
    seal_into(k.key, {g.memory_id, g.group(), -1, RecordField::kBoundsGroup}, plain.data(),
              plain.size(), sealed);
  }
  q.reset();
  Statement up(db_.handle(),
               has_blob ? "UPDATE bounds_groups SET key_id = ?3, bounds = ?4 WHERE memory_id = ?1 "
                          "AND group_id = ?2"
                        : "UPDATE bounds_groups SET key_id = ?3 WHERE memory_id = ?1 AND "
                          "group_id = ?2");
  up.bind(1, g.memory_id).bind(2, g.group()).bind(3, k.key_id);
  if (has_blob) up.bind_blob(4, sealed.data(), sealed.size());
  up.run();
}

}  // namespace svattn::store_detail
