// Reading token matrices (.csv / .npy), parsing ROWS specs, JSON of states.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "svattn/types.h"

namespace svattn {

/// Reads a 2-D matrix: `.csv` (one row per line, comma-separated, `#` comment lines and blank lines
/// skipped) or `.npy` (2-D, float32/float64, little-endian, C or Fortran order). Throws IoError
/// (missing/unreadable) or FormatError naming file, row and column (NaN/Inf, ragged, empty, bad
/// header).
RowMatrix read_matrix(const std::string& path);

/// Default byte limit of read_file (16 GiB): large enough for any token file svattn is sized for,
/// small enough that a mistaken path cannot exhaust memory.
inline constexpr std::uint64_t kMaxInputBytes = std::uint64_t{16} << 30;
/// Reads a whole input file: the one input policy of every reader (matrices, ops files, record
/// files). Only regular files are read (a device, FIFO or socket such as /dev/zero is refused
/// before a byte is read), at most `max_bytes`; every failure is an IoError naming the path.
std::vector<char> read_file(const std::string& path, std::uint64_t max_bytes = kMaxInputBytes);

/// Parses a decimal integer in [lo, hi]: the one integer parser of every CLI option, ROWS list and
/// record file. Digits with an optional '-' only: "010" is ten (never octal), "0x10", "+5", " 5",
/// "1e3" and "" are rejected. Throws InvalidArgument "WHAT: 'TEXT' ..." naming the value.
std::int64_t parse_decimal(const std::string& text, std::int64_t lo, std::int64_t hi,
                           const std::string& what);
/// Writes a float64 C-order .npy.
void write_npy(const std::string& path, const RowMatrix& m);
/// Writes a CSV with full precision (%.17g).
void write_csv(const std::string& path, const RowMatrix& m);

/// Parses "3,10-12" into ascending unique ids; every id must be in [0, n). Throws InvalidArgument
/// naming the bad item.
std::vector<TokenId> parse_rows(const std::string& spec, int n);

/// Throws InvalidArgument "WHAT: not valid UTF-8 (byte 0xNN at offset K)" unless `text` is well-formed
/// UTF-8 (no overlong forms, no surrogates, at most U+10FFFF): the one check of every name that
/// enters a store, a certificate or a JSON document.
void check_utf8(const std::string& text, const std::string& what);

/// The `svattn solve --json` object: n, dim, settings, status, warmup, ids, alpha, b, partition,
/// kkt, state_sha256 (no value_dim: values do not enter the state).
nlohmann::json state_to_json(const State& s);
nlohmann::json settings_to_json(const ProblemSettings& s);

}  // namespace svattn
