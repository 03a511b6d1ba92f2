// E6 — training throughput: tokens/s of full training steps (forward, backward, AdamW) of every 3m
// preset in one process, and the ratio to full softmax (lm::measure_throughput). measure() makes
// the typed Result, render() the report from it alone.
#include <cmath>
#include <sstream>

#include "common.h"
#include "lm_run_checks.h"
#include "svattn/errors.h"
#include "svattn/experiments/e6_throughput/e6_throughput.h"
#include "svattn/lm/trainer.h"

namespace svattn::experiments::e6_throughput {

using nlohmann::json;

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Settings, presets, batch, seq, steps, warmup, corpus, device)

namespace {

Settings e6_preset(const std::string& name) {
  if (name == "quick") return {{"softmax-3m", "swa-3m", "linear-3m", "deltanet-3m", "hybrid-3m"}, 4, 256, 2, 1, "enwik8", "cpu"};
  if (name == "tiny") return {{"tiny-swa", "tiny"}, 2, 64, 1, 1, "shakespeare", "cpu"};
  return {{"softmax-3m", "swa-3m", "linear-3m", "deltanet-3m", "hybrid-3m", "hybrid-token-3m"}, 16, 256, 3, 1, "enwik8", "cpu"};
}

json row_json(const Row& r) {
  json x = {{"preset", r.preset},
            {"parameters", r.parameters},
            {"tokens_per_second", r.tokens_per_second},
            {"seconds_per_step", r.seconds_per_step}};
  if (r.sv_forward_share) x["sv_forward_share"] = *r.sv_forward_share;
  if (r.support_mean) x["support_mean"] = *r.support_mean;
  return x;
}

template <typename T>
T field(const json& j, const char* key) {
  return detail::json_field<T>(j, key, "E6 result");
}

Row row_from_json(const json& x) {
  Row r;
  r.preset = field<std::string>(x, "preset");
  r.parameters = field<std::int64_t>(x, "parameters");
  r.tokens_per_second = field<double>(x, "tokens_per_second");
  r.seconds_per_step = field<double>(x, "seconds_per_step");
  if (x.contains("sv_forward_share")) r.sv_forward_share = field<double>(x, "sv_forward_share");
  if (x.contains("support_mean")) r.support_mean = field<double>(x, "support_mean");
  return r;
}

std::string scale_text(const Result& r) {
  std::ostringstream scale;
  scale << "batch " << r.settings.batch << " x " << r.settings.seq << " bytes, " << r.settings.steps
        << " timed steps after " << r.settings.warmup
        << " untimed, untrained models (support as at initialisation); CPU, 1 thread ("
        << r.machine.value("cpu", std::string("unknown CPU")) << ")";
  return scale.str();
}

json summary_json(const Result& r) {
  const Row* hyb = nullptr;
  for (const auto& x : r.rows)
    if (x.preset == "hybrid-3m" || x.preset == "tiny") hyb = &x;
  json summary = json::array();
  if (hyb == nullptr) return summary;
  const double reference = r.rows.front().tokens_per_second;
  summary.push_back({{"metric", "hybrid training throughput (" + hyb->preset + ")"},
                     {"paper", "9,125 tokens/s (Apple GPU)"},
                     {"ours", fmt_fixed(hyb->tokens_per_second, 0) + " tokens/s (CPU, 1 thread)"}});
  summary.push_back({{"metric", "hybrid slowdown vs " + r.rows.front().preset},
                     {"paper", "35.8x"},
                     {"ours", fmt_fixed(reference / hyb->tokens_per_second, 2) + "x"}});
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

json Result::to_json() const {
  json rows_json = json::array();
  for (const auto& r : rows) rows_json.push_back(row_json(r));
  return {{"preset", preset},   {"seed", seed},       {"settings", settings},
          {"data", corpus},     {"machine", machine}, {"created", created},
          {"measure_seconds", measure_seconds},       {"rows", rows_json}};
}

Result Result::from_json(const json& j) {
  Result r;
  r.preset = field<std::string>(j, "preset");
  r.seed = field<std::uint64_t>(j, "seed");
  r.settings = field<Settings>(j, "settings");
  r.corpus = field<std::string>(j, "data");
  r.machine = field<json>(j, "machine");
  r.created = field<std::string>(j, "created");
  r.measure_seconds = field<double>(j, "measure_seconds");
  for (const auto& x : field<json>(j, "rows")) r.rows.push_back(row_from_json(x));
  if (r.rows.empty()) throw FormatError("E6 result: field `rows` is empty");
  return r;
}

json preset(const std::string& name) { return e6_preset(name); }

RangeTable ranges() {
  RangeTable t;
  t.keys = {{"presets", 0, 0, false, 1, 16, lm::preset_names()},
            {"batch", 1, static_cast<double>(lm::TrainHyper::kMaxBatch)},
            {"seq", 2, static_cast<double>(lm::TrainHyper::kMaxSeq)},
            {"steps", 1, 1000000},
            {"warmup", 0, 1000000},
            {"corpus", 0, 0, false, 0, 0, {"enwik8", "shakespeare"}},
            {"device"}};
  t.relations = check_lm_run;
  return t;
}

Result measure(const ExperimentOptions& o) {
  o.validate();
  const Stopwatch total;
  lm::set_threads(1);
  Result res;
  res.preset = o.preset;
  res.seed = o.seed;
  res.settings = detail::with_overrides(e6_preset(o.preset), "E6", o);
  const Settings& st = res.settings;
  if (st.presets.empty()) throw SettingError("E6.presets", "needs at least one LM preset");
  const lm::Corpus corpus = lm::Corpus::load({st.corpus, "", o.data_dir});
  res.corpus = corpus.label();
  res.machine = detail::machine_info();
  res.created = utc_now();
  Progress prog("E6 throughput", static_cast<long>(st.presets.size()), "presets", o.progress);
  for (const auto& name : st.presets) {
    lm::Preset p = lm::make_preset(name);
    p.train.batch = st.batch;
    p.train.seq = st.seq;
    const lm::Throughput t = lm::measure_throughput(p, corpus, st.steps, st.warmup, o.seed, st.device);
    Row row{t.preset, t.parameters, t.tokens_per_second, t.seconds_per_step, {}, {}};
    if (std::isfinite(t.support_mean)) row.sv_forward_share = t.sv_forward_share, row.support_mean = t.support_mean;
    res.rows.push_back(row);
    prog.tick();
  }
  prog.finish();
  res.measure_seconds = total.seconds();
  return res;
}

ExperimentResult render(const Result& r, const ExperimentOptions& o) {
  ensure_dir(o.out_dir);
  const double reference = r.rows.front().tokens_per_second;  // softmax-3m (tiny: tiny-swa)
  Table t({"preset", "params", "tokens/s", "s / step", "slowdown vs " + r.rows.front().preset,
           "SV forward share", "mean |S ∪ E|"});
  json j = r.to_json();
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    const Row& x = r.rows[i];
    const double ratio = reference / x.tokens_per_second;
    t.add_row({x.preset, std::to_string(x.parameters), fmt_fixed(x.tokens_per_second, 0),
               fmt_fixed(x.seconds_per_step, 2), fmt_fixed(ratio, 2) + "x",
               x.sv_forward_share ? fmt_pct(*x.sv_forward_share, 0) : "-",
               x.support_mean ? fmt_fixed(*x.support_mean, 1) : "-"});
    j["rows"][i]["slowdown_vs_reference"] = ratio;
  }
  j["experiment"] = "E6";
  j["title"] = kInfo.title;
  const std::string scale = scale_text(r);
  j["scale"] = scale;
  j["reference"] = r.rows.front().preset;
  j["tables"] = {{"throughput", t.json()}};
  const json summary = summary_json(r);
  j["summary"] = summary;
  const PlotResult pr = throughput_plot(r, o);
  j["plots"] = detail::plots_json({pr});
  j["runtime_seconds"] = r.measure_seconds;

  std::ostringstream md;
  md << "# E6 — training throughput\n\n";
  md << "Preset `" << r.preset << "`, run time " << detail::duration(r.measure_seconds) << ".\n\nScale: "
     << scale << ". Tokens/s counts full training steps (forward, backward, AdamW) on " << r.corpus
     << "; the CPU is shared with other jobs, so treat ratios as indicative.\n\n";
  md << "## Summary (ours beside the paper)\n\n| metric | paper | ours |\n| --- | --- | --- |\n";
  for (const auto& s : summary)
    md << "| " << s["metric"].get<std::string>() << " | " << s["paper"].get<std::string>() << " | "
       << s["ours"].get<std::string>() << " |\n";
  md << "\n## Throughput\n\n" << t.markdown() << "\n" << detail::plots_markdown({pr});
  detail::write_outputs(o, "E6", j, md.str());
  return ExperimentResult::from_json(j);
}

ExperimentResult run(const ExperimentOptions& o) { return render(measure(o), o); }

}  // namespace svattn::experiments::e6_throughput
