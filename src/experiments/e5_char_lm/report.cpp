// E5's report: tables, plots, Markdown and the descriptive keys of E5.json, from the typed result
// alone (render).
#include "experiments/e5_char_lm/e5_char_lm.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "common.h"
#include "internal.h"
#include "experiments/framework/report_builder.h"
#include "lm_run_checks.h"
#include "svattn/errors.h"
#include "experiments/framework/statistics.h"
#include "svattn/lm/position_eval.h"
#include "svattn/lm/trainer.h"

namespace svattn::experiments::e5_char_lm {

using nlohmann::json;
using detail::number_or_null;

namespace {

std::vector<double> test_bpc(const std::vector<Run>& runs) {
  std::vector<double> v;
  for (const auto& r : runs) v.push_back(r.test_bpc);
  return v;
}

std::string scale_text(const Result& res) {
  const Settings& p = res.settings;
  std::ostringstream scale;
  scale << res.corpus_label << "; " << p.steps << " steps of " << p.batch << " x " << p.seq
        << " bytes per model (equal steps and tokens); " << res.seeds.size()
        << " seeds; CPU, 1 thread; "
        << (p.test_windows > 0 ? std::to_string(p.test_windows) + " evenly spaced test windows"
                               : std::string("the whole test split"));
  return scale.str();
}

std::string per_layer(const std::vector<double>& v, int digits) {
  std::string out;
  for (double x : v)
    out += (out.empty() ? "" : ", ") + (std::isfinite(x) ? fmt_fixed(x, digits) : std::string("–"));
  return out.empty() ? std::string("–") : out;
}

/// The tables and the summary rows, derived from the runs.
struct Derived {
  Table main_table{{"model", "params", "attention state", "test BPC per seed", "mean ± sd",
                    "train time / run", "tokens/s"}};
  Table conv_table{{"model", "seed", "steps", "final valid BPC", "last 20 % improvement",
                    "gate memory share per layer", "|S ∪ E| per layer", "σ per layer"}};
  Table position_table{{"model"}};
  json pairs = json::array();
  std::vector<SummaryRow> summary;
  double worst_last_fifth = std::nan("");
  double train_seconds = 0;
};

void add_model_row(Derived& d, const Pair& pr, const std::vector<Run>& runs, const std::string& state) {
  std::string per;
  double secs = 0, tps = 0;
  for (const auto& r : runs) {
    per += (per.empty() ? "" : ", ") + fmt_fixed(r.test_bpc, 3);
    secs += r.train_seconds / runs.size();
    tps += r.tokens_per_second / runs.size();
  }
  const std::string& name = runs.front().preset;
  d.main_table.add_row({name + (name.rfind("hybrid", 0) == 0 ? " (" + pr.gate + " gate)" : ""),
                        std::to_string(runs.front().parameters), state, per,
                        fmt_mean_sd(test_bpc(runs), 3), detail::duration(secs), fmt_fixed(tps, 0)});
}

void add_convergence_row(Derived& d, const Run& r) {
  const double imp = r.last_fifth_improvement();
  if (std::isfinite(imp) && !(imp <= d.worst_last_fifth)) d.worst_last_fifth = imp;
  d.conv_table.add_row({r.preset, std::to_string(r.seed), std::to_string(r.steps),
                        r.valid_curve.empty() ? "–" : fmt_fixed(r.valid_curve.back().second, 3),
                        std::isfinite(imp) ? fmt_pct(imp, 2) : "–", per_layer(r.layer_gate, 3),
                        per_layer(r.layer_support, 1), per_layer(r.layer_sigma, 3)});
}

// The paper's numbers: 3.22M hybrid vs its window (also beside smaller models), no advantage at
// 10M (chunk-frozen gate); it has no per-token-gate result.
void add_pair_summary(Derived& d, const Pair& pr, const std::vector<double>& hb,
                      const std::vector<double>& sb, const PairedTTest& tt, double rel) {
  const std::string tag = pr.hybrid + " vs " + pr.swa;
  const bool is10m = pr.hybrid.find("10m") != std::string::npos;
  const bool is3m = pr.hybrid.find("3m") != std::string::npos;
  const bool token_gate = pr.gate == "token" && !is10m;
  const std::string paper_bpc = token_gate ? "not reported (chunk-frozen gate only)"
                                : is10m    ? "no advantage"
                                : is3m     ? "2.178 vs 2.383"
                                           : "(3.22M) 2.178 vs 2.383";
  d.summary.push_back({"test BPC, " + tag + " (mean ± sd, " + std::to_string(hb.size()) + " seeds)",
                       paper_bpc,
                       fmt_mean_sd(hb, 3) + " vs " + fmt_mean_sd(sb, 3)});
  const std::string p_str = std::isfinite(tt.p_two_sided) ? fmt_sci(tt.p_two_sided, 2) : "n/a (n < 2)";
  d.summary.push_back({"relative improvement of the hybrid, " + tag + " (paired t-test p)",
                       token_gate ? "not reported" : is10m ? "none" : "8.6 % (p = 0.001)",
                       fmt_pct(rel, 1) + " (p = " + p_str + ")"});
}

json t_test_json(const PairedTTest& tt) {
  return {{"n", tt.n}, {"mean_difference", tt.mean_difference}, {"sd_difference", tt.sd_difference},
          {"t", number_or_null(tt.t)}, {"dof", tt.dof}, {"p_two_sided", number_or_null(tt.p_two_sided)}};
}

// The hybrid against its memory-off ablation: what the SV memory adds on top of the same local path.
void add_ablation(Derived& d, const PairResult& pr, json& pj) {
  if (pr.ablation.empty()) return;
  const std::vector<double> hb = test_bpc(pr.hybrid), ab = test_bpc(pr.ablation);
  add_model_row(d, pr.pair, pr.ablation, "local path alone (memory off)");
  const PairedTTest tt = paired_t_test(ab, hb);  // positive mean: the memory lowers the BPC
  const double rel = (mean_of(ab) - mean_of(hb)) / mean_of(ab);
  pj["ablation_test_bpc"] = ab;
  pj["relative_improvement_vs_ablation"] = rel;
  pj["paired_t_vs_ablation"] = t_test_json(tt);
  const std::string p_str = std::isfinite(tt.p_two_sided) ? fmt_sci(tt.p_two_sided, 2) : "n/a (n < 2)";
  d.summary.push_back({"what the memory adds: " + pr.pair.hybrid + " vs " + pr.pair.ablation +
                                      " (relative BPC improvement, paired t-test p)",
                       "not reported",
                       fmt_mean_sd(hb, 3) + " vs " + fmt_mean_sd(ab, 3) + ": " + fmt_pct(rel, 1) +
                                    " (p = " + p_str + ")"});
}

void add_pair(Derived& d, const PairResult& pr) {
  const std::vector<double> hb = test_bpc(pr.hybrid), sb = test_bpc(pr.swa), rb = test_bpc(pr.reference);
  for (const auto* set : {&pr.hybrid, &pr.swa, &pr.reference, &pr.ablation})
    for (const auto& r : *set) d.train_seconds += r.train_seconds;
  const PairedTTest tt = paired_t_test(sb, hb);  // positive mean: the hybrid has the lower BPC
  const double rel = (mean_of(sb) - mean_of(hb)) / mean_of(sb);
  double sup = 0;
  for (const auto& r : pr.swa) sup += r.matched_support / pr.swa.size();
  // The hybrid's local width (chunk, or W_loc + chunk - 1 with the sliding local path) is what the
  // window adds the support to (docs/layers.md §3).
  const Run& w0 = pr.swa.front();
  const std::string width =
      std::to_string(w0.window - static_cast<std::int64_t>(std::llround(w0.matched_support)));
  add_model_row(d, pr.pair, pr.hybrid, "local " + width + " + |S ∪ E| ≈ " + fmt_fixed(sup, 1) + " (measured)");
  add_model_row(d, pr.pair, pr.swa,
                "window " + std::to_string(w0.window) + " = local width " + width + " + " + fmt_fixed(sup, 1));
  if (!pr.reference.empty()) add_model_row(d, pr.pair, pr.reference, "full context");
  json pj = {{"hybrid", pr.pair.hybrid}, {"swa", pr.pair.swa}, {"reference", pr.pair.reference},
             {"gate", pr.pair.gate}, {"hybrid_test_bpc", hb}, {"swa_test_bpc", sb},
             {"reference_test_bpc", rb}, {"relative_improvement", rel}, {"paired_t", t_test_json(tt)}};
  add_ablation(d, pr, pj);
  json runs = json::array();
  for (const auto* set : {&pr.hybrid, &pr.swa, &pr.reference, &pr.ablation})
    for (const auto& r : *set) runs.push_back(run_json(r)), add_convergence_row(d, r);
  pj["runs"] = runs;
  d.pairs.push_back(pj);
  add_pair_summary(d, pr.pair, hb, sb, tt, rel);
}

// Every model's runs (each pair's hybrid, window, reference and ablation) in report order.
std::vector<const std::vector<Run>*> model_runs(const Result& res) {
  std::vector<const std::vector<Run>*> out;
  for (const auto& pr : res.pairs)
    for (const auto* set : {&pr.hybrid, &pr.swa, &pr.reference, &pr.ablation})
      if (!set->empty() && !set->front().position_bpc.empty()) out.push_back(set);
  return out;
}

// Mean over seeds of the test BPC at each position within the chunk.
std::vector<double> mean_position_bpc(const std::vector<Run>& runs) {
  std::vector<double> m(runs.front().position_bpc.size(), 0.0);
  for (const auto& r : runs)
    for (std::size_t i = 0; i < m.size() && i < r.position_bpc.size(); ++i)
      m[i] += r.position_bpc[i] / static_cast<double>(runs.size());
  return m;
}

// Positions within the chunk in groups that double: 0, 1, 2–3, 4–7, ..., up to chunk - 1.
std::vector<std::pair<std::size_t, std::size_t>> position_groups(std::size_t period) {
  std::vector<std::pair<std::size_t, std::size_t>> g;
  for (std::size_t lo = 0; lo < period; lo = lo == 0 ? 1 : 2 * lo) g.emplace_back(lo, std::min(period, lo == 0 ? 1 : 2 * lo) - 1);
  return g;
}

// Test BPC by position within the chunk (mean over seeds; every position holds the same number of
// targets when the sequence is a multiple of the chunk): the chunk-local reset shows at position 0.
void add_position_table(Derived& d, const Result& res) {
  const auto sets = model_runs(res);
  if (sets.empty()) return;
  const auto groups = position_groups(sets.front()->front().position_bpc.size());
  std::vector<std::string> cols = {"model"};
  for (const auto& [lo, hi] : groups)
    cols.push_back(lo == hi ? std::to_string(lo) : std::to_string(lo) + "–" + std::to_string(hi));
  cols.push_back("all");
  d.position_table = Table(cols);
  for (const auto* runs : sets) {
    const std::vector<double> m = mean_position_bpc(*runs);
    std::vector<std::string> row = {runs->front().preset};
    for (const auto& [lo, hi] : groups) {
      double sum = 0;
      for (std::size_t i = lo; i <= hi && i < m.size(); ++i) sum += m[i];
      row.push_back(fmt_fixed(sum / static_cast<double>(hi - lo + 1), 3));
    }
    row.push_back(fmt_mean_sd(test_bpc(*runs), 3));
    d.position_table.add_row(row);
  }
}

Derived derive(const Result& res) {
  Derived d;
  for (const auto& pr : res.pairs) add_pair(d, pr);
  add_position_table(d, res);
  const PairResult& first = res.pairs.front();
  if (!first.reference.empty())
    d.summary.push_back({"test BPC, full softmax reference " + first.pair.reference,
                       "not reported",
                       fmt_mean_sd(test_bpc(first.reference), 3)});
  std::vector<double> g;
  for (const auto& r : first.hybrid)
    if (!r.gate_curve.empty()) g.push_back(r.gate_curve.back().second);
  d.summary.push_back({"hybrid gate memory / local split at the end of training",
                       "not reported (gate trains slowly at 10M)",
                       g.empty() ? "n/a"
                                          : fmt_fixed(mean_of(g), 3) + " / " + fmt_fixed(1 - mean_of(g), 3)});
  d.summary.push_back({"largest validation improvement over the last 20 % of training (any run)",
                       "not reported",
                       std::isfinite(d.worst_last_fifth) ? fmt_pct(d.worst_last_fifth, 2) : "n/a"});
  return d;
}

// Validation BPC curves of every model and seed, and the hybrids' gate share during training.
std::vector<PlotResult> plots(const Result& res, const ExperimentOptions& o) {
  LinePlot vc;
  vc.title = "E5 validation BPC (" + res.corpus_label + ")";
  vc.xlabel = "step";
  vc.ylabel = "validation BPC";
  LinePlot gc;
  gc.title = "E5 hybrid gate: memory share during training";
  gc.xlabel = "step";
  gc.ylabel = "mean gate g (memory share)";
  gc.ymin = 0;
  gc.ymax = 1;
  const auto series = [](const std::string& title, const std::vector<std::pair<double, double>>& c) {
    Series s;
    s.title = title;
    for (const auto& [x, y] : c) s.x.push_back(x), s.y.push_back(y);
    return s;
  };
  for (const auto& pr : res.pairs)
    for (const auto* set : {&pr.hybrid, &pr.swa, &pr.reference, &pr.ablation})
      for (const auto& r : *set) {
        const std::string title = r.preset + " seed " + std::to_string(r.seed);
        if (!r.valid_curve.empty()) vc.series.push_back(series(title, r.valid_curve));
        if (!r.gate_curve.empty()) gc.series.push_back(series(title, r.gate_curve));
      }
  LinePlot pc;
  pc.title = "E5 test BPC by position within the chunk (mean over seeds)";
  pc.xlabel = "query position t mod chunk";
  pc.ylabel = "test BPC";
  for (const auto* runs : model_runs(res)) {
    const std::vector<double> m = mean_position_bpc(*runs);
    Series s;
    s.title = runs->front().preset;
    for (std::size_t i = 0; i < m.size(); ++i) s.x.push_back(static_cast<double>(i)), s.y.push_back(m[i]);
    pc.series.push_back(s);
  }
  std::vector<PlotResult> out = {detail::maybe_line_plot(o, "E5_valid_bpc", vc), detail::maybe_line_plot(o, "E5_gate", gc)};
  if (!pc.series.empty()) out.push_back(detail::maybe_line_plot(o, "E5_position_bpc", pc));
  return out;
}

std::string markdown(const Result& res, const Derived& d, const std::vector<PlotResult>& plot_list) {
  const Settings& p = res.settings;
  std::ostringstream md;
  md << "# E5 — character LM: hybrid SV attention vs state-matched sliding window\n\n";
  md << "Preset `" << res.preset << "`, seeds " << res.seeds.front() << "–" << res.seeds.back()
     << ", run time " << detail::duration(res.measure_seconds) << " (training "
     << detail::duration(d.train_seconds) << ") on "
     << res.machine.value("cpu", std::string("unknown CPU")) << " (1 thread per run, "
     << (p.device == "cpu" ? std::max(1, p.workers) : 1) << " run(s) side by side).\n\n";
  md << "Scale: " << scale_text(res) << ". " << p.note << ".\n\n";
  md << "Each seed trains the hybrid first; its sliding-window partner uses window = the hybrid's "
        "local width (its chunk; W_loc + chunk - 1 with the sliding local path) + its measured "
        "average support (last quarter of its training log), so both carry the "
        "same attention state per head. Same seed = same initialisation seed and the same training "
        "batches for every model. Test BPC over the test split (5 % at the end of the corpus).\n\n";
  md << "## Summary (ours beside the paper)\n\n| metric | paper | ours |\n| --- | --- | --- |\n";
  for (const auto& s : d.summary) md << "| " << s.metric << " | " << s.paper << " | " << s.ours << " |\n";
  md << "\n## Test BPC\n\n" << d.main_table.markdown() << "\n";
  md << "## Convergence, gate and support per run\n\nLast 20 % improvement: (validation BPC at the "
        "first evaluation at or after 80 % of the steps − final validation BPC) / the former; the "
        "gate's memory share and |S ∪ E| per head are each layer's values at the last training "
        "record.\n\n"
     << d.conv_table.markdown() << "\n";
  if (d.position_table.rows() > 0)
    md << "## Test BPC by position within the chunk\n\nMean over seeds of the test BPC of the queries "
          "at positions t mod chunk (groups of positions; the chunk-local softmax restarts at 0, "
          "where a query sees only itself locally).\n\n"
       << d.position_table.markdown() << "\n";
  md << "Run directories (checkpoints, metrics.jsonl with the gate's memory/local split per layer): `"
     << res.runs_dir << "`.\n\n";
  md << detail::plots_markdown(plot_list);
  return md.str();
}

}  // namespace

ExperimentResult render(const Result& res, const ExperimentOptions& o) {
  ReportBuilder report(kInfo, res, o);
  const Derived d = derive(res);
  const std::vector<PlotResult> plot_list = plots(res, o);
  for (const auto& pl : plot_list) report.add_plot(pl);
  for (const auto& s : d.summary) report.add_summary(s.metric, s.paper, s.ours);
  const Settings& p = res.settings;
  report.set_data(res.corpus_label + " (split 90/5/5 in order)");
  report.set_scale(scale_text(res));
  report.json("settings") = {{"steps", p.steps}, {"batch", p.batch}, {"seq", p.seq}, {"warmup", p.warmup},
                             {"eval_every", p.eval_every}, {"eval_windows", p.eval_windows},
                             {"test_windows", p.test_windows}, {"seeds", res.seeds}, {"note", p.note}};
  report.json("pairs") = d.pairs;
  report.add_table("test_bpc", d.main_table);
  report.add_table("convergence", d.conv_table);
  report.add_table("position_bpc", d.position_table);
  report.json("train_seconds_total") = d.train_seconds;
  report.json("result") = res.to_json();  // render(Result::from_json(E5.json["result"])) writes this report
  report.md() << markdown(res, d, plot_list);
  return report.write(json::object());
}

}  // namespace svattn::experiments::e5_char_lm
