// Paired cost of one training step of a trained hybrid on the exact path (lean solver) against its
// baselines (docs/performance.md "Hybrid training paths").
//
//   bench_hybrid_paths --checkpoint DIR [--rounds R] [--warmup W] [--threads K] [--data-dir D]
//                      [--baselines swa,softmax] [--batched] [--memory]
//
// The hybrid loads the checkpoint's weights (trained keys: the regime training runs in); with
// --batched the same weights on the batched FISTA path, with --memory on the exact path with one
// svattn::Memory per sequence, head and chunk (the core). Baselines from their initialisation
// (their cost does not depend on the weights), with the checkpoint's chunk, batch and seq:
// swa = make_preset("swa-<size>") with a window of chunk + the hybrid's measured mean support (the
// state-matched window), softmax = make_preset("softmax-<size>"). Every round runs one step
// (forward, backward, clip, AdamW) of each model on the same batch, in an order that rotates with
// the round; W untimed rounds come first. The tables give each model's median s/step and
// tokens/s, the exact path's SV memory forward and backward shares of the step, and the median,
// min and max over rounds of the per-round ratios of the hybrid to every other model.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"
#include "blas_reexec.h"
#include "svattn/errors.h"
#include "svattn/lm/blas.h"
#include "svattn/lm/trainer.h"
#include "svattn/torch/exact.h"

namespace {

using svattn::bench::median;

using svattn::layers::CharLm;
using torch::Tensor;

struct Model {
  std::string name;
  CharLm lm{nullptr};
  std::unique_ptr<torch::optim::AdamW> opt;
  std::vector<double> seconds, sv_forward, sv_backward;
};

Model make_model(std::string name, CharLm lm) {
  Model m{std::move(name), std::move(lm), nullptr, {}, {}, {}};
  m.lm->train();
  m.opt =
      std::make_unique<torch::optim::AdamW>(m.lm->parameters(), torch::optim::AdamWOptions(1e-4));
  return m;
}

// One full training step; returns its wall time and sets the SV memory's forward and backward
// time (the exact path's, from svattn::layers::exact_times; the batched path's forward from the
// layers' diagnostics, its backward not taken apart: 0).
double step(Model& m, const Tensor& w, double* sv_fwd, double* sv_bwd) {
  const svattn::layers::ExactTimes e0 = svattn::layers::exact_times();
  const svattn::support::Stopwatch watch;
  const auto T = w.size(1) - 1;
  Tensor logits = m.lm->forward(w.narrow(1, 0, T));
  Tensor loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                     w.narrow(1, 1, T).reshape({-1}));
  m.opt->zero_grad();
  loss.backward();
  torch::nn::utils::clip_grad_norm_(m.lm->parameters(), 1.0);
  m.opt->step();
  const double dt = watch.seconds();
  const svattn::layers::ExactTimes e1 = svattn::layers::exact_times();
  *sv_fwd = e1.forward_seconds - e0.forward_seconds;
  *sv_bwd = e1.backward_seconds - e0.backward_seconds;
  if (*sv_fwd == 0)
    for (const auto& d : m.lm->diagnostics()) *sv_fwd += d.solver_seconds;
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

void print_ratio(const Model& a, const Model& b) {
  svattn::bench::print_ratio_row(a.name + " / " + b.name,
                                 svattn::support::ratios(a.seconds, b.seconds));
}

struct Options {
  std::string checkpoint;
  std::int64_t rounds = 5, warmup = 1;
  int threads = 1;
  std::vector<std::string> baselines{"swa"};
  bool batched = false, memory = false;
  svattn::lm::DataSpec spec;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t comma = std::min(s.find(',', at), s.size());
    const std::string item = s.substr(at, comma - at);
    if (item != "swa" && item != "softmax")
      throw svattn::InvalidArgument("--baselines: unknown baseline '" + item + "' (swa, softmax)");
    out.push_back(item);
    at = comma + 1;
  }
  return out;
}

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
    else if (a == "--baselines")
      o.baselines = split_list(next());
    else if (a == "--batched")
      o.batched = true;
    else if (a == "--memory")
      o.memory = true;
    else
      throw svattn::InvalidArgument("unknown option " + a);
  }
  if (o.checkpoint.empty()) throw svattn::InvalidArgument("--checkpoint DIR is required");
  if (o.rounds < 1 || o.warmup < 0) throw svattn::InvalidArgument("--rounds >= 1, --warmup >= 0");
  return o;
}

