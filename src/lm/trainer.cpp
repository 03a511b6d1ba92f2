// The resumable trainer of the character LMs: a run's settings (preset, overrides, or the
// checkpoint's on --resume), its data and model, the training loop with validation, metrics,
// progress and checkpoints.
#include "svattn/lm/trainer.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "checkpoint_io.h"
#include "step.h"
#include "support/clock.h"
#include "svattn/errors.h"

namespace svattn::lm {

namespace fs = std::filesystem;
using nlohmann::json;
using torch::Tensor;

namespace {

constexpr double kProgressSeconds = 2.0;

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const auto t = static_cast<long>(std::llround(s));
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  return buf;
}

bool is_hybrid(const layers::LmConfig& c) { return c.attention.type == layers::AttentionType::kHybrid; }

// The per-layer diagnostics of a metrics record, with the means of the gate's memory share and of
// the support over the layers that report them.
json diagnostics_json(const std::vector<layers::AttentionDiagnostics>& diags, double* gate_share, double* support) {
  json layers_j = json::array();
  double gs = 0, ss = 0;
  int ng = 0, ns = 0;
  for (const auto& d : diags) {
    json l = {{"support_mean", d.support_mean},
              {"support_per_head", d.support_per_head},
              {"gate_memory_share", d.gate_mean},
              {"gate_local_share", std::isfinite(d.gate_mean) ? 1.0 - d.gate_mean : d.gate_mean},
              {"fista_residual", d.fista_residual},
              {"negative_coefficients", d.negative_coefficients},
              {"sv_forward_seconds", d.solver_seconds}};
    if (std::isfinite(d.partition_agreement)) {
      l["partition_agreement"] = d.partition_agreement;
      l["coefficient_error"] = d.coefficient_error;
    }
    layers_j.push_back(l);
    if (std::isfinite(d.gate_mean)) gs += d.gate_mean, ++ng;
    if (std::isfinite(d.support_mean)) ss += d.support_mean, ++ns;
  }
  *gate_share = ng > 0 ? gs / ng : std::nan("");
  *support = ns > 0 ? ss / ns : std::nan("");
  return layers_j;
}

// The last override of the hybrid field `field` (its short key or model.attention.hybrid.*), or
// nullptr.
const Setting* find_hybrid_setting(const TrainOptions& o, const std::string& field) {
  const Setting* found = nullptr;
  for (const auto& s : o.settings)
    if (is_hybrid_key(s.key, field)) found = &s;
  return found;
}

// The average support a new swa run is state-matched to: --match-run's, else --matched-support
// (< 0: the preset's default).
double requested_support(const TrainOptions& o) {
  return o.match_run.empty() ? o.matched_support : average_support_from_run(o.match_run);
}

// State matching of a new swa run (docs/layers.md §3): with --match-run the window is the matched
// hybrid's local width (chunk, or W_loc + chunk - 1 in window mode) plus its measured support, and
// the run takes that hybrid's local settings; a chunk override keeps the support part.
void match_window(layers::AttentionConfig& a, const TrainOptions& o, double support) {
  if (a.type != layers::AttentionType::kSlidingWindow) return;
  if (!o.match_run.empty()) {
    const auto matched = detail::verify_checkpoint(detail::checkpoint_dir_of(o.match_run)).config.model.attention.hybrid;
    a.hybrid.chunk = matched.chunk;
    a.hybrid.local = matched.local;
    a.hybrid.local_window = matched.local_window;
    a.window = layers::state_matched_window(a.hybrid.local_width(), support);
  }
  if (const Setting* chunk = find_hybrid_setting(o, "chunk")) {
    const double support_part = static_cast<double>(a.window - a.hybrid.local_width());
    a.hybrid.chunk = field_as<std::int64_t>("chunk", chunk->value);
    a.window = layers::state_matched_window(a.hybrid.local_width(), support_part);
  }
}

// The attention window a new run of `preset` with these options gets.
std::int64_t fresh_window(const std::string& preset, const TrainOptions& o) {
  const double support = requested_support(o);
  layers::AttentionConfig a = make_preset(preset, support).model.attention;
  match_window(a, o, support);
  return a.window;
}

// On --resume every override must equal the checkpoint's value: a changed one is refused by name,
// never dropped (docs/lm.md "Training settings").
void check_resume_settings(const TrainOptions& o, const CheckpointConfig& ck) {
  if (!o.preset.empty() && o.preset != ck.preset)
    throw InvalidArgument("--preset " + o.preset + " differs from the checkpoint's " + ck.preset);
  const RunSettings held = ck.settings();
  for (const auto& s : o.settings) {
    const auto& f = run_settings_field(s.key);
    RunSettings asked = held;
    f.set(asked, s.value);
    if (f.get(asked) != f.get(held))
      throw InvalidArgument(setting_flag(s.key) + " " + value_text(s.value) + " differs from the checkpoint's " +
                            value_text(f.get(held)));
  }
  if (o.matched_support >= 0 || !o.match_run.empty()) {
    // Accepted when they give the checkpoint's window (E5 resumes its runs with the same
    // --match-run), refused when they would change it.
    const std::int64_t w = fresh_window(ck.preset, o);
    if (w != ck.model.attention.window)
      throw InvalidArgument("--matched-support/--match-run give the window " + std::to_string(w) +
                            ", which differs from the checkpoint's " + std::to_string(ck.model.attention.window));
  }
}

bool is_schedule_key(const std::string& key) { return find_field(train_hyper_fields(), key) != nullptr; }

// A new run's settings: the preset's, the schedule overrides, state matching of swa, then the
// attention overrides (swa-* takes its local path from the matched hybrid only).
RunSettings new_run_settings(const TrainOptions& o, Preset& preset) {
  RunSettings r{preset.train, preset.model, kDefaultSeed};
  for (const auto& s : o.settings)
    if (is_schedule_key(s.key) || s.key == "seed") run_settings_field(s.key).set(r, s.value);
  r.train.validate();
  auto& a = r.model.attention;
  const double support = requested_support(o);
  match_window(a, o, support);
  if (!o.match_run.empty() && a.type == layers::AttentionType::kSlidingWindow) {
    std::ostringstream os;
    os << preset.description.substr(0, preset.description.find(", state-matched"))
       << ", state-matched sliding window " << a.window << " = local width " << a.hybrid.local_width()
       << " + average support " << support << " (both from " << o.match_run << ")";
    preset.description = os.str();
  }
  const bool swa = a.type == layers::AttentionType::kSlidingWindow;
  for (const auto& s : o.settings) {
    if (is_schedule_key(s.key) || s.key == "seed") continue;
    if (swa && (is_hybrid_key(s.key, "local") || is_hybrid_key(s.key, "local_window")))
      throw InvalidArgument("--local/--local-window: for hybrid presets (swa-* takes the matched "
                            "hybrid's local path from --match-run)");
    run_settings_field(s.key).set(r, s.value);  // swa chunk: already re-matched above
  }
  for (const auto& s : o.settings) check_model_setting(s.key, r);
  r.model.validate();
  return r;
}

// Checks the options that need no file, and the run directory; true when it holds a checkpoint.
bool open_run_dir(const TrainOptions& o) {
  if (o.out.empty()) throw InvalidArgument("--out is required");
  if (o.steps < 1) throw InvalidArgument("--steps must be >= 1 (got " + std::to_string(o.steps) + ")");
  std::error_code ec;
  if (fs::exists(o.out, ec) && !fs::is_directory(o.out, ec))
    throw IoError("run directory " + o.out + " exists and is not a directory");
  const bool have_ckpt = fs::exists(fs::path(o.out) / detail::kLatest);
  if (have_ckpt && !o.resume)
    throw InvalidArgument("run directory " + o.out + " already holds a checkpoint; pass --resume or another --out");
  return have_ckpt;
}

// The run's corpus: the options' or the checkpoint's (whose bytes it must match), enwik8 by default.
Corpus load_corpus(const TrainOptions& o, const CheckpointConfig* ck, CorpusRecord* record) {
  DataSpec spec = o.data;
  if (ck && spec.path.empty() && spec.corpus.empty()) {
    spec.corpus = ck->data.corpus;
    spec.path = ck->data.path_given;
  }
  if (spec.path.empty() && spec.corpus.empty()) spec.corpus = "enwik8";
  Corpus corpus = Corpus::load(spec);
  *record = CorpusRecord::of(corpus, spec);
  if (ck && ck->data.sha256 != corpus.sha256())
    throw InvalidArgument("data " + corpus.path() + " differs from the checkpoint's (SHA-256 " + ck->data.sha256 + ")");
  return corpus;
}

// Every split the run reads must hold one window before the first step (nothing is written yet).
void check_splits(const Corpus& corpus, std::int64_t seq) {
  for (Split split : {Split::kTrain, Split::kValid, Split::kTest}) {
    const auto [b, e] = corpus.range(split);
    if (e - b < seq + 1)
      throw InvalidArgument("split " + to_string(split) + " of " + corpus.label() + " has " + std::to_string(e - b) +
                            " bytes, fewer than seq + 1 = " + std::to_string(seq + 1) +
                            "; lower --seq or use more data");
  }
}

// Creates the run directory and removes the leftovers of a crash during a checkpoint write.
void make_run_dir(const std::string& out) {
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec || !fs::is_directory(out)) throw IoError("cannot create run directory " + out);
  for (const auto& e : fs::directory_iterator(out)) {
    const std::string n = e.path().filename().string();
    if (n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0) fs::remove_all(e.path());
  }
}

}  // namespace

