// `svattn reproduce`: runs the paper's experiments E1–E7 that this build can run and writes
// DIR/REPORT.md and DIR/REPORT.json beside each experiment's files (docs/experiments.md).
#include <fmt/core.h>

#include <filesystem>

#include "commands.h"
#include "svattn/errors.h"
#include "experiments/reproduce.h"
#ifdef SVATTN_CLI_TORCH_EXPERIMENTS
#include "experiments/torch_experiments.h"
#endif

namespace svattn::cli {
namespace {

struct ReproduceCliOptions {
  experiments::ReproduceOptions opts;
  std::string only;
  std::vector<std::string> set;
  bool no_plots = false;
  bool quiet = false;
};

int run_reproduce(ReproduceCliOptions& o) {
  o.opts.experiment.plots = !o.no_plots;
  o.opts.experiment.progress = !o.quiet;
  o.opts.experiment.overrides.clear();
  for (const auto& item : o.set) o.opts.experiment.overrides.push_back(experiments::parse_override(item));
  o.opts.only.clear();
  std::string cur;
  for (char c : o.only + ",") {
    if (c == ',') {
      if (!cur.empty()) o.opts.only.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  const nlohmann::json r = experiments::reproduce(o.opts);
  const std::filesystem::path dir(o.opts.experiment.out_dir);
  fmt::print("reproduce (preset {}, seed {}) finished in {:.1f} s\n", o.opts.experiment.preset,
             o.opts.experiment.seed, r.at("runtime_seconds").get<double>());
  bool failed = false;
  for (const auto& e : r.at("experiments")) {
    const std::string status = e.at("status").get<std::string>();
    failed = failed || status == "failed";
    std::string what = status == "not_available" ? "not yet available" : status;
    if (e.contains("runtime_seconds")) what += fmt::format(" ({:.1f} s)", e["runtime_seconds"].get<double>());
    if (status == "failed") what += ": " + e.at("reason").get<std::string>();
    fmt::print("  {:<3} {:<80} {}\n", e.at("id").get<std::string>(), e.at("title").get<std::string>(), what);
  }
  fmt::print("report: {}\n", (dir / "REPORT.md").string());
  fmt::print("json:   {}\n", (dir / "REPORT.json").string());
  return failed ? 1 : 0;
}

Registrar reg("reproduce", [](CLI::App& app, int& exit_code) {
#ifdef SVATTN_CLI_TORCH_EXPERIMENTS
  experiments::install_torch_experiments();
#endif
  static ReproduceCliOptions opts;  // outlives parsing: CLI11 binds to it
  ReproduceCliOptions* o = &opts;
  o->opts.experiment.out_dir = "out/report";
  auto* sub = app.add_subcommand(
      "reproduce",
      "Run the paper's experiments E1-E7 (those this build can run; the others are reported as not "
      "yet available) and write DIR/REPORT.md and DIR/REPORT.json. Exit 1 when an experiment failed");
  sub->add_option("--preset", o->opts.experiment.preset,
                  "quick (minutes), paper (the paper's scale where the data allow) or tiny (seconds)")
      ->check(CLI::IsMember({"quick", "paper", "tiny"}))
      ->capture_default_str();
  sub->add_option("--seed", o->opts.experiment.seed, "seed of every random choice")->capture_default_str();
  sub->add_option("--out", o->opts.experiment.out_dir, "output directory")->capture_default_str();
  sub->add_option("--data-dir", o->opts.experiment.data_dir,
                  "data directory (default: $SVATTN_DATA, else ../shared/data)");
  sub->add_option("--learned-keys", o->opts.experiment.learned_keys,
                  "E1: keys of a trained model (.npy/.csv from `svattn dump-keys`)");
  sub->add_option("--only", o->only, "comma-separated experiment ids to run (default: all)");
  sub->add_option("--set", o->set,
                  "override a preset field of one experiment, E?.KEY=VALUE (repeatable; "
                  "docs/experiments.md lists the keys); a bad key or value exits 2")
      ->allow_extra_args(false);
  sub->add_flag("--no-plots", o->no_plots, "write plot data and scripts but do not run gnuplot");
  sub->add_flag("--quiet", o->quiet, "no progress lines on stderr");
  sub->callback([o, &exit_code] { exit_code = run_reproduce(*o); });
});

}  // namespace
}  // namespace svattn::cli
