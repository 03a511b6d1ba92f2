// `svattn reproduce`: the runner registry, the driver that runs E1–E7 and the report writer
// (REPORT.json, and REPORT.md rendered from it).
#include "experiments/reproduce.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "common.h"
#include "support/shell.h"
#include "svattn/errors.h"

namespace svattn::experiments {
namespace {

using nlohmann::json;

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

/// Output of a shell command (first line, trimmed); empty on failure.
std::string command_line(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  const int rc = ::pclose(p);
  if (rc != 0) return "";
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string str_or(const json& j, const char* key, const std::string& fallback) {
  if (j.contains(key) && j[key].is_string()) return j[key].get<std::string>();
  return fallback;
}

double num_or(const json& j, const char* key, double fallback) {
  if (j.contains(key) && j[key].is_number()) return j[key].get<double>();
  return fallback;
}

std::string duration(double s) {
  if (s < 120) return fmt_fixed(s, 1) + " s";
  return fmt_fixed(s / 60.0, 1) + " min";
}

/// Escapes a cell for a Markdown table row.
std::string cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|"; else if (c == '\n') out += ' '; else out += c;
  }
  return out;
}

}  // namespace

json report_machine() {
  json m = detail::machine_info();
  int processors = 0;
  {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("processor", 0) == 0) ++processors;
  }
  m["cores"] = processors > 0 ? processors : static_cast<int>(std::thread::hardware_concurrency());
  {
    std::ifstream in("/proc/meminfo");
    std::string key;
    long kib = 0;
    std::string unit;
    while (in >> key >> kib >> unit) {
      if (key == "MemTotal:") {
        m["memory_gib"] = static_cast<double>(kib) / (1024.0 * 1024.0);
        break;
      }
    }
  }
  struct utsname u {};
  if (::uname(&u) == 0) m["os"] = std::string(u.sysname) + " " + u.release + " " + u.machine;
  m["date"] = utc_now();
  std::string commit = "unknown";
#ifdef SVATTN_SOURCE_DIR
  const std::string src = SVATTN_SOURCE_DIR;
  const std::string head = command_line("git -C " + support::shell_quote(src) + " rev-parse HEAD 2>/dev/null");
  if (!head.empty()) {
    commit = head;
    const std::string dirty =
        command_line("git -C " + support::shell_quote(src) + " status --porcelain --untracked-files=no 2>/dev/null | head -1");
    if (!dirty.empty()) commit += "+dirty";
  }
#endif
  m["git_commit"] = commit;
  return m;
}

namespace {

/// The command line that reproduces this report.
std::string reproduce_command(const ReproduceOptions& ro) {
  const ExperimentOptions& o = ro.experiment;
  std::string command = "svattn reproduce --preset " + o.preset + " --seed " + std::to_string(o.seed) +
                        " --out " + o.out_dir;
  if (!o.data_dir.empty()) command += " --data-dir " + o.data_dir;
  if (!o.learned_keys.empty()) command += " --learned-keys " + o.learned_keys;
  for (const auto& ov : o.overrides) command += " --set " + ov.text();
  if (!ro.only.empty()) {
    std::string ids;
    for (const auto& s : ro.only) ids += (ids.empty() ? "" : ",") + upper(s);
    command += " --only " + ids;
  }
  return command;
}

/// REPORT.json's header: preset, seed, command, machine, data directory.
json report_header(const ReproduceOptions& ro) {
  const ExperimentOptions& o = ro.experiment;
  json report = {{"report", "svattn-reproduce-v1"},
                 {"created", utc_now()},
                 {"preset", o.preset},
                 {"seed", o.seed},
                 {"out_dir", o.out_dir},
                 {"command", reproduce_command(ro)},
                 {"machine", report_machine()}};
  try {
    const DataDir d = resolve_data_dir(o.data_dir);
    report["data_dir"] = {{"path", d.path}, {"source", d.source}};
  } catch (const Error& e) {
    report["data_dir"] = {{"path", ""}, {"source", std::string("none: ") + e.what()}};
  }
  return report;
}

/// Runs one experiment into its REPORT.json entry (status ok, or failed with the reason).
void run_entry(const Experiment& pe, const ExperimentOptions& o, int stage, int stages, json& entry) {
  if (o.progress) {
    std::fprintf(stderr, "[reproduce %d/%d] %s: %s (preset %s)\n", stage, stages, pe.id.c_str(),
                 pe.title.c_str(), o.preset.c_str());
    std::fflush(stderr);
  }
  const Stopwatch sw;
  try {
    const ExperimentResult r = pe.run(o);
    json summary = json::array();
    for (const auto& row : r.summary) {
      json j = row.numbers.is_object() ? row.numbers : json::object();
      j["metric"] = row.metric;
      j["paper"] = row.paper;
      j["ours"] = row.ours;
      summary.push_back(j);
    }
    json plots = json::array();
    for (const auto& p : r.plots) plots.push_back(p.json());
    entry["status"] = "ok";
    entry["runtime_seconds"] = r.runtime_seconds;
    entry["summary"] = summary;
    entry["scale"] = r.scale;
    entry["title"] = r.title.empty() ? pe.title : r.title;
    entry["markdown_file"] = r.markdown_file;
    entry["json_file"] = r.json_file;
    entry["plots"] = plots;
    if (!r.data.is_null()) entry["data"] = r.data;
  } catch (const std::exception& e) {
    entry["status"] = "failed";
    entry["reason"] = e.what();
    entry["runtime_seconds"] = sw.seconds();
  }
  if (o.progress) {
    std::fprintf(stderr, "[reproduce %d/%d] %s %s in %.1f s\n", stage, stages, pe.id.c_str(),
                 entry["status"].get<std::string>().c_str(), sw.seconds());
    std::fflush(stderr);
  }
}

}  // namespace

