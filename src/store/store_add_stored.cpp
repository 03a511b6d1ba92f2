// Adding a record without restoring the memory (docs/store.md "Operations without a restore").
// A new token whose KKT gradient g = sum_j a_j k(x, x_j) - k(x, x) / 2 + b is positive against the
// current state enters as a reserve token and moves nothing (docs/math.md §3): the incremental path
// then leaves every coefficient, b and set bit-identical. When every token of the record clears a
// safety margin against the stored support (read and checked against its digest), the state after
// is the stored support over the enlarged token set, and its hash follows from the persisted
// bucket digests plus the record's own. The cost is O(|S u E| d) for the support, O(k |S u E| d)
// for the gradients and O(records) digests, instead of a restore's O(n d). Any condition this path
// cannot establish sends the add down the ordinary path (nothing is written here then).
#include <chrono>

#include "store_impl.h"
#include "svattn/hash.h"
#include "svattn/kernel.h"

namespace svattn {

using namespace store_detail;

namespace {

// Margin that a stored-rows gradient must clear: far above the rounding of either arithmetic, so
// the incremental path (its own summation order) sees g > 0 too.
double gradient_margin(double kxx, double b) { return 1e-8 * (1.0 + std::abs(kxx) + std::abs(b)); }

}  // namespace

std::optional<Store::Impl::StoredAdd> Store::Impl::plan_stored_add(const MemoryRow& row,
                                                                   std::int64_t record,
                                                                   const TokenSet& ts) {
  if (!stored_rows_usable(row) || read_record(row.id, record).exists) return std::nullopt;
  StoredAdd a;
  std::size_t first = 0, count = 0;
  if (!read_active_buckets(row, -1, a.buckets, first, count)) return std::nullopt;
  const StoredSupportRows sup_rows = read_support_rows(row.id);
  std::optional<StateHashParts> checked = checked_hash_parts(row, sup_rows, a.buckets);
  if (!checked) return std::nullopt;
  StateHashParts& parts = *checked;
  // The stored support (rows checked against the digest bound to the recorded hash).
  const StoredSupport& sup = stored_support(row.name);
  if (sup.seq != row.last_audit_seq || !(sup.b == row.b)) return std::nullopt;
  const KernelSettings& ks = row.settings.problem.kernel;
  for (Eigen::Index i = 0; i < ts.keys.rows(); ++i) {
    const double* x = ts.keys.row(i).data();
    const double kxx = kernel(ks, x, x, row.dim);
    double g = row.b - kxx / 2;
    for (Eigen::Index j = 0; j < sup.support.keys.rows(); ++j)
      g += sup.support.alpha[j] * kernel(ks, x, sup.support.keys.row(j).data(), row.dim);
    const double margin = gradient_margin(kxx, row.b);
    if (!(g > margin)) return std::nullopt;  // it may enter the support: the path must run
    a.new_bounds.push_back(g - margin);      // a lower bound of the exact gradient
    a.kernel_evaluations += 1 + sup.support.keys.rows();
  }
  // Where the record's buckets go in ascending bucket.
  const std::vector<BucketDigest> mine = record_buckets(ts);
  std::size_t at = 0;
  while (at < a.buckets.size() && a.buckets[at].bucket < mine.front().bucket) ++at;
  a.buckets.insert(a.buckets.begin() + static_cast<std::ptrdiff_t>(at), mine.begin(), mine.end());
  parts.n += static_cast<std::uint64_t>(ts.size());
  a.after_sha256 = state_sha256_from_parts(row.settings.problem, parts, a.buckets);
  a.support_margin = static_cast<std::int64_t>(sup_rows.margin);
  a.support_error = static_cast<std::int64_t>(sup_rows.error);
  a.n_after = static_cast<std::int64_t>(parts.n);
  return a;
}

void Store::Impl::write_stored_add(const MemoryRow& row, std::int64_t record, const TokenSet& ts,
                                   StoredAdd& a, OpResult& res) {
  record_rows.insert(row.id, {record}, now_utc());
  insert_tokens(
      row.id, ts, [](TokenId) { return true; }, true);
  // The other records' bounds hold as they are; the new record's are its own lower bounds.
  const auto s0 = OpClock::now();
  const std::int64_t epoch =
      update_screening_head(row, a.after_sha256, a.n_after - ts.size(), a.n_after);
  if (epoch >= 0) {  // the record's bounds join its group's blob (a new group's: none yet)
    const std::int64_t g = read_record(row.id, record).bounds_group;
    GroupBounds group;
    group.epoch = epoch;
    bool absent = false;
    const bool read = screening_bounds.read_blob(row.id, g, &group, &absent).empty();
    if ((read && group.epoch == epoch) || absent)
      screening_bounds.rewrite_entry(row.id, g, std::move(group), record, a.new_bounds);
  }  // else a damaged or stale blob is left: the next restore and verify say so
  res.screening_seconds = seconds_since(s0);
  res.diagnostics.ops = ts.size();
  res.diagnostics.kernel_evaluations = a.kernel_evaluations;
  res.diagnostics.status = Status::kOptimal;
  nlohmann::json cert{
      {"operation", "add"},
      {"record", record},
      {"tokens", ts.size()},
      {"first_token_id", ts.ids.front()},
      {"last_token_id", ts.ids.back()},
      {"encryption", encryption},
      {"memory_tokens", a.n_after},
      {"partition_sizes",
       {{"margin", a.support_margin},
        {"error", a.support_error},
        {"reserve", a.n_after - a.support_margin - a.support_error}}},
      {"status", to_string(row.status)},
      {"diagnostics", diagnostics_to_json(res.diagnostics)},
      {"without_restore",
       "every new token has g > 0 against the stored support: no coefficient, b or set moves"}};
  AuditEntry& e = res.entry;
  e.operation = "add";
  e.memory = row.name;
  e.record = record;
  e.token_count = ts.size();
  e.state_before = row.state_sha256;
  e.state_after = a.after_sha256;
  e.certificate = cert.dump();
  audit.append(e);
  write_state_hash(row.id, a.after_sha256, e.seq);
}

std::optional<OpResult> Store::Impl::add_stored(const MemoryRow& row, std::int64_t record,
                                                const TokenSet& ts, Transaction& t) {
  if (options.read_only || !options.without_restore || schema_version < kFirstSchemaWithHashV2)
    return std::nullopt;
  if (ts.keys.cols() != row.dim || ts.values.cols() != row.value_dim) return std::nullopt;
  std::optional<StoredAdd> a = plan_stored_add(row, record, ts);
  if (!a) return std::nullopt;  // nothing was written
  OpResult res;
  write_stored_add(row, record, ts, *a, res);
  res.memory_tokens = static_cast<int>(a->n_after);
  commit_op(row.id, t, res);
  return res;
}

}  // namespace svattn
