// The screening-bounds codecs (docs/store.md "Persisted screening", "Bounds groups"): the bounds
// group blob, the screening head's checksum, the layouts of schema 2-5 (read by the upgrade and
// read-only opens), and the token ranges of records. Implemented in bounds_codec.cpp and
// store_screening_legacy.cpp. Private to the store.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "svattn/memory.h"
#include "svattn/types.h"

namespace svattn::store_detail {

/// Checksum of a schema 2-4 screening row, every bound in it (docs/store.md "Persisted
/// screening").
std::string screening_checksum(std::int64_t memory_id, const std::string& state_sha256,
                               const double* bounds, std::size_t n);
/// Checksum of a schema-5 screening head row.
std::string screening_head_checksum(std::int64_t memory_id, const std::string& state_sha256,
                                    std::int64_t tokens, std::int64_t epoch);
/// Decodes a schema-5 records.bounds blob (epoch (i64) | k fp64 | SHA-256 (32), little-endian)
/// of `n` bytes at `p` into k bounds at `out`; empty, or what is wrong with them.
std::string decode_record_bounds(std::int64_t memory_id, std::int64_t record, std::int64_t epoch,
                                 const std::uint8_t* p, std::size_t n, std::size_t k, double* out);
/// A bounds group (docs/store.md "Bounds groups") takes new records while it holds fewer than
/// kGroupMaxRecords records and their token rows stay within kGroupMaxTokens (a larger record gets
/// a group of its own): a full rewrite of the bounds seals one blob per group, not per record, and
/// an erasure rewrites one group's blob.
constexpr std::int64_t kGroupMaxRecords = 64;
constexpr std::int64_t kGroupMaxTokens = 4096;
/// One record's part of a group blob: its active tokens' bounds, `count` of them.
struct GroupEntry {
  std::int64_t record = 0;
  std::int64_t count = 0;
};
/// A group blob's content: the epoch, the entries in ascending record, their bounds back to back.
struct GroupBounds {
  std::int64_t epoch = 0;
  std::vector<GroupEntry> entries;
  std::vector<double> bounds;
};
/// The plaintext group blob: EPOCH (i64) | M (i64) | M x (RECORD, COUNT) (i64) | bounds (fp64) |
/// SHA-256("svattn-group-bounds-v1\n" MEMORY "\n" GROUP "\n" EPOCH "\n" M "\n" ENTRIES BOUNDS),
/// little-endian (docs/store.md "Bounds groups").
std::vector<std::uint8_t> encode_group_bounds(std::int64_t memory_id, std::int64_t group,
                                              const GroupBounds& g);
/// Decodes `n` bytes at `p`; empty, or what is wrong with them ("bounds group G: …").
std::string decode_group_bounds(std::int64_t memory_id, std::int64_t group, const std::uint8_t* p,
                                std::size_t n, GroupBounds* out);
/// The records of ascending token ids `ids` with the range [first, first + count) of each.
struct RecordRange {
  std::int64_t record;
  std::size_t first, count;
};
std::vector<RecordRange> record_ranges(const std::vector<TokenId>& ids);
/// The head row of a memory's persisted screening (schema 5 on).
struct ScreeningHead {
  bool present = false;
  std::string state_sha256;
  std::int64_t tokens = 0;  ///< active tokens the record blobs cover; 0: the memory has no bounds
  std::int64_t epoch = 0;   ///< the record blobs of another epoch are stale
  std::string checksum;
};
/// The support digest (docs/store.md "Persisted screening") of the state `mem` holds, from its own
/// tokens: the same bytes Store::Impl::support_digest reads from the file.
std::string memory_support_digest(std::int64_t memory_id, const Memory& mem, const State& st);

}  // namespace svattn::store_detail
