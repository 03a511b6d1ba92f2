// Trainer, checkpoints, evaluation and throughput of the character LMs.
#include "svattn/lm/trainer.h"

#include <fcntl.h>
#include <unistd.h>

#include <ATen/Parallel.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "svattn/errors.h"
#include "svattn/hash.h"
#include "svattn/lm/blas.h"

namespace svattn::lm {

namespace fs = std::filesystem;
using nlohmann::json;
using torch::Tensor;

namespace {

// Serialises the uses of LibTorch's global CPU generator (seeding + initialisation).
std::mutex& global_generator_mutex() {
  static std::mutex m;
  return m;
}

constexpr const char* kLatest = "LATEST";
constexpr const char* kManifest = "MANIFEST.json";
constexpr int kCheckpointVersion = 1;
constexpr double kLn2 = 0.69314718055994530942;
constexpr double kProgressSeconds = 2.0;

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// fsync of a file or directory (best effort for directories on filesystems that refuse it).
void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) {
    if (directory) return;
    throw IoError("cannot open " + path + " to sync");
  }
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0 && !directory) throw IoError("fsync failed on " + path);
}

void write_text_synced(const std::string& path, const std::string& text) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw IoError("cannot write " + path);
    out << text;
    out.flush();
    if (!out) throw IoError("cannot write " + path);
  }
  fsync_path(path, false);
}

