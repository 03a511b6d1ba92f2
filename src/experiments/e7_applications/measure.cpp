// E7's measurement: the fact parts and the patient part into one typed result.
#include "common.h"
#include "internal.h"

namespace svattn::experiments::e7_applications {

Result measure(const ExperimentOptions& o) {
  Result res;
  res.begin(o);
  res.settings = detail::with_overrides(preset_settings(o.preset), kInfo.id, o);
  ensure_dir(o.out_dir);
  const DataDir dir = resolve_data_dir(o.data_dir);
  res.data_dir = dir.path;
  res.data_dir_source = dir.source;
  run_facts(res.settings, o, res);
  run_patients(res.settings, o, dir, res.erasure);
  res.end();
  return res;
}

ExperimentResult run(const ExperimentOptions& o) { return render(measure(o), o); }

}  // namespace svattn::experiments::e7_applications
