// `svattn reproduce`: runs every paper experiment (E1–E7) that has a runner in this build and writes
// one report, DIR/REPORT.md and DIR/REPORT.json, beside the per-experiment files (E?.md, E?.json,
// plots) in the same directory.
//
// Experiments come from the one registry (registry.h): the LibTorch ones (E3, E5, E6) are there
// when svattn_experiments_torch is installed, otherwise their section says what they need;
// nothing is ever filled in for them. The report is rendered from REPORT.json alone
// (render_report_file).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/registry.h"

namespace svattn::experiments {

struct ReproduceOptions {
  /// preset, seed, out_dir, data_dir, learned_keys, overrides (scoped "E?.KEY"), progress and
  /// plots are passed to every experiment.
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
/// REPORT.md rendered from the REPORT.json file at `path` (IoError / FormatError naming it).
std::string render_report_file(const std::string& path);

/// The machine block of the report: CPU model and core count (/proc/cpuinfo), hardware threads,
/// compiler, build type, date (UTC) and the git commit of the source tree ("unknown" outside a
/// checkout; "+dirty" appended when tracked files are modified).
nlohmann::json report_machine();

}  // namespace svattn::experiments
