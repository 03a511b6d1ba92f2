// E2's report: the tables, plot and Markdown of E2.md and the descriptive keys of E2.json, derived
// from the typed result alone (render).
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common.h"
#include "internal.h"
#include "experiments/framework/report_builder.h"
#include "experiments/report.h"
#include "svattn/types.h"

namespace svattn::experiments::e2_rare_recall {
namespace {

/// The per-budget tables, the recall curves and the per-method JSON.
struct Tabulated {
  Table recall, retrieved, coverage;
  nlohmann::json methods = nlohmann::json::object();
  std::vector<Series> series;
  bool budgets_equal = true;
  explicit Tabulated(const std::vector<std::string>& cols)
      : recall(cols), retrieved(cols), coverage(cols) {}
};

int rare_count(const Settings& p) {
  return std::max(1, static_cast<int>(std::lround(p.rare_share * p.tokens)));
}

/// One method's row of each table, its curve and its JSON.
void tabulate_method(const Result& res, Method m, Tabulated& t) {
  const Settings& p = res.settings;
  std::vector<std::string> rr = {method_label(m)}, rt = {method_label(m)}, rc = {method_label(m)};
  nlohmann::json mj = nlohmann::json::object();
  Series se;
  se.title = method_label(m);
  for (std::size_t bi = 0; bi < p.budgets.size(); ++bi) {
    const int b = p.budgets[bi];
    std::vector<double> rec, ret, cov, kept, support;
    int truncated = 0;
    for (const auto& x : res.outcomes.at(method_name(m))[bi]) {
      rec.push_back(x.recall);
      ret.push_back(x.retrieved);
      cov.push_back(x.coverage);
      kept.push_back(x.kept);
      if (x.support >= 0) support.push_back(x.support);
      truncated += x.truncated ? 1 : 0;
      t.budgets_equal = t.budgets_equal && x.kept == std::min(b, p.tokens);
    }
    const MeanCi mr = mean_ci95(rec), mt = mean_ci95(ret), mc = mean_ci95(cov);
    rr.push_back(fmt_mean_ci(mr));
    rt.push_back(fmt_mean_ci(mt));
    rc.push_back(fmt_mean_ci(mc));
    se.x.push_back(b);
    se.y.push_back(mr.mean);
    se.err.push_back(mr.half_width);
    nlohmann::json bj = {{"recall_mean", mr.mean},          {"recall_ci95", mr.half_width},
                         {"retrieved_mean", mt.mean},       {"retrieved_ci95", mt.half_width},
                         {"pattern_coverage_mean", mc.mean}, {"recall_per_seed", rec},
                         {"retained_counts", kept}};
    if (!support.empty()) {
      bj["support_size_mean"] = mean_of(support);
      bj["truncated_seeds"] = truncated;
    }
    mj[std::to_string(b)] = bj;
  }
  t.recall.add_row(rr);
  t.retrieved.add_row(rt);
  t.coverage.add_row(rc);
  t.methods[method_name(m)] = {{"label", method_label(m)}, {"budgets", mj}};
  t.series.push_back(se);
}

Tabulated tabulate(const Result& res) {
  std::vector<std::string> cols = {"method"};
  for (int b : res.settings.budgets) cols.push_back("B = " + std::to_string(b));
  Tabulated t(cols);
  for (Method m : kMethods) tabulate_method(res, m, t);
  return t;
}

/// SV support size (before truncation) per budget.
Table support_table(const Settings& p, const nlohmann::json& methods) {
  Table support({"budget B", "C = 1/B", "mean |S∪E| (audit)", "seeds truncated to top-α",
                 "mean |S∪E| (bounded)"});
  for (int b : p.budgets) {
    const auto& a = methods["sv"]["budgets"][std::to_string(b)];
    const auto& bd = methods["sv_bounded"]["budgets"][std::to_string(b)];
    support.add_row({std::to_string(b), fmt_sci(1.0 / b), fmt_fixed(a.value("support_size_mean", 0.0), 1),
                     std::to_string(a.value("truncated_seeds", 0)) + "/" + std::to_string(p.seeds),
                     fmt_fixed(bd.value("support_size_mean", 0.0), 1)});
  }
  return support;
}

/// The headline table (every method's recall at the headline budget beside the paper's) and
/// the summary rows.
Table headline_table(const Result& res, ReportBuilder& report) {
  const Settings& p = res.settings;
  const auto hb = static_cast<std::size_t>(
      std::find(p.budgets.begin(), p.budgets.end(), p.headline_budget) - p.budgets.begin());
  Table headline({"method (B = " + std::to_string(p.headline_budget) + ")", "paper", "ours (mean ± 95 % CI)"});
  const std::vector<std::pair<Method, std::string>> rows = {
      {Method::kSv, "0.86"},        {Method::kH2o, "0.32"},
      {Method::kH2oOracle, "0.32 (\"even with oracle queries\")"},
      {Method::kSvBounded, "—"},    {Method::kHeavyHitters, "—"},
      {Method::kSnapKv, "—"},       {Method::kRecency, "—"},
      {Method::kRandom, "—"}};
  for (const auto& [m, paper] : rows) {
    std::vector<double> v;
    const auto& per_budget = res.outcomes.at(method_name(m));
    if (hb < per_budget.size())
      for (const auto& x : per_budget[hb]) v.push_back(x.recall);
    const MeanCi r = mean_ci95(v);
    headline.add_row({method_label(m), paper, fmt_mean_ci(r)});
    report.add_summary("rare-item recall, " + method_label(m) + ", B = " +
                           std::to_string(p.headline_budget),
                       paper, fmt_mean_ci(r), {{"mean", r.mean}, {"ci95", r.half_width}});
  }
  return headline;
}

void add_plot(const Settings& p, const std::vector<Series>& series, ReportBuilder& report) {
  LinePlot lp;
  lp.title = "E2: rare-item recall vs token budget (T = " + std::to_string(p.tokens) + ", " +
             std::to_string(rare_count(p)) + " rare items, " + std::to_string(p.seeds) +
             " seeds, 95 % CI)";
  lp.xlabel = "token budget B";
  lp.ylabel = "share of rare items retained";
  lp.logx = true;
  lp.ymin = 0;
  lp.ymax = 1.05;
  lp.series = series;
  report.add_line_plot("E2_recall_vs_budget", lp);
}

/// The descriptive keys of E2.json beside the typed result: scale, data, settings explained.
void describe(const Result& res, ReportBuilder& report) {
  const Settings& p = res.settings;
  const int rare = rare_count(p);
  report.set_data({{"source", "synthetic (generated in src/experiments/e2_rare_recall.cpp)"}});
  report.set_scale("synthetic skewed streams: T = " + std::to_string(p.tokens) + " tokens, d = " +
                   std::to_string(p.dim) + ", " + std::to_string(p.patterns) +
                   " frequent patterns, " + std::to_string(rare) + " rare items, " +
                   std::to_string(p.seeds) + " seeds, budget B = " +
                   std::to_string(p.headline_budget) + " in the headline");
  report.json("settings") = {
      {"tokens", p.tokens}, {"dim", p.dim}, {"patterns", p.patterns}, {"rare_items", rare},
      {"rare_share", p.rare_share}, {"noise", p.noise}, {"budgets", p.budgets},
      {"headline_budget", p.headline_budget}, {"seeds", p.seeds}, {"kernel", "rbf"},
      {"bandwidth_rule", "median pairwise distance (400 random pairs)"},
      {"sigma_median", median_of(res.sigmas)}, {"C_rule", "C = 1/B"},
      {"ridge", ProblemSettings{}.ridge},
      {"attention", "softmax(q.k / sqrt(d))"}};
}

/// "What was run": the stream and every method, in words.
void what_was_run(const Settings& p, bool budgets_equal, std::ostream& md) {
  const int rare = rare_count(p);
  md << "## What was run\n\n"
     << "A synthetic stream of T = " << p.tokens << " keys in d = " << p.dim << ": " << p.patterns
     << " frequent patterns (centres ~ N(0, I), Zipf frequencies ∝ 1/rank, each copy = centre + "
     << p.noise << "·N(0, I)) and " << rare
     << " rare items (" << fmt_pct(p.rare_share, 0)
     << ", each a fresh N(0, I) key, at random positions). Every method keeps exactly B tokens "
        "(checked: `budgets_equal` = "
     << (budgets_equal ? "true" : "false") << " in E2.json).\n\n"
     << "- **SV certified**: an audit-mode `svattn::Memory` over the whole stream (RBF, σ = median "
        "pairwise distance, C = 1/B so that |S∪E| ≥ B); keeps S∪E, the top-α B of it when larger "
        "(ties to the more recent token). **SV bounded**: the same memory in bounded mode "
        "(reserve tokens evicted during the stream while more than B are held).\n"
     << "- **Heavy hitters / H2O**: causal accumulated attention softmax(q·k/√d) of the observed "
        "queries (query t = key t + noise, attending to keys 0..t). H2O keeps B/2 heavy hitters and "
        "the B/2 most recent tokens; \"heavy hitters\" keeps the top B. **H2O oracle**: scores by the "
        "attention of the real future queries over the whole stream — the "
     << rare << " retrieval queries (rare key + noise) and " << p.tokens - rare
     << " frequent-pattern queries.\n"
     << "- **SnapKV-style**: the last w = clamp(B/4, 1, 32) tokens plus the top B − w earlier tokens "
        "by the attention of the window's queries, max-pooled over 7 positions.\n"
     << "- **Recency**: the last B tokens. **Random**: B uniformly random tokens.\n\n"
     << "**Rare-item recall** = share of rare items among the retained tokens (primary). "
        "**Retrieved** = share of rare items whose retrieval query's nearest retained key "
        "(Euclidean, i.e. the RBF-argmax) is the item itself. Mean ± 95 % CI (Student t) over seeds.\n\n";
}

void write_markdown(const Result& res, const Tabulated& t, const Table& headline,
                    const Table& support, ReportBuilder& report) {
  const Settings& p = res.settings;
  std::ostream& md = report.md();
  md << "# E2 — " << kInfo.title << "\n\n";
  md << "Preset `" << res.preset << "`, seed " << res.seed << ", " << p.seeds << " seeds. Run time "
     << fmt_fixed(res.measure_seconds, 1) << " s on " << res.machine["cpu"].get<std::string>()
     << " (1 thread).\n\n";
  md << "## Paper vs ours (rare-item recall at B = " << p.headline_budget << ")\n\n"
     << headline.markdown() << "\n";
  what_was_run(p, t.budgets_equal, md);
  md << "## Rare-item recall (retained)\n\n" << t.recall.markdown() << "\n";
  md << "## Rare items retrieved by their query\n\n" << t.retrieved.markdown() << "\n";
  md << "## Frequent-pattern coverage (share of patterns with ≥ 1 retained copy)\n\n"
     << t.coverage.markdown() << "\n";
  md << "## SV support size\n\n" << support.markdown() << "\n";
  md << "## Plots\n\n" << detail::plots_markdown(report.plots(), {"Rare-item recall vs budget"}) << "\n";
  md << "## Scale and data, honestly\n\n"
     << "- The paper does not publish its stream generator; this one is ours (documented above and "
        "in docs/experiments.md), so the numbers are comparable in direction, not in value.\n"
     << "- H2O and SnapKV are scored here with plain dot-product softmax attention on the keys "
        "(no trained model); selection happens once, at the end of the stream.\n";
}

}  // namespace

ExperimentResult render(const Result& res, const ExperimentOptions& o) {
  ReportBuilder report(kInfo, res, o);
  const Tabulated t = tabulate(res);
  const Table support = support_table(res.settings, t.methods);
  const Table headline = headline_table(res, report);
  add_plot(res.settings, t.series, report);
  describe(res, report);
  report.json("methods") = t.methods;
  report.json("budgets_equal") = t.budgets_equal;
  report.add_table("headline", headline);
  report.add_table("recall", t.recall);
  report.add_table("retrieved", t.retrieved);
  report.add_table("pattern_coverage", t.coverage);
  report.add_table("sv_support", support);
  write_markdown(res, t, headline, support, report);
  return report.write(res.to_json());
}

}  // namespace svattn::experiments::e2_rare_recall
