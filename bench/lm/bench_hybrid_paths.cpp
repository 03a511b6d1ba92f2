// Paired cost of one training step of a trained hybrid on its two memory solvers (exact and
// batched) and of its state-matched sliding window (docs/performance.md "Hybrid training paths").
//
//   bench_hybrid_paths --checkpoint DIR [--rounds R] [--warmup W] [--threads K] [--data-dir D]
//
// Both hybrid models load the checkpoint's weights (trained keys: the regime training runs in);
// the window model is make_preset("swa-<size>") with the checkpoint's chunk, batch and seq and a
// window of chunk + the hybrid's measured mean support, from its initialisation (its cost does not
// depend on the weights). Every round runs one step (forward, backward, clip, AdamW) of each model
// on the same batch, in an order that rotates with the round; W untimed rounds come first. The
// table gives the median s/step of each model and the median, min and max over rounds of the
// per-round ratios, plus the hybrids' share of the step in the SV memory forward.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "blas_reexec.h"
#include "svattn/errors.h"
#include "svattn/lm/blas.h"
#include "svattn/lm/trainer.h"

namespace {

using svattn::layers::CharLm;
using torch::Tensor;

struct Model {
  std::string name;
  CharLm lm{nullptr};
  std::unique_ptr<torch::optim::AdamW> opt;
  std::vector<double> seconds, sv_seconds;
};

Model make_model(std::string name, CharLm lm) {
  Model m{std::move(name), std::move(lm), nullptr, {}, {}};
  m.lm->train();
  m.opt =
      std::make_unique<torch::optim::AdamW>(m.lm->parameters(), torch::optim::AdamWOptions(1e-4));
  return m;
}

// One full training step; returns its wall time and adds the SV forward time to *sv.
double step(Model& m, const Tensor& w, double* sv) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto T = w.size(1) - 1;
  Tensor logits = m.lm->forward(w.narrow(1, 0, T));
  Tensor loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                     w.narrow(1, 1, T).reshape({-1}));
  m.opt->zero_grad();
  loss.backward();
  torch::nn::utils::clip_grad_norm_(m.lm->parameters(), 1.0);
  m.opt->step();
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  *sv = 0;
  for (const auto& d : m.lm->diagnostics()) *sv += d.solver_seconds;
  return dt;
}

Tensor windows(const svattn::lm::Corpus& corpus, const std::vector<std::int64_t>& offsets,
               std::int64_t seq) {
  Tensor t = torch::empty({static_cast<std::int64_t>(offsets.size()), seq + 1}, torch::kInt64);
  auto acc = t.accessor<std::int64_t, 2>();
  for (std::size_t i = 0; i < offsets.size(); ++i)
    for (std::int64_t j = 0; j <= seq; ++j)
      acc[static_cast<std::int64_t>(i)][j] = corpus.data()[offsets[i] + j];
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void print_ratio(const char* label, const Model& a, const Model& b) {
  std::vector<double> r;
  for (std::size_t i = 0; i < a.seconds.size(); ++i) r.push_back(a.seconds[i] / b.seconds[i]);
  std::printf("| %s | %.2fx | %.2fx | %.2fx |\n", label, median(r),
              *std::min_element(r.begin(), r.end()), *std::max_element(r.begin(), r.end()));
}

struct Options {
  std::string checkpoint;
  std::int64_t rounds = 5, warmup = 1;
  int threads = 1;
  svattn::lm::DataSpec spec;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw svattn::InvalidArgument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--checkpoint")
      o.checkpoint = next();
    else if (a == "--rounds")
      o.rounds = std::stoll(next());
    else if (a == "--warmup")
      o.warmup = std::stoll(next());
    else if (a == "--threads")
      o.threads = std::stoi(next());
    else if (a == "--data-dir")
      o.spec.data_dir = next();
    else
      throw svattn::InvalidArgument("unknown option " + a);
  }
  if (o.checkpoint.empty()) throw svattn::InvalidArgument("--checkpoint DIR is required");
  if (o.rounds < 1 || o.warmup < 0) throw svattn::InvalidArgument("--rounds >= 1, --warmup >= 0");
  return o;
}

