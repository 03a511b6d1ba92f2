// E1's report: tables, plots, Markdown and the descriptive keys of E1.json, from the typed result
// alone (render).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include "common.h"
#include "svattn/batch_solver.h"
#include "svattn/errors.h"
#include "experiments/e1_forgetting/e1_forgetting.h"
#include "experiments/registry.h"
#include "experiments/icu.h"
#include "experiments/report.h"
#include "experiments/streams.h"
#include "svattn/io.h"
#include "svattn/memory.h"
#include "svattn/readout.h"
#include "internal.h"
#include "experiments/framework/report_builder.h"

namespace svattn::experiments::e1_forgetting {
namespace {

/// Histogram bins of log10 deviations: "exactly 0", then decades 1e-17 .. 1e0, then ">= 1".
std::vector<std::string> hist_labels() {
  std::vector<std::string> l = {"exactly 0", "<1e-16"};
  for (int e = -16; e < 0; ++e) l.push_back("1e" + std::to_string(e));
  l.push_back(">=1");
  return l;
}

std::vector<double> histogram(const std::vector<double>& v) {
  std::vector<double> h(hist_labels().size(), 0.0);
  for (double x : v) {
    std::size_t bin;
    if (x == 0.0) {
      bin = 0;
    } else if (x < 1e-16) {
      bin = 1;
    } else if (x >= 1.0 || !std::isfinite(x)) {
      bin = h.size() - 1;
    } else {
      const int e = static_cast<int>(std::floor(std::log10(x)));  // -16 .. -1
      bin = static_cast<std::size_t>(2 + (e + 16));
    }
    h[bin] += 1;
  }
  return h;
}

std::string median_cell(const std::vector<double>& v) { return v.empty() ? "n/a" : fmt_sci(median_of(v)); }
std::string max_cell(const std::vector<double>& v) { return v.empty() ? "n/a" : fmt_sci(max_of(v)); }

// ------------------------------------------------------------------------- the report
// Everything below reads the Result only: no data, no solving.

double rate(const std::vector<Comparison>& cs, bool Comparison::*field) {
  if (cs.empty()) return std::nan("");
  long k = 0;
  for (const auto& c : cs) k += (c.*field) ? 1 : 0;
  return static_cast<double>(k) / static_cast<double>(cs.size());
}

std::vector<double> collect(const std::vector<Comparison>& cs, double Comparison::*field,
                            bool only_mass = false) {
  std::vector<double> v;
  for (const auto& c : cs)
    if (!only_mass || c.removed_mass > 0) v.push_back(c.*field);
  return v;
}

/// Every deletion of the streams that ran, stream by stream.
std::vector<Comparison> all_comparisons(const Result& res) {
  std::vector<Comparison> all;
  for (const auto& s : res.streams)
    if (s.status == "ok") all.insert(all.end(), s.comparisons.begin(), s.comparisons.end());
  return all;
}

bool learned_pending(const Result& res) {
  return std::any_of(res.streams.begin(), res.streams.end(), [](const StreamResult& s) {
    return s.name == "learned" && s.status != "ok";
  });
}

/// A table and its twin in E1.json.
struct TableJson {
  Table table;
  nlohmann::json json;
};

/// A stream's deletions as its row of the per-stream table and its entry of E1.json's `streams`.
struct StreamStats {
  double pm = 0, he = 0;  // partition match, hash identical rates
  std::vector<double> ddec, dro, dal, dz, dzo, dm;
  double t_rem = 0, t_re = 0;  // median remove / retrain seconds
  long repairs = 0, fallbacks = 0;
};

StreamStats stream_stats(const std::vector<Comparison>& cs) {
  StreamStats st;
  st.pm = rate(cs, &Comparison::partition_equal);
  st.he = rate(cs, &Comparison::hash_equal);
  st.ddec = collect(cs, &Comparison::ddecision);
  st.dro = collect(cs, &Comparison::dreadout);
  st.dal = collect(cs, &Comparison::dalpha);
  st.dz = collect(cs, &Comparison::decay_ddecision, true);
  st.dzo = collect(cs, &Comparison::decay_dreadout, true);
  st.dm = collect(cs, &Comparison::mult_ddecision, true);
  st.t_rem = median_of(collect(cs, &Comparison::remove_seconds));
  st.t_re = median_of(collect(cs, &Comparison::retrain_seconds));
  for (const auto& c : cs) {
    st.fallbacks += c.fallbacks;
    st.repairs += c.repairs;
  }
  return st;
}

nlohmann::json stream_summary_json(const StreamResult& s, const StreamStats& st) {
  return {{"n", s.n}, {"d", s.d}, {"sigma_median", s.sigma_median}, {"C", s.C},
          {"trials", s.trials}, {"deletions", s.comparisons.size()}, {"partition_match_rate", st.pm},
          {"hash_identical_rate", st.he},
          {"median_max_abs_ddecision", median_of(st.ddec)}, {"worst_max_abs_ddecision", max_of(st.ddec)},
          {"median_max_abs_dreadout", median_of(st.dro)}, {"worst_max_abs_dreadout", max_of(st.dro)},
          {"worst_max_abs_dalpha", max_of(st.dal)},
          {"decay_zero", {{"median_max_abs_ddecision", median_of(st.dz)},
                          {"worst_max_abs_ddecision", max_of(st.dz)},
                          {"median_max_abs_dreadout", median_of(st.dzo)},
                          {"deletions_with_removed_mass", st.dz.size()}}},
          {"decay_mult", {{"median_max_abs_ddecision", median_of(st.dm)},
                          {"worst_max_abs_ddecision", max_of(st.dm)}}},
          {"median_remove_seconds", st.t_rem}, {"median_retrain_seconds", st.t_re},
          {"repairs", st.repairs}, {"batch_fallbacks", st.fallbacks}, {"seconds", s.seconds}};
}

TableJson per_stream(const Result& res) {
  TableJson t{Table({"stream", "n", "d", "σ (median)", "C", "trials", "deletions", "partition match",
                     "hash identical", "median max|Δf|", "worst max|Δf|", "worst max|Δo|",
                     "worst max|Δα|", "decay: median max|Δf|", "decay: worst max|Δf|",
                     "mult-decay: median max|Δf|", "repairs / fallbacks", "retrain / remove time"}),
              nlohmann::json::array()};
  for (const auto& s : res.streams) {
    nlohmann::json sj = {{"name", s.name}, {"description", s.description}, {"status", s.status}};
    if (s.status != "ok") {
      sj["reason"] = s.pending_reason;
      t.table.add_row({s.name, "–", "–", "–", "–", "–", "–", s.pending_reason, "–", "–", "–", "–",
                       "–", "–", "–", "–", "–", "–"});
      t.json.push_back(sj);
      continue;
    }
    const StreamStats st = stream_stats(s.comparisons);
    t.table.add_row({s.name, std::to_string(s.n), std::to_string(s.d), fmt_fixed(s.sigma_median, 3),
                     fmt_sci(s.C), std::to_string(s.trials), std::to_string(s.comparisons.size()),
                     fmt_pct(st.pm), fmt_pct(st.he), median_cell(st.ddec), max_cell(st.ddec),
                     max_cell(st.dro), max_cell(st.dal), median_cell(st.dz), max_cell(st.dz),
                     median_cell(st.dm),
                     std::to_string(st.repairs) + " / " + std::to_string(st.fallbacks),
                     fmt_fixed(st.t_rem > 0 ? st.t_re / st.t_rem : std::nan(""), 1) + "×"});
    sj.update(stream_summary_json(s, st));
    t.json.push_back(sj);
  }
  return t;
}

TableJson per_kind(const std::vector<Comparison>& all) {
  TableJson t{Table({"deletion", "deletions", "mean tokens removed", "partition match",
                     "hash identical", "median max|Δf|", "worst max|Δf|", "decay: median max|Δf|",
                     "decay: worst max|Δf|"}),
              nlohmann::json::object()};
  for (const auto& sc : kScenarios) {
    std::vector<Comparison> cs;
    for (const auto& c : all)
      if (c.scenario == sc) cs.push_back(c);
    if (cs.empty()) continue;
    double mean_removed = 0;
    for (const auto& c : cs) mean_removed += c.removed;
    mean_removed /= static_cast<double>(cs.size());
    const auto ddec = collect(cs, &Comparison::ddecision);
    const auto dz = collect(cs, &Comparison::decay_ddecision);
    t.table.add_row({sc, std::to_string(cs.size()), fmt_fixed(mean_removed, 1),
                     fmt_pct(rate(cs, &Comparison::partition_equal)),
                     fmt_pct(rate(cs, &Comparison::hash_equal)), median_cell(ddec), max_cell(ddec),
                     median_cell(dz), max_cell(dz)});
    t.json[sc] = {{"deletions", cs.size()},
                  {"partition_match_rate", rate(cs, &Comparison::partition_equal)},
                  {"hash_identical_rate", rate(cs, &Comparison::hash_equal)},
                  {"median_max_abs_ddecision", median_of(ddec)},
                  {"worst_max_abs_ddecision", max_of(ddec)},
                  {"decay_zero_median_max_abs_ddecision", median_of(dz)}};
  }
  return t;
}

/// Paper vs ours; the json is E1.json's `summary`.
/// The headline table and E1.json's `summary` rows.
struct Headline {
  Table table;
  std::vector<SummaryRow> summary;
};

Headline headline(const Result& res, const std::vector<Comparison>& all) {
  auto of_streams = [&](auto pred) {
    std::vector<Comparison> cs;
    for (const auto& c : all)
      if (pred(c.stream)) cs.push_back(c);
    return cs;
  };
  const auto gi = of_streams([](const std::string& s) {
    return s.rfind("gaussian", 0) == 0 || s.rfind("icu", 0) == 0;
  });
  const auto learned = of_streams([](const std::string& s) { return s == "learned"; });
  const auto neardup = of_streams([](const std::string& s) { return s == "near_duplicate"; });
  const auto dz_all = collect(all, &Comparison::decay_ddecision, true);
  const auto dm_all = collect(all, &Comparison::mult_ddecision, true);
  const auto& names = res.selected_streams;
  const bool learned_selected = std::find(names.begin(), names.end(), "learned") != names.end();
  Headline t{Table({"metric", "paper", "ours"}), {}};
  auto add = [&](const std::string& metric, const std::string& paper, const std::string& ours) {
    t.table.add_row({metric, paper, ours});
    t.summary.push_back({metric, paper, ours});
  };
  add("partition match (all streams)", "98–100 %",
      all.empty() ? "n/a" : fmt_pct(rate(all, &Comparison::partition_equal)));
  add("bit-identical state hash (all streams)", "not reported",
      all.empty() ? "n/a" : fmt_pct(rate(all, &Comparison::hash_equal)));
  add("median max|Δf|, Gaussian + ICU keys", "~1e-9", median_cell(collect(gi, &Comparison::ddecision)));
  add("median max|Δf|, learned keys", "~1e-13",
      !learned_selected      ? "not run (stream not selected)"
      : learned_pending(res) ? "pending (needs LibTorch or --learned-keys)"
                             : median_cell(collect(learned, &Comparison::ddecision)));
  add("worst max|Δf|, near-duplicate stream", "1.1e-2", max_cell(collect(neardup, &Comparison::ddecision)));
  add("worst max|Δf|, all streams", "1.1e-2 (near-duplicates)",
      max_cell(collect(all, &Comparison::ddecision)));
  add("coefficient decay (zeroing), max|Δf| median [worst]", "1e-2 … 1e-1",
      dz_all.empty() ? "n/a" : fmt_sci(median_of(dz_all)) + " [" + fmt_sci(max_of(dz_all)) + "]");
  add("multiplicative decay (α_D × 0.1), max|Δf| median [worst]", "—",
      dm_all.empty() ? "n/a" : fmt_sci(median_of(dm_all)) + " [" + fmt_sci(max_of(dm_all)) + "]");
  return t;
}

std::vector<PlotResult> deviation_plots(const std::vector<Comparison>& all, const ExperimentOptions& o) {
  std::vector<PlotResult> plots;
  BarPlot bp;
  bp.title = "E1: max |Δ decision function| vs retraining from scratch, " +
             std::to_string(all.size()) + " deletions, all streams";
  bp.xlabel = "max over probes of |Δf|; bin 1eK = [1eK, 1eK+1), first bin = exactly 0";
  bp.ylabel = "deletions";
  bp.categories = hist_labels();
  bp.groups = {"decremental (svattn)", "coefficient decay (zeroing)", "multiplicative decay"};
  bp.values = {histogram(collect(all, &Comparison::ddecision)),
               histogram(collect(all, &Comparison::decay_ddecision, true)),
               histogram(collect(all, &Comparison::mult_ddecision, true))};
  bp.note = "exact zeros are counted in the first bin (a log axis cannot show 0); decay counts exclude reserve-only deletions";
  plots.push_back(detail::maybe_bar_plot(o, "E1_decision_deviation_hist", bp));
  bp.title = "E1: max |Δ readout| vs retraining from scratch";
  bp.xlabel = "max over probes and components of |Δo|; bin 1eK = [1eK, 1eK+1), first bin = exactly 0";
  bp.values = {histogram(collect(all, &Comparison::dreadout)),
               histogram(collect(all, &Comparison::decay_dreadout, true)),
               histogram(collect(all, &Comparison::mult_dreadout, true))};
  plots.push_back(detail::maybe_bar_plot(o, "E1_readout_deviation_hist", bp));
  return plots;
}

nlohmann::json settings_json(const Result& res) {
  return {{"n", res.settings.n}, {"trials_per_stream", res.trials}, {"kernel", "rbf"},
          {"bandwidth_rule", "median pairwise distance of the trial's keys (400 random pairs)"},
          {"C_rule", "C = 1 / (0.1 n)"}, {"ridge", ProblemSettings{}.ridge}, {"mode", "audit"},
          {"value_dim", kValueDim}, {"probes", kProbesOnKeys + kProbesAround},
          {"decay_factor", kDecayFactor}, {"scenarios", kScenarios}};
}

/// One line of data and scale for the report writer (`svattn reproduce`).
std::string scale_line(const Result& res, std::size_t deletions) {
  std::string list;
  int run = 0;
  for (const auto& s : res.streams) {
    list += (list.empty() ? "" : ", ") + s.name + (s.status == "ok" ? "" : " (" + s.status + ")");
    run += s.status == "ok" ? 1 : 0;
  }
  return std::to_string(run) + " streams × " + std::to_string(res.trials) + " trials, n = " +
         std::to_string(res.settings.n) + " tokens per trial, " + std::to_string(deletions) +
         " deletions; streams: " + list;
}

/// E1.json's descriptive keys: data, scale, settings, per-stream and per-deletion numbers, every
/// comparison, and the typed result the report was rendered from.
void describe(const Result& res, const std::vector<Comparison>& all, const TableJson& streams,
              const TableJson& kinds, ReportBuilder& report) {
  nlohmann::json comps = nlohmann::json::array();
  for (const auto& c : all) comps.push_back(c.to_json());
  nlohmann::json data = nlohmann::json::object();
  if (!res.data_dir.empty()) data = {{"data_dir", res.data_dir}, {"data_dir_source", res.data_dir_source}};
  report.set_data(data);
  report.set_scale(scale_line(res, all.size()));
  report.json("settings") = settings_json(res);
  report.json("streams") = streams.json;
  report.json("by_deletion") = kinds.json;
  report.json("comparisons") = comps;
  report.json("result") = res.to_json();  // render(Result::from_json(E1.json["result"])) writes this report
}

std::string what_was_run_md() {
  std::ostringstream md;
  md << "## What was run\n\n"
     << "Each trial streams n keys one at a time into an audit-mode `svattn::Memory` (RBF kernel, "
        "σ = median pairwise distance of the trial's keys, C = 1/(0.1 n), ridge μ = "
     << fmt_sci(ProblemSettings{}.ridge, 0)
     << ", so the optimum is unique), then, each from a copy of the ingested memory, removes: one "
        "random margin token, one error token, one reserve token, a random set of max(2, n/20) "
        "tokens, and one record (ICU: all hours of one stay; other streams: 10 consecutive tokens). "
        "Each result is compared with `svattn::solve_batch` (SMO + canonical refinement) on the "
        "remaining tokens: partition equality, SHA-256 of the canonical state, max |Δα|, and, on "
     << kProbesOnKeys + kProbesAround << " probes (" << kProbesOnKeys << " stream keys + "
     << kProbesAround
     << " Gaussian points around the data), the max |Δ| of the decision function f and of the "
        "readout o (values ~ N(0, I_4)). Both states are evaluated by the same functions, so equal "
        "states give exactly 0.\n\n"
     << "Coefficient-decay baseline (no re-solve): the removed tokens' α are zeroed (or, "
        "multiplicative variant, multiplied by 0.1) and all α renormalised to sum 1; b is refitted "
        "as the mean of K_ii/2 − ((K+μI)α')_i over the surviving margin tokens (generous to the "
        "baseline). Its deviations are reported for deletions that remove coefficient mass "
        "(deleting reserve tokens leaves the state unchanged, so decay is exact there too).\n\n";
  return md.str();
}

/// The count of deletions not bit-identical to retraining, and each one's reproduction folder.
std::string not_identical_md(const std::vector<Comparison>& all) {
  std::vector<const Comparison*> bad;
  for (const auto& c : all)
    if (!c.hash_equal) bad.push_back(&c);
  std::ostringstream md;
  md << "\n**Deletions whose state is not bit-identical to retraining: " << bad.size() << " of "
     << all.size() << ".**";
  if (bad.empty()) return md.str() + "\n";
  md << " Each has a reproduction (tokens, removed ids, settings, `svattn replay` ops and command):\n\n";
  for (const Comparison* c : bad) {
    md << "- `" << c->repro << "`: " << c->removed << " tokens removed, partition "
       << (c->partition_equal ? "equal" : "differs") << ", max|Δα| " << fmt_sci(c->dalpha)
       << ", max|Δf| " << fmt_sci(c->ddecision) << ", max|Δo| " << fmt_sci(c->dreadout) << "\n";
  }
  return md.str();
}

std::string honest_md(const Result& res) {
  std::ostringstream md;
  md << "## Scale and data, honestly\n\n"
     << "- The paper's ICU keys come from MIMIC-IV; here they are hourly vitals of the open "
        "MIMIC-III demo (132 stays)" << (res.preset == "paper" ? " and PhysioNet/CinC 2012 (8,000 stays)" : "")
     << ", standardised (docs/experiments.md, \"ICU data\").\n"
     << "- The paper's learned keys come from its trained LM; "
     << (learned_pending(res) ? "that row is pending: this run had no trained keys (tiny preset, or no LibTorch).\n"
                              : "here they are read from `" + res.learned_keys + "`.\n")
     << "- Trial sizes (n = " << res.settings.n << ") are ours; the paper does not state its n.\n"
     << "- Deviation 0 means bit-identical decision values, not a rounding artefact: see the hash "
        "column.\n";
  return md.str();
}

std::string markdown(const Result& res, const std::vector<Comparison>& all, const Table& streams,
                     const Table& kinds, const Table& head, const std::vector<PlotResult>& plots) {
  std::ostringstream md;
  md << "# E1 — " << kInfo.title << "\n\n";
  md << "Preset `" << res.preset << "`, seed " << res.seed << ", " << res.trials
     << " trials per stream, n = " << res.settings.n
     << " tokens per trial (ICU: whole stays up to n hours). Run time "
     << fmt_fixed(res.measure_seconds, 1) << " s on " << res.machine.at("cpu").get<std::string>()
     << " (1 thread).\n\n";
  md << "## Paper vs ours\n\n" << head.markdown() << "\n";
  md << what_was_run_md();
  md << "## Per stream\n\n" << streams.markdown() << "\n";
  for (const auto& s : res.streams) md << "- `" << s.name << "`: " << s.description << "\n";
  md << not_identical_md(all);
  md << "\n## By deletion kind (all streams)\n\n" << kinds.markdown() << "\n";
  md << "## Plots\n\n"
     << detail::plots_markdown(plots, {"Decision-function deviation histogram",
                                       "Readout deviation histogram"})
     << "\n";
  md << honest_md(res);
  return md.str();
}

}  // namespace

ExperimentResult render(const Result& res, const ExperimentOptions& o) {
  ReportBuilder report(kInfo, res, o);
  const std::vector<Comparison> all = all_comparisons(res);
  const TableJson streams = per_stream(res);
  const TableJson kinds = per_kind(all);
  const Headline head = headline(res, all);
  const std::vector<PlotResult> plots = deviation_plots(all, o);
  for (const auto& p : plots) report.add_plot(p);
  for (const auto& row : head.summary) report.add_summary(row.metric, row.paper, row.ours);
  describe(res, all, streams, kinds, report);
  report.add_table("per_stream", streams.table);
  report.add_table("by_deletion", kinds.table);
  report.add_table("headline", head.table);
  report.md() << markdown(res, all, streams.table, kinds.table, head.table, plots);
  return report.write(nlohmann::json::object());
}

}  // namespace svattn::experiments::e1_forgetting