json reproduce(const ReproduceOptions& ro) {
  const ExperimentOptions& o = ro.experiment;
  o.validate();
  for (const auto& id : ro.only) find_experiment(id);  // unknown ids fail before running
  const Stopwatch total;
  auto selected = [&](const std::string& id) {
    if (ro.only.empty()) return true;
    return std::any_of(ro.only.begin(), ro.only.end(), [&](const std::string& s) { return upper(s) == id; });
  };
  int stages = 0;
  std::vector<std::string> run_ids;
  for (const auto& e : all_experiments())
    if (selected(e.id) && e.available()) ++stages, run_ids.push_back(e.id);
  check_overrides(o, run_ids);  // a bad --set fails before anything runs or is written
  ensure_dir(o.out_dir);
  json report = report_header(ro);
  json exps = json::array();
  std::map<std::string, int> counts;
  int stage = 0;
  for (const auto& pe : all_experiments()) {
    json entry = {{"id", pe.id}, {"title", pe.title}, {"paper_result", pe.paper_result}};
    if (!selected(pe.id)) {
      entry["status"] = "skipped";
      entry["reason"] = "not selected (--only)";
    } else if (!pe.available()) {
      entry["status"] = "not_available";
      entry["reason"] = pe.needs;
    } else {
      run_entry(pe, o, ++stage, stages, entry);
    }
    ++counts[entry["status"].get<std::string>()];
    exps.push_back(entry);
  }
  report["experiments"] = exps;
  report["counts"] = counts;
  report["runtime_seconds"] = total.seconds();
  report["report_markdown"] = "REPORT.md";
  report["report_json"] = "REPORT.json";
  const std::filesystem::path dir(o.out_dir);
  write_json_file((dir / "REPORT.json").string(), report);
  write_text_file((dir / "REPORT.md").string(), report_markdown(report));
  return report;
}

std::string render_report_file(const std::string& path) {
  const std::string text = read_text_file(path);
  const json r = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (r.is_discarded() || !r.is_object()) throw FormatError("'" + path + "' is not a report JSON object");
  try {
    return report_markdown(r);
  } catch (const json::exception& e) {
    throw FormatError("'" + path + "': " + e.what());
  }
}

