// The rows of a store as the operations read them (store_rows.cpp): a memory's row, a record's
// row, the stored support, the in-RAM cache entry, an import plan, and helpers of token ids and
// certificates the operations share. Private to the store.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "svattn/memory.h"
#include "svattn/readout.h"
#include "svattn/store.h"
#include "svattn/types.h"

namespace svattn::store_detail {

// Partition codes of the support table.
constexpr int kPartMargin = 1;
constexpr int kPartError = 2;

nlohmann::json diagnostics_to_json(const OpDiagnostics& d);
/// The outcome fields every operation's certificate carries.
void add_outcome_fields(nlohmann::json& cert, const Memory& mem, const State& after,
                        const OpDiagnostics& diagnostics);
inline std::int64_t record_lo(std::int64_t record) { return record << kPositionBits; }
inline std::int64_t record_hi(std::int64_t record) {
  return (record << kPositionBits) | kMaxPosition;
}
void check_record(std::int64_t record);
bool same_bits(double a, double b);
bool valid_utf8(const std::string& s);

struct MemoryRow {
  std::int64_t id = 0;
  std::string name;
  MemorySettings settings;
  int dim = 0;
  int value_dim = 0;
  double b = 0;
  Status status = Status::kEmpty;
  bool warmup = false;
  KktReport kkt;
  std::string state_sha256;
  std::int64_t last_audit_seq = 0;
};

struct RecordRow {
  bool exists = false;
  bool suspended = false;
  std::string key_id;              // empty: its payloads are plaintext
  std::int64_t bounds_group = -1;  // -1: none (before schema 6)
};

// What a query needs: the support (alpha > 0, ascending id) and b of the stored state.
struct StoredSupport {
  std::int64_t id = 0;
  std::int64_t seq = 0;
  int dim = 0;
  int value_dim = 0;
  KernelSettings kernel;
  double b = 0;
  Support support;
};

struct Cached {
  std::int64_t id = 0;
  std::int64_t seq = 0;
  std::unique_ptr<Memory> memory;
};

struct ImportPlan {
  std::vector<std::int64_t> records;            // ascending, distinct
  std::vector<std::vector<Eigen::Index>> rows;  // input rows of each record, in input order
};

/// The support rows of a stored state (margin and error tokens), ascending id.
struct StoredSupportRows {
  std::vector<TokenId> ids;
  std::vector<double> alpha;
  std::vector<char> is_error;
  std::size_t margin = 0, error = 0;
};

}  // namespace svattn::store_detail
