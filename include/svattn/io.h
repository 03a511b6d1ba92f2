// Reading token matrices (.csv / .npy), parsing ROWS specs, JSON of states.
#pragma once
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
/// Writes a float64 C-order .npy.
void write_npy(const std::string& path, const RowMatrix& m);
/// Writes a CSV with full precision (%.17g).
void write_csv(const std::string& path, const RowMatrix& m);

/// Parses "3,10-12" into ascending unique ids; every id must be in [0, n). Throws InvalidArgument
/// naming the bad item.
std::vector<TokenId> parse_rows(const std::string& spec, int n);

/// The `svattn solve --json` object: n, dim, settings, status, warmup, ids, alpha, b, partition,
/// kkt, state_sha256 (no value_dim: values do not enter the state).
nlohmann::json state_to_json(const State& s);
nlohmann::json settings_to_json(const ProblemSettings& s);

}  // namespace svattn
