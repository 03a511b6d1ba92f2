// Reading the record-id file of `svattn memory import --records` (docs/store.md "CLI"): one
// integer record id per key row, as CSV (one decimal integer per line) or .npy (an integer or
// integral float array of shape (n,) or (n, 1)).
#pragma once
#include <Eigen/Core>
#include <cstdint>
#include <string>
#include <vector>

namespace svattn::cli {

/// The record ids of `path`, one per row of the keys file `keys_path` (`want_rows` rows), each in
/// [0, 2^40). CSV lines follow the integer policy of every CLI input (parse_decimal: digits with
/// no sign, exponent or fraction; blank and '#' lines skipped); a .npy holds '<i8', '<i4', '<u8',
/// '<u4' (and narrower) integers, or float values that are integers. FormatError naming the file
/// and the 0-based row otherwise.
std::vector<std::int64_t> read_record_ids(const std::string& path, Eigen::Index want_rows,
                                          const std::string& keys_path);

}  // namespace svattn::cli