std::string sha_of(const std::string& bytes) {
  return sha256_hex(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

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

/// Tokens [B, T + 1] of the windows starting at `offsets`.
Tensor window_tensor(const Corpus& corpus, const std::vector<std::int64_t>& offsets, std::int64_t seq) {
  const auto B = static_cast<std::int64_t>(offsets.size());
  Tensor t = torch::empty({B, seq + 1}, torch::kInt64);
  auto acc = t.accessor<std::int64_t, 2>();
  const std::uint8_t* d = corpus.data();
  for (std::int64_t i = 0; i < B; ++i)
    for (std::int64_t j = 0; j <= seq; ++j) acc[i][j] = d[offsets[static_cast<std::size_t>(i)] + j];
  return t;
}

/// Learning rate at (1-based) step: linear warm-up to lr over `warmup` steps, then cosine decay to
/// min_lr_ratio * lr at `total`.
double schedule(const TrainHyper& h, std::int64_t step, std::int64_t total) {
  if (h.warmup > 0 && step <= h.warmup) return h.lr * static_cast<double>(step) / static_cast<double>(h.warmup);
  const double span = static_cast<double>(std::max<std::int64_t>(1, total - h.warmup));
  const double p = std::min(1.0, static_cast<double>(step - h.warmup) / span);
  const double floor = h.min_lr_ratio * h.lr;
  return floor + (h.lr - floor) * 0.5 * (1.0 + std::cos(M_PI * p));
}

struct StepOut {
  double loss = 0, grad_norm = 0;
};

/// The device of the model's parameters (where its batches go).
torch::Device model_device(layers::CharLm& model) {
  const auto params = model->parameters();
  return params.empty() ? torch::Device(torch::kCPU) : params.front().device();
}

StepOut train_step(layers::CharLm& model, torch::optim::Optimizer& opt, const Tensor& cpu_windows,
                   double clip) {
  const Tensor windows = cpu_windows.to(model_device(model));
  const auto T = windows.size(1) - 1;
  Tensor x = windows.narrow(1, 0, T), y = windows.narrow(1, 1, T);
  Tensor logits = model->forward(x);
  Tensor loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
  opt.zero_grad();
  loss.backward();
  StepOut out;
  std::vector<Tensor> params;
  for (auto& p : model->parameters()) params.push_back(p);
  if (clip > 0) {
    out.grad_norm = torch::nn::utils::clip_grad_norm_(params, clip);
  } else {
    double s = 0;
    for (auto& p : params)
      if (p.grad().defined()) s += p.grad().pow(2).sum().item<double>();
    out.grad_norm = std::sqrt(s);
  }
  opt.step();
  out.loss = loss.item<double>();
  return out;
}

void set_lr(torch::optim::Optimizer& opt, double lr) {
  for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
}

json diagnostics_json(const std::vector<layers::AttentionDiagnostics>& diags, double* gate_share,
                      double* support) {
  json layers_j = json::array();
  double gs = 0, ss = 0;
  int ng = 0, ns = 0;
  for (const auto& d : diags) {
    json l;
    l["support_mean"] = d.support_mean;
    l["support_per_head"] = d.support_per_head;
    l["gate_memory_share"] = d.gate_mean;
    l["gate_local_share"] = std::isfinite(d.gate_mean) ? 1.0 - d.gate_mean : d.gate_mean;
    l["fista_residual"] = d.fista_residual;
    l["negative_coefficients"] = d.negative_coefficients;
    l["sv_forward_seconds"] = d.solver_seconds;
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

bool is_hybrid(const layers::LmConfig& c) { return c.attention.type == layers::AttentionType::kHybrid; }

std::string checkpoint_name(std::int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "ckpt-%09lld", static_cast<long long>(step));
  return buf;
}

/// The checkpoint directory a path names: a ckpt-* directory (has MANIFEST.json) or a run
/// directory (has LATEST). Throws IoError.
std::string checkpoint_dir_of(const std::string& path) {
  if (!fs::exists(path)) throw IoError("checkpoint " + path + ": no such file or directory");
  if (fs::exists(fs::path(path) / kManifest)) return path;
  const fs::path latest = fs::path(path) / kLatest;
  if (!fs::exists(latest))
    throw IoError("checkpoint " + path + ": neither a run directory (no LATEST) nor a checkpoint (no " +
                  kManifest + ")");
  std::string name = read_file(latest.string());
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
  if (name.empty() || name.find('/') != std::string::npos)
    throw FormatError(latest.string() + ": malformed (expected a ckpt-* name)");
  const fs::path dir = fs::path(path) / name;
  if (!fs::is_directory(dir)) throw FormatError(latest.string() + " names " + name + ", which is missing");
  return dir.string();
}

struct CheckpointFiles {
  json config, state;
};

/// Verifies MANIFEST.json (every listed file present with its size and SHA-256) and parses
/// config.json and state.json.
CheckpointFiles verify_checkpoint(const std::string& dir) {
  const std::string mpath = (fs::path(dir) / kManifest).string();
  json manifest;
  try {
    manifest = json::parse(read_file(mpath));
  } catch (const json::exception& e) {
    throw FormatError(mpath + ": corrupt manifest (" + e.what() + ")");
  }
  if (!manifest.contains("version") || manifest["version"] != kCheckpointVersion || !manifest.contains("files"))
    throw FormatError(mpath + ": not a version " + std::to_string(kCheckpointVersion) + " svattn checkpoint manifest");
  for (const char* required : {"config.json", "state.json", "model.pt", "optim.pt", "rng.pt"})
    if (!manifest["files"].contains(required))
      throw FormatError(mpath + ": manifest does not list " + required);
  for (const auto& [name, entry] : manifest["files"].items()) {
    const std::string p = (fs::path(dir) / name).string();
    if (!fs::exists(p)) throw FormatError("checkpoint file " + p + " is missing");
    const auto size = static_cast<std::int64_t>(fs::file_size(p));
    if (size != entry.at("bytes").get<std::int64_t>())
      throw FormatError("checkpoint file " + p + " has " + std::to_string(size) + " bytes, manifest says " +
                        std::to_string(entry.at("bytes").get<std::int64_t>()) + " (truncated or corrupt)");
    if (sha_of(read_file(p)) != entry.at("sha256").get<std::string>())
      throw FormatError("checkpoint file " + p + ": SHA-256 mismatch (corrupt)");
  }
  CheckpointFiles f;
  try {
    f.config = json::parse(read_file((fs::path(dir) / "config.json").string()));
    f.state = json::parse(read_file((fs::path(dir) / "state.json").string()));
  } catch (const json::exception& e) {
    throw FormatError("checkpoint " + dir + ": bad config/state JSON (" + e.what() + ")");
  }
  return f;
}

template <typename T>
void torch_load(T& value, const std::string& path) {
  try {
    torch::load(value, path);
  } catch (const c10::Error& e) {
    std::string what = e.what();
    if (const auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    throw FormatError("checkpoint file " + path + " cannot be loaded: " + what);
  }
}

/// Loads a model's parameters and checks every tensor's shape against the model built from the
/// checkpoint's config (LibTorch would replace mismatched tensors and fail later, in a forward).
void torch_load_model(layers::CharLm& model, const std::string& path) {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> expected;
  for (const auto& p : model->named_parameters(/*recurse=*/true))
    expected.emplace_back(p.key(), p.value().sizes().vec());
  for (const auto& b : model->named_buffers(/*recurse=*/true))
    expected.emplace_back(b.key(), b.value().sizes().vec());
  torch_load(model, path);
  std::map<std::string, std::vector<std::int64_t>> got;
  for (const auto& p : model->named_parameters(/*recurse=*/true)) got[p.key()] = p.value().sizes().vec();
  for (const auto& b : model->named_buffers(/*recurse=*/true)) got[b.key()] = b.value().sizes().vec();
  auto shape = [](const std::vector<std::int64_t>& v) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
    return out + "]";
  };
  for (const auto& [name, want] : expected) {
    const auto it = got.find(name);
    if (it == got.end() || it->second != want)
      throw FormatError("checkpoint file " + path + ": tensor " + name + " has shape " +
                        (it == got.end() ? std::string("(missing)") : shape(it->second)) +
                        ", the checkpoint's config implies " + shape(want));
  }
}

}  // namespace

// A hybrid gate parameter: some component of its dotted name starts with "gate_" (gate_proj,
// gate_bias, gate_position).
bool is_gate_parameter(const std::string& name) {
  for (std::size_t at = 0; at < name.size();) {
    if (name.compare(at, 5, "gate_") == 0) return true;
    const auto dot = name.find('.', at);
    if (dot == std::string::npos) break;
    at = dot + 1;
  }
  return false;
}

// AdamW groups: matrices decay; vectors, and the gate unless h.gate_weight_decay, do not.
std::vector<torch::optim::OptimizerParamGroup> param_groups(torch::nn::Module& model, const TrainHyper& h) {
  std::vector<Tensor> decay, no_decay;
  for (auto& item : model.named_parameters(/*recurse=*/true)) {
    const Tensor& p = item.value();
    if (!p.requires_grad()) continue;
    const bool decays = p.dim() >= 2 && (h.gate_weight_decay || !is_gate_parameter(item.key()));
    (decays ? decay : no_decay).push_back(p);
  }
  auto opts = [&](double wd) {
    auto o = std::make_unique<torch::optim::AdamWOptions>(h.lr);
    o->betas(std::make_tuple(h.beta1, h.beta2)).eps(h.eps).weight_decay(wd);
    return o;
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, opts(h.weight_decay));
  groups.emplace_back(no_decay, opts(0.0));
  return groups;
}

layers::CharLm seeded_char_lm(const layers::LmConfig& config, std::uint64_t seed) {
  const std::lock_guard<std::mutex> lock(global_generator_mutex());
  torch::manual_seed(seed);
  return layers::CharLm(config);
}

int max_threads() {
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::min(4u * cpus, 1024u));
}

void set_threads(int threads) {
  if (threads < 1 || threads > max_threads())
    throw InvalidArgument("--threads must be in [1, " + std::to_string(max_threads()) +
                          "] (4 x the " + std::to_string(std::thread::hardware_concurrency()) +
                          " CPUs of this machine, at most 1024), got " + std::to_string(threads));
  at::set_num_threads(threads);
  set_blas_threads(threads);
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      at::set_num_interop_threads(1);
    } catch (const c10::Error&) {
      // Already started by an earlier parallel region: keep LibTorch's choice.
    }
  });
}