void print_tables(const std::vector<Model>& models) {
  std::printf("\n| model | median s/step | SV forward share |\n|---|---:|---:|\n");
  for (const auto& m : models) {
    double sv = 0, tot = 0;
    for (std::size_t i = 0; i < m.seconds.size(); ++i) sv += m.sv_seconds[i], tot += m.seconds[i];
    std::printf("| %s | %.3f | %.0f %% |\n", m.name.c_str(), median(m.seconds), 100 * sv / tot);
  }
  std::printf("\n| ratio (per round) | median | min | max |\n|---|---:|---:|---:|\n");
  print_ratio("exact / batched", models[0], models[1]);
  print_ratio("exact / window", models[0], models[2]);
  print_ratio("batched / window", models[1], models[2]);
}

int run(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  const std::string& checkpoint = opt.checkpoint;
  const std::int64_t rounds = opt.rounds, warmup = opt.warmup;
  const int threads = opt.threads;
  svattn::lm::set_threads(threads);
  using svattn::layers::GlobalPath;
  auto on = [&](GlobalPath p) {
    return svattn::lm::load_checkpoint(
        checkpoint, [p](svattn::layers::LmConfig& c) { c.attention.hybrid.path = p; });
  };
  svattn::lm::LoadedCheckpoint ex = on(GlobalPath::kExact), ba = on(GlobalPath::kBatched);
  const auto& cfg = ex.model->config();
  if (cfg.attention.type != svattn::layers::AttentionType::kHybrid)
    throw svattn::InvalidArgument("--checkpoint " + checkpoint + " is not a hybrid model");
  const std::string preset = ex.config.preset;
  const auto dash = preset.rfind('-');
  if (dash == std::string::npos)
    throw svattn::InvalidArgument("checkpoint preset '" + preset +
                                  "' is not a sized hybrid preset (hybrid-800k, hybrid-3m, ...)");
  const std::int64_t batch = ex.config.train.batch, seq = ex.config.train.seq;
  const std::int64_t chunk = cfg.attention.hybrid.chunk;
  svattn::lm::Corpus corpus = svattn::lm::checkpoint_corpus(ex.config, opt.spec);

  std::vector<Model> models;
  models.push_back(make_model("exact", ex.model));
  models.push_back(make_model("batched", ba.model));
  // The window: chunk + the trained hybrid's mean support on the first batch.
  const Tensor w0 = windows(
      corpus, svattn::lm::batch_offsets(corpus, svattn::lm::Split::kTrain, batch, seq, 99, 0), seq);
  double support = 0;
  {
    torch::NoGradGuard ng;
    ex.model->forward(w0.narrow(1, 0, seq));
    int n = 0;
    for (const auto& d : ex.model->diagnostics())
      if (std::isfinite(d.support_mean)) support += d.support_mean, ++n;
    support /= std::max(n, 1);
  }
  svattn::lm::Preset swa = svattn::lm::make_preset("swa" + preset.substr(dash), support);
  swa.model.attention.hybrid.chunk = chunk;
  swa.model.attention.window = svattn::layers::state_matched_window(chunk, support);
  models.push_back(make_model("swa W " + std::to_string(swa.model.attention.window),
                              svattn::lm::seeded_char_lm(swa.model, 1234)));

  std::printf(
      "%s step %lld (%s), batch %lld x seq %lld, chunk %lld, %d thread(s), OpenBLAS %s; "
      "%lld rounds after %lld untimed\n",
      preset.c_str(), static_cast<long long>(ex.step), corpus.label().c_str(),
      static_cast<long long>(batch), static_cast<long long>(seq), static_cast<long long>(chunk),
      threads, svattn::lm::blas_core_name().c_str(), static_cast<long long>(rounds),
      static_cast<long long>(warmup));
  for (std::int64_t r = 0; r < warmup + rounds; ++r) {
    const Tensor w = windows(
        corpus, svattn::lm::batch_offsets(corpus, svattn::lm::Split::kTrain, batch, seq, 7, r),
        seq);
    for (std::size_t k = 0; k < models.size(); ++k) {
      Model& m = models[(k + static_cast<std::size_t>(r)) % models.size()];
      double sv = 0;
      const double dt = step(m, w, &sv);
      if (r < warmup) continue;
      m.seconds.push_back(dt);
      m.sv_seconds.push_back(sv);
    }
  }
  print_tables(models);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  svattn::cli::reexec_with_fast_blas_if_misdetected();
  try {
    return run(argc, argv);
  } catch (const svattn::Error& e) {
    std::fprintf(stderr, "bench_hybrid_paths: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_hybrid_paths: %s\n", e.what());
    return 2;
  }
}
