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
  /// The text of each settings flag given (--batch, --C, ...; one per row of the run table, null
  /// for the dotted keys, which have no flag), in the table's order, and the --set items in the
  /// order given.
  std::vector<std::string> flags;
  std::vector<CLI::Option*> flag_options;
  std::vector<std::string> set;
  bool quiet = false, no_plot = false;
};

// The overrides of the command line: the settings flags in the table's order, then --set.
std::vector<lm::Setting> settings_of(const TrainCliOptions& c) {
  std::vector<lm::Setting> out;
  const auto& table = lm::run_settings_fields();
  for (std::size_t i = 0; i < table.size(); ++i)
    if (c.flag_options[i] && c.flag_options[i]->count() > 0) {
      try {
        out.push_back({table[i].name, parse_field(table[i], c.flags[i])});
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(lm::setting_flag(table[i].name) + ": " + e.what());
      }
    }
  for (const auto& item : c.set) out.push_back(lm::parse_setting(item));
  return out;
}

int run_train(TrainCliOptions& c, CLI::App* sub) {
  lm::TrainOptions t = c.t;
  if (!c.corpus.empty()) {
    if (c.corpus != "enwik8" && c.corpus != "shakespeare")
      throw InvalidArgument("--corpus " + c.corpus + ": expected enwik8 or shakespeare");
    t.data.corpus = c.corpus;
  } else {
    t.data.corpus.clear();  // a new run defaults to enwik8; a resumed run keeps its corpus
  }
  t.settings = settings_of(c);
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
  // One flag per run setting without a dot (docs/lm.md "Training settings"), and --set KEY=VALUE
  // for any of them (model.attention.hybrid.* by --set only).
  const auto& table = lm::run_settings_fields();
  o->flags.resize(table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    const auto& f = table[i];
    if (f.name.find('.') != std::string::npos) {
      o->flag_options.push_back(nullptr);
      continue;
    }
    o->flag_options.push_back(
        sub->add_option(lm::setting_flag(f.name), o->flags[i], f.doc + " Must be " + requirement(f) + " (preset default).")
            ->type_name(python_type(f.type)));
  }
  sub->add_option("--set", o->set,
                  "override a run setting, KEY=VALUE (repeatable; keys: " + field_names(table) + ")");
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