// ------------------------------------------------------------------ Trainer
namespace {

// The average support a new swa run is state-matched to: --match-run's, else --matched-support
// (< 0: the preset's default).
double requested_support(const TrainOptions& o) {
  return o.match_run.empty() ? o.matched_support : average_support_from_run(o.match_run);
}

// State matching of a new swa run (docs/layers.md §3): with --match-run the window is the matched
// hybrid's local width (chunk, or W_loc + chunk - 1 in window mode) plus its measured support, and
// the run takes that hybrid's local settings; a --chunk override keeps the support part.
void match_window(layers::AttentionConfig& a, const TrainOptions& o, double support) {
  if (a.type != layers::AttentionType::kSlidingWindow) return;
  if (!o.match_run.empty()) {
    const auto f = verify_checkpoint(checkpoint_dir_of(o.match_run));
    const auto matched = lm_config_from_json(f.config.at("model")).attention.hybrid;
    a.hybrid.chunk = matched.chunk;
    a.hybrid.local = matched.local;
    a.hybrid.local_window = matched.local_window;
    a.window = layers::state_matched_window(a.hybrid.local_width(), support);
  }
  if (o.chunk) {
    const double support_part = static_cast<double>(a.window - a.hybrid.local_width());
    a.hybrid.chunk = *o.chunk;
    a.window = layers::state_matched_window(a.hybrid.local_width(), support_part);
  }
}

// The attention window a new run of `preset` with these options gets (the new-run branch of
// Trainer: the preset's window for the requested support, matched as match_window does).
std::int64_t fresh_window(const std::string& preset, const TrainOptions& o) {
  const double support = requested_support(o);
  layers::AttentionConfig a = make_preset(preset, support).model.attention;
  match_window(a, o, support);
  return a.window;
}

// On --resume every override must equal the checkpoint's value (`stored`, of preset `ck_preset`):
// the schedule's and the architecture's; a changed one is refused by name, never dropped
// (docs/lm.md "Presets").
void check_resume_overrides(const TrainOptions& o, const Preset& stored,
                            const std::string& ck_preset) {
  auto same = [](const char* what, auto requested, auto held) {
    if (requested && *requested != held) {
      std::ostringstream os;
      os << "--" << what << " " << *requested << " differs from the checkpoint's " << held;
      throw InvalidArgument(os.str());
    }
  };
  const auto& t = stored.train;
  same("batch", o.batch, t.batch);
  same("seq", o.seq, t.seq);
  same("lr", o.lr, t.lr);
  same("warmup", o.warmup, t.warmup);
  same("eval-every", o.eval_every, t.eval_every);
  same("eval-windows", o.eval_windows, t.eval_windows);
  same("checkpoint-every", o.checkpoint_every, t.checkpoint_every);
  same("log-every", o.log_every, t.log_every);
  // The architecture is the checkpoint's: a changed one is refused, never silently dropped.
  const auto& a = stored.model.attention;
  same("C", o.svm_C, a.hybrid.problem.C);
  same("chunk", o.chunk, a.hybrid.chunk);
  same("fista-iterations", o.fista_iterations, a.hybrid.batched.iterations);
  if (o.gate && layers::gate_type_from_string(*o.gate) != a.hybrid.gate)
    throw InvalidArgument("--gate " + *o.gate + " differs from the checkpoint's " +
                          layers::to_string(a.hybrid.gate));
  if (o.global_path && layers::global_path_from_string(*o.global_path) != a.hybrid.path)
    throw InvalidArgument("--global-path " + *o.global_path + " differs from the checkpoint's " +
                          layers::to_string(a.hybrid.path));
  if (o.matched_support >= 0 || !o.match_run.empty()) {
    // Accepted when they give the checkpoint's window (E5 resumes its runs with the same
    // --match-run), refused when they would change it.
    const std::int64_t w = fresh_window(ck_preset, o);
    if (w != a.window)
      throw InvalidArgument("--matched-support/--match-run give the window " +
                            std::to_string(w) + ", which differs from the checkpoint's " +
                            std::to_string(a.window));
  }
}

}  // namespace


struct Trainer::State {
  TrainOptions opt;
  Preset preset;
  std::uint64_t seed = kDefaultSeed;
  Corpus corpus;
  json data_json;
  layers::CharLm model{nullptr};
  std::unique_ptr<torch::optim::AdamW> optimizer;
  std::int64_t step = 0;
  std::int64_t params = 0;
  fs::path out;
  std::ofstream metrics;
  double last_valid_bpc = std::nan("");
  double trained_seconds = 0;  // training-step time over the whole run (restored on resume)
  std::int64_t trained_tokens = 0;

  json config_json() const {
    return {{"version", kCheckpointVersion},
            {"preset", preset.name},
            {"description", preset.description},
            {"model", to_json(preset.model)},
            {"train", to_json(preset.train)},
            {"steps", opt.steps},
            {"seed", seed},
            {"data", data_json},
            {"parameters", params}};
  }

  void write_metrics(const json& j) {
    metrics << j.dump() << '\n';
    metrics.flush();
  }