struct Trainer::State {
  TrainOptions opt;
  Preset preset;
  CheckpointConfig config;
  Corpus corpus;
  layers::CharLm model{nullptr};
  std::unique_ptr<torch::optim::AdamW> optimizer;
  CheckpointState at;  // step, validation, training time and tokens so far
  fs::path out;
  std::ofstream metrics;

  void write_metrics(const json& j) {
    metrics << j.dump() << '\n';
    metrics.flush();
  }

  void save_checkpoint() {
    metrics.flush();
    at.metrics_offset = static_cast<std::int64_t>(fs::file_size(out / "metrics.jsonl"));
    detail::write_checkpoint(out.string(), model, *optimizer, config, at);
  }

  double tokens_per_second() const {
    return at.trained_seconds > 0 ? static_cast<double>(at.trained_tokens) / at.trained_seconds : 0;
  }

  void settle(const TrainOptions& o, const detail::CheckpointFiles* ck);
  void build_model(const std::string& ck_dir);
  void validate();
  void log_step(const StepRecord& r, std::int64_t window_steps, double window_seconds);
  void report_progress(const StepRecord& r, double step_seconds);
  void finish(TrainResult& r, double seconds);
};

// The preset, settings and seed of the run: the checkpoint's on resume, else the preset's with the
// overrides.
void Trainer::State::settle(const TrainOptions& o, const detail::CheckpointFiles* ck) {
  if (ck) {
    check_resume_settings(o, ck->config);
    config = ck->config;
    preset = {config.preset, config.description, config.model, config.train};
    if (o.steps != config.steps && o.progress)
      std::cerr << "note: --steps " << o.steps << " differs from the checkpoint's " << config.steps
                << "; the cosine schedule now ends at step " << o.steps << "\n";
  } else {
    preset = make_preset(o.preset, requested_support(o));
    const RunSettings r = new_run_settings(o, preset);
    preset.train = r.train;
    preset.model = r.model;
    config.preset = preset.name;
    config.description = preset.description;
    config.model = r.model;
    config.train = r.train;
    config.seed = r.seed;
  }
  config.steps = o.steps;
}

