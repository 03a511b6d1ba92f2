// E6's report: the throughput table, the bar plot and the Markdown of E6.md, from the typed result
// alone (render).
#include <cmath>
#include <sstream>

#include "common.h"
#include "internal.h"
#include "lm_run_checks.h"
#include "svattn/errors.h"
#include "svattn/lm/trainer.h"
#include "experiments/framework/report_builder.h"

namespace svattn::experiments::e6_throughput {

using nlohmann::json;

namespace {

std::string scale_text(const Result& r) {
  std::ostringstream scale;
  scale << "batch " << r.settings.batch << " x " << r.settings.seq << " bytes, " << r.settings.steps
        << " timed steps after " << r.settings.warmup
        << " untimed, untrained models (support as at initialisation); CPU, 1 thread ("
        << r.machine.value("cpu", std::string("unknown CPU")) << ")";
  return scale.str();
}

std::vector<SummaryRow> summary_rows(const Result& r) {
  const Row* hyb = nullptr;
  for (const auto& x : r.rows)
    if (x.preset == "hybrid-3m" || x.preset == "tiny") hyb = &x;
  std::vector<SummaryRow> summary;
  if (hyb == nullptr) return summary;
  const double reference = r.rows.front().tokens_per_second;
  summary.push_back({"hybrid training throughput (" + hyb->preset + ")", "9,125 tokens/s (Apple GPU)",
                     fmt_fixed(hyb->tokens_per_second, 0) + " tokens/s (CPU, 1 thread)"});
  summary.push_back({"hybrid slowdown vs " + r.rows.front().preset, "35.8x",
                     fmt_fixed(reference / hyb->tokens_per_second, 2) + "x"});
  return summary;
}

PlotResult throughput_plot(const Result& r, const ExperimentOptions& o) {
  BarPlot bp;
  bp.title = "E6 training throughput (" + r.preset + ")";
  bp.xlabel = "preset";
  bp.ylabel = "tokens / s";
  bp.groups = {"tokens/s"};
  bp.values = {{}};
  for (const auto& x : r.rows) {
    bp.categories.push_back(x.preset);
    bp.values[0].push_back(x.tokens_per_second);
  }
  if (o.plots) return write_bar_plot(o.out_dir, "E6_throughput", bp);
  PlotResult pr;
  pr.file = "E6_throughput.png";
  pr.note = "plots disabled (--no-plots)";
  return pr;
}

}  // namespace

ExperimentResult render(const Result& r, const ExperimentOptions& o) {
  ReportBuilder report(kInfo, r, o);
  const double reference = r.rows.front().tokens_per_second;  // softmax-3m (tiny: tiny-swa)
  Table t({"preset", "params", "tokens/s", "s / step", "slowdown vs " + r.rows.front().preset,
           "SV forward share", "mean |S ∪ E|"});
  json typed = r.to_json();
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    const Row& x = r.rows[i];
    const double ratio = reference / x.tokens_per_second;
    t.add_row({x.preset, std::to_string(x.parameters), fmt_fixed(x.tokens_per_second, 0),
               fmt_fixed(x.seconds_per_step, 2), fmt_fixed(ratio, 2) + "x",
               x.sv_forward_share ? fmt_pct(*x.sv_forward_share, 0) : "-",
               x.support_mean ? fmt_fixed(*x.support_mean, 1) : "-"});
    typed["rows"][i]["slowdown_vs_reference"] = ratio;
  }
  const std::string scale = scale_text(r);
  report.set_scale(scale);
  report.set_data(r.corpus);
  report.json("reference") = r.rows.front().preset;
  report.add_table("throughput", t);
  const std::vector<SummaryRow> summary = summary_rows(r);
  for (const auto& s : summary) report.add_summary(s.metric, s.paper, s.ours);
  report.add_plot(throughput_plot(r, o));
  std::ostream& md = report.md();
  md << "# E6 — training throughput\n\n";
  md << "Preset `" << r.preset << "`, run time " << detail::duration(r.measure_seconds) << ".\n\nScale: "
     << scale << ". Tokens/s counts full training steps (forward, backward, AdamW) on " << r.corpus
     << "; the CPU is shared with other jobs, so treat ratios as indicative.\n\n";
  md << "## Summary (ours beside the paper)\n\n| metric | paper | ours |\n| --- | --- | --- |\n";
  for (const auto& s : summary) md << "| " << s.metric << " | " << s.paper << " | " << s.ours << " |\n";
  md << "\n## Throughput\n\n" << t.markdown() << "\n" << detail::plots_markdown(report.plots());
  return report.write(typed);
}

}  // namespace svattn::experiments::e6_throughput