  void save_checkpoint() {
    metrics.flush();
    const std::int64_t offset = static_cast<std::int64_t>(fs::file_size(out / "metrics.jsonl"));
    const std::string name = checkpoint_name(step);
    const fs::path tmp = out / (name + ".tmp");
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    torch::save(model, (tmp / "model.pt").string());
    torch::save(*optimizer, (tmp / "optim.pt").string());
    {
      auto gen = at::detail::getDefaultCPUGenerator();
      Tensor st;
      {
        std::lock_guard<std::mutex> lock(gen.mutex());
        st = gen.get_state();
      }
      torch::save(st, (tmp / "rng.pt").string());
    }
    write_text_synced((tmp / "config.json").string(), config_json().dump(2) + "\n");
    json state = {{"step", step},
                  {"metrics_offset", offset},
                  {"last_valid_bpc", last_valid_bpc},
                  {"trained_seconds", trained_seconds},
                  {"trained_tokens", trained_tokens}};
    write_text_synced((tmp / "state.json").string(), state.dump(2) + "\n");
    json files = json::object();
    for (const char* f : {"config.json", "state.json", "model.pt", "optim.pt", "rng.pt"}) {
      const std::string p = (tmp / f).string();
      fsync_path(p, false);
      const std::string bytes = read_file(p);
      files[f] = {{"bytes", bytes.size()}, {"sha256", sha_of(bytes)}};
    }
    write_text_synced((tmp / kManifest).string(),
                      json{{"version", kCheckpointVersion}, {"files", files}}.dump(2) + "\n");
    fsync_path(tmp.string(), true);
    const fs::path final_dir = out / name;
    fs::remove_all(final_dir);
    fs::rename(tmp, final_dir);
    fsync_path(out.string(), true);
    // LATEST is replaced atomically (rename of a synced file): a crash anywhere above leaves the
    // previous LATEST and its checkpoint intact.
    write_text_synced((out / "LATEST.tmp").string(), name + "\n");
    fs::rename(out / "LATEST.tmp", out / kLatest);
    fsync_path(out.string(), true);
    for (const auto& e : fs::directory_iterator(out)) {
      const std::string n = e.path().filename().string();
      if (n.rfind("ckpt-", 0) == 0 && n != name) fs::remove_all(e.path());
    }
  }
};

Trainer::Trainer(TrainOptions options) : s_(std::make_unique<State>()) {
  try {
    init(std::move(options));
  } catch (const nlohmann::json::exception& e) {
    throw FormatError("checkpoint in " + s_->opt.out + ": malformed config or state (" + e.what() + ")");
  }
}

