// Resumable trainer of the character LMs: AdamW with warm-up + cosine, gradient clipping, fixed
// seeds, periodic validation BPC, atomic checkpoints (survive kill -9), JSONL metrics, a gnuplot
// PNG of the curves, and BPC evaluation of a checkpoint.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "svattn/lm/corpus.h"
#include "svattn/lm/presets.h"
#include "svattn/torch/model.h"

namespace svattn::lm {

/// The most intra-op threads set_threads accepts: 4 x the CPUs of this machine
/// (std::thread::hardware_concurrency, 1 when unknown), at most 1024 (docs/lm.md "Resource bounds").
/// More threads than that only oversubscribe the cores (a thousand threads on two cores ran for
/// minutes).
int max_threads();
/// Sets LibTorch's intra-op threads and, once per process, its inter-op threads. Throws
/// InvalidArgument naming --threads outside [1, max_threads()].
void set_threads(int threads);

inline constexpr std::uint64_t kDefaultSeed = 1234;

/// A CharLm initialised from LibTorch's global CPU generator seeded with `seed`, under the one lock
/// that serialises every seeding of that generator: models built side by side (E3's and E5's
/// workers) start exactly as they would alone.
layers::CharLm seeded_char_lm(const layers::LmConfig& config, std::uint64_t seed);

/// Whether a parameter name belongs to a hybrid gate (a dotted component starting "gate_").
bool is_gate_parameter(const std::string& name);
/// The AdamW groups of a model: {matrices, weight_decay} and {the rest, 0}; the gate's matrices
/// decay only with h.gate_weight_decay.
std::vector<torch::optim::OptimizerParamGroup> param_groups(torch::nn::Module& model, const TrainHyper& h);

struct TrainOptions {
  std::string preset = "tiny";
  DataSpec data;
  std::string out;                  ///< run directory (created)
  std::int64_t steps = 1000;        ///< total steps (the schedule's horizon)
  bool resume = false;              ///< continue from out/LATEST if present
  std::optional<std::uint64_t> seed;  ///< unset: kDefaultSeed (or the checkpoint's on resume)
  // Overrides of the preset (on --resume they must equal the checkpoint's values).
  std::optional<std::int64_t> batch, seq, warmup, eval_every, eval_windows, checkpoint_every, log_every;
  std::optional<double> lr;
  std::optional<std::string> gate;              ///< hybrid: "chunk" | "token" | "position" | "joint"
  std::optional<std::string> local;             ///< hybrid: local path "chunk" | "window"
  std::optional<std::int64_t> local_window;     ///< hybrid window mode: W_loc (implies window)
  std::optional<double> svm_C;                  ///< hybrid: box bound C
  std::optional<std::int64_t> chunk;            ///< hybrid chunk (swa: the window's chunk part)
  std::optional<int> fista_iterations;          ///< hybrid batched path
  std::optional<std::string> global_path;       ///< hybrid: "exact" | "batched" memory solver
  double matched_support = -1;      ///< swa-*: average support to match (< 0: default; new runs only)
  std::string match_run;            ///< swa-*: read the average support from this hybrid run (new runs only)
  int threads = 2;
  /// LibTorch device of the model and its batches: "cpu", "cuda", "cuda:1" (scripts/gpu-paper.sh).
  /// A CUDA device needs a CUDA build of LibTorch and a visible GPU (InvalidArgument otherwise);
  /// resuming a checkpoint works on the CPU only.
  std::string device = "cpu";
  /// > 0: stop after the step that brings the training time past this many seconds, then
  /// validate and checkpoint as at the end (the schedule keeps the horizon `steps`).
  double max_seconds = 0;
  bool progress = true;             ///< progress line on stderr (throttled)
  bool plot = true;                 ///< PNG of the curves at the end (gnuplot)
};

struct StepRecord {
  std::int64_t step = 0;            ///< 1-based number of the step just taken
  double loss = 0;                  ///< mean cross-entropy (nats / byte) of the step's batch
  double lr = 0;
  double grad_norm = 0;             ///< before clipping
};

struct TrainResult {
  std::int64_t start_step = 0;      ///< step the run started (or resumed) from
  std::int64_t end_step = 0;
  std::vector<StepRecord> steps;    ///< every step taken in this call
  double final_valid_bpc = std::nan("");
  double tokens_per_second = 0;     ///< training steps only (no eval / checkpoint time)
  double seconds = 0;
  std::int64_t parameters = 0;
};

/// One run: builds a fresh model or resumes from the run directory's latest checkpoint.
class Trainer {
 public:
  /// Throws InvalidArgument (bad options, --resume mismatch, out dir holds a run without
  /// --resume), IoError (data, directory), FormatError (corrupt checkpoint).
  explicit Trainer(TrainOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Trains up to options.steps. `stop_after` >= 0 stops after that global step without the
  /// final checkpoint, validation or plot (a simulated crash, for tests).
  TrainResult run(std::int64_t stop_after = -1);

  std::int64_t step() const;
  const Preset& preset() const;
  const Corpus& corpus() const;
  layers::CharLm& model();
  std::int64_t parameters() const;
  /// The run's config JSON (what config.json in a checkpoint holds).
  nlohmann::json config_json() const;

 private:
  void init(TrainOptions options);
  struct State;
  std::unique_ptr<State> s_;
};

/// Writes train.dat / valid.dat from run_dir/metrics.jsonl and renders curves.png with gnuplot.
/// Returns a one-line message (what was written, or why the PNG was skipped).
std::string plot_run(const std::string& run_dir);

/// A model loaded from a checkpoint (a run directory with LATEST, or a ckpt-* directory).
struct LoadedCheckpoint {
  std::string directory;            ///< the ckpt-* directory read
  nlohmann::json config;            ///< config.json
  std::int64_t step = 0;
  layers::CharLm model{nullptr};
};

/// Verifies the manifest (SHA-256 of every file) and loads the model in eval mode. `modify` may
/// change settings that do not change the parameters (e.g. the hybrid's global path).
/// Throws IoError (missing) or FormatError (truncated/corrupt, naming the file).
LoadedCheckpoint load_checkpoint(const std::string& path,
                                 const std::function<void(layers::LmConfig&)>& modify = {});

/// The corpus a checkpoint was trained on (its data section), read from `data_dir` / $SVATTN_DATA
/// / the default directory; `override_spec` with a corpus or path replaces it.
Corpus checkpoint_corpus(const nlohmann::json& config, const DataSpec& override_spec);

/// Keys (and values) of one head of a layer's attention as its memory sees them: k_proj of the
/// layer's normalised input, L2-normalised when the hybrid normalises keys. tokens: int64 [T].
struct LayerKeys {
  torch::Tensor keys;    ///< fp64 [T, dh]
  torch::Tensor values;  ///< fp64 [T, dh]
  double bandwidth = std::nan("");  ///< hybrid: the head's RBF sigma
  double C = std::nan("");
  double mu = std::nan("");
  bool normalized = false;
};
LayerKeys learned_keys(layers::CharLm& model, const torch::Tensor& tokens, std::int64_t layer,
                       std::int64_t head);

struct EvalOptions {
  Split split = Split::kTest;
  std::int64_t seq = 0;             ///< 0: the training seq
  std::int64_t windows = 0;         ///< 0: every window of the split
  std::int64_t batch = 16;          ///< windows per forward (fixed: results do not depend on it
                                    ///< across runs, but a different value may change rounding)
};

struct EvalResult {
  double bpc = 0;                   ///< bits per byte = mean NLL / ln 2
  double nll = 0;                   ///< mean NLL (nats / byte)
  std::int64_t targets = 0;
  std::int64_t windows = 0;
  std::int64_t seq = 0;
  double seconds = 0;
  std::vector<layers::AttentionDiagnostics> diagnostics;  ///< averaged support / gate per layer
};

/// Mean next-byte NLL of `model` over the fixed windows of a split (no gradient, eval mode).
EvalResult evaluate(layers::CharLm& model, const Corpus& corpus, const EvalOptions& options);

/// Throughput of one preset: tokens/s of full training steps (forward, backward, AdamW) after
/// `warmup` untimed steps, on the corpus' train split.
struct Throughput {
  std::string preset;
  std::int64_t parameters = 0;
  double tokens_per_second = 0;
  double seconds_per_step = 0;
  double sv_forward_share = 0;      ///< hybrid: share of the step spent in the SV memory forward
  double support_mean = std::nan("");
};
/// `device` as TrainOptions::device.
Throughput measure_throughput(const Preset& preset, const Corpus& corpus, std::int64_t steps,
                              std::int64_t warmup, std::uint64_t seed, const std::string& device = "cpu");

/// The LibTorch device named `name` ("cpu", "cuda", "cuda:N"); InvalidArgument for a malformed
/// name or a CUDA device this process cannot use.
torch::Device parse_device(const std::string& name);

}  // namespace svattn::lm
