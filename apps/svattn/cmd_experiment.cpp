// `svattn experiment E1 ... E7`: runs one of the paper's experiments from the registry and writes
// E?.md, E?.json and PNG plots into --out (docs/experiments.md). `--set KEY=VALUE` overrides a
// preset field; a bad one exits 2 naming the key before anything runs.
#include <fmt/core.h>

#include <filesystem>

#include "commands.h"
#include "svattn/errors.h"
#include "experiments/registry.h"
#ifdef SVATTN_CLI_TORCH_EXPERIMENTS
#include "experiments/torch_experiments.h"
#endif

namespace svattn::cli {
namespace {

struct ExperimentCliOptions {
  std::string id;
  experiments::ExperimentOptions opts;
  std::vector<std::string> set;
  std::string render;  ///< an earlier run's E?.json: render its report instead of running
  bool no_plots = false;
  bool quiet = false;
};

int run_experiment_cmd(ExperimentCliOptions& o) {
  o.opts.overrides.clear();
  for (const auto& item : o.set) o.opts.overrides.push_back(experiments::parse_override(item));
  o.opts.plots = !o.no_plots;
  o.opts.progress = !o.quiet;
  const nlohmann::json j =
      o.render.empty() ? experiments::run_experiment(o.id, o.opts).to_json()
                       : experiments::render_experiment_file(o.id, o.render, o.opts).to_json();
  const std::filesystem::path dir(o.opts.out_dir);
  if (o.render.empty()) {
    fmt::print("{} ({}, preset {}, seed {}) finished in {:.1f} s\n",
               j.at("experiment").get<std::string>(), j.at("title").get<std::string>(),
               o.opts.preset, o.opts.seed, j.at("runtime_seconds").get<double>());
  } else {
    fmt::print("{} ({}, preset {}, seed {}) rendered from {} (measured in {:.1f} s)\n",
               j.at("experiment").get<std::string>(), j.at("title").get<std::string>(),
               j.at("preset").get<std::string>(), j.at("seed").dump(), o.render,
               j.at("runtime_seconds").get<double>());
  }
  for (const auto& row : j.at("summary")) {
    fmt::print("  {:<70} paper {:<28} ours {}\n", row.at("metric").get<std::string>(),
               row.at("paper").get<std::string>(), row.at("ours").get<std::string>());
  }
  fmt::print("wrote {}\n", (dir / j.value("markdown_file", "")).string());
  fmt::print("wrote {}\n", (dir / j.value("json_file", "")).string());
  for (const auto& p : j.at("plots")) {
    if (p.at("written").get<bool>()) {
      fmt::print("wrote {}\n", (dir / p.at("file").get<std::string>()).string());
    } else {
      fmt::print("plot {}: {}\n", p.at("file").get<std::string>(), p.at("note").get<std::string>());
    }
  }
  return 0;
}

Registrar reg("experiment", [](CLI::App& app, int& exit_code) {
#ifdef SVATTN_CLI_TORCH_EXPERIMENTS
  experiments::install_torch_experiments();
#endif
  static ExperimentCliOptions opts;  // outlives parsing: CLI11 binds to it
  ExperimentCliOptions* o = &opts;
  auto* sub = app.add_subcommand(
      "experiment",
      "Run a paper experiment (E1 exact forgetting, E2 rare-item recall, E4 ICU critical hours, E7 "
      "fact forgetting / knowledge editing / patient erasure) and write E?.md, E?.json and plots");
  sub->add_option("id", o->id,
                  "experiment: E1, E2, E4, E7; with LibTorch also E3 (selective copy), E5 "
                  "(character LM), E6 (training throughput)")
      ->required()
      ->check(CLI::IsMember({"E1", "E2", "E3", "E4", "E5", "E6", "E7", "e1", "e2", "e3", "e4", "e5",
                             "e6", "e7"}));
  sub->add_option(
         "--preset", o->opts.preset,
         "quick (minutes), paper (the paper's scale), tiny, or cpu (E5 only: under an hour)")
      ->check(CLI::IsMember({"quick", "paper", "tiny", "cpu"}))
      ->capture_default_str();
  sub->add_option("--seed", o->opts.seed, "seed of every random choice")->capture_default_str();
  sub->add_option("--out", o->opts.out_dir, "output directory")->capture_default_str();
  sub->add_option("--data-dir", o->opts.data_dir,
                  "data directory (default: $SVATTN_DATA, else ../shared/data)");
  sub->add_option("--learned-keys", o->opts.learned_keys,
                  "E1: keys of a trained model (.npy/.csv from `svattn dump-keys`)");
  sub->add_option("--set", o->set,
                  "override a preset field, KEY=VALUE (repeatable; VALUE is JSON or text, lists "
                  "comma-separated; e.g. E1.streams, E1.trials, E2.seeds, E5.seeds, E5.steps; "
                  "docs/experiments.md lists the keys); a bad key or value exits 2")
      ->allow_extra_args(false);
  auto* render = sub->add_option(
      "--render", o->render,
      "write the report (E?.md, E?.json, plots) into --out from an earlier run's E?.json, without "
      "running: its typed result is the only input (a bad or foreign file exits 2, nothing written)");
  for (const char* flag : {"--preset", "--seed", "--data-dir", "--learned-keys", "--set"})
    render->excludes(sub->get_option(flag));
  sub->add_flag("--no-plots", o->no_plots, "write plot data and scripts but do not run gnuplot");
  sub->add_flag("--quiet", o->quiet, "no progress line on stderr");
  sub->callback([o, &exit_code] { exit_code = run_experiment_cmd(*o); });
});

}  // namespace
}  // namespace svattn::cli