void Trainer::init(TrainOptions options) {
  auto& s = *s_;
  s.opt = std::move(options);
  const auto& o = s.opt;
  set_threads(o.threads);
  if (o.out.empty()) throw InvalidArgument("--out is required");
  if (o.steps < 1) throw InvalidArgument("--steps must be >= 1 (got " + std::to_string(o.steps) + ")");
  s.out = o.out;
  std::error_code ec;
  if (fs::exists(s.out, ec) && !fs::is_directory(s.out, ec))
    throw IoError("run directory " + o.out + " exists and is not a directory");
  const bool have_ckpt = fs::exists(s.out / kLatest);
  if (have_ckpt && !o.resume)
    throw InvalidArgument("run directory " + o.out + " already holds a checkpoint; pass --resume or another --out");

  CheckpointFiles ck;
  std::string ck_dir;
  if (have_ckpt) {
    ck_dir = checkpoint_dir_of(o.out);
    ck = verify_checkpoint(ck_dir);
    const std::string ck_preset = ck.config.at("preset").get<std::string>();
    if (!o.preset.empty() && o.preset != ck_preset)
      throw InvalidArgument("--preset " + o.preset + " differs from the checkpoint's " + ck_preset);
    s.preset.name = ck_preset;
    s.preset.description = ck.config.value("description", "");
    s.preset.model = lm_config_from_json(ck.config.at("model"));
    s.preset.train = train_hyper_from_json(ck.config.at("train"));
    s.seed = ck.config.at("seed").get<std::uint64_t>();
    if (o.seed && *o.seed != s.seed)
      throw InvalidArgument("--seed " + std::to_string(*o.seed) + " differs from the checkpoint's " +
                            std::to_string(s.seed));
    check_resume_overrides(o, s.preset, ck_preset);
    const auto stored_steps = ck.config.at("steps").get<std::int64_t>();
    if (o.steps != stored_steps && o.progress)
      std::cerr << "note: --steps " << o.steps << " differs from the checkpoint's " << stored_steps
                << "; the cosine schedule now ends at step " << o.steps << "\n";
  } else {
    s.preset = make_preset(o.preset, requested_support(o));
    s.seed = o.seed.value_or(kDefaultSeed);
    auto& t = s.preset.train;
    if (o.batch) t.batch = *o.batch;
    if (o.seq) t.seq = *o.seq;
    if (o.lr) t.lr = *o.lr;
    if (o.warmup) t.warmup = *o.warmup;
    if (o.eval_every) t.eval_every = *o.eval_every;
    if (o.eval_windows) t.eval_windows = *o.eval_windows;
    if (o.checkpoint_every) t.checkpoint_every = *o.checkpoint_every;
    if (o.log_every) t.log_every = *o.log_every;
    t.validate();
    auto& a = s.preset.model.attention;
    const double support = requested_support(o);
    match_window(a, o, support);
    if (!o.match_run.empty() && a.type == layers::AttentionType::kSlidingWindow) {
      std::ostringstream os;
      os << s.preset.description.substr(0, s.preset.description.find(", state-matched"))
         << ", state-matched sliding window " << a.window << " = local width " << a.hybrid.local_width()
         << " + average support " << support << " (both from " << o.match_run << ")";
      s.preset.description = os.str();
    }
    if (o.gate) a.hybrid.gate = layers::gate_type_from_string(*o.gate);
    if (o.local || o.local_window) {
      if (a.type == layers::AttentionType::kSlidingWindow)
        throw InvalidArgument("--local/--local-window: for hybrid presets (swa-* takes the matched "
                              "hybrid's local path from --match-run)");
      if (o.local) a.hybrid.local = layers::local_path_from_string(*o.local);
      if (o.local_window) {
        a.hybrid.local = layers::LocalPath::kWindow;
        a.hybrid.local_window = *o.local_window;
      }
    }
    if (o.svm_C) a.hybrid.problem.C = *o.svm_C;
    if (o.fista_iterations) a.hybrid.batched.iterations = *o.fista_iterations;
    if (o.global_path) a.hybrid.path = layers::global_path_from_string(*o.global_path);
    if (o.chunk) a.hybrid.chunk = *o.chunk;  // swa-*: re-matched by match_window above
    s.preset.model.validate();
  }

  // Data: the checkpoint's corpus unless the options name one; its bytes must be the same.
  DataSpec spec = o.data;
  if (have_ckpt && spec.path.empty() && spec.corpus.empty()) {
    const auto& d = ck.config.at("data");
    spec.corpus = d.value("corpus", "");
    spec.path = d.value("path_given", "");
  }
  if (spec.path.empty() && spec.corpus.empty()) spec.corpus = "enwik8";
  s.corpus = Corpus::load(spec);
  s.data_json = {{"corpus", spec.path.empty() ? spec.corpus : ""},
                 {"path_given", spec.path},
                 {"file", s.corpus.path()},
                 {"label", s.corpus.label()},
                 {"bytes", s.corpus.size()},
                 {"sha256", s.corpus.sha256()}};
  if (have_ckpt && ck.config.at("data").at("sha256").get<std::string>() != s.corpus.sha256())
    throw InvalidArgument("data " + s.corpus.path() + " differs from the checkpoint's (SHA-256 " +
                          ck.config.at("data").at("sha256").get<std::string>() + ")");

  // Every split the run reads must hold one window before the first step (nothing is written yet).
  for (Split split : {Split::kTrain, Split::kValid, Split::kTest}) {
    const auto [b, e] = s.corpus.range(split);
    if (e - b < s.preset.train.seq + 1)
      throw InvalidArgument("split " + to_string(split) + " of " + s.corpus.label() + " has " +
                            std::to_string(e - b) + " bytes, fewer than seq + 1 = " +
                            std::to_string(s.preset.train.seq + 1) + "; lower --seq or use more data");
  }
  fs::create_directories(s.out, ec);
  if (ec || !fs::is_directory(s.out)) throw IoError("cannot create run directory " + o.out);
  // Leftovers of a crash during a checkpoint write.
  for (const auto& e : fs::directory_iterator(s.out)) {
    const std::string n = e.path().filename().string();
    if (n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0) fs::remove_all(e.path());
  }

  const torch::Device device = parse_device(o.device);
  if (have_ckpt && !device.is_cpu())
    throw InvalidArgument("resuming " + o.out + " on device " + o.device + ": checkpoints resume on the CPU only");
  // The initialisation draws from LibTorch's global generator: one run at a time seeds it and
  // builds its model, so runs trained side by side (E5's workers) start as they would alone.
  s.model = seeded_char_lm(s.preset.model, s.seed);
  s.model->to(device);
  s.params = layers::count_parameters(*s.model);
  s.optimizer = std::make_unique<torch::optim::AdamW>(param_groups(*s.model, s.preset.train),
                                                      torch::optim::AdamWOptions(s.preset.train.lr));
  const fs::path metrics_path = s.out / "metrics.jsonl";
  if (have_ckpt) {
    torch_load_model(s.model, (fs::path(ck_dir) / "model.pt").string());
    torch_load(*s.optimizer, (fs::path(ck_dir) / "optim.pt").string());
    Tensor st;
    torch_load(st, (fs::path(ck_dir) / "rng.pt").string());
    {
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(st);
    }
    s.step = ck.state.at("step").get<std::int64_t>();
    const auto& lv = ck.state.at("last_valid_bpc");  // null when no validation ran yet
    s.last_valid_bpc = lv.is_number() ? lv.get<double>() : std::nan("");
    s.trained_seconds = ck.state.value("trained_seconds", 0.0);
    s.trained_tokens = ck.state.value("trained_tokens", std::int64_t{0});
    const auto offset = ck.state.at("metrics_offset").get<std::int64_t>();
    if (!fs::exists(metrics_path) || static_cast<std::int64_t>(fs::file_size(metrics_path)) < offset)
      throw FormatError(metrics_path.string() + " is shorter than the checkpoint's record of it");
    // Drop the records written after the checkpoint (they are replayed identically).
    fs::resize_file(metrics_path, static_cast<std::uintmax_t>(offset));
  } else {
    std::ofstream(metrics_path, std::ios::trunc);
  }
  s.metrics.open(metrics_path, std::ios::app);
  if (!s.metrics) throw IoError("cannot open " + metrics_path.string());
}

Trainer::~Trainer() = default;

std::int64_t Trainer::step() const { return s_->step; }
const Preset& Trainer::preset() const { return s_->preset; }
const Corpus& Trainer::corpus() const { return s_->corpus; }
layers::CharLm& Trainer::model() { return s_->model; }
std::int64_t Trainer::parameters() const { return s_->params; }
json Trainer::config_json() const { return s_->config_json(); }

