// Bulk import (docs/store.md "Operations"): the input is planned (records in ascending id, each
// record's rows in input order), records already in the memory are checked to hold the same tokens
// and skipped (resume after a crash), and the rest are committed in chunks, one import_chunk
// operation (store_ops.cpp) each.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include "store_impl.h"
#include "support/clock.h"

namespace svattn {

using namespace store_detail;

namespace {

ImportPlan plan_import(const std::vector<std::int64_t>& record_of_row, const RowMatrix& keys,
                       const RowMatrix& values, int dim, int value_dim) {
  if (static_cast<Eigen::Index>(record_of_row.size()) != keys.rows()) {
    throw InvalidArgument("import: " + std::to_string(record_of_row.size()) + " record ids for " +
                          std::to_string(keys.rows()) + " key rows");
  }
  if (keys.cols() != dim || values.cols() != value_dim || values.rows() != keys.rows()) {
    throw InvalidArgument(
        "import: dimension mismatch: the memory has key/value dimension " + std::to_string(dim) +
        "/" + std::to_string(value_dim) + ", the input has " + std::to_string(keys.cols()) + "/" +
        std::to_string(values.cols()) + " columns and " + std::to_string(keys.rows()) + "/" +
        std::to_string(values.rows()) + " rows");
  }
  std::map<std::int64_t, std::vector<Eigen::Index>> by_record;
  for (std::size_t i = 0; i < record_of_row.size(); ++i) {
    const std::int64_t r = record_of_row[i];
    if (r < 0 || r > kMaxRecordId) {
      throw InvalidArgument("import: row " + std::to_string(i) + ": record id " +
                            std::to_string(r) + " out of range [0, 2^40)");
    }
    auto& v = by_record[r];
    if (static_cast<std::int64_t>(v.size()) > kMaxPosition) {
      throw InvalidArgument("import: row " + std::to_string(i) + ": record " + std::to_string(r) +
                            " has more than 2^23 rows");
    }
    v.push_back(static_cast<Eigen::Index>(i));
  }
  ImportPlan p;
  for (auto& [r, v] : by_record) {
    p.records.push_back(r);
    p.rows.push_back(std::move(v));
  }
  return p;
}

bool same_tokens(const TokenSet& a, const TokenSet& b) {
  auto bytes_equal = [](const RowMatrix& x, const RowMatrix& y) {
    return x.rows() == y.rows() && x.cols() == y.cols() &&
           std::memcmp(x.data(), y.data(), sizeof(double) * static_cast<std::size_t>(x.size())) ==
               0;
  };
  return a.ids == b.ids && bytes_equal(a.keys, b.keys) && bytes_equal(a.values, b.values);
}

}  // namespace

ImportResult Store::import_records(const std::string& name,
                                   const std::vector<std::int64_t>& record_of_row,
                                   const RowMatrix& keys, const RowMatrix* values,
                                   const ImportOptions& options) {
  if (options.chunk_records < 1) {
    throw InvalidArgument("import: chunk_records must be >= 1, got " +
                          std::to_string(options.chunk_records));
  }
  Impl& im = *impl_;
  im.require_writable();
  const support::Stopwatch watch;
  const RowMatrix& vals = values != nullptr ? *values : keys;
  const MemoryRow row0 = im.read([&] { return im.read_memory_row(name); });
  const ImportPlan plan = plan_import(record_of_row, keys, vals, row0.dim, row0.value_dim);
  // Which records are already there (resume) -- all checked before the first write.
  std::vector<char> skip(plan.records.size(), 0);
  im.read([&] {
    for (std::size_t k = 0; k < plan.records.size(); ++k) {
      if (!im.read_record(row0.id, plan.records[k]).exists) continue;
      const TokenSet want = import_record_set(plan.records[k], plan.rows[k], keys, vals);
      if (!same_tokens(im.record_tokens(row0, plan.records[k]), want)) {
        throw AlreadyExists("import: memory '" + name + "' already has record " +
                            std::to_string(plan.records[k]) + " with other tokens (input row " +
                            std::to_string(plan.rows[k].front()) + ")");
      }
      skip[k] = 1;
    }
    return 0;
  });
  ImportResult res;
  res.totals.records_total = static_cast<std::int64_t>(plan.records.size());
  for (char c : skip) res.totals.records_skipped += c;
  std::size_t k = 0;
  while (k < plan.records.size()) {
    std::vector<std::size_t> chunk;
    for (;
         k < plan.records.size() && static_cast<std::int64_t>(chunk.size()) < options.chunk_records;
         ++k) {
      if (skip[k] == 0) chunk.push_back(k);
    }
    if (chunk.empty()) continue;
    // Only the last chunk writes the screening bounds (an interrupted import leaves none).
    const bool last = std::find(skip.begin() + static_cast<std::ptrdiff_t>(k), skip.end(), 0) ==
                      skip.end();
    res.entries.push_back(im.import_chunk(name, plan, chunk, keys, vals, res.totals, last));
    ++res.chunks;
    res.totals.seconds =
        watch.seconds();
    if (options.progress) options.progress(res.totals);
  }
  res.state_sha256 = im.read([&] { return im.read_memory_row(name).state_sha256; });
  im.refresh_planner_statistics(row0.id, res.totals.tokens_done);
  return res;
}

}  // namespace svattn
