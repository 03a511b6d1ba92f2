// `svattn train`: train a character LM preset (docs/experiments.md "E5", "E6") with a resumable
// trainer.
#include <fmt/core.h>

#include <cmath>

#include "blas_reexec.h"
#include "cli_common.h"
#include "commands.h"
#include "malloc_tuning.h"
#include "svattn/errors.h"
#include "svattn/lm/blas.h"
#include "svattn/lm/trainer.h"

namespace svattn::cli {
namespace {

struct TrainCliOptions {
  lm::TrainOptions t;
  std::string corpus;
  bool json = false;
  std::uint64_t seed = lm::kDefaultSeed;
  std::int64_t batch = 0, seq = 0, warmup = -1, eval_every = -1, eval_windows = -1, checkpoint_every = -1,
               log_every = 0, chunk = 0, local_window = 0;
  double lr = 0, svm_C = 0;
  int fista_iterations = 0;
  std::string gate, global_path, local;
  bool quiet = false, no_plot = false;
};

int run_train(TrainCliOptions& c, CLI::App* sub) {
  lm::TrainOptions t = c.t;
  if (!c.corpus.empty()) {
    if (c.corpus != "enwik8" && c.corpus != "shakespeare")
      throw InvalidArgument("--corpus " + c.corpus + ": expected enwik8 or shakespeare");
    t.data.corpus = c.corpus;
  } else if (!t.data.path.empty()) {
    t.data.corpus.clear();
  } else {
    t.data.corpus.clear();  // a new run defaults to enwik8; a resumed run keeps its corpus
  }
  if (sub->count("--seed") > 0) t.seed = c.seed;
  if (sub->count("--batch") > 0) t.batch = c.batch;
  if (sub->count("--seq") > 0) t.seq = c.seq;
  if (sub->count("--lr") > 0) t.lr = c.lr;
  if (sub->count("--warmup") > 0) t.warmup = c.warmup;
  if (sub->count("--eval-every") > 0) t.eval_every = c.eval_every;
  if (sub->count("--eval-windows") > 0) t.eval_windows = c.eval_windows;
  if (sub->count("--checkpoint-every") > 0) t.checkpoint_every = c.checkpoint_every;
  if (sub->count("--log-every") > 0) t.log_every = c.log_every;
  if (sub->count("--gate") > 0) t.gate = c.gate;
  if (sub->count("--local") > 0) t.local = c.local;
  if (sub->count("--local-window") > 0) t.local_window = c.local_window;
  if (sub->count("--C") > 0) t.svm_C = c.svm_C;
  if (sub->count("--chunk") > 0) t.chunk = c.chunk;
  if (sub->count("--fista-iterations") > 0) t.fista_iterations = c.fista_iterations;
  if (sub->count("--global-path") > 0) t.global_path = c.global_path;
  if (sub->count("--preset") == 0) t.preset.clear();
  if (t.preset.empty() && !t.resume) throw InvalidArgument("--preset is required for a new run");
  t.progress = !c.quiet;
  t.plot = !c.no_plot;

  lm::Trainer trainer(t);
  const auto& p = trainer.preset();
  const auto& corpus = trainer.corpus();
  const auto tr = corpus.range(lm::Split::kTrain), va = corpus.range(lm::Split::kValid);
  if (!c.json) {
    fmt::print("preset {}: {}\n", p.name, p.description);
    fmt::print("parameters: {}\n", trainer.parameters());
    if (p.model.attention.type == layers::AttentionType::kSlidingWindow)
      fmt::print("sliding window: {}\n", p.model.attention.window);
    if (p.model.attention.type == layers::AttentionType::kHybrid) {
      const auto& h = p.model.attention.hybrid;
      if (h.memory)
        fmt::print("hybrid memory: {} path, chunk {}\n", layers::to_string(h.path), h.chunk);
      else
        fmt::print("hybrid memory: off (local path alone)\n");
      fmt::print("hybrid local path: {}, {} to {} recent tokens, {} gate\n", layers::to_string(h.local),
                 h.min_local(), h.local_width(), layers::to_string(h.gate));
    }
    fmt::print("data: {} ({}, {} bytes; train {} bytes, valid {} bytes)\n", corpus.label(), corpus.path(),
               corpus.size(), tr.second - tr.first, va.second - va.first);
    fmt::print("batch {} x seq {}, lr {}, steps {}{}, threads {}, OpenBLAS kernels {}\n", p.train.batch,
               p.train.seq, p.train.lr, t.steps,
               trainer.step() > 0 ? fmt::format(" (resuming at step {})", trainer.step()) : "", t.threads,
               lm::blas_core_name());
    fmt::print("allocator: {}\n", malloc_tuning_summary());
    std::fflush(stdout);
  }
  lm::TrainResult r = trainer.run();
  nlohmann::json j = trainer.config_json();
  j["step"] = r.end_step;
  j["started_at_step"] = r.start_step;
  j["valid_bpc"] = r.final_valid_bpc;
  j["tokens_per_second"] = r.tokens_per_second;
  j["seconds"] = r.seconds;
  j["out"] = t.out;
  if (!r.steps.empty()) j["last_loss"] = r.steps.back().loss;
  if (c.json) {
    print_json(j);
  } else {
    fmt::print("step {}: valid BPC {:.4f} ({} valid windows), {:.0f} training tokens/s; checkpoint in {}\n",
               r.end_step, r.final_valid_bpc, p.train.eval_windows == 0 ? std::string("all")
                                                                          : std::to_string(p.train.eval_windows),
               r.tokens_per_second, t.out);
  }
  return 0;
}

Registrar reg("train", [](CLI::App& app, int& exit_code) {
  static TrainCliOptions opts;
  TrainCliOptions* o = &opts;
  auto* sub = app.add_subcommand("train", "Train a character LM preset (resumable; JSONL metrics, PNG curves)");
  std::string names;
  for (const auto& n : lm::preset_names()) names += (names.empty() ? "" : ", ") + n;
  sub->add_option("--preset", o->t.preset, "preset: " + names);
  sub->add_option("--corpus", o->corpus, "enwik8 (default) | shakespeare");
  sub->add_option("--data", o->t.data.path, "any file, read as bytes (split 90/5/5 in order)");
  sub->add_option("--data-dir", o->t.data.data_dir, "data directory (default $SVATTN_DATA, ../shared/data)");
  sub->add_option("--steps", o->t.steps, "total training steps")->required();
  sub->add_option("--out", o->t.out, "run directory (checkpoints, metrics.jsonl, curves.png)")->required();
  sub->add_flag("--resume", o->t.resume, "continue from the run directory's latest checkpoint");
  sub->add_option("--seed", o->seed, "seed of the initialisation and of the batch order (default 1234)");
  sub->add_option("--batch", o->batch, "sequences per step (preset default)");
  sub->add_option("--seq", o->seq, "tokens per sequence (preset default)");
  sub->add_option("--lr", o->lr, "peak learning rate (preset default)");
  sub->add_option("--warmup", o->warmup, "warm-up steps (preset default)");
  sub->add_option("--eval-every", o->eval_every, "validation period in steps (0: end only)");
  sub->add_option("--eval-windows", o->eval_windows, "validation windows (0: the whole split)");
  sub->add_option("--checkpoint-every", o->checkpoint_every, "checkpoint period in steps (0: end only)");
  sub->add_option("--log-every", o->log_every, "JSONL train record period in steps");
  sub->add_option("--gate", o->gate, "hybrid gate: chunk (the paper's) | token | position | joint (docs/layers.md §3)");
  sub->add_option("--local", o->local, "hybrid local path: chunk (the paper's) | window (sliding, docs/layers.md §3)");
  sub->add_option("--local-window", o->local_window, "hybrid window mode: W_loc, the fewest recent tokens seen locally");
  sub->add_option("--C", o->svm_C, "hybrid: box bound C of the SV memory");
  sub->add_option("--chunk", o->chunk, "hybrid chunk length (swa: the chunk part of the window)");
  sub->add_option("--fista-iterations", o->fista_iterations, "hybrid: FISTA iterations of the batched path");
  sub->add_option("--global-path", o->global_path,
                  "hybrid: memory solver, exact (fp64 core, certified) | batched (FISTA + repair); "
                  "default: the preset's");
  sub->add_option("--matched-support", o->t.matched_support,
                  "swa: average support |S u E| to match (default: documented hybrid-3m measurement)");
  sub->add_option("--match-run", o->t.match_run, "swa: read the average support from this hybrid run directory");
  sub->add_option("--threads", o->t.threads, "LibTorch intra-op threads")->capture_default_str();
  sub->add_flag("--quiet", o->quiet, "no progress lines on stderr");
  sub->add_flag("--no-plot", o->no_plot, "skip the gnuplot PNG");
  add_json_flag(sub, o->json);
  sub->callback([o, sub, &exit_code] {
    reexec_with_fast_blas_if_misdetected();
    exit_code = run_train(*o, sub);
  });
});

}  // namespace
}  // namespace svattn::cli