TrainResult Trainer::run(std::int64_t stop_after) {
  auto& s = *s_;
  const auto& h = s.preset.train;
  const auto& o = s.opt;
  set_threads(o.threads);
  TrainResult r;
  r.start_step = s.step;
  r.parameters = s.params;
  const auto t_run = Clock::now();
  auto last_progress = Clock::now() - std::chrono::hours(1);
  double ema_step = 0;  // seconds per step, smoothed
  std::int64_t window_steps = 0;
  double window_seconds = 0;

  auto validate = [&]() {
    EvalOptions eo;
    eo.split = Split::kValid;
    eo.seq = h.seq;
    eo.windows = h.eval_windows;
    EvalResult ev = evaluate(s.model, s.corpus, eo);
    s.last_valid_bpc = ev.bpc;
    double gate = 0, support = 0;
    json lj = diagnostics_json(ev.diagnostics, &gate, &support);
    json rec = {{"type", "valid"},   {"step", s.step},         {"bpc", ev.bpc},
                {"nll", ev.nll},     {"windows", ev.windows},  {"targets", ev.targets},
                {"seconds", ev.seconds}};
    if (is_hybrid(s.preset.model)) {
      rec["layers"] = lj;
      rec["gate_memory_share"] = gate;
      rec["support_mean"] = support;
    }
    s.write_metrics(rec);
    if (o.progress)
      std::fprintf(stderr, "[%s] step %lld valid BPC %.4f (%lld windows of %lld, %.1fs)\n",
                   s.preset.name.c_str(), static_cast<long long>(s.step), ev.bpc,
                   static_cast<long long>(ev.windows), static_cast<long long>(ev.seq), ev.seconds);
  };

  while (s.step < o.steps) {
    const std::int64_t step = s.step + 1;
    const double lr = schedule(h, step, o.steps);
    set_lr(*s.optimizer, lr);
    const auto t0 = Clock::now();
    Tensor w = window_tensor(s.corpus, batch_offsets(s.corpus, Split::kTrain, h.batch, h.seq, s.seed, step), h.seq);
    s.model->train();
    StepOut so = train_step(s.model, *s.optimizer, w, h.clip);
    const double dt = since(t0);
    s.step = step;
    s.trained_seconds += dt;
    s.trained_tokens += h.batch * h.seq;
    window_seconds += dt;
    ++window_steps;
    ema_step = ema_step == 0 ? dt : 0.9 * ema_step + 0.1 * dt;
    if (!std::isfinite(so.loss))
      throw Error("training diverged at step " + std::to_string(step) + " (loss " + std::to_string(so.loss) +
                  "); lower --lr or check the data");
    r.steps.push_back({step, so.loss, lr, so.grad_norm});
    if (step % h.log_every == 0 || step == o.steps) {
      json rec = {{"type", "train"},
                  {"step", step},
                  {"loss", so.loss},
                  {"bpb", so.loss / kLn2},
                  {"lr", lr},
                  {"grad_norm", so.grad_norm},
                  {"tokens_per_s", window_seconds > 0 ? static_cast<double>(window_steps * h.batch * h.seq) / window_seconds : 0.0},
                  {"elapsed_s", s.trained_seconds}};
      if (is_hybrid(s.preset.model)) {
        double gate = 0, support = 0;
        rec["layers"] = diagnostics_json(s.model->diagnostics(), &gate, &support);
        rec["gate_memory_share"] = gate;
        rec["gate_local_share"] = 1.0 - gate;
        rec["support_mean"] = support;
      }
      s.write_metrics(rec);
      window_steps = 0;
      window_seconds = 0;
    }
    if (o.progress && (since(last_progress) >= kProgressSeconds || step == o.steps)) {
      last_progress = Clock::now();
      const double tps = s.trained_seconds > 0 ? static_cast<double>(s.trained_tokens) / s.trained_seconds : 0;
      std::fprintf(stderr, "[%s] step %lld/%lld loss %.4f (%.3f bpb) lr %.2e %.0f tok/s ETA %s\n",
                   s.preset.name.c_str(), static_cast<long long>(step), static_cast<long long>(o.steps),
                   so.loss, so.loss / kLn2, lr, tps,
                   format_duration(ema_step * static_cast<double>(o.steps - step)).c_str());
    }
    if (o.max_seconds > 0 && s.trained_seconds >= o.max_seconds) break;  // the time budget is spent
    if (h.eval_every > 0 && step % h.eval_every == 0 && step != o.steps) validate();
    if (h.checkpoint_every > 0 && step % h.checkpoint_every == 0 && step != o.steps) s.save_checkpoint();
    if (stop_after >= 0 && step >= stop_after) {
      r.end_step = s.step;
      r.seconds = since(t_run);
      r.tokens_per_second = s.trained_seconds > 0 ? static_cast<double>(s.trained_tokens) / s.trained_seconds : 0;
      r.final_valid_bpc = s.last_valid_bpc;
      return r;
    }
  }
  // The end: validation, final checkpoint, summary, plot. A resumed run that is already complete
  // only redoes the summary and plot.
  if (r.steps.size() > 0 || !fs::exists(s.out / kLatest)) {
    validate();
    s.save_checkpoint();
  }
  r.end_step = s.step;
  r.seconds = since(t_run);
  r.tokens_per_second = s.trained_seconds > 0 ? static_cast<double>(s.trained_tokens) / s.trained_seconds : 0;
  r.final_valid_bpc = s.last_valid_bpc;
  json summary = config_json();
  summary["step"] = s.step;
  summary["valid_bpc"] = s.last_valid_bpc;
  summary["tokens_per_second"] = r.tokens_per_second;
  summary["trained_seconds"] = s.trained_seconds;
  summary["threads"] = o.threads;
  write_text_synced((s.out / "summary.json").string(), summary.dump(2) + "\n");
  if (o.plot) {
    std::string msg = plot_run(o.out);
    if (o.progress) std::fprintf(stderr, "%s\n", msg.c_str());
  }
  return r;
}

// ------------------------------------------------------------------ plot

