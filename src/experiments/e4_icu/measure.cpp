// E4's measurement: every stay of every dataset, every method's selection at every budget
// fraction, the critical hours retained tallied (docs/experiments.md "E4").
#include <algorithm>
#include <cmath>
#include <map>

#include "common.h"
#include "internal.h"
#include "experiments/icu.h"
#include "experiments/report.h"
#include "experiments/streams.h"

namespace svattn::experiments::e4_icu {
namespace {

int budget_for(double f, int n) { return std::max(2, static_cast<int>(std::lround(f * n))); }

// Adds one stay's outcome to a tally: `retained` critical hours kept out of `critical`.
void add_to(Tally& t, double retained, long critical) {
  t.critical_total += critical;
  t.critical_retained += retained;
  if (critical > 0) t.per_stay.push_back(retained / static_cast<double>(critical));
}

// The critical hours of one stay under each definition, in criticality_definitions() order.
std::vector<std::vector<int>> critical_hours_by_definition(const IcuStay& stay) {
  const auto& defs = criticality_definitions();
  std::vector<std::vector<int>> out(defs.size());
  for (std::size_t i = 0; i < stay.hours.size(); ++i)
    for (std::size_t d = 0; d < defs.size(); ++d)
      if (defs[d].meets(stay.hours[i].measured)) out[d].push_back(static_cast<int>(i));
  return out;
}

/// The dataset's stays as hourly keys (data_file names a missing file and where to get it).
IcuDataset load_dataset(const std::string& name, const DataDir& dir) {
  if (name == "mimic") return load_mimic_vitals(data_file(dir, "mimic-iii-demo/vitals.csv.gz"));
  return load_physionet2012({data_file(dir, "physionet2012/set-a.tar.gz"),
                             data_file(dir, "physionet2012/set-b.tar.gz")});
}

/// One stay's keys and critical hours (standard definition and each definition of the sweep).
struct StayHours {
  int n = 0;
  RowMatrix keys;
  std::vector<int> crit;
  std::vector<std::vector<int>> crit_by_def;
};

/// Stay s's hours, its critical hours and the thresholds they meet, counted into res.
StayHours count_stay(const IcuDataset& data, const IcuKeys& icu, int s, DatasetResult& res) {
  StayHours st;
  const int begin = icu.stay_begin[static_cast<std::size_t>(s)];
  st.n = icu.stay_begin[static_cast<std::size_t>(s) + 1] - begin;
  st.keys = icu.keys.middleRows(begin, st.n);
  for (int i = 0; i < st.n; ++i)
    if (icu.critical[static_cast<std::size_t>(begin + i)]) st.crit.push_back(i);
  for (const auto& h : data.stays[static_cast<std::size_t>(s)].hours) {
    const std::vector<std::string> why = critical_reasons(h.measured);
    for (std::size_t k = 0; k < critical_thresholds().size(); ++k) {
      if (std::find(why.begin(), why.end(), critical_thresholds()[k].label) != why.end()) {
        ++res.reason_counts[k];
      }
    }
  }
  res.hours += st.n;
  res.critical_hours += static_cast<long>(st.crit.size());
  if (!st.crit.empty()) ++res.stays_with_critical;
  st.crit_by_def = critical_hours_by_definition(data.stays[static_cast<std::size_t>(s)]);
  for (std::size_t d = 0; d < st.crit_by_def.size(); ++d) {
    res.sweep[d].critical_hours += static_cast<long>(st.crit_by_def[d].size());
    if (!st.crit_by_def[d].empty()) ++res.sweep[d].stays_with_critical;
  }
  return st;
}

/// Every method's selection of the stay at budget fraction f (random: p.random_draws draws from
/// rng), the retained critical hours tallied under every definition, and the upper bound.
void select_at_fraction(const StayHours& st, double f, const Settings& p, SelectionProblem sp,
                        Rng& rng, DatasetResult& res) {
  const int n = st.n, b = budget_for(f, n);
  const auto upper_bound = [&](const std::vector<int>& c) {
    return std::min<double>(b, static_cast<double>(c.size()));
  };
  add_to(res.upper[f], upper_bound(st.crit), static_cast<long>(st.crit.size()));
  for (std::size_t d = 0; d < st.crit_by_def.size(); ++d) {
    const auto& c = st.crit_by_def[d];
    add_to(res.sweep[d].cells[f].upper, upper_bound(c), static_cast<long>(c.size()));
  }
  sp.budget = b;
  for (Method m : kMethods) {
    Tally& t = res.tallies[m][f];
    const int draws = m == Method::kRandom ? p.random_draws : 1;
    double retained_crit = 0;
    std::vector<double> retained_by_def(st.crit_by_def.size(), 0.0);
    for (int dr = 0; dr < draws; ++dr) {
      sp.seed = rng.next();
      const Selection sel = select_tokens(m, sp);
      std::vector<char> kept(static_cast<std::size_t>(n), 0);
      for (int k : sel.kept) kept[static_cast<std::size_t>(k)] = 1;
      for (int c : st.crit) retained_crit += kept[static_cast<std::size_t>(c)];
      for (std::size_t d = 0; d < st.crit_by_def.size(); ++d)
        for (int c : st.crit_by_def[d]) retained_by_def[d] += kept[static_cast<std::size_t>(c)];
      if (dr == 0) t.retained_tokens += static_cast<long>(sel.kept.size());
    }
    t.budget_tokens += std::min(b, n);
    add_to(t, retained_crit / draws, static_cast<long>(st.crit.size()));
    for (std::size_t d = 0; d < st.crit_by_def.size(); ++d) {
      add_to(res.sweep[d].cells[f].methods[m], retained_by_def[d] / draws,
             static_cast<long>(st.crit_by_def[d].size()));
    }
  }
}

DatasetResult run_dataset(const std::string& name, const Settings& p, const ExperimentOptions& o,
                          const DataDir& dir) {
  const Stopwatch watch;
  DatasetResult res;
  res.name = name;
  res.reason_counts.assign(critical_thresholds().size(), 0);
  res.sweep.assign(criticality_definitions().size(), DatasetResult::Definition{});
  const IcuDataset data = load_dataset(name, dir);
  res.source = data.source;
  res.rows_read = data.rows_read;
  res.rows_out_of_range = data.rows_out_of_range;
  res.rows_flagged_error = data.rows_flagged_error;
  const IcuKeys icu = icu_keys(data);
  res.stays_total = icu.stays();
  std::vector<int> stays;
  for (int s = 0; s < icu.stays(); ++s) {
    const int n = icu.stay_begin[static_cast<std::size_t>(s) + 1] - icu.stay_begin[static_cast<std::size_t>(s)];
    if (n >= kMinStayHours) stays.push_back(s);
    if (p.max_stays > 0 && static_cast<int>(stays.size()) >= p.max_stays) break;
  }
  res.stays_used = static_cast<int>(stays.size());
  for (auto& def : res.sweep) {  // every cell exists, also when no stay is long enough
    for (double f : p.fractions)
      for (Method m : kMethods) def.cells[f].methods[m];
  }
  Progress progress("E4 " + name, static_cast<long>(stays.size()), "stays", o.progress);
  for (int s : stays) {
    const StayHours st = count_stay(data, icu, s, res);
    Rng rng(derive_seed(o.seed, detail::name_hash(name) + static_cast<std::uint64_t>(s)));
    SelectionProblem sp;
    sp.sv.kernel.type = KernelType::kRbf;
    sp.sv.kernel.bandwidth = median_pairwise_distance(st.keys, 400, rng);
    const Eigen::VectorXd causal = causal_accumulated_attention(st.keys, st.keys);
    sp.keys = &st.keys;
    sp.queries = &st.keys;  // each hour's query is its own vector
    sp.causal_scores = &causal;
    for (double f : p.fractions) select_at_fraction(st, f, p, sp, rng, res);
    progress.tick();
  }
  progress.finish();
  res.seconds = watch.seconds();
  return res;
}

}  // namespace

Result measure(const ExperimentOptions& o) {
  Result res;
  res.begin(o);
  res.settings = detail::with_overrides(preset_settings(o.preset), kInfo.id, o);
  const DataDir dir = resolve_data_dir(o.data_dir);
  res.data_dir = dir.path;
  res.data_dir_source = dir.source;
  for (const auto& ds : res.settings.datasets)
    res.datasets.push_back(run_dataset(ds, res.settings, o, dir));
  res.end();
  return res;
}

ExperimentResult run(const ExperimentOptions& o) { return render(measure(o), o); }

}  // namespace svattn::experiments::e4_icu