// The model on its device and the optimiser; on resume their state, the generator's and the run's
// position, with metrics.jsonl cut back to the checkpoint.
void Trainer::State::build_model(const std::string& ck_dir) {
  const torch::Device device = parse_device(opt.device);
  if (!ck_dir.empty() && !device.is_cpu())
    throw InvalidArgument("resuming " + opt.out + " on device " + opt.device + ": checkpoints resume on the CPU only");
  // The initialisation draws from LibTorch's global generator: one run at a time seeds it and
  // builds its model, so runs trained side by side (E5's workers) start as they would alone.
  model = seeded_char_lm(preset.model, config.seed);
  model->to(device);
  config.parameters = layers::count_parameters(*model);
  optimizer = std::make_unique<torch::optim::AdamW>(param_groups(*model, preset.train),
                                                    torch::optim::AdamWOptions(preset.train.lr));
  const fs::path metrics_path = out / "metrics.jsonl";
  if (!ck_dir.empty()) {
    detail::load_model(model, ck_dir);
    detail::load_training_state(*optimizer, ck_dir);
    if (!fs::exists(metrics_path) || static_cast<std::int64_t>(fs::file_size(metrics_path)) < at.metrics_offset)
      throw FormatError(metrics_path.string() + " is shorter than the checkpoint's record of it");
    // Drop the records written after the checkpoint (they are replayed identically).
    fs::resize_file(metrics_path, static_cast<std::uintmax_t>(at.metrics_offset));
  } else {
    std::ofstream(metrics_path, std::ios::trunc);
  }
  metrics.open(metrics_path, std::ios::app);
  if (!metrics) throw IoError("cannot open " + metrics_path.string());
}