std::string plot_run(const std::string& run_dir) {
  const fs::path dir = run_dir;
  std::ifstream in(dir / "metrics.jsonl");
  if (!in) throw IoError("cannot open " + (dir / "metrics.jsonl").string());
  std::ofstream tr(dir / "train.dat"), va(dir / "valid.dat");
  std::string line;
  std::size_t n_train = 0, n_valid = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) continue;
    const std::string type = j.value("type", "");
    char buf[96];
    if (type == "train") {
      std::snprintf(buf, sizeof buf, "%lld %.9g\n", static_cast<long long>(j["step"].get<std::int64_t>()),
                    j["bpb"].get<double>());
      tr << buf;
      ++n_train;
    } else if (type == "valid") {
      std::snprintf(buf, sizeof buf, "%lld %.9g\n", static_cast<long long>(j["step"].get<std::int64_t>()),
                    j["bpc"].get<double>());
      va << buf;
      ++n_valid;
    }
  }
  tr.close();
  va.close();
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0)
    return "gnuplot not found: skipped the PNG (data in " + (dir / "train.dat").string() + ", valid.dat)";
  if (n_train == 0) return "no train records: skipped the PNG";
  const fs::path gp = dir / "curves.gp";
  {
    std::ofstream g(gp);
    g << "set terminal pngcairo size 900,540\n"
      << "set output '" << (dir / "curves.png").string() << "'\n"
      << "set xlabel 'step'\nset ylabel 'bits per byte'\nset grid\nset key top right\n"
      << "plot '" << (dir / "train.dat").string() << "' using 1:2 with lines lw 1 title 'train (batch)'";
    if (n_valid > 0)
      g << ", '" << (dir / "valid.dat").string() << "' using 1:2 with linespoints lw 2 pt 7 title 'valid BPC'";
    g << "\n";
  }
  const std::string cmd = "gnuplot '" + gp.string() + "' >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) return "gnuplot failed: no PNG (script " + gp.string() + ")";
  return "wrote " + (dir / "curves.png").string();
}

// ------------------------------------------------------------------ checkpoints and eval

LoadedCheckpoint load_checkpoint_impl(const std::string& path,
                                      const std::function<void(layers::LmConfig&)>& modify);

LoadedCheckpoint load_checkpoint(const std::string& path,
                                 const std::function<void(layers::LmConfig&)>& modify) {
  try {
    return load_checkpoint_impl(path, modify);
  } catch (const nlohmann::json::exception& e) {
    throw FormatError("checkpoint " + path + ": malformed config or state (" + e.what() + ")");
  }
}

LoadedCheckpoint load_checkpoint_impl(const std::string& path,
                                      const std::function<void(layers::LmConfig&)>& modify) {
  LoadedCheckpoint lc;
  lc.directory = checkpoint_dir_of(path);
  CheckpointFiles f = verify_checkpoint(lc.directory);
  lc.config = f.config;
  lc.step = f.state.at("step").get<std::int64_t>();
  layers::LmConfig cfg = lm_config_from_json(f.config.at("model"));
  if (modify) modify(cfg);
  lc.model = layers::CharLm(cfg);
  torch_load_model(lc.model, (fs::path(lc.directory) / "model.pt").string());
  lc.model->eval();
  return lc;
}

Corpus checkpoint_corpus(const json& config, const DataSpec& override_spec) {
  DataSpec spec = override_spec;
  if (spec.path.empty() && spec.corpus.empty()) {
    const auto& d = config.at("data");
    spec.corpus = d.value("corpus", "");
    spec.path = d.value("path_given", "");
  }
  return Corpus::load(spec);
}

LayerKeys learned_keys(layers::CharLm& model, const Tensor& tokens, std::int64_t layer, std::int64_t head) {
  const auto& cfg = model->config();
  if (layer < 0 || layer >= cfg.n_layers)
    throw InvalidArgument("--layer " + std::to_string(layer) + " out of range [0, " + std::to_string(cfg.n_layers) + ")");
  const auto H = cfg.attention.n_heads, D = cfg.attention.d_model, dh = D / H;
  if (head < 0 || head >= H)
    throw InvalidArgument("--head " + std::to_string(head) + " out of range [0, " + std::to_string(H) + ")");
  if (tokens.dim() != 1 || tokens.size(0) < 1) throw InvalidArgument("learned_keys: tokens must be [T], T >= 1");
  torch::NoGradGuard ng;
  model->eval();
  auto mods = model->named_modules("", /*include_self=*/false);
  auto get = [&](const std::string& name) {
    if (!mods.contains(name)) throw InvalidArgument("learned_keys: model has no module " + name);
    return mods[name];
  };
  Tensor h = get("embed")->as<torch::nn::EmbeddingImpl>()->forward(tokens.unsqueeze(0));
  for (std::int64_t l = 0; l < layer; ++l)
    h = get("block" + std::to_string(l))->as<layers::TransformerBlockImpl>()->forward(h);
  const std::string pre = "block" + std::to_string(layer);
  Tensor x = get(pre + ".ln1")->as<torch::nn::LayerNormImpl>()->forward(h);
  const auto T = tokens.size(0);
  auto head_of = [&](const char* proj) {
    Tensor y = get(pre + ".attn." + proj)->as<torch::nn::LinearImpl>()->forward(x);
    return y.view({T, H, dh}).select(1, head);
  };
  LayerKeys out;
  Tensor k = head_of("k_proj");
  const auto& hs = cfg.attention.hybrid;
  if (cfg.attention.type == layers::AttentionType::kHybrid) {
    out.C = hs.problem.C;
    out.mu = hs.problem.ridge;
    out.normalized = hs.normalize_keys;
    if (hs.normalize_keys) k = torch::nn::functional::normalize(k, torch::nn::functional::NormalizeFuncOptions().dim(-1).eps(1e-6));
    auto params = model->named_parameters(/*recurse=*/true);
    auto buffers = model->named_buffers(/*recurse=*/true);
    const std::string ls = pre + ".attn.log_sigma";
    Tensor lsig = params.contains(ls) ? params[ls] : buffers.contains(ls) ? buffers[ls] : Tensor();
    out.bandwidth = lsig.defined() ? std::exp(lsig[head].item<double>()) : hs.problem.kernel.bandwidth;
  }
  out.keys = k.to(torch::kFloat64).contiguous();
  out.values = head_of("v_proj").to(torch::kFloat64).contiguous();
  return out;
}

