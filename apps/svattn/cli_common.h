// Shared helpers of the svattn subcommands: problem options (kernel, C, ridge), loading tokens,
// timing, deterministic random numbers and output helpers.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/clock.h"
#include "support/random.h"
#include "support/random_matrix.h"
#include "svattn/types.h"

namespace svattn::cli {

/// The options that define a problem: --kernel, --bandwidth, --degree, --coef0, --C, --ridge.
struct ProblemOptions {
  std::string kernel = "rbf";
  double bandwidth = 1.0;
  int degree = 2;
  double coef0 = 1.0;
  double C = 0.0;
  double ridge = ProblemSettings{}.ridge;

  /// Builds and validates the settings (throws InvalidArgument naming the bad field).
  ProblemSettings build() const;
};

/// Largest --probes of a certificate's readout check (memory grows with probes x dim).
inline constexpr int kMaxProbes = 100000;

/// Adds the problem options to `sub`; --C is required.
void add_problem_options(CLI::App* sub, ProblemOptions& opts);

/// --keys FILE (required) and --values FILE (optional; defaults to the keys).
struct TokenOptions {
  std::string keys;
  std::string values;
};
void add_token_options(CLI::App* sub, TokenOptions& opts);

/// Reads keys (and values, defaulting to the keys) and returns tokens with ids = row index.
/// Throws IoError / FormatError (row-count mismatch names both files).
TokenSet load_tokens(const TokenOptions& opts);
TokenSet load_tokens(const std::string& keys_path, const std::string& values_path);

/// The one input policy of every option of `app` and its subcommands, applied once in main():
/// integer options are decimal only (core parse_decimal: "010" is ten, "0x10", "+5", " 5", "1e3"
/// are exit 2 naming the option), floating-point options must be finite numbers (an empty string
/// is not 0), and every text option must be valid UTF-8.
void apply_input_policy(CLI::App& app);

/// Adds --json (a flag) to `sub`.
void add_json_flag(CLI::App* sub, bool& json);

/// Exit code of a status: 0 for optimal, warm-up and empty, 1 for a numerical failure (which is
/// also named in one line on stderr).
int exit_code_for(Status s);

/// Prints `j` with a 2-space indent and a trailing newline on stdout.
void print_json(const nlohmann::json& j);
/// Writes `j` (2-space indent) to `path`; throws IoError.
void write_json(const std::string& path, const nlohmann::json& j);

/// Human-readable summary of a state (the non --json output of solve and replay).
void print_state_summary(const State& s);

// The support layer's stopwatch, generator and random matrices (src/support).
using support::gaussian_matrix;
using support::Rng;
using support::Stopwatch;

/// `count` probe queries around the rows of `keys`: per dimension mean + std * z, z ~ N(0, 1).
RowMatrix probes_around(const RowMatrix& keys, int count, std::uint64_t seed);

/// Comma-joined list of at most `max_items` ids, with "…" when truncated.
std::string id_list(const std::vector<TokenId>& ids, std::size_t max_items = 10);

}  // namespace svattn::cli