Trainer::Trainer(TrainOptions options) : s_(std::make_unique<State>()) {
  auto& s = *s_;
  s.opt = std::move(options);
  const auto& o = s.opt;
  try {
    set_threads(o.threads);
    const bool have_ckpt = open_run_dir(o);
    s.out = o.out;
    std::string ck_dir;
    std::unique_ptr<detail::CheckpointFiles> ck;
    if (have_ckpt) {
      ck_dir = detail::checkpoint_dir_of(o.out);
      ck = std::make_unique<detail::CheckpointFiles>(detail::verify_checkpoint(ck_dir));
      s.at = ck->state;
    }
    s.settle(o, ck.get());
    s.corpus = load_corpus(o, ck ? &ck->config : nullptr, &s.config.data);
    check_splits(s.corpus, s.preset.train.seq);
    make_run_dir(o.out);
    s.build_model(ck_dir);
  } catch (const nlohmann::json::exception& e) {
    throw FormatError("checkpoint in " + o.out + ": malformed config or state (" + e.what() + ")");
  }
}

Trainer::~Trainer() = default;

std::int64_t Trainer::step() const { return s_->at.step; }
const Preset& Trainer::preset() const { return s_->preset; }
const Corpus& Trainer::corpus() const { return s_->corpus; }
layers::CharLm& Trainer::model() { return s_->model; }
std::int64_t Trainer::parameters() const { return s_->config.parameters; }
const CheckpointConfig& Trainer::config() const { return s_->config; }

// Validation BPC over the evenly spaced windows of the valid split: a "valid" metrics record.
void Trainer::State::validate() {
  const auto& h = preset.train;
  EvalOptions eo;
  eo.split = Split::kValid;
  eo.seq = h.seq;
  eo.windows = h.eval_windows;
  const EvalResult ev = evaluate(model, corpus, eo);
  at.last_valid_bpc = ev.bpc;
  double gate = 0, support = 0;
  json lj = diagnostics_json(ev.diagnostics, &gate, &support);
  json rec = {{"type", "valid"}, {"step", at.step},         {"bpc", ev.bpc},         {"nll", ev.nll},
              {"windows", ev.windows}, {"targets", ev.targets}, {"seconds", ev.seconds}};
  if (is_hybrid(preset.model)) {
    rec["layers"] = lj;
    rec["gate_memory_share"] = gate;
    rec["support_mean"] = support;
  }
  write_metrics(rec);
  if (opt.progress)
    std::fprintf(stderr, "[%s] step %lld valid BPC %.4f (%lld windows of %lld, %.1fs)\n", preset.name.c_str(),
                 static_cast<long long>(at.step), ev.bpc, static_cast<long long>(ev.windows),
                 static_cast<long long>(ev.seq), ev.seconds);
}

// A "train" metrics record: the step's loss, and the throughput over the steps since the last one.
void Trainer::State::log_step(const StepRecord& r, std::int64_t window_steps, double window_seconds) {
  const auto& h = preset.train;
  const double tps = window_seconds > 0 ? static_cast<double>(window_steps * h.batch * h.seq) / window_seconds : 0.0;
  json rec = {{"type", "train"},  {"step", r.step},         {"loss", r.loss},
              {"bpb", r.loss / detail::kLn2}, {"lr", r.lr}, {"grad_norm", r.grad_norm},
              {"tokens_per_s", tps}, {"elapsed_s", at.trained_seconds}};
  if (is_hybrid(preset.model)) {
    double gate = 0, support = 0;
    rec["layers"] = diagnostics_json(model->diagnostics(), &gate, &support);
    rec["gate_memory_share"] = gate;
    rec["gate_local_share"] = 1.0 - gate;
    rec["support_mean"] = support;
  }
  write_metrics(rec);
}

