// E6 — training throughput: tokens/s of full training steps (forward, backward, AdamW) of every 3m
// preset in one process, and the ratio to full softmax (lm::measure_throughput).
#include <cmath>
#include <sstream>

#include "common.h"
#include "svattn/errors.h"
#include "svattn/experiments/e6_throughput/e6_throughput.h"
#include "svattn/lm/trainer.h"

namespace svattn::experiments::e6_throughput {
namespace {

using nlohmann::json;

struct E6Preset {
  std::vector<std::string> presets;  // LM presets, the first is the reference
  std::int64_t batch = 0, seq = 0, steps = 0, warmup = 0;
  std::string corpus;
  std::string device = "cpu";  // "cuda" on a GPU (scripts/gpu-paper.sh)
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(E6Preset, presets, batch, seq, steps, warmup, corpus, device)

E6Preset e6_preset(const std::string& name) {
  if (name == "quick") return {{"softmax-3m", "swa-3m", "linear-3m", "deltanet-3m", "hybrid-3m"}, 4, 256, 2, 1, "enwik8", "cpu"};
  if (name == "tiny") return {{"tiny-swa", "tiny"}, 2, 64, 1, 1, "shakespeare", "cpu"};
  return {{"softmax-3m", "swa-3m", "linear-3m", "deltanet-3m", "hybrid-3m", "hybrid-token-3m"}, 16, 256, 3, 1, "enwik8", "cpu"};
}

}  // namespace

json preset(const std::string& name) { return e6_preset(name); }

ExperimentResult run(const ExperimentOptions& o) {
  o.validate();
  const Stopwatch total;
  lm::set_threads(1);
  ensure_dir(o.out_dir);
  const E6Preset st = detail::with_overrides(e6_preset(o.preset), "E6", o);
  if (st.presets.empty()) throw SettingError("E6.presets", "needs at least one LM preset");
  const lm::Corpus corpus = lm::Corpus::load({st.corpus, "", o.data_dir});

  std::vector<lm::Throughput> rows;
  Progress prog("E6 throughput", static_cast<long>(st.presets.size()), "presets", o.progress);
  for (const auto& name : st.presets) {
    lm::Preset p = lm::make_preset(name);
    p.train.batch = st.batch;
    p.train.seq = st.seq;
    rows.push_back(lm::measure_throughput(p, corpus, st.steps, st.warmup, o.seed, st.device));
    prog.tick();
  }
  prog.finish();
  const double reference = rows.front().tokens_per_second;  // softmax-3m (tiny: tiny-swa)

  Table t({"preset", "params", "tokens/s", "s / step", "slowdown vs " + rows.front().preset,
           "SV forward share", "mean |S ∪ E|"});
  json rj = json::array();
  for (const auto& r : rows) {
    const double ratio = reference / r.tokens_per_second;
    t.add_row({r.preset, std::to_string(r.parameters), fmt_fixed(r.tokens_per_second, 0),
               fmt_fixed(r.seconds_per_step, 2), fmt_fixed(ratio, 2) + "x",
               std::isfinite(r.support_mean) ? fmt_pct(r.sv_forward_share, 0) : "-",
               std::isfinite(r.support_mean) ? fmt_fixed(r.support_mean, 1) : "-"});
    json x = {{"preset", r.preset}, {"parameters", r.parameters}, {"tokens_per_second", r.tokens_per_second},
              {"seconds_per_step", r.seconds_per_step}, {"slowdown_vs_reference", ratio}};
    if (std::isfinite(r.support_mean)) x["sv_forward_share"] = r.sv_forward_share, x["support_mean"] = r.support_mean;
    rj.push_back(x);
  }
  const lm::Throughput* hyb = nullptr;
  for (const auto& r : rows)
    if (r.preset == "hybrid-3m" || r.preset == "tiny") hyb = &r;

  json j;
  j["experiment"] = "E6";
  j["title"] = "Training throughput";
  j["preset"] = o.preset;
  j["seed"] = o.seed;
  j["machine"] = detail::machine_info();
  j["created"] = utc_now();
  j["data"] = corpus.label();
  std::ostringstream scale;
  scale << "batch " << st.batch << " x " << st.seq << " bytes, " << st.steps << " timed steps after "
        << st.warmup << " untimed, untrained models (support as at initialisation); CPU, 1 thread ("
        << j["machine"]["cpu"].get<std::string>() << ")";
  j["scale"] = scale.str();
  j["rows"] = rj;
  j["reference"] = rows.front().preset;
  j["tables"] = {{"throughput", t.json()}};
  json summary = json::array();
  if (hyb) {
    summary.push_back({{"metric", "hybrid training throughput (" + hyb->preset + ")"},
                       {"paper", "9,125 tokens/s (Apple GPU)"},
                       {"ours", fmt_fixed(hyb->tokens_per_second, 0) + " tokens/s (CPU, 1 thread)"}});
    summary.push_back({{"metric", "hybrid slowdown vs " + rows.front().preset},
                       {"paper", "35.8x"},
                       {"ours", fmt_fixed(reference / hyb->tokens_per_second, 2) + "x"}});
  }
  j["summary"] = summary;
  BarPlot bp;
  bp.title = "E6 training throughput (" + o.preset + ")";
  bp.xlabel = "preset";
  bp.ylabel = "tokens / s";
  bp.groups = {"tokens/s"};
  bp.values = {{}};
  for (const auto& r : rows) bp.categories.push_back(r.preset), bp.values[0].push_back(r.tokens_per_second);
  PlotResult pr;
  if (o.plots) {
    pr = write_bar_plot(o.out_dir, "E6_throughput", bp);
  } else {
    pr.file = "E6_throughput.png";
    pr.note = "plots disabled (--no-plots)";
  }
  j["plots"] = detail::plots_json({pr});
  j["runtime_seconds"] = total.seconds();

  std::ostringstream md;
  md << "# E6 — training throughput\n\n";
  md << "Preset `" << o.preset << "`, run time " << detail::duration(total.seconds()) << ".\n\nScale: "
     << scale.str() << ". Tokens/s counts full training steps (forward, backward, AdamW) on "
     << corpus.label() << "; the CPU is shared with other jobs, so treat ratios as indicative.\n\n";
  md << "## Summary (ours beside the paper)\n\n| metric | paper | ours |\n| --- | --- | --- |\n";
  for (const auto& s : summary)
    md << "| " << s["metric"].get<std::string>() << " | " << s["paper"].get<std::string>() << " | "
       << s["ours"].get<std::string>() << " |\n";
  md << "\n## Throughput\n\n" << t.markdown() << "\n" << detail::plots_markdown({pr});
  detail::write_outputs(o, "E6", j, md.str());
  return ExperimentResult::from_json(j);
}

}  // namespace svattn::experiments::e6_throughput
