// Checkpoints of the character LMs: typed config.json / state.json, the manifest, atomic writes
// that survive kill -9, verified loading (docs/lm.md "Training, checkpoints, resume").
#include "svattn/lm/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "checkpoint_io.h"
#include "svattn/errors.h"
#include "svattn/hash.h"

namespace svattn::lm {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kManifest = "MANIFEST.json";
constexpr const char* kFiles[] = {"config.json", "state.json", "model.pt", "optim.pt", "rng.pt"};

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

std::string sha_of(const std::string& bytes) {
  return sha256_hex(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

std::string checkpoint_name(std::int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "ckpt-%09lld", static_cast<long long>(step));
  return buf;
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

using Shapes = std::map<std::string, std::vector<std::int64_t>>;

Shapes shapes_of(layers::CharLm& model) {
  Shapes s;
  for (const auto& p : model->named_parameters(/*recurse=*/true)) s[p.key()] = p.value().sizes().vec();
  for (const auto& b : model->named_buffers(/*recurse=*/true)) s[b.key()] = b.value().sizes().vec();
  return s;
}

std::string shape_text(const std::vector<std::int64_t>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

/// Parses and checks MANIFEST.json against the files of `dir`.
void verify_manifest(const std::string& dir) {
  const std::string mpath = (fs::path(dir) / kManifest).string();
  json manifest;
  try {
    manifest = json::parse(read_file(mpath));
  } catch (const json::exception& e) {
    throw FormatError(mpath + ": corrupt manifest (" + e.what() + ")");
  }
  if (!manifest.contains("version") || manifest["version"] != kCheckpointVersion || !manifest.contains("files"))
    throw FormatError(mpath + ": not a version " + std::to_string(kCheckpointVersion) + " svattn checkpoint manifest");
  for (const char* required : kFiles)
    if (!manifest["files"].contains(required)) throw FormatError(mpath + ": manifest does not list " + required);
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
}

}  // namespace

// ------------------------------------------------------------------ config.json and state.json

CorpusRecord CorpusRecord::of(const Corpus& corpus, const DataSpec& spec) {
  return {spec.path.empty() ? spec.corpus : "", spec.path, corpus.path(), corpus.label(),
          static_cast<std::int64_t>(corpus.size()), corpus.sha256()};
}

json CorpusRecord::to_json() const {
  return {{"corpus", corpus}, {"path_given", path_given}, {"file", file},
          {"label", label},   {"bytes", bytes},           {"sha256", sha256}};
}

CorpusRecord CorpusRecord::from_json(const json& j) {
  return {j.value("corpus", ""),  j.value("path_given", ""), j.value("file", ""),
          j.value("label", ""),   j.value("bytes", std::int64_t{0}), j.at("sha256").get<std::string>()};
}

json CheckpointConfig::to_json() const {
  return {{"version", version},          {"preset", preset}, {"description", description},
          {"model", lm::to_json(model)}, {"train", lm::to_json(train)},
          {"steps", steps},              {"seed", seed},     {"data", data.to_json()},
          {"parameters", parameters}};
}

CheckpointConfig CheckpointConfig::from_json(const json& j) {
  CheckpointConfig c;
  c.version = j.value("version", kCheckpointVersion);
  c.preset = j.at("preset").get<std::string>();
  c.description = j.value("description", "");
  c.model = lm_config_from_json(j.at("model"));
  c.train = train_hyper_from_json(j.at("train"));
  c.steps = j.at("steps").get<std::int64_t>();
  c.seed = j.at("seed").get<std::uint64_t>();
  c.data = CorpusRecord::from_json(j.at("data"));
  c.parameters = j.value("parameters", std::int64_t{0});
  return c;
}

json CheckpointState::to_json() const {
  return {{"step", step},
          {"metrics_offset", metrics_offset},
          {"last_valid_bpc", last_valid_bpc},
          {"trained_seconds", trained_seconds},
          {"trained_tokens", trained_tokens}};
}

CheckpointState CheckpointState::from_json(const json& j) {
  CheckpointState s;
  s.step = j.at("step").get<std::int64_t>();
  s.metrics_offset = j.at("metrics_offset").get<std::int64_t>();
  const auto& lv = j.at("last_valid_bpc");  // null when no validation ran yet
  s.last_valid_bpc = lv.is_number() ? lv.get<double>() : std::nan("");
  s.trained_seconds = j.value("trained_seconds", 0.0);
  s.trained_tokens = j.value("trained_tokens", std::int64_t{0});
  return s;
}

// ------------------------------------------------------------------ directories

namespace detail {

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

CheckpointFiles verify_checkpoint(const std::string& dir) {
  verify_manifest(dir);
  json config, state;
  try {
    config = json::parse(read_file((fs::path(dir) / "config.json").string()));
    state = json::parse(read_file((fs::path(dir) / "state.json").string()));
  } catch (const json::exception& e) {
    throw FormatError("checkpoint " + dir + ": bad config/state JSON (" + e.what() + ")");
  }
  return {CheckpointConfig::from_json(config), CheckpointState::from_json(state)};
}

// The files of a checkpoint in `tmp`, each synced, listed in the manifest with size and SHA-256.
void write_checkpoint_files(const fs::path& tmp, layers::CharLm& model, torch::optim::Optimizer& optimizer,
                            const CheckpointConfig& config, const CheckpointState& state) {
  torch::save(model, (tmp / "model.pt").string());
  torch::save(optimizer, (tmp / "optim.pt").string());
  auto gen = at::detail::getDefaultCPUGenerator();
  torch::Tensor st;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    st = gen.get_state();
  }
  torch::save(st, (tmp / "rng.pt").string());
  write_text_synced((tmp / "config.json").string(), config.to_json().dump(2) + "\n");
  write_text_synced((tmp / "state.json").string(), state.to_json().dump(2) + "\n");
  json files = json::object();
  for (const char* f : kFiles) {
    const std::string p = (tmp / f).string();
    fsync_path(p, false);
    const std::string bytes = read_file(p);
    files[f] = {{"bytes", bytes.size()}, {"sha256", sha_of(bytes)}};
  }
  write_text_synced((tmp / kManifest).string(),
                    json{{"version", kCheckpointVersion}, {"files", files}}.dump(2) + "\n");
  fsync_path(tmp.string(), true);
}

void write_checkpoint(const std::string& run_dir, layers::CharLm& model, torch::optim::Optimizer& optimizer,
                      const CheckpointConfig& config, const CheckpointState& state) {
  const fs::path out = run_dir;
  const std::string name = checkpoint_name(state.step);
  const fs::path tmp = out / (name + ".tmp");
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  write_checkpoint_files(tmp, model, optimizer, config, state);
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

// LibTorch would replace mismatched tensors and fail later, in a forward: every shape is checked.
void load_model(layers::CharLm& model, const std::string& ckpt_dir) {
  const std::string path = (fs::path(ckpt_dir) / "model.pt").string();
  const Shapes expected = shapes_of(model);
  torch_load(model, path);
  const Shapes got = shapes_of(model);
  for (const auto& [name, want] : expected) {
    const auto it = got.find(name);
    if (it == got.end() || it->second != want)
      throw FormatError("checkpoint file " + path + ": tensor " + name + " has shape " +
                        (it == got.end() ? std::string("(missing)") : shape_text(it->second)) +
                        ", the checkpoint's config implies " + shape_text(want));
  }
}

void load_training_state(torch::optim::Optimizer& optimizer, const std::string& ckpt_dir) {
  torch_load(optimizer, (fs::path(ckpt_dir) / "optim.pt").string());
  torch::Tensor st;
  torch_load(st, (fs::path(ckpt_dir) / "rng.pt").string());
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(st);
}

}  // namespace detail

// ------------------------------------------------------------------ loading for evaluation

LoadedCheckpoint load_checkpoint(const std::string& path, const std::function<void(layers::LmConfig&)>& modify) {
  try {
    LoadedCheckpoint lc;
    lc.directory = detail::checkpoint_dir_of(path);
    detail::CheckpointFiles f = detail::verify_checkpoint(lc.directory);
    lc.config = f.config;
    lc.step = f.state.step;
    layers::LmConfig cfg = f.config.model;
    if (modify) modify(cfg);
    lc.model = layers::CharLm(cfg);
    detail::load_model(lc.model, lc.directory);
    lc.model->eval();
    return lc;
  } catch (const nlohmann::json::exception& e) {
    throw FormatError("checkpoint " + path + ": malformed config or state (" + e.what() + ")");
  }
}

Corpus checkpoint_corpus(const CheckpointConfig& config, const DataSpec& override_spec) {
  DataSpec spec = override_spec;
  if (spec.path.empty() && spec.corpus.empty()) {
    spec.corpus = config.data.corpus;
    spec.path = config.data.path_given;
  }
  return Corpus::load(spec);
}

}  // namespace svattn::lm