namespace {

/// The machine table of REPORT.md.
void machine_markdown(const json& r, std::ostream& md) {
  const json& m = r.at("machine");
  md << "| machine | |\n| --- | --- |\n";
  md << "| CPU | " << cell(str_or(m, "cpu", "unknown")) << " |\n";
  md << "| cores | " << (m.contains("cores") ? std::to_string(m["cores"].get<int>()) : "?")
     << " (experiments run on 1 thread) |\n";
  if (m.contains("memory_gib")) md << "| memory | " << fmt_fixed(m["memory_gib"].get<double>(), 1) << " GiB |\n";
  if (m.contains("os")) md << "| OS | " << cell(str_or(m, "os", "")) << " |\n";
  md << "| compiler | " << cell(str_or(m, "compiler", "unknown")) << " |\n";
  md << "| build | " << cell(str_or(m, "build", "unknown")) << " |\n";
  md << "| date (UTC) | " << str_or(m, "date", "?") << " |\n";
  md << "| git commit | `" << str_or(m, "git_commit", "unknown") << "` |\n";
  if (r.contains("data_dir")) {
    md << "| data directory | `" << cell(str_or(r["data_dir"], "path", "")) << "` ("
       << cell(str_or(r["data_dir"], "source", "")) << ") |\n";
  }
  md << "\n";
}

/// The overview table: one row per experiment with its status and headline.
void overview_markdown(const json& r, std::ostream& md) {
  md << "## Overview\n\n| id | experiment | status | run time | paper | ours (headline) |\n"
     << "| --- | --- | --- | --- | --- | --- |\n";
  for (const auto& e : r.at("experiments")) {
    const std::string status = e.at("status").get<std::string>();
    std::string ours = "—";
    if (status == "ok" && !e["summary"].empty()) {
      ours = e["summary"][0]["metric"].get<std::string>() + ": " + e["summary"][0]["ours"].get<std::string>();
    } else if (status == "not_available") {
      ours = "not yet available";
    } else if (status == "failed") {
      ours = "failed (see section)";
    } else if (status == "skipped") {
      ours = "skipped";
    }
    const std::string label = status == "not_available" ? "not yet available" : status;
    md << "| [" << e.at("id").get<std::string>() << "](#" << upper(e.at("id").get<std::string>()) << ") | "
       << cell(e.at("title").get<std::string>()) << " | " << label << " | "
       << (e.contains("runtime_seconds") ? duration(e["runtime_seconds"].get<double>()) : "—") << " | "
       << cell(e.at("paper_result").get<std::string>()) << " | " << cell(ours) << " |\n";
  }
  md << "\n";
}

/// An experiment's plots, captioned by their file names.
void entry_plots_markdown(const json& e, std::ostream& md) {
  if (!e.contains("plots")) return;
  for (const auto& p : e["plots"]) {
    const std::string file = str_or(p, "file", "");
    std::string caption = file;
    if (caption.size() > 4 && caption.compare(caption.size() - 4, 4, ".png") == 0) caption.resize(caption.size() - 4);
    std::replace(caption.begin(), caption.end(), '_', ' ');
    if (p.value("written", false)) {
      md << "![" << caption << "](" << file << ")\n\n";
    } else {
      md << "- *" << caption << "*: " << str_or(p, "note", "not written") << "\n\n";
    }
  }
}

/// An experiment's section: why it did not run, or its files, scale, headline table and plots.
void section_markdown(const json& e, std::ostream& md) {
  const std::string id = e.at("id").get<std::string>();
  const std::string status = e.at("status").get<std::string>();
  md << "<a id=\"" << id << "\"></a>\n\n## " << id << " — " << e.at("title").get<std::string>() << "\n\n";
  md << "**Paper:** " << e.at("paper_result").get<std::string>() << "\n\n";
  if (status == "not_available") {
    md << "**Not yet available.** Needs " << e.at("reason").get<std::string>()
       << ". No numbers are reported for it.\n\n";
    return;
  }
  if (status == "skipped") {
    md << "**Skipped** on request (" << e.at("reason").get<std::string>() << ").\n\n";
    return;
  }
  if (status == "failed") {
    md << "**Failed** after " << duration(e["runtime_seconds"].get<double>()) << ": "
       << e.at("reason").get<std::string>() << "\n\n";
    return;
  }
  md << "Run time " << duration(e["runtime_seconds"].get<double>()) << ".";
  const std::string mdf = str_or(e, "markdown_file", ""), jsf = str_or(e, "json_file", "");
  if (!mdf.empty()) md << " Details: [" << mdf << "](" << mdf << ")";
  if (!jsf.empty()) md << (mdf.empty() ? " Details: " : " · ") << "[" << jsf << "](" << jsf << ")";
  md << "\n\n";
  const std::string scale = str_or(e, "scale", "");
  md << "**Scale and data:** " << (scale.empty() ? "not stated by the runner" : scale) << ".\n\n";
  md << "| metric | paper | ours |\n| --- | --- | --- |\n";
  for (const auto& row : e.at("summary")) {
    md << "| " << cell(row.at("metric").get<std::string>()) << " | " << cell(row.at("paper").get<std::string>())
       << " | " << cell(row.at("ours").get<std::string>()) << " |\n";
  }
  md << "\n";
  entry_plots_markdown(e, md);
}

}  // namespace

// REPORT.md from REPORT.json (also what `--render` of a REPORT.json does).
std::string report_markdown(const json& r) {
  std::ostringstream md;
  const double runtime = num_or(r, "runtime_seconds", 0);
  md << "# svattn — reproduction of the paper's experiments\n\n";
  md << "Preset `" << str_or(r, "preset", "?") << "`, seed " << r.at("seed").get<std::uint64_t>()
     << ", created " << str_or(r, "created", "?") << "; total run time " << duration(runtime) << ".\n\n";
  md << "Reproduce with `" << str_or(r, "command", "svattn reproduce") << "`.\n\n";
  machine_markdown(r, md);
  overview_markdown(r, md);
  for (const auto& e : r.at("experiments")) section_markdown(e, md);
  md << "---\n\nEvery number above is read from `REPORT.json` (each experiment's `summary`), which "
        "copies it from the experiment's own `E?.json`. Experiments marked *not yet available* cannot "
        "run in this build (the section says what they need); nothing is filled in for them.\n";
  return md.str();
}

}  // namespace svattn::experiments