void Trainer::State::report_progress(const StepRecord& r, double step_seconds) {
  std::fprintf(stderr, "[%s] step %lld/%lld loss %.4f (%.3f bpb) lr %.2e %.0f tok/s ETA %s\n", preset.name.c_str(),
               static_cast<long long>(r.step), static_cast<long long>(opt.steps), r.loss, r.loss / detail::kLn2,
               r.lr, tokens_per_second(),
               format_duration(step_seconds * static_cast<double>(opt.steps - r.step)).c_str());
}

// The end of a run: validation and the final checkpoint (a resumed run that is already complete
// only redoes the summary and plot), summary.json, the plot.
void Trainer::State::finish(TrainResult& r, double seconds) {
  if (!r.steps.empty() || !fs::exists(out / detail::kLatest)) {
    validate();
    save_checkpoint();
  }
  r.end_step = at.step;
  r.seconds = seconds;
  r.tokens_per_second = tokens_per_second();
  r.final_valid_bpc = at.last_valid_bpc;
  json summary = config.to_json();
  summary["step"] = at.step;
  summary["valid_bpc"] = at.last_valid_bpc;
  summary["tokens_per_second"] = r.tokens_per_second;
  summary["trained_seconds"] = at.trained_seconds;
  summary["threads"] = opt.threads;
  detail::write_text_synced((out / "summary.json").string(), summary.dump(2) + "\n");
  if (opt.plot) {
    const std::string msg = plot_run(opt.out);
    if (opt.progress) std::fprintf(stderr, "%s\n", msg.c_str());
  }
}

TrainResult Trainer::run(std::int64_t stop_after) {
  auto& s = *s_;
  const auto& h = s.preset.train;
  const auto& o = s.opt;
  set_threads(o.threads);
  TrainResult r;
  r.start_step = s.at.step;
  r.parameters = s.config.parameters;
  const support::Stopwatch run_clock;
  support::Stopwatch progress_clock;
  bool progress_shown = false;
  double ema_step = 0;  // seconds per step, smoothed
  std::int64_t window_steps = 0;
  double window_seconds = 0;
  while (s.at.step < o.steps) {
    const std::int64_t step = s.at.step + 1;
    const double lr = detail::schedule(h, step, o.steps);
    detail::set_lr(*s.optimizer, lr);
    const support::Stopwatch step_clock;
    const Tensor w = detail::window_tensor(
        s.corpus, batch_offsets(s.corpus, Split::kTrain, h.batch, h.seq, s.config.seed, step), h.seq);
    s.model->train();
    const bool logged = step % h.log_every == 0 || step == o.steps;
    s.model->set_record_diagnostics(logged);  // log_step reports this step's diagnostics
    const detail::StepOut so = detail::train_step(s.model, *s.optimizer, w, h.clip);
    const double dt = step_clock.seconds();
    s.at.step = step;
    s.at.trained_seconds += dt;
    s.at.trained_tokens += h.batch * h.seq;
    window_seconds += dt;
    ++window_steps;
    ema_step = ema_step == 0 ? dt : 0.9 * ema_step + 0.1 * dt;
    if (!std::isfinite(so.loss))
      throw Error("training diverged at step " + std::to_string(step) + " (loss " + std::to_string(so.loss) +
                  "); lower --lr or check the data");
    r.steps.push_back({step, so.loss, lr, so.grad_norm});
    if (logged) {
      s.log_step(r.steps.back(), window_steps, window_seconds);
      window_steps = 0;
      window_seconds = 0;
    }
    if (o.progress && (!progress_shown || progress_clock.seconds() >= kProgressSeconds || step == o.steps)) {
      progress_clock.restart();
      progress_shown = true;
      s.report_progress(r.steps.back(), ema_step);
    }
    if (o.max_seconds > 0 && s.at.trained_seconds >= o.max_seconds) break;  // the time budget is spent
    if (h.eval_every > 0 && step % h.eval_every == 0 && step != o.steps) s.validate();
    if (h.checkpoint_every > 0 && step % h.checkpoint_every == 0 && step != o.steps) s.save_checkpoint();
    if (stop_after >= 0 && step >= stop_after) {
      r.end_step = s.at.step;
      r.seconds = run_clock.seconds();
      r.tokens_per_second = s.tokens_per_second();
      r.final_valid_bpc = s.at.last_valid_bpc;
      return r;
    }
  }
  s.finish(r, run_clock.seconds());
  return r;
}

}  // namespace svattn::lm