void print_tables(const std::vector<Model>& models, std::int64_t tokens_per_step) {
  std::printf(
      "\n| model | median s/step | tokens/s | SV forward share | SV backward share |\n"
      "|---|---:|---:|---:|---:|\n");
  for (const auto& m : models) {
    double fwd = 0, bwd = 0, tot = 0;
    for (std::size_t i = 0; i < m.seconds.size(); ++i)
      fwd += m.sv_forward[i], bwd += m.sv_backward[i], tot += m.seconds[i];
    const double med = median(m.seconds);
    std::printf("| %s | %.3f | %.0f | %.0f %% | %.0f %% |\n", m.name.c_str(), med,
                static_cast<double>(tokens_per_step) / med, 100 * fwd / tot, 100 * bwd / tot);
  }
  std::printf("\n| ratio (per round) | median | min | max |\n|---|---:|---:|---:|\n");
  for (std::size_t k = 1; k < models.size(); ++k) print_ratio(models[0], models[k]);
}

// Largest |logit| difference of the lean and the core solver on one batch (no gradient): the
// solvers' partitions agree when it is at fp32 round-off.
double solver_logit_gap(CharLm lean, CharLm memory, const Tensor& tokens) {
  torch::NoGradGuard ng;
  return (lean->forward(tokens) - memory->forward(tokens)).abs().max().item<double>();
}

int run(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  const std::string& checkpoint = opt.checkpoint;
  const std::int64_t rounds = opt.rounds, warmup = opt.warmup;
  const int threads = opt.threads;
  svattn::lm::set_threads(threads);
  using svattn::layers::GlobalPath;
  auto on = [&](GlobalPath p, svattn::layers::ExactSolver solver) {
    return svattn::lm::load_checkpoint(checkpoint, [p, solver](svattn::layers::LmConfig& c) {
      c.attention.hybrid.path = p;
      c.attention.hybrid.exact_solver = solver;
    });
  };
  using svattn::layers::ExactSolver;
  svattn::lm::LoadedCheckpoint ex = on(GlobalPath::kExact, ExactSolver::kLean);
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
  models.push_back(make_model(preset + " exact", ex.model));
  // The window: chunk + the trained hybrid's mean support on the first batch.
  const Tensor w0 = windows(
      corpus, svattn::lm::batch_offsets(corpus, svattn::lm::Split::kTrain, batch, seq, 99, 0), seq);
  double support = 0;
  {
    torch::NoGradGuard ng;
    ex.model->set_record_diagnostics(true);  // the measured support sizes the state-matched window
    ex.model->forward(w0.narrow(1, 0, seq));
    ex.model->set_record_diagnostics(false);  // the timed steps record nothing, as training does
    int n = 0;
    for (const auto& d : ex.model->diagnostics())
      if (std::isfinite(d.support_mean)) support += d.support_mean, ++n;
    support /= std::max(n, 1);
  }
  if (opt.memory) {
    svattn::lm::LoadedCheckpoint core = on(GlobalPath::kExact, ExactSolver::kMemory);
    std::printf("lean vs core solver on one batch: max |d logit| %.3g\n",
                solver_logit_gap(ex.model, core.model, w0.narrow(1, 0, seq)));
    models.push_back(make_model(preset + " exact (svattn::Memory)", core.model));
  }
  if (opt.batched)
    models.push_back(make_model(preset + " batched", on(GlobalPath::kBatched, ExactSolver::kLean).model));
  const std::string size = preset.substr(dash);
  for (const std::string& base : opt.baselines) {
    svattn::lm::Preset bp = svattn::lm::make_preset(base + size, support);
    bp.model.attention.hybrid.chunk = chunk;
    std::string name = base + size;
    if (base == "swa") {
      bp.model.attention.window = svattn::layers::state_matched_window(chunk, support);
      name += " W " + std::to_string(bp.model.attention.window);
    }
    models.push_back(make_model(name, svattn::lm::seeded_char_lm(bp.model, 1234)));
  }

  std::printf(
      "%s step %lld (%s), batch %lld x seq %lld, chunk %lld, mean support %.1f, %d thread(s), "
      "OpenBLAS %s; %lld rounds after %lld untimed\n",
      preset.c_str(), static_cast<long long>(ex.step), corpus.label().c_str(),
      static_cast<long long>(batch), static_cast<long long>(seq), static_cast<long long>(chunk),
      support, threads, svattn::lm::blas_core_name().c_str(), static_cast<long long>(rounds),
      static_cast<long long>(warmup));
  for (std::int64_t r = 0; r < warmup + rounds; ++r) {
    const Tensor w = windows(
        corpus, svattn::lm::batch_offsets(corpus, svattn::lm::Split::kTrain, batch, seq, 7, r),
        seq);
    for (std::size_t k = 0; k < models.size(); ++k) {
      Model& m = models[(k + static_cast<std::size_t>(r)) % models.size()];
      double fwd = 0, bwd = 0;
      const double dt = step(m, w, &fwd, &bwd);
      if (r < warmup) continue;
      m.seconds.push_back(dt);
      m.sv_forward.push_back(fwd);
      m.sv_backward.push_back(bwd);
    }
  }
  print_tables(models, batch * seq);
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
