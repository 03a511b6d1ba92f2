// E4's report: tables, plots, Markdown and the descriptive keys of E4.json, from the typed result
// alone (render).
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "common.h"
#include "internal.h"
#include "experiments/framework/report_builder.h"
#include "experiments/icu.h"
#include "experiments/report.h"
#include "svattn/types.h"

namespace svattn::experiments::e4_icu {
namespace {

std::string pct_label(double f) { return fmt_fixed(100.0 * f, 0) + " %"; }

double pooled_share(const Tally& t) {
  return t.critical_total > 0 ? t.critical_retained / static_cast<double>(t.critical_total)
                              : std::nan("");
}

std::string rules_text(const CriticalityDefinition& d) {
  std::string t = d.min_rules > 1 ? "≥ " + std::to_string(d.min_rules) + " of: " : "any of: ";
  for (std::size_t k = 0; k < d.rules.size(); ++k)
    t += (k ? ", " : "") + std::string(d.rules[k].label);
  return t;
}

// The criticality sweep of one dataset: a definition × budget table (pooled shares, the upper
// bound beside every cell, SV as a share of it) and its JSON.
std::string sweep_markdown(const DatasetResult& r, const Settings& p, nlohmann::json* out) {
  std::vector<std::string> cols = {"definition", "critical hours", "B"};
  for (Method m : kMethods) cols.push_back(method_label(m));
  cols.insert(cols.end(), {"upper bound", "SV / bound", "SV − best other"});
  Table t(cols);
  *out = nlohmann::json::array();
  const auto& defs = criticality_definitions();
  for (std::size_t d = 0; d < defs.size(); ++d) {
    const auto& def = r.sweep[d];
    const double prevalence =
        r.hours > 0 ? static_cast<double>(def.critical_hours) / static_cast<double>(r.hours) : 0.0;
    nlohmann::json fj = nlohmann::json::object();
    for (double f : p.fractions) {
      const auto& cell = def.cells.at(f);
      std::vector<std::string> row = {defs[d].name, fmt_pct(prevalence), pct_label(f)};
      nlohmann::json mj = nlohmann::json::object();
      double best_other = -1;
      for (Method m : kMethods) {
        const Tally& mt = cell.methods.at(m);
        const double share = pooled_share(mt);
        row.push_back(fmt_fixed(share, 3));
        const MeanCi ci = mean_ci95(mt.per_stay);
        mj[method_name(m)] = {{"pooled_share", share},
                              {"per_stay_mean", ci.mean},
                              {"per_stay_ci95", ci.half_width},
                              {"stays", ci.n}};
        if (m != Method::kSv && m != Method::kSvBounded) best_other = std::max(best_other, share);
      }
      const double sv = pooled_share(cell.methods.at(Method::kSv));
      const double bound = pooled_share(cell.upper);
      row.push_back(fmt_fixed(bound, 3));
      row.push_back(bound > 0 ? fmt_fixed(sv / bound, 3) : "—");
      row.push_back((sv >= best_other ? "+" : "") + fmt_fixed(sv - best_other, 3));
      t.add_row(row);
      fj[fmt_fixed(f, 2)] = {{"methods", mj},
                             {"upper_bound", bound},
                             {"sv_over_bound", bound > 0 ? sv / bound : std::nan("")},
                             {"sv_minus_best_other", sv - best_other}};
    }
    out->push_back({{"definition", defs[d].name},
                    {"clinical", defs[d].clinical},
                    {"rules", rules_text(defs[d])},
                    {"critical_hours", def.critical_hours},
                    {"prevalence", prevalence},
                    {"stays_with_critical", def.stays_with_critical},
                    {"fractions", fj}});
  }
  return "Criticality sweep (pooled share of critical hours retained; \"critical hours\" is the "
         "definition's prevalence among all hours; the upper bound keeps min(B, critical) of each "
         "stay's critical hours; \"SV − best other\" is SV certified minus the best of the "
         "label-blind baselines):\n\n" +
         t.markdown() + "\n";
}

/// A tally's row cells, curve point and JSON at one fraction.
struct Cell {
  double share;
  MeanCi ci;
};

Cell cell_of(const Tally& t) { return {pooled_share(t), mean_ci95(t.per_stay)}; }

/// One dataset's method tables (pooled share and per-stay mean at every fraction), curves and
/// JSON; the headline rows at the headline fraction.
struct DatasetTables {
  Table pooled, per_stay;
  nlohmann::json methods = nlohmann::json::object();
  std::vector<Series> series;
  explicit DatasetTables(const std::vector<std::string>& cols) : pooled(cols), per_stay(cols) {}
};

std::string paper_of(Method m) {
  return m == Method::kSv ? "0.80" : m == Method::kHeavyHitters ? "0.05" : "—";
}

/// A method's row of both tables, its curve and JSON; its headline row and summary line.
void method_rows(const Settings& p, const DatasetResult& r, Method m, DatasetTables& t,
                 Table& headline, ReportBuilder& report, bool& budgets_equal) {
  std::vector<std::string> rp = {method_label(m)}, rs = {method_label(m)};
  Series se;
  se.title = method_label(m);
  nlohmann::json fj = nlohmann::json::object();
  for (double f : p.fractions) {
    const Tally& tally = r.tallies.at(m).at(f);
    const Cell c = cell_of(tally);
    rp.push_back(fmt_fixed(c.share, 3));
    rs.push_back(fmt_mean_ci(c.ci));
    se.x.push_back(100.0 * f);
    se.y.push_back(c.share);
    budgets_equal = budgets_equal && tally.retained_tokens == tally.budget_tokens;
    fj[fmt_fixed(f, 2)] = {{"pooled_share", c.share},
                           {"per_stay_mean", c.ci.mean},
                           {"per_stay_ci95", c.ci.half_width},
                           {"stays", c.ci.n},
                           {"critical_retained", tally.critical_retained},
                           {"critical_total", tally.critical_total},
                           {"retained_tokens", tally.retained_tokens},
                           {"budget_tokens", tally.budget_tokens}};
    if (f != p.headline_fraction) continue;
    headline.add_row({r.source, method_label(m), paper_of(m), fmt_fixed(c.share, 3), fmt_mean_ci(c.ci)});
    report.add_summary("critical hours retained, " + r.name + ", " + method_label(m) + ", B = " +
                           pct_label(f) + " of each stay",
                       paper_of(m), fmt_fixed(c.share, 3),
                       {{"pooled_share", c.share},
                        {"per_stay_mean", c.ci.mean},
                        {"per_stay_ci95", c.ci.half_width}});
  }
  t.pooled.add_row(rp);
  t.per_stay.add_row(rs);
  t.methods[method_name(m)] = {{"label", method_label(m)}, {"fractions", fj}};
  t.series.push_back(se);
}

/// The upper bound's row (labels known: keep min(B, critical) of each stay's critical hours).
void upper_bound_rows(const Settings& p, const DatasetResult& r, DatasetTables& t,
                      Table& headline) {
  const std::string label = "upper bound (labels known: keep min(B, critical))";
  std::vector<std::string> rp = {label}, rs = {label};
  Series se;
  se.title = "upper bound (labels known)";
  nlohmann::json fj = nlohmann::json::object();
  for (double f : p.fractions) {
    const Cell c = cell_of(r.upper.at(f));
    rp.push_back(fmt_fixed(c.share, 3));
    rs.push_back(fmt_mean_ci(c.ci));
    se.x.push_back(100.0 * f);
    se.y.push_back(c.share);
    fj[fmt_fixed(f, 2)] = {{"pooled_share", c.share}, {"per_stay_mean", c.ci.mean},
                           {"per_stay_ci95", c.ci.half_width}};
    if (f == p.headline_fraction)
      headline.add_row({r.source, label, "—", fmt_fixed(c.share, 3), fmt_mean_ci(c.ci)});
  }
  t.pooled.add_row(rp);
  t.per_stay.add_row(rs);
  t.methods["upper_bound"] = {{"label", label}, {"fractions", fj}};
  t.series.push_back(se);
}

/// Hours meeting each threshold, as a table and as JSON.
Table reasons_table(const DatasetResult& r, nlohmann::json& reasons_json) {
  Table reasons({"threshold", "hours meeting it", "share of all hours"});
  reasons_json = nlohmann::json::object();
  for (std::size_t k = 0; k < critical_thresholds().size(); ++k) {
    const long c = r.reason_counts[k];
    reasons.add_row({critical_thresholds()[k].label, std::to_string(c),
                     fmt_pct(r.hours > 0 ? static_cast<double>(c) / static_cast<double>(r.hours) : 0.0)});
    reasons_json[critical_thresholds()[k].label] = c;
  }
  return reasons;
}

double base_rate(const DatasetResult& r) {
  return r.hours > 0 ? static_cast<double>(r.critical_hours) / static_cast<double>(r.hours) : 0;
}

void add_dataset_plot(const DatasetResult& r, const std::vector<Series>& series,
                      ReportBuilder& report, std::vector<std::string>& captions) {
  LinePlot lp;
  lp.title = "E4: critical hours retained vs budget — " + r.source + " (" +
             std::to_string(r.stays_used) + " stays)";
  lp.xlabel = "budget B (% of the stay's hours)";
  lp.ylabel = "share of critical hours retained (pooled)";
  lp.ymin = 0;
  lp.ymax = 1.05;
  lp.series = series;
  report.add_line_plot("E4_retained_vs_budget_" + r.name, lp);
  captions.push_back("Critical hours retained vs budget, " + r.source);
}

nlohmann::json dataset_report_json(const DatasetResult& r, const DatasetTables& t,
                                   const nlohmann::json& reasons_json, const nlohmann::json& sweep_json) {
  return {{"name", r.name},
          {"source", r.source},
          {"stays_total", r.stays_total},
          {"stays_used", r.stays_used},
          {"stays_with_critical", r.stays_with_critical},
          {"hours", r.hours},
          {"critical_hours", r.critical_hours},
          {"critical_base_rate", base_rate(r)},
          {"measurements_read", r.rows_read},
          {"measurements_out_of_range", r.rows_out_of_range},
          {"measurements_flagged_error", r.rows_flagged_error},
          {"methods", t.methods},
          {"threshold_hours", reasons_json},
          {"criticality_sweep", sweep_json},
          {"tables", {{"pooled", t.pooled.json()}, {"per_stay", t.per_stay.json()}}},
          {"seconds", r.seconds}};
}

void dataset_markdown(const DatasetResult& r, const Table& reasons, const DatasetTables& t,
                      const std::string& sweep_md, std::ostream& md) {
  md << "### " << r.source << "\n\n"
     << r.stays_used << " of " << r.stays_total << " stays (≥ " << kMinStayHours
     << " hours), " << r.hours << " hours, " << r.critical_hours << " critical ("
     << fmt_pct(base_rate(r)) << "), " << r.stays_with_critical
     << " stays with ≥ 1 critical hour; " << r.rows_read << " measurements read, "
     << r.rows_out_of_range << " dropped as implausible"
     << (r.rows_flagged_error
             ? ", " + std::to_string(r.rows_flagged_error) + " flagged as errors"
             : std::string())
     << ".\n\nHours meeting each threshold:\n\n"
     << reasons.markdown()
     << "\nPooled share of critical hours retained (Σ retained critical / Σ critical over "
        "stays; "
        "the last row is the most any method could keep at that budget):\n\n"
     << t.pooled.markdown()
     << "\nPer-stay share (stays with ≥ 1 critical hour), mean ± 95 % CI:\n\n"
     << t.per_stay.markdown() << "\n"
     << sweep_md;
}

/// Every dataset's section: tables, plot, JSON; the headline rows.
struct Datasets {
  nlohmann::json json = nlohmann::json::array();
  std::ostringstream md;
  std::vector<std::string> captions;
  bool budgets_equal = true;
};

void report_datasets(const Result& res, Table& headline, ReportBuilder& report, Datasets& out) {
  const Settings& p = res.settings;
  std::vector<std::string> cols = {"method"};
  for (double f : p.fractions) cols.push_back("B = " + pct_label(f) + " of stay");
  for (const auto& r : res.datasets) {
    DatasetTables t(cols);
    for (Method m : kMethods) method_rows(p, r, m, t, headline, report, out.budgets_equal);
    upper_bound_rows(p, r, t, headline);
    nlohmann::json reasons_json, sweep_json;
    const Table reasons = reasons_table(r, reasons_json);
    const std::string sweep_md = sweep_markdown(r, p, &sweep_json);
    add_dataset_plot(r, t.series, report, out.captions);
    out.json.push_back(dataset_report_json(r, t, reasons_json, sweep_json));
    dataset_markdown(r, reasons, t, sweep_md, out.md);
  }
}

Table thresholds_table() {
  Table thresholds({"rule", "vital", "MIMIC-III itemids (vitals.csv.gz)", "PhysioNet 2012 parameter"});
  for (const auto& t : critical_thresholds()) {
    std::string items, pn;
    switch (t.vital) {
      case kSpO2: items = "646, 220277"; pn = "SaO2 (arterial, sparse)"; break;
      case kMeanBp: items = "52, 443, 456, 6702, 220052, 220181, 225312"; pn = "MAP, NIMAP"; break;
      case kHeartRate: items = "211, 220045"; pn = "HR"; break;
      case kRespRate: items = "615, 618, 220210, 224690"; pn = "RespRate"; break;
      case kSysBp: items = "51, 442, 455, 6701, 220050, 220179"; pn = "SysABP, NISysABP"; break;
      default: break;
    }
    thresholds.add_row({t.label, vital_name(t.vital), items, pn});
  }
  return thresholds;
}

Table definitions_table() {
  Table definitions({"definition", "clinically", "rules (measured in the hour)"});
  for (const auto& d : criticality_definitions())
    definitions.add_row({d.name, d.clinical, rules_text(d)});
  return definitions;
}

std::string scale_of(const Result& res) {
  std::string t;
  for (const auto& r : res.datasets) {
    t += (t.empty() ? "" : "; ") + r.source + ": " + std::to_string(r.stays_used) + " stays (≥ " +
         std::to_string(kMinStayHours) + " h), " + std::to_string(r.hours) + " hours, " +
         std::to_string(r.critical_hours) + " critical";
  }
  return t + "; headline budget B = " + pct_label(res.settings.headline_fraction) + " of each stay";
}

/// The descriptive keys of E4.json: data, scale, settings explained, and the typed result.
void describe(const Result& res, ReportBuilder& report) {
  const Settings& p = res.settings;
  report.set_data({{"data_dir", res.data_dir}, {"data_dir_source", res.data_dir_source}, {"datasets", p.datasets}});
  report.set_scale(scale_of(res));
  report.json("settings") = {
      {"fractions", p.fractions},
      {"headline_fraction", p.headline_fraction},
      {"budget_rule", "B = max(2, round(f * hours of the stay))"},
      {"min_stay_hours", kMinStayHours},
      {"random_draws", p.random_draws},
      {"kernel", "rbf"},
      {"bandwidth_rule", "median pairwise distance of the stay's keys (400 random pairs)"},
      {"C_rule", "C = 1/B"},
      {"ridge", ProblemSettings{}.ridge},
      {"queries", "each hour's own standardised vector, causal softmax(q.k/sqrt(7))"}};
  report.json("result") = res.to_json();  // render(Result::from_json(E4.json["result"]))
}

void what_was_run(const Settings& p, bool budgets_equal, std::ostream& md) {
  md << "## What was run\n\n"
     << "Each ICU stay (≥ " << kMinStayHours
     << " hours) is one stream of hourly vectors: the mean of each vital's plausible measurements in "
        "the clock hour, carried forward when not measured, standardised with dataset-wide means and "
        "standard deviations (7 dimensions: HR, SBP, DBP, MAP, RR, SpO2, temperature). An hour is "
        "*critical* when a vital measured in that hour meets a threshold below (no imputation for "
        "labels). Every method keeps B = max(2, round(f·hours)) hours of the stay (checked: "
        "`budgets_equal` = "
     << (budgets_equal ? "true" : "false")
     << " in E4.json); the labels are never shown to any method.\n\n"
     << "- **SV certified**: audit-mode `svattn::Memory` over the stay (RBF, σ = median pairwise "
        "distance of the stay's vectors, C = 1/B), keeps S∪E, top-α when larger than B. **SV "
        "bounded**: bounded mode during the stream.\n"
     << "- **Heavy hitters**: top B by causal accumulated attention softmax(q·k/√7) with each hour's "
        "own vector as its query. **H2O**: B/2 heavy hitters + B/2 most recent hours.\n"
     << "- **Recency**: the last B hours. **Random**: B random hours (mean over " << p.random_draws
     << " draws).\n\n";
}

void write_markdown(const Result& res, const Table& headline, const Table& thresholds,
                    const Table& definitions, const Datasets& ds, ReportBuilder& report) {
  const Settings& p = res.settings;
  std::ostream& md = report.md();
  md << "# E4 — " << kInfo.title << "\n\n";
  md << "Preset `" << res.preset << "`, seed " << res.seed << ". Run time " << fmt_fixed(res.measure_seconds, 1) << " s on "
     << res.machine["cpu"].get<std::string>() << " (1 thread). Data: `" << res.data_dir << "` (" << res.data_dir_source
     << ").\n\n";
  md << "## Paper vs ours (B = " << pct_label(p.headline_fraction) << " of each stay's hours)\n\n"
     << headline.markdown() << "\n";
  what_was_run(p, ds.budgets_equal, md);
  md << "### Critical-deterioration thresholds\n\n"
     << thresholds.markdown() << "\n"
     << "Plausibility filter (values outside are dropped as artefacts): HR 20–300, SBP 40–300, DBP "
        "10–200, MAP 20–250, RR 1–80, SpO2 50–100, temperature 25–45 °C.\n\n"
     << "### Criticality sweep: the definitions\n\n"
     << "The main tables use `standard`. The sweep re-scores the same selections (same kept hours "
        "per method and draw) under each definition, so only the labels change between its "
        "rows:\n\n"
     << definitions.markdown() << "\n";
  md << "## Results\n\n" << ds.md.str();
  md << "## Plots\n\n" << detail::plots_markdown(report.plots(), ds.captions) << "\n";
  md << "## Scale and data, honestly\n\n"
     << "- The paper uses MIMIC-IV ICU streams (credentialed); here the open MIMIC-III demo (same "
        "hospital and charting system, 136 stays)"
     << (res.preset == "paper" ? " and PhysioNet/CinC 2012 (8,000 stays, first 48 h; its SpO2 column is "
                               "arterial SaO2 from blood gases, so SpO2 < 90 rarely fires there)"
                             : "")
     << ".\n"
     << "- The paper does not publish its budget or its critical-hour definition; ours are documented "
        "above and in docs/experiments.md. Headline budget: " << pct_label(p.headline_fraction)
     << " of each stay.\n";
}

}  // namespace

ExperimentResult render(const Result& res, const ExperimentOptions& o) {
  ReportBuilder report(kInfo, res, o);
  Table headline({"dataset", "method", "paper", "ours: pooled share", "ours: per-stay mean ± 95 % CI"});
  Datasets ds;
  report_datasets(res, headline, report, ds);
  const Table thresholds = thresholds_table();
  const Table definitions = definitions_table();
  describe(res, report);
  report.json("thresholds") = thresholds.json();
  report.json("datasets") = ds.json;
  report.json("budgets_equal") = ds.budgets_equal;
  report.add_table("headline", headline);
  report.add_table("thresholds", thresholds);
  report.add_table("criticality_definitions", definitions);
  write_markdown(res, headline, thresholds, definitions, ds, report);
  return report.write(nlohmann::json::object());
}

}  // namespace svattn::experiments::e4_icu
