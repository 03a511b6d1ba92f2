// E3's report: tables, plots, Markdown and the descriptive keys of E3.json, from the typed result
// alone (render).
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>

#include "common.h"
#include "internal.h"
#include "experiments/framework/report_builder.h"
#include "svattn/errors.h"
#include "experiments/framework/statistics.h"
#include "svattn/lm/trainer.h"
#include "svattn/torch/model.h"

namespace svattn::experiments::e3_selective_copy {
namespace {

using nlohmann::json;
using detail::number_or_null;

/// The evaluation points of one method as JSON.
json eval_json(const std::vector<EvalPoint>& evs, std::int64_t heads,
               const layers::AttentionConfig& attention) {
  json ev = json::array();
  for (const auto& e : evs) {
    json ej = {{"factor", e.factor},
               {"length", e.length},
               {"recall", e.recall},
               {"outputs", e.outputs},
               {"recall_per_output", e.recall_per_output},
               {"seconds", e.seconds}};
    if (!e.support.empty()) {
      ej["support_per_layer_head"] = e.support;
      ej["support_mean"] = number_or_null(mean_support(e));
      ej["hybrid_state_floats_per_layer"] =
          static_cast<double>(heads) * state_floats_per_head(attention, mean_support(e), e.length);
      ej["distinct_support_per_layer_head"] = e.distinct_support;
      // null for the exact path, which does not count distinct keys
      ej["distinct_support_mean"] = number_or_null(mean_of_layers(e.distinct_support));
      ej["duplicate_alpha_spread"] = e.duplicate_alpha_spread;
      ej["duplicate_support_tokens"] = e.duplicate_support_tokens;
      ej["gate_memory_share"] = e.gate_mean;
      ej["gate_memory_share_per_layer"] = e.gate_per_layer;
    }
    if (!std::isnan(e.partition_agreement)) {
      ej["partition_agreement_vs_exact"] = e.partition_agreement;
      ej["coefficient_error_vs_exact"] = e.coefficient_error;
    }
    ev.push_back(ej);
  }
  return ev;
}

/// Per method: label, heads, parameters, training, state, loss curve and evaluations.
json methods_json(const Settings& p, const SeedRuns& runs) {
  json methods = json::object();
  for (const auto& r : runs.results) {
    json mj;
    mj["label"] = method_of(r).label;
    mj["heads"] = config_of(p, r).attention.n_heads;
    mj["parameters"] = r.parameters;
    mj["train_seconds"] = r.train_seconds;
    mj["final_train_loss"] = r.final_train_loss;
    if (r.reused) mj["reused_saved_model"] = true;
    mj["state_floats_per_layer"] = r.state_per_layer;
    if (method_of(r).type == layers::AttentionType::kSlidingWindow)
      mj["window"] = config_of(p, r).attention.window;
    json curve = json::array();
    for (std::size_t i = 0; i < r.loss_curve.size(); ++i)
      curve.push_back({{"step", r.loss_curve[i].first},
                       {"loss", r.loss_curve[i].second},
                       {"grad_norm", r.grad_norm_curve[i]}});
    mj["loss_curve"] = curve;
    mj["eval"] = eval_json(r.eval, config_of(p, r).attention.n_heads, config_of(p, r).attention);
    if (!r.sigma.empty()) mj["sigma_per_layer_head"] = r.sigma;
    if (!r.eval_exact.empty()) {
      mj["eval_other_path"] =
          eval_json(r.eval_exact, config_of(p, r).attention.n_heads, config_of(p, r).attention);
      mj["eval_other_path_name"] =
          config_of(p, r).attention.hybrid.path == layers::GlobalPath::kBatched ? "exact" : "batched";
      mj["eval_other_path_seconds"] = r.eval_exact_seconds;
    }
    methods[r.method] = mj;
  }
  return methods;
}

/// Recall per method (rows) and padding factor (columns).
Table recall_table(const Settings& p, const SeedRuns& runs) {
  std::vector<std::string> cols = {"method", "heads", "state floats / layer", "params"};
  for (int f : p.factors) cols.push_back(std::to_string(f) + "x");
  Table recall(cols);
  for (const auto& r : runs.results) {
    std::vector<std::string> row = {method_of(r).label, std::to_string(config_of(p, r).attention.n_heads),
                                    method_of(r).type == layers::AttentionType::kSoftmax
                                        ? "context·(d_k+d_v)"
                                        : fmt_fixed(r.state_per_layer, 0),
                                    std::to_string(r.parameters)};
    for (const auto& e : r.eval) row.push_back(fmt_fixed(e.recall, 3));
    recall.add_row(row);
    if (!r.eval_exact.empty()) {
      const bool trained_batched = config_of(p, r).attention.hybrid.path == layers::GlobalPath::kBatched;
      std::vector<std::string> xr = {
          method_of(r).label + (trained_batched ? ", evaluated by the exact path"
                                            : ", evaluated by the batched path"),
          row[1], row[2], row[3]};
      for (const auto& e : r.eval_exact) xr.push_back(fmt_fixed(e.recall, 3));
      recall.add_row(xr);
    }
  }
  return recall;
}

/// The hybrid's support per layer and head, its state and gate per padding.
Table support_table(const Settings& p, const SeedRuns& runs) {
  const MethodResult* hyb = runs.find("hybrid");
  std::vector<std::string> scols = {"padding", "length"};
  for (std::int64_t l = 0; l < p.n_layers; ++l)
    for (std::int64_t h = 0; h < p.n_heads; ++h)
      scols.push_back("L" + std::to_string(l) + "H" + std::to_string(h));
  scols.push_back("mean");
  scols.push_back("distinct keys (mean)");
  scols.push_back("state floats / layer");
  for (std::int64_t l = 0; l < p.n_layers; ++l) scols.push_back("gate L" + std::to_string(l));
  Table supp(scols);
  if (hyb != nullptr) {
    for (const auto& e : hyb->eval) {
      std::vector<std::string> row = {std::to_string(e.factor) + "x", std::to_string(e.length)};
      for (const auto& l : e.support)
        for (double v : l) row.push_back(fmt_fixed(v, 1));
      row.push_back(fmt_fixed(mean_support(e), 1));
      row.push_back(fmt_fixed(mean_of_layers(e.distinct_support), 1));
      // The hybrid's state at this padding, from the support measured at this padding.
      row.push_back(
          fmt_fixed(static_cast<double>(p.n_heads) *
                        state_floats_per_head(config_of(p, *hyb).attention, mean_support(e), e.length),
                    0));
      for (double g : e.gate_per_layer) row.push_back(fmt_fixed(g, 3));
      supp.add_row(row);
    }
  }
  return supp;
}


/// The headline rows: ours beside the paper's (mean ± sd and per-seed values over the seeds).
std::vector<SummaryRow> summary_of(const Settings& p, const std::vector<SeedRuns>& all) {
  const double chance = 1.0 / p.task.symbols;
  const std::size_t last = p.factors.size() - 1;
  auto recall_at_max = [&](const std::string& name) {
    return seeds_cell(over_seeds(all, name, last, recall_of), 3);
  };
  const std::string chance_note = " (chance " + fmt_fixed(chance, 3) + ")";
  const std::string at = " at " + std::to_string(p.factors.back()) + "x training padding" +
                         (all.size() > 1 ? ", " + std::to_string(all.size()) + " seeds" : "");
  std::vector<SummaryRow> summary;
  summary.push_back({"SV hybrid recall" + at,
                     "≈ 0.99",
                     recall_at_max("hybrid")});
  double smin = 1e300, smax = 0, dmin = 1e300, dmax = 0;
  for (const auto& runs : all) {
    const MethodResult* hyb = runs.find("hybrid");
    if (hyb == nullptr) continue;
    for (const auto& e : hyb->eval) {
      for (const auto& l : e.support)
        for (double v : l) smin = std::min(smin, v), smax = std::max(smax, v);
      for (const auto& l : e.distinct_support)
        for (double v : l) dmin = std::min(dmin, v), dmax = std::max(dmax, v);
    }
  }
  std::string support = "not run";
  if (smax > 0) {
    support = fmt_fixed(smin, 1) + "–" + fmt_fixed(smax, 1) + " tokens (C = " + fmt_fixed(p.C, 4) +
              ", so ≥ " + fmt_fixed(1.0 / p.C, 0) + ")";
    if (dmax > 0) support += "; distinct keys " + fmt_fixed(dmin, 1) + "–" + fmt_fixed(dmax, 1);
  }
  summary.push_back({"SV support per head (all paddings)",
                     "11–14 tokens",
                     support});
  summary.push_back({"DeltaNet recall" + at,
                     "chance",
                     recall_at_max("deltanet") + chance_note});
  summary.push_back({"linear attention recall" + at,
                     "chance",
                     recall_at_max("linear") + chance_note});
  std::int64_t wmin = 0, wmax = 0;
  for (const auto& runs : all) {
    wmin = wmin == 0 ? runs.window : std::min(wmin, runs.window);
    wmax = std::max(wmax, runs.window);
  }
  const std::string w =
      wmin == wmax ? std::to_string(wmin) : std::to_string(wmin) + "–" + std::to_string(wmax);
  summary.push_back({"state-matched sliding window (W = " + w + ") recall" + at,
                     "not reported",
                     recall_at_max("swa")});
  if (all.front().find("softmax") != nullptr)
    summary.push_back({"full causal softmax (unbounded state) recall" + at,
                     "not reported",
                     recall_at_max("softmax")});
  return summary;
}

/// Recall vs padding and the training loss curves.
std::vector<PlotResult> e3_plots(const ExperimentOptions& o, const Settings& p,
                                 const std::vector<SeedRuns>& all) {
  const SeedRuns& runs = all.front();
  const double chance = 1.0 / p.task.symbols;
  LinePlot lp;
  lp.title = all.size() > 1 ? "E3 selective copy: recall vs padding (mean of " +
                                  std::to_string(all.size()) + " seeds)"
                            : std::string("E3 selective copy: recall vs padding");
  lp.xlabel = "padding / training padding";
  lp.ylabel = "recall (token accuracy on the k outputs)";
  lp.logx = true;
  lp.ymin = 0;
  lp.ymax = 1.05;
  for (const auto& r : runs.results) {
    Series s;
    s.title = method_of(r).label;
    for (std::size_t fi = 0; fi < r.eval.size(); ++fi)
      s.x.push_back(r.eval[fi].factor),
          s.y.push_back(mean_of(over_seeds(all, r.method, fi, recall_of)));
    lp.series.push_back(s);
  }
  Series ch;
  ch.title = "chance";
  for (int f : p.factors) ch.x.push_back(f), ch.y.push_back(chance);
  lp.series.push_back(ch);
  LinePlot lc;
  lc.title = "E3 training loss (seed " + std::to_string(runs.seed) + ")";
  lc.xlabel = "step";
  lc.ylabel = "cross-entropy on the outputs (nats)";
  for (const auto& r : runs.results) {
    Series s;
    s.title = method_of(r).label;
    for (const auto& [st, l] : r.loss_curve) s.x.push_back(st), s.y.push_back(l);
    lc.series.push_back(s);
  }
  return {detail::maybe_line_plot(o, "E3_recall", lp), detail::maybe_line_plot(o, "E3_loss", lc)};
}

/// E3.md, rendered from the same numbers as E3.json.
/// The tables of a run: the first seed's detail and, with several seeds, the ones over seeds.
struct E3Tables {
  Table recall{{}}, support{{}};                            // first seed
  Table seeds_recall{{}}, per_seed{{}}, seeds_support{{}};  // over the seeds (several only)
  Table outputs{{}};  // the hybrid per seed and output position (chunk 1 only)
};

/// The hybrid per seed and output position at 1x: when training converged (first logged mean
/// loss < 0.1), its bandwidth, and per output its recall, which data symbol it emitted, and the
/// support and gate of the memory its query reads (docs/experiments.md, E3 "Why seeds fail").
Table outputs_table(const Settings& p, const std::vector<SeedRuns>& all) {
  Table t({"seed", "loss < 0.1 at step", "final loss", "σ per layer", "output", "recall",
           "emitted = data symbol 1…k", "|S ∪ E| per layer", "gate memory share per layer"});
  const auto list = [](const std::vector<double>& v, int digits) {
    std::string out;
    for (double x : v) out += (out.empty() ? "" : " / ") + fmt_fixed(x, digits);
    return out;
  };
  for (const auto& runs : all) {
    const MethodResult* h = runs.find("hybrid");
    if (h == nullptr || h->outputs.empty()) continue;
    std::vector<double> sigma;
    for (const auto& l : h->sigma) sigma.push_back(mean_of(l));
    const int conv = steps_to_loss(h->loss_curve, 0.1);
    for (const auto& d : h->outputs)
      t.add_row({std::to_string(runs.seed), conv < 0 ? "not within " + std::to_string(p.steps) : std::to_string(conv),
                 fmt_fixed(h->final_train_loss, 3), list(sigma, 3), std::to_string(d.output),
                 fmt_fixed(d.recall, 3), list(d.predicted_symbol_share, 2), list(d.support_per_layer, 1),
                 list(d.gate_per_layer, 3)});
  }
  return t;
}

/// The section over the seeds (with two or more).
std::string seeds_markdown(const std::vector<SeedRuns>& all, const E3Tables& t) {
  std::ostringstream md;
  md << "## Over " << all.size() << " seeds (mean ± sd)\n\n"
     << "Each seed trains every method from its own initialisation and batches and evaluates on "
        "its own sequences; the sliding window is matched to that seed's hybrid.\n\n"
     << t.seeds_recall.markdown() << "\n### Per seed\n\n"
     << t.per_seed.markdown() << "\n";
  if (all.front().find("hybrid") != nullptr)
    md << "### SV support over the seeds: all keys and distinct keys\n\n"
       << "Distinct keys: support tokens whose key vectors differ bitwise (exact duplicates, e.g. "
          "the padding tokens of layer 0, count once); the last column is the largest "
          "coefficient difference between two support tokens with equal keys of one memory.\n\n"
       << t.seeds_support.markdown() << "\n";
  return md.str();
}

/// The task, the hybrid's settings and the state matching of the first seed, in words.
void setup_markdown(const Settings& p, const SeedRuns& runs, std::ostream& md) {
  const MethodResult* hyb = runs.find("hybrid");
  const MethodResult* lin = runs.find("linear");
  const MethodResult* dn = runs.find("deltanet");
  const double chance = 1.0 / p.task.symbols;
  md << "Task: the input holds " << p.task.k << " data symbols (alphabet " << p.task.symbols
     << ", chance recall " << fmt_fixed(chance, 3)
     << ") at random positions among padding, then a go "
     << "marker and " << p.task.k - 1 << " query tokens; the model must emit the symbols in order. "
     << "Recall = token accuracy on the " << p.task.k << " outputs over " << p.eval_sequences
     << " fresh sequences per padding; padding factor f keeps " << p.task.k << " symbols among "
     << p.task.k << " + f·" << (p.task.prefix - p.task.k) << " positions.\n\n";
  md << "Hybrid: chunk " << p.chunk << ", C = " << fmt_fixed(p.C, 4) << ", " << p.gate
     << " gate (bias init " << fmt_fixed(p.gate_bias, 2) << "), σ init " << fmt_fixed(p.sigma, 3)
     << (p.learn_sigma ? " (learned)" : " (fixed)") << ", "
     << (p.path == "exact"
             ? std::string("exact (certified fp64) path")
             : "batched FISTA path with " + std::to_string(p.fista_iterations) + " iterations")
     << (p.bounded ? ", bounded memory" : "") << ".\n\n";
  if (hyb != nullptr) {
    md << "State matching: the hybrid measured an average support of " << fmt_fixed(runs.support, 2)
       << " tokens per head at the training length";
    if (p.window < 1)
      md << ", so the sliding window is W = chunk + support = " << runs.window;
    else
      md << "; the sliding window was fixed at W = " << runs.window << " by override";
    md << " (" << p.n_heads << " heads, W·(d_k + d_v) floats per head). The hybrid then carries "
       << fmt_fixed(runs.hybrid_state, 0)
       << " floats per layer ((chunk + support)·(d_k + d_v) + support per head). ";
    for (const MethodResult* r : {lin, dn}) {
      if (r == nullptr) continue;
      const auto h = config_of(p, *r).attention.n_heads;
      md << method_of(*r).label << ": " << h << " head(s) of d_k = d_v = " << p.d_model / h
         << ", a fixed " << fmt_fixed(r->state_per_layer, 0) << " floats per layer"
         << (p.recurrent_heads < 1 ? " (the head split whose state is closest to the hybrid's)"
                                   : " (fixed by override)")
         << ". ";
    }
    md << "Recurrent state " << (runs.recurrent_covers ? "≥" : "<")
       << " the hybrid's at the training length. "
       << "The hybrid's support, and so its state, is measured per padding in the support table "
          "below; "
       << "it is not fixed.\n\n";
  }
}

std::string markdown_of(const std::string& preset, const Settings& p,
                        const std::vector<SeedRuns>& all, const std::string& overrides,
                        const std::string& scale, const std::vector<SummaryRow>& summary, const E3Tables& tables,
                        const std::vector<PlotResult>& plots, double runtime,
                        const std::string& cpu) {
  const SeedRuns& runs = all.front();
  const Table& recall = tables.recall;
  const Table& supp = tables.support;
  const MethodResult* hyb = runs.find("hybrid");
  std::ostringstream md;
  md << "# E3 — selective copy with growing padding\n\n";
  md << "Preset `" << preset << "`, ";
  if (all.size() > 1) {
    md << all.size() << " seeds (";
    for (std::size_t i = 0; i < all.size(); ++i) md << (i ? ", " : "") << all[i].seed;
    md << "), " << std::max(1, std::min<int>(p.workers, static_cast<int>(all.size())))
       << " side by side";
  } else {
    md << "seed " << runs.seed;
  }
  md << ", run time " << detail::duration(runtime) << " on " << cpu << " (1 thread per run).\n\n";
  if (!overrides.empty()) md << "Overrides (--set): `" << overrides << "`.\n\n";
  md << "Scale: " << scale << ".\n\n";
  setup_markdown(p, runs, md);
  md << "## Summary (ours beside the paper)\n\n| metric | paper | ours |\n| --- | --- | --- |\n";
  for (const auto& s : summary) md << "| " << s.metric << " | " << s.paper << " | " << s.ours << " |\n";
  if (all.size() > 1)
    md << "\n"
       << seeds_markdown(all, tables) << "## Seed " << runs.seed
       << " in detail\n\nThe state matching above and the tables below are this seed's.\n";
  if (tables.outputs.rows() > 0)
    md << "\n## The hybrid per seed and output (1x)\n\nConvergence: the first logged step whose mean "
          "training loss (over the outputs) is below 0.1. Per output j: recall, the share of "
          "predictions equal to the i-th data symbol (a repeated symbol counts for each index), and "
          "the support and gate of the memory read by its query (mean over heads and sequences).\n\n"
       << tables.outputs.markdown();
  md << "\n## Recall vs padding factor\n\n" << recall.markdown() << "\n";
  if (hyb != nullptr) {
    md << "## SV support |S ∪ E| per layer and head, and the gate's memory share (hybrid)\n\n"
       << supp.markdown() << "\n";
    const auto& f = hyb->eval.front();
    if (!std::isnan(f.partition_agreement))
      md << "Batched vs exact path on the trained keys (" << f.factor
         << "x, 16 sequences): partition agreement " << fmt_fixed(f.partition_agreement, 3)
         << ", max |Δα| " << fmt_sci(f.coefficient_error, 1)
         << "; the evaluation by the other path took " << detail::duration(hyb->eval_exact_seconds)
         << ".\n\n";
  }
  md << "## Training\n\n| method | train time | final loss |\n| --- | ---: | ---: |\n";
  for (const auto& r : runs.results)
    md << "| " << method_of(r).label << " | " << detail::duration(r.train_seconds) << " | "
       << fmt_fixed(r.final_train_loss, 4) << " |\n";
  md << "\n" << detail::plots_markdown(plots);
  return md.str();
}

std::string scale_of(const Result& res) {
  const Settings& p = res.settings;
  std::ostringstream scale;
  scale << "synthetic selective copy: " << p.task.k << " of " << p.task.symbols << " symbols among "
        << p.task.prefix << " training positions, padding up to " << p.factors.back()
        << "x; CharLm d " << p.d_model << ", " << p.n_layers << " layers, " << p.steps
        << " steps of " << p.batch << " sequences; " << res.runs.size()
        << (res.runs.size() == 1 ? " seed" : " seeds") << "; CPU, 1 thread per run";
  return scale.str();
}

// One seed's block of E3.json (the first seed's also at the top level).
json seed_block_json(const Settings& p, const SeedRuns& r) {
  json rj;
  rj["seed"] = r.seed;
  rj["hybrid_average_support"] = number_or_null(r.support);
  rj["hybrid_state_floats_per_layer_at_training_length"] = number_or_null(r.hybrid_state);
  rj["matched_window"] = r.window;
  rj["state_context"] = r.longest;
  rj["recurrent_state_covers_hybrid"] = r.recurrent_covers;
  rj["methods"] = methods_json(p, r);
  return rj;
}

E3Tables tables_of(const Result& res) {
  const Settings& p = res.settings;
  E3Tables t;
  t.recall = recall_table(p, res.runs.front());
  t.support = support_table(p, res.runs.front());
  if (res.runs.size() > 1) {
    t.seeds_recall = seeds_recall_table(p, res.runs);
    t.per_seed = per_seed_recall_table(p, res.runs);
    t.seeds_support = seeds_support_table(p, res.runs);
  }
  t.outputs = outputs_table(p, res.runs);
  return t;
}

void add_tables(const E3Tables& t, bool several_seeds, ReportBuilder& report) {
  report.add_table("recall", t.recall);
  report.add_table("support", t.support);
  report.add_table("outputs", t.outputs);
  if (several_seeds) {
    report.add_table("recall_over_seeds", t.seeds_recall);
    report.add_table("recall_per_seed", t.per_seed);
    report.add_table("support_over_seeds", t.seeds_support);
  }
}

/// The run header of the report: E3's result records no run seed; the first training seed stands
/// for it.
RunHeader header_of(const Result& res) {
  RunHeader h;
  h.preset = res.preset;
  h.seed = res.runs.front().seed;
  h.machine = res.machine;
  h.created = res.created;
  h.measure_seconds = res.measure_seconds;
  return h;
}

/// E3.json's descriptive keys: the task, the settings, the first seed's block at the top level and
/// every seed's under `runs`, and the typed result.
void describe(const Result& res, ReportBuilder& report) {
  const Settings& p = res.settings;
  report.json("seeds") = json::array();
  for (const auto& r : res.runs) report.json("seeds").push_back(r.seed);
  report.set_data("synthetic selective copy (generated in-process)");
  report.json("overrides") = res.overrides;
  report.json("task") = {{"symbols", p.task.symbols},
                         {"k", p.task.k},
                         {"train_prefix", p.task.prefix},
                         {"train_length", p.task.length()},
                         {"chance_recall", 1.0 / p.task.symbols}};
  report.json("settings") = json(p);
  const json first = seed_block_json(p, res.runs.front());
  for (auto it = first.begin(); it != first.end(); ++it) report.json(it.key()) = it.value();
  report.json("runs") = json::array();
  for (const auto& r : res.runs) report.json("runs").push_back(seed_block_json(p, r));
  report.json("result") = res.to_json();  // render(Result::from_json(E3.json["result"])) writes this report
}

}  // namespace

ExperimentResult render(const Result& res, const ExperimentOptions& o) {
  const RunHeader header = header_of(res);
  ReportBuilder report(kInfo, header, o);
  const Settings& p = res.settings;
  const std::string scale = scale_of(res);
  report.set_scale(scale);
  describe(res, report);
  const E3Tables tables = tables_of(res);
  add_tables(tables, res.runs.size() > 1, report);
  const std::vector<SummaryRow> summary = summary_of(p, res.runs);
  for (const auto& s : summary) report.add_summary(s.metric, s.paper, s.ours);
  const std::vector<PlotResult> plots = e3_plots(o, p, res.runs);
  for (const auto& pl : plots) report.add_plot(pl);
  report.md() << markdown_of(res.preset, p, res.runs, res.overrides, scale, summary, tables, plots,
                             res.measure_seconds, res.machine.value("cpu", std::string("unknown CPU")));
  return report.write(json::object());
}

}  // namespace svattn::experiments::e3_selective_copy