EvalResult evaluate(layers::CharLm& model, const Corpus& corpus, const EvalOptions& options) {
  if (options.seq < 2) throw InvalidArgument("evaluate: seq must be >= 2, got " + std::to_string(options.seq));
  if (options.batch < 1) throw InvalidArgument("evaluate: batch must be >= 1");
  const auto t0 = Clock::now();
  const auto offsets = eval_offsets(corpus, options.split, options.seq, options.windows);
  torch::NoGradGuard ng;
  const bool was_training = model->is_training();
  model->eval();
  EvalResult r;
  r.seq = options.seq;
  r.windows = static_cast<std::int64_t>(offsets.size());
  double nll_sum = 0;
  std::vector<layers::AttentionDiagnostics> acc;
  std::vector<int> counts;
  for (std::size_t i = 0; i < offsets.size(); i += static_cast<std::size_t>(options.batch)) {
    const std::size_t e = std::min(offsets.size(), i + static_cast<std::size_t>(options.batch));
    std::vector<std::int64_t> part(offsets.begin() + static_cast<std::ptrdiff_t>(i),
                                   offsets.begin() + static_cast<std::ptrdiff_t>(e));
    Tensor w = window_tensor(corpus, part, options.seq).to(model_device(model));
    Tensor x = w.narrow(1, 0, options.seq), y = w.narrow(1, 1, options.seq);
    Tensor logits = model->forward(x);
    Tensor loss = torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}).to(torch::kFloat64), y.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    nll_sum += loss.item<double>();
    r.targets += y.numel();
    const auto d = model->diagnostics();
    if (acc.empty()) {
      acc = d;
      counts.assign(d.size(), 1);
    } else {
      for (std::size_t l = 0; l < d.size(); ++l) {
        acc[l].support_mean += d[l].support_mean;
        acc[l].gate_mean += d[l].gate_mean;
        acc[l].solver_seconds += d[l].solver_seconds;
        for (std::size_t hh = 0; hh < d[l].support_per_head.size() && hh < acc[l].support_per_head.size(); ++hh)
          acc[l].support_per_head[hh] += d[l].support_per_head[hh];
        acc[l].fista_residual = std::max(acc[l].fista_residual, d[l].fista_residual);
        acc[l].negative_coefficients += d[l].negative_coefficients;
        acc[l].certified_units += d[l].certified_units;
        acc[l].verified_units += d[l].verified_units;
        if (std::isfinite(d[l].partition_agreement)) {
          const long units = acc[l].agreement_units + d[l].agreement_units;
          if (units > 0)
            acc[l].partition_agreement =
                (acc[l].partition_agreement * static_cast<double>(acc[l].agreement_units) +
                 d[l].partition_agreement * static_cast<double>(d[l].agreement_units)) /
                static_cast<double>(units);
          acc[l].agreement_units = units;
          acc[l].coefficient_error = std::max(acc[l].coefficient_error, d[l].coefficient_error);
        }
        ++counts[l];
      }
    }
  }
  for (std::size_t l = 0; l < acc.size(); ++l) {
    const double c = counts[l];
    acc[l].support_mean /= c;
    acc[l].gate_mean /= c;
    for (auto& v : acc[l].support_per_head) v /= c;
  }
  r.diagnostics = acc;
  if (was_training) model->train();
  r.nll = nll_sum / static_cast<double>(r.targets);
  r.bpc = r.nll / kLn2;
  r.seconds = since(t0);
  return r;
}

torch::Device parse_device(const std::string& name) {
  std::optional<torch::Device> d;
  try {
    d.emplace(name);
  } catch (const c10::Error&) {
    throw InvalidArgument("device '" + name + "' (expected cpu, cuda or cuda:N)");
  }
  if (d->is_cuda()) {
    if (!torch::cuda::is_available())
      throw InvalidArgument("device '" + name + "': no CUDA device (this LibTorch has no CUDA or sees no GPU)");
    if (d->has_index() && d->index() >= static_cast<int>(torch::cuda::device_count()))
      throw InvalidArgument("device '" + name + "': only " + std::to_string(torch::cuda::device_count()) +
                            " CUDA device(s)");
  } else if (!d->is_cpu()) {
    throw InvalidArgument("device '" + name + "' (expected cpu, cuda or cuda:N)");
  }
  return *d;
}

Throughput measure_throughput(const Preset& preset, const Corpus& corpus, std::int64_t steps,
                              std::int64_t warmup, std::uint64_t seed, const std::string& device) {
  if (steps < 1 || warmup < 0) throw InvalidArgument("measure_throughput: steps >= 1, warmup >= 0");
  const torch::Device dev = parse_device(device);
  torch::manual_seed(seed);
  layers::CharLm model(preset.model);
  model->to(dev);
  torch::optim::AdamW opt(param_groups(*model, preset.train), torch::optim::AdamWOptions(preset.train.lr));
  model->train();
  Throughput t;
  t.preset = preset.name;
  t.parameters = layers::count_parameters(*model);
  double seconds = 0, sv_seconds = 0, support = 0;
  int support_n = 0;
  const auto& h = preset.train;
  for (std::int64_t i = 0; i < warmup + steps; ++i) {
    set_lr(opt, h.lr * 0.1);
    Tensor w = window_tensor(corpus, batch_offsets(corpus, Split::kTrain, h.batch, h.seq, seed, i + 1), h.seq);
    const auto t0 = Clock::now();
    train_step(model, opt, w, h.clip);
    const double dt = since(t0);
    if (i < warmup) continue;
    seconds += dt;
    for (const auto& d : model->diagnostics()) {
      sv_seconds += d.solver_seconds;
      if (std::isfinite(d.support_mean)) support += d.support_mean, ++support_n;
    }
  }
  t.seconds_per_step = seconds / static_cast<double>(steps);
  t.tokens_per_second = static_cast<double>(steps * h.batch * h.seq) / seconds;
  t.sv_forward_share = seconds > 0 ? sv_seconds / seconds : 0;
  if (support_n > 0) t.support_mean = support / support_n;
  return t;
}

}  // namespace svattn::lm
