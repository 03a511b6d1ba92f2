// `svattn experiment E3|E5|E6` (trained-model experiments, LibTorch) and their registration with
// `svattn reproduce`. The `experiment` subcommand itself is defined in cmd_experiment.cpp for the
// torch-free experiments; this file extends it: the id validator also accepts E3, E5 and E6, and
// when one of them is given the subcommand's callback runs the LibTorch runner instead.
#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>

#include "commands.h"
#include "svattn/errors.h"
#include "svattn/experiments/reproduce.h"
#include "svattn/lm/experiments.h"

namespace svattn::cli {
namespace {

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

bool is_torch_id(const std::string& id) {
  const std::string u = upper(id);
  return u == "E3" || u == "E5" || u == "E6";
}

/// The ExperimentOptions given on the `experiment` subcommand (its own defaults where not given).
experiments::ExperimentOptions read_options(CLI::App* sub) {
  experiments::ExperimentOptions o;
  auto given = [&](const char* name) {
    auto* opt = sub->get_option_no_throw(name);
    return opt != nullptr && opt->count() > 0 ? opt : nullptr;
  };
  if (auto* p = given("--preset")) o.preset = p->as<std::string>();
  if (auto* p = given("--seed")) o.seed = p->as<std::uint64_t>();
  if (auto* p = given("--out")) o.out_dir = p->as<std::string>();
  if (auto* p = given("--data-dir")) o.data_dir = p->as<std::string>();
  if (auto* p = given("--trials")) o.trials = p->as<int>();
  o.plots = given("--no-plots") == nullptr;
  o.progress = given("--quiet") == nullptr;
  return o;
}

int run_torch_experiment(const std::string& id, const experiments::ExperimentOptions& o) {
  const std::string u = upper(id);
  nlohmann::json j;
  if (u == "E3") j = experiments::run_e3(o);
  if (u == "E5") j = experiments::run_e5(o);
  if (u == "E6") j = experiments::run_e6(o);
  const std::filesystem::path dir(o.out_dir);
  fmt::print("{} ({}, preset {}, seed {}) finished in {:.1f} s\n", u, j.at("title").get<std::string>(),
             o.preset, o.seed, j.at("runtime_seconds").get<double>());
  for (const auto& row : j.at("summary")) {
    fmt::print("  {:<70} paper {:<28} ours {}\n", row.at("metric").get<std::string>(),
               row.at("paper").get<std::string>(), row.at("ours").get<std::string>());
  }
  fmt::print("wrote {}\n", (dir / j.at("markdown_file").get<std::string>()).string());
  fmt::print("wrote {}\n", (dir / j.at("json_file").get<std::string>()).string());
  for (const auto& p : j.at("plots")) {
    if (p.at("written").get<bool>()) {
      fmt::print("wrote {}\n", (dir / p.at("file").get<std::string>()).string());
    } else {
      fmt::print("plot {}: {}\n", p.at("file").get<std::string>(), p.at("note").get<std::string>());
    }
  }
  return 0;
}

/// Extends the `experiment` subcommand once: ids E3, E5, E6 are accepted and routed here.
void extend_experiment(CLI::App& app, int& exit_code) {
  static bool done = false;
  if (done) return;
  const auto found = app.get_subcommands([](CLI::App* a) { return a->get_name() == "experiment"; });
  if (found.empty()) return;
  CLI::App* sub = found.front();
  CLI::Option* id = sub->get_option_no_throw("id");
  if (id == nullptr) return;
  done = true;
  // Replace the id check (E1/E2/E4/E7) by one that also accepts the trained-model experiments.
  for (int i = 0;; ++i) {
    try {
      id->get_validator(i)->active(false);
    } catch (const CLI::OptionNotFound&) {
      break;
    }
  }
  id->check(CLI::IsMember({"E1", "E2", "E3", "E4", "E5", "E6", "E7", "e1", "e2", "e3", "e4", "e5", "e6", "e7"}));
  id->description("experiment: E1, E2, E3 (selective copy), E4, E5 (character LM), E6 (training throughput) or E7");
  sub->description(sub->get_description() +
                   "; with LibTorch also E3 selective copy, E5 character LM and E6 training throughput");
  auto* trials = sub->get_option_no_throw("--trials");
  if (trials != nullptr) trials->description("E1: trials per stream, E2: seeds, E5: seeds (0 = preset)");
  // Runs during parsing, after the value is known and before any subcommand callback: when the id
  // is a trained-model experiment, the subcommand's callback is replaced by the LibTorch runner.
  id->each([sub, &exit_code](const std::string& value) {
    if (!is_torch_id(value)) return;
    sub->callback([sub, value, &exit_code] { exit_code = run_torch_experiment(value, read_options(sub)); });
  });
}

Registrar reg("experiment-torch", [](CLI::App& app, int& exit_code) {
  experiments::register_lm_experiments();
  extend_experiment(app, exit_code);  // when cmd_experiment.cpp registered first
  app.preparse_callback([&app, &exit_code](std::size_t) { extend_experiment(app, exit_code); });
});

}  // namespace
}  // namespace svattn::cli
