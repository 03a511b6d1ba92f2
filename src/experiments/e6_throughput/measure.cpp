// E6's measurement: tokens/s of full training steps (forward, backward, AdamW) of every preset in
// one process (lm::measure_throughput).
#include <cmath>
#include <sstream>

#include "common.h"
#include "internal.h"
#include "lm_run_checks.h"
#include "svattn/errors.h"
#include "svattn/lm/trainer.h"

namespace svattn::experiments::e6_throughput {

using nlohmann::json;

Result measure(const ExperimentOptions& o) {
  Result res;
  res.begin(o);
  lm::set_threads(1);
  res.settings = detail::with_overrides(e6_preset(o.preset), kInfo.id, o);
  const Settings& st = res.settings;
  if (st.presets.empty()) throw SettingError("E6.presets", "needs at least one LM preset");
  const lm::Corpus corpus = lm::Corpus::load({st.corpus, "", o.data_dir});
  res.corpus = corpus.label();
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
  res.end();
  return res;
}


ExperimentResult run(const ExperimentOptions& o) { return render(measure(o), o); }

}  // namespace svattn::experiments::e6_throughput
