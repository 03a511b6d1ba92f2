// `svattn reproduce`: runs every paper experiment (E1–E7) that has a runner in this build and writes
// one report, DIR/REPORT.md and DIR/REPORT.json, beside the per-experiment files (E?.md, E?.json,
// plots) in the same directory.
//
// Runners. E1, E2, E4 and E7 are built in. Experiments that need trained models (E3 selective copy,
// E5 character LM, E6 training throughput) plug in by registering a runner before reproduce() is
// called, e.g. from a translation unit of the executable:
//
//   static svattn::experiments::RunnerRegistrar e5("E5", [](const ExperimentOptions& o) { ... });
//
// A runner writes its files into o.out_dir and returns the JSON contract of experiments.h: at
// least `summary` (array of {metric, paper, ours} strings) and `runtime_seconds`; `plots`
// ({file, written, note}), `markdown_file`, `json_file`, `scale` (one line: data and scale) and
// `data` are used when present. An experiment without a runner gets a "not yet available" section
// with the reason; nothing is ever filled in for it.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "svattn/experiments/experiments.h"

namespace svattn::experiments {

using ExperimentRunner = std::function<nlohmann::json(const ExperimentOptions&)>;

/// One experiment of the paper (SPEC §11): id, title, the paper's result, and what a runner needs
/// (the reason printed while none is registered).
struct PaperExperiment {
  std::string id;
  std::string title;
  std::string paper_result;
  std::string needs;
};
/// E1 … E7 in order.
const std::vector<PaperExperiment>& paper_experiments();

/// Registers (or replaces) the runner of a paper experiment id ("E1" … "E7"); throws
/// InvalidArgument for another id or an empty runner.
void register_runner(const std::string& id, ExperimentRunner runner);
/// Removes a registered runner (built-in ones too); no-op when none is registered.
void unregister_runner(const std::string& id);
bool has_runner(const std::string& id);
/// The registered runner of an id, or an empty function.
ExperimentRunner find_runner(const std::string& id);

struct RunnerRegistrar {
  RunnerRegistrar(const char* id, ExperimentRunner runner) { register_runner(id, std::move(runner)); }
};

struct ReproduceOptions {
  /// preset, seed, out_dir, data_dir, learned_keys, progress, plots are passed to every runner.
  ExperimentOptions experiment;
  /// Run only these ids (empty = all of E1 … E7). The others get a "skipped on request" section.
  std::vector<std::string> only;
};

/// Runs the experiments in order, one progress line per stage on stderr, and writes REPORT.json
/// and REPORT.md (rendered from the JSON by report_markdown). An experiment that throws is reported
/// as failed with its error; the others still run. Returns the report JSON: `created`, `preset`,
/// `seed`, `machine` (cpu, cores, compiler, build, git commit), `runtime_seconds`, `command`,
/// `experiments` (one object per id: id, title, paper_result, status "ok" | "not_available" |
/// "failed" | "skipped", reason, runtime_seconds, scale, summary, plots, markdown_file, json_file),
/// `counts` (per status) and `report_markdown` / `report_json` (file names).
nlohmann::json reproduce(const ReproduceOptions& options);

/// REPORT.md from a report JSON alone: every number it prints is a string field of the JSON.
std::string report_markdown(const nlohmann::json& report);

/// The machine block of the report: CPU model and core count (/proc/cpuinfo), hardware threads,
/// compiler, build type, date (UTC) and the git commit of the source tree ("unknown" outside a
/// checkout; "+dirty" appended when tracked files are modified).
nlohmann::json report_machine();

}  // namespace svattn::experiments
