// The paper's experiments that need trained models (SPEC §11): E3 selective copy with growing
// padding, E5 character LM (hybrid vs state-matched sliding window), E6 training throughput.
// Each run_* writes `<out_dir>/E?.md`, `<out_dir>/E?.json` and PNG plots and returns the JSON it
// wrote, with the contract of svattn/experiments/experiments.h (experiment, title, preset, seed,
// data, scale, runtime_seconds, markdown_file, json_file, plots, summary {metric, paper, ours},
// tables). docs/experiments.md describes the designs and the measured numbers.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "svattn/experiments/experiments.h"
#include "svattn/torch/attention.h"

namespace svattn::experiments {

// ------------------------------------------------------------------ selective copy (E3)

/// Vocabulary of the selective-copy task: token 0 = padding, 1 = go marker, 2 = output query,
/// 3 .. 3 + symbols - 1 = data symbols.
struct SelectiveCopyTask {
  int symbols = 8;       ///< data alphabet size (chance recall = 1 / symbols)
  int k = 4;             ///< data tokens per sequence
  int prefix = 64;       ///< length of the data + padding region (k data tokens among prefix - k pads)

  static constexpr int kPad = 0;
  static constexpr int kGo = 1;
  static constexpr int kQuery = 2;
  static constexpr int kFirstSymbol = 3;
  int vocab() const { return kFirstSymbol + symbols; }
  /// Sequence length of the model input: prefix, the go marker, k - 1 output queries.
  int length() const { return prefix + k; }
  /// Throws InvalidArgument for k < 1, symbols < 2, prefix < k.
  void validate() const;
};

/// One batch: input tokens [B, prefix + k] and targets [B, prefix + k] (-100 = ignored: every
/// position except the k outputs). The input is the prefix (k symbols drawn uniformly, at k
/// distinct positions drawn uniformly, padding elsewhere), then `go`, then k - 1 `query` tokens;
/// the target of the go position is the first data symbol, of query j the (j + 1)-th, in order of
/// position. Row-major int64 vectors, so the generator is testable without LibTorch.
struct SelectiveCopyBatch {
  int batch = 0;
  int length = 0;
  std::vector<std::int64_t> inputs;   ///< batch * length
  std::vector<std::int64_t> targets;  ///< batch * length
  std::vector<std::vector<int>> data_positions;  ///< per row: the k data positions, ascending
};
SelectiveCopyBatch make_selective_copy_batch(const SelectiveCopyTask& task, int batch,
                                             std::mt19937_64& rng);

// ------------------------------------------------------------------ state matching

/// Floats of recurrent/attention state one head carries at inference when predicting a token
/// (SPEC §9, docs/experiments.md "How state is matched"):
///   softmax window W:  W (d_k + d_v);  full softmax: `context` (d_k + d_v);
///   linear / DeltaNet: d_k d_v (+ d_k for linear attention's normaliser);
///   hybrid:            (chunk + average |S ∪ E|) (d_k + d_v) (+ |S ∪ E| for the coefficients α).
/// `average_support` is used by the hybrid only; `context` by full softmax only.
double state_floats_per_head(const layers::AttentionConfig& config, double average_support,
                             std::int64_t context);

// ------------------------------------------------------------------ statistics

/// Regularised incomplete beta function I_x(a, b) (continued fraction, Numerical Recipes §6.4),
/// a, b > 0, x in [0, 1].
double regularized_incomplete_beta(double a, double b, double x);
/// CDF of Student's t with `dof` > 0 degrees of freedom: 1 - I_{dof/(dof+t²)}(dof/2, 1/2) / 2 for t > 0.
double student_t_cdf(double t, double dof);

struct PairedTTest {
  int n = 0;
  double mean_difference = 0;  ///< mean of a_i - b_i
  double sd_difference = 0;    ///< sample sd of the differences
  double t = 0;
  double dof = 0;
  double p_two_sided = 0;      ///< NaN when n < 2 or every difference is equal
};
/// Paired t-test of a against b (same length >= 1).
PairedTTest paired_t_test(const std::vector<double>& a, const std::vector<double>& b);

// ------------------------------------------------------------------ runners

/// E3 selective copy; E5 character LM on the enwik8 prefix; E6 training throughput of the 3m
/// presets. Presets: tiny (seconds, for tests), quick (≤ 10 min on 2 cores), paper.
nlohmann::json run_e3(const ExperimentOptions& options);
nlohmann::json run_e5(const ExperimentOptions& options);
nlohmann::json run_e6(const ExperimentOptions& options);

/// Registers E3, E5 and E6 with `svattn reproduce` (register_runner). Idempotent.
void register_lm_experiments();

}  // namespace svattn::experiments
