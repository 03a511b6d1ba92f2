// E7 (c) patient erasure from the audited store: certificates, equality with a store that never
// saw the patients, a byte scan of its files and a membership probe, against coefficient decay and
// approximate removal (docs/experiments.md "E7").
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <map>
#include <set>
#include <sstream>

#include "common.h"
#include "svattn/errors.h"
#include "experiments/e7_applications/tools.h"
#include "experiments/e7_applications/e7_applications.h"
#include "experiments/registry.h"
#include "experiments/icu.h"
#include "experiments/report.h"
#include "experiments/streams.h"
#include "svattn/memory.h"
#include "svattn/readout.h"
#include "svattn/store.h"
#include "internal.h"

namespace svattn::experiments::e7_applications {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::int64_t record_id_of(const std::string& stay_id, std::int64_t fallback) {
  try {
    std::size_t pos = 0;
    const long long v = std::stoll(stay_id, &pos);
    if (pos == stay_id.size() && v >= 0 && v <= kMaxRecordId) return v;
  } catch (const std::exception&) {
  }
  return fallback;
}

struct Patient {
  std::int64_t record = 0;
  RowMatrix keys;
};

/// The stays in the store (the first `erased` of them, in shuffled order, are erased; the rest
/// stay) and the stays never stored.
struct Cohort {
  std::vector<Patient> members, never;
};

Cohort choose_patients(const Settings& p, const ExperimentOptions& o, const DataDir& dir, ErasureResult& res) {
  const IcuDataset data = load_mimic_vitals(data_file(dir, "mimic-iii-demo/vitals.csv.gz"));
  res.source = data.source;
  const IcuKeys icu = icu_keys(data);
  std::vector<int> eligible;
  for (int s = 0; s < icu.stays(); ++s) {
    const int n = icu.stay_begin[static_cast<std::size_t>(s) + 1] - icu.stay_begin[static_cast<std::size_t>(s)];
    if (n >= kMinStayHours) eligible.push_back(s);
  }
  res.stays_eligible = static_cast<int>(eligible.size());
  if (static_cast<int>(eligible.size()) < p.members + 2 || p.erased < 1 || p.erased >= p.members) {
    throw InvalidArgument("E7 patient erasure needs at least " + std::to_string(p.members + 2) +
                          " ICU stays of >= " + std::to_string(kMinStayHours) + " hours; the data have " +
                          std::to_string(eligible.size()));
  }
  Rng rng(derive_seed(o.seed, detail::name_hash("E7 patients")));
  shuffle_in_place(eligible, rng);
  const int avail_never = static_cast<int>(eligible.size()) - p.members;
  res.members = p.members;
  res.erased = p.erased;
  res.never_seen = p.never_seen > 0 ? std::min(p.never_seen, avail_never) : avail_never;
  res.max_hours = p.max_hours;
  auto patient = [&](int s, std::int64_t fallback) {
    Patient pt;
    const int begin = icu.stay_begin[static_cast<std::size_t>(s)];
    const int n = std::min(p.max_hours, icu.stay_begin[static_cast<std::size_t>(s) + 1] - begin);
    pt.record = record_id_of(data.stays[static_cast<std::size_t>(s)].id, fallback);
    pt.keys = icu.keys.middleRows(begin, n);
    return pt;
  };
  Cohort c;
  for (int i = 0; i < p.members; ++i) c.members.push_back(patient(eligible[static_cast<std::size_t>(i)], i));
  for (int i = 0; i < res.never_seen; ++i) {
    c.never.push_back(patient(eligible[static_cast<std::size_t>(p.members + i)], p.members + i));
  }
  return c;
}

/// 0.25 × the median pairwise distance of the members' pooled hourly keys.
double patient_sigma(const std::vector<Patient>& members, long tokens, const ExperimentOptions& o) {
  RowMatrix pooled(tokens, kNumVitals);
  long r = 0;
  for (const auto& m : members) {
    pooled.middleRows(r, m.keys.rows()) = m.keys;
    r += m.keys.rows();
  }
  Rng srng(derive_seed(o.seed, detail::name_hash("E7 bandwidth")));
  return kPatientSigmaFactor * median_pairwise_distance(pooled, 2000, srng);
}

/// The scores f(q) at every hourly key of the patients ps[from, to).
ScoreGroup scores_of(const std::function<double(const Eigen::VectorXd&)>& f, const std::vector<Patient>& ps,
                     std::size_t from, std::size_t to) {
  ScoreGroup g;
  for (std::size_t i = from; i < to; ++i) {
    std::vector<double> s;
    for (Eigen::Index r = 0; r < ps[i].keys.rows(); ++r) s.push_back(f(ps[i].keys.row(r).transpose()));
    g.scores.push_back(s);
  }
  return g;
}

/// The scores f(q) of the erased, never-seen and present patients.
ProbeScores probe(const std::function<double(const Eigen::VectorXd&)>& f, const Cohort& c, std::size_t ne) {
  return {scores_of(f, c.members, 0, ne), scores_of(f, c.never, 0, c.never.size()),
          scores_of(f, c.members, ne, c.members.size())};
}

RemovalMethod method(const std::string& name, const std::string& label, bool exact) {
  RemovalMethod m;
  m.name = name;
  m.label = label;
  m.exact = exact;
  return m;
}

struct BytePatterns {
  std::vector<std::vector<std::uint8_t>> rows, values;
};

/// Byte patterns: each erased key row (the 56-byte blob the store writes) and each fp64 number of
/// the erased keys; patterns that a retained patient also holds are excluded (they legitimately
/// remain).
BytePatterns byte_patterns(const std::vector<Patient>& members, std::size_t ne, StoreScan& scan) {
  std::set<std::vector<std::uint8_t>> kept_rows, kept_values;
  for (std::size_t i = ne; i < members.size(); ++i) {
    const RowMatrix& k = members[i].keys;
    for (Eigen::Index r = 0; r < k.rows(); ++r) {
      kept_rows.insert(fp64_bytes(k.row(r).data(), kNumVitals));
      for (int c = 0; c < kNumVitals; ++c) kept_values.insert(fp64_bytes(&k(r, c), 1));
    }
  }
  std::set<std::vector<std::uint8_t>> row_set, value_set;
  for (std::size_t i = 0; i < ne; ++i) {
    const RowMatrix& k = members[i].keys;
    for (Eigen::Index r = 0; r < k.rows(); ++r) {
      auto row = fp64_bytes(k.row(r).data(), kNumVitals);
      if (kept_rows.count(row)) {
        ++scan.shared_rows_excluded;
      } else {
        row_set.insert(row);
      }
      for (int c = 0; c < kNumVitals; ++c) {
        auto v = fp64_bytes(&k(r, c), 1);
        if (!kept_values.count(v)) value_set.insert(v);
      }
    }
  }
  BytePatterns b;
  b.rows.assign(row_set.begin(), row_set.end());
  b.values.assign(value_set.begin(), value_set.end());
  scan.row_patterns = b.rows.size();
  scan.value_patterns = b.values.size();
  return b;
}

/// Scans the store's files for the patterns, before (the control) or after the erasure.
void scan_store(const std::string& path, const BytePatterns& pats, bool after, StoreScan& scan) {
  const ByteScan rows = scan_files(store_files(path), pats.rows);
  const ByteScan vals = scan_files(store_files(path), pats.values);
  if (!after) {
    scan.rows_found_before = rows.patterns_found;
    scan.values_found_before = vals.patterns_found;
    scan.bytes_scanned_before = rows.bytes_scanned;
    return;
  }
  scan.rows_found_after = rows.patterns_found;
  scan.values_found_after = vals.patterns_found;
  scan.bytes_scanned_after = rows.bytes_scanned;
  scan.files_with_hits_after = rows.files_with_hits;
  for (const auto& f : vals.files_with_hits) scan.files_with_hits_after.push_back(f);
}

/// Erases the first `ne` members one by one, each with its certificate.
void erase_patients(Store& a, const std::vector<Patient>& members, std::size_t ne, ErasureResult& res,
                    Progress& progress) {
  Stopwatch fw;
  for (std::size_t i = 0; i < ne; ++i) {
    const ForgetResult fr = a.forget_record("icu", members[i].record);
    ++res.certificates;
    const RemovalCertificate& c = fr.certificate;
    if (c.check.performed && c.check.hash_equal) ++res.certificates_hash_equal;
    const bool kkt_ok = c.verify.performed ? c.verify.kkt_ok : c.after.kkt.max_violation <= 1e-9;
    if (kkt_ok) ++res.certificates_kkt_ok;
    if (fr.wal_truncated) ++res.wal_truncated;
    if (i == 0) {
      res.first_certificate = c.to_json();
      res.first_certificate.erase("removed_ids");  // thousands of ids: summarised instead
      res.first_certificate["removed_token_count"] = c.removed_ids.size();
    }
    progress.tick();
  }
  res.forget_seconds_total = fw.seconds();
}

/// The pre-erasure memory restricted to the retained tokens, beside the retrained state (the
/// never-seen store's) on the same tokens, and the retrained answers at every probe key.
struct Retained {
  RowMatrix keys, values;
  Eigen::VectorXd alpha0, alpha_retrained;
  double removed_mass = 0;  // pre-erasure α of the erased tokens
  Eigen::MatrixXd K;
  std::vector<Eigen::VectorXd> probe_keys;  // every hourly key of the members and the never-seen
  std::vector<double> f_ret;
  std::vector<Eigen::VectorXd> o_ret;
};

Retained retained_of(const Memory& before, const State& st, const State& retrained,
                     const std::set<std::int64_t>& erased_ids, const KernelSettings& kern, const Cohort& c) {
  Retained t;
  const TokenSet all = before.tokens();  // ascending id, aligned with st.alpha
  std::vector<int> keep_rows;
  for (int i = 0; i < all.size(); ++i) {
    if (erased_ids.count(record_of(all.ids[static_cast<std::size_t>(i)]))) {
      t.removed_mass += st.alpha[static_cast<std::size_t>(i)];
    } else {
      keep_rows.push_back(i);
    }
  }
  const int nk = static_cast<int>(keep_rows.size());
  t.keys.resize(nk, kNumVitals);
  t.values.resize(nk, kNumVitals);
  t.alpha0.resize(nk);
  t.alpha_retrained.resize(nk);
  bool ids_match = static_cast<int>(retrained.ids.size()) == nk;
  for (int r = 0; r < nk; ++r) {
    const int i = keep_rows[static_cast<std::size_t>(r)];
    t.keys.row(r) = all.keys.row(i);
    t.values.row(r) = all.values.row(i);
    t.alpha0(r) = st.alpha[static_cast<std::size_t>(i)];
    if (ids_match) {
      ids_match = retrained.ids[static_cast<std::size_t>(r)] == all.ids[static_cast<std::size_t>(i)];
      t.alpha_retrained(r) = retrained.alpha[static_cast<std::size_t>(r)];
    }
  }
  if (!ids_match) throw Error("E7: the never-seen store holds other tokens than the erased one");
  t.K = gram(kern, t.keys);
  const Support ret_support = support_from(t.keys, t.values, t.alpha_retrained);
  for (const auto* ps : {&c.members, &c.never})
    for (const auto& pt : *ps)
      for (Eigen::Index r = 0; r < pt.keys.rows(); ++r) t.probe_keys.push_back(pt.keys.row(r).transpose());
  for (const auto& q : t.probe_keys) {
    t.f_ret.push_back(decision_function(kern, ret_support, retrained.b, q));
    t.o_ret.push_back(readout(kern, ret_support, q));
  }
  return t;
}

/// How far the erased store is from the retrained one (exact erasure: 0); the reference shares |Δα|.
void exact_deviation(const Memory& erased_mem, const State& retrained, const Retained& t, RemovalMethod& exact,
                     RemovalMethod& ref) {
  double dd = 0, dr = 0;
  for (std::size_t i = 0; i < t.probe_keys.size(); ++i) {
    dd = std::max(dd, std::abs(erased_mem.decision(t.probe_keys[i]) - t.f_ret[i]));
    dr = std::max(dr, max_abs_diff(erased_mem.readout(t.probe_keys[i]), t.o_ret[i]));
  }
  const State es = erased_mem.state();
  if (es.ids != retrained.ids) throw Error("E7: the erased store holds other tokens than the never-seen store");
  double da = 0;
  for (std::size_t i = 0; i < es.alpha.size(); ++i) da = std::max(da, std::abs(es.alpha[i] - retrained.alpha[i]));
  exact.dalpha = ref.dalpha = da;
  exact.ddecision = dd;
  exact.dreadout = dr;
}

/// Whether the exact store's scores equal the never-seen store's, bit for bit, and their max |Δ|.
void compare_scores(const ProbeScores& exact, const ProbeScores& ref, ErasureResult& res) {
  const auto x = exact.erased.flat(), y = ref.erased.flat();
  const auto x2 = exact.never.flat(), y2 = ref.never.flat();
  const auto x3 = exact.present.flat(), y3 = ref.present.flat();
  double m = 0;
  bool same = x == y && x2 == y2 && x3 == y3;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  for (std::size_t i = 0; i < x2.size(); ++i) m = std::max(m, std::abs(x2[i] - y2[i]));
  for (std::size_t i = 0; i < x3.size(); ++i) m = std::max(m, std::abs(x3[i] - y3[i]));
  res.scores_bit_identical = same;
  res.max_abs_dscore_vs_never_store = m;
}

/// An approximate removal: coefficients `alpha` on the retained tokens, b refitted on the margin;
/// its scores go to `scores`.
RemovalMethod approximate(const std::string& name, const std::string& label, const Eigen::VectorXd& alpha,
                          const Retained& t, const MemorySettings& settings, double b_before, const Cohort& c,
                          std::size_t ne, ProbeScores& scores) {
  const KernelSettings& kern = settings.problem.kernel;
  const double b = refit_offset(t.K, settings.problem.ridge, settings.problem.C, alpha, b_before);
  const Support s = support_from(t.keys, t.values, alpha);
  scores = probe([&](const Eigen::VectorXd& q) { return decision_function(kern, s, b, q); }, c, ne);
  RemovalMethod m = method(name, label, false);
  m.dalpha = (alpha - t.alpha_retrained).cwiseAbs().maxCoeff();
  for (std::size_t i = 0; i < t.probe_keys.size(); ++i) {
    m.ddecision = std::max(m.ddecision, std::abs(decision_function(kern, s, b, t.probe_keys[i]) - t.f_ret[i]));
    m.dreadout = std::max(m.dreadout, max_abs_diff(readout(kern, s, t.probe_keys[i]), t.o_ret[i]));
  }
  return m;
}

/// The membership probe after erasure: exact erasure, the reference, decay and decay + PG steps,
/// each with its AUCs (the scores of exact erasure and of decay are kept for the plots).
void probe_after(const Memory& before, const State& st, const Memory& erased_mem, const Memory& never_mem,
                 const MemorySettings& settings, const Cohort& c, const std::set<std::int64_t>& erased_ids,
                 const Settings& p, std::uint64_t seed, ErasureResult& res) {
  const std::size_t ne = static_cast<std::size_t>(p.erased);
  const State retrained = never_mem.state();
  std::vector<ProbeScores> scores(2 + 1 + p.pg_steps.size());  // aligned with res.methods
  RemovalMethod exact = method("exact", "exact erasure (svattn store)", true);
  RemovalMethod ref = method("never_seen", "store that never saw them (reference)", true);
  scores[0] = probe([&](const Eigen::VectorXd& q) { return erased_mem.decision(q); }, c, ne);
  scores[1] = probe([&](const Eigen::VectorXd& q) { return never_mem.decision(q); }, c, ne);
  compare_scores(scores[0], scores[1], res);
  const Retained t = retained_of(before, st, retrained, erased_ids, settings.problem.kernel, c);
  exact_deviation(erased_mem, retrained, t, exact, ref);
  res.methods.push_back(exact);
  res.methods.push_back(ref);
  const Eigen::VectorXd decay = t.alpha0 / (1.0 - t.removed_mass);
  res.methods.push_back(approximate("decay", "coefficient decay (zero α, renormalise, refit b)", decay, t, settings,
                                    st.b, c, ne, scores[2]));
  for (std::size_t k = 0; k < p.pg_steps.size(); ++k) {
    const int steps = p.pg_steps[k];
    const Eigen::VectorXd pg =
        projected_gradient_steps(t.K, settings.problem.ridge, settings.problem.C, decay, steps);
    res.methods.push_back(approximate("pg" + std::to_string(steps),
                                      "approximate removal: zero α + " + std::to_string(steps) +
                                          " projected-gradient step" + (steps == 1 ? "" : "s"),
                                      pg, t, settings, st.b, c, ne, scores[3 + k]));
  }
  int salt = 100;
  for (std::size_t i = 0; i < res.methods.size(); ++i) {
    const ProbeScores& s = scores[i];
    res.methods[i].auc_erased_never = auc_cluster_bootstrap(s.erased.scores, s.never.scores, p.bootstrap,
                                                            derive_seed(seed, static_cast<std::uint64_t>(salt++)));
    res.methods[i].auc_present_never = auc_cluster_bootstrap(s.present.scores, s.never.scores, p.bootstrap,
                                                             derive_seed(seed, static_cast<std::uint64_t>(salt++)));
  }
  res.exact_scores = std::move(scores[0]);
  res.decay_scores = std::move(scores[2]);
}

StoreOptions work_store_options() {
  StoreOptions so;
  so.create = true;
  // Plaintext stores: the byte scan below shows that the erased rows' bytes are gone from every
  // file (secure delete), with the scan's control finding them before the erasure; an encrypted
  // store (the default) would hide them from the control as well (docs/experiments.md, E7).
  so.encrypt = false;
  so.certificate_check = true;
  so.certificate_resolve = true;  // E7 reports how many certificates matched a re-solve
  return so;
}

/// Adds the stays members[from, end) to the store's memory "icu", one record each.
void fill_store(Store& s, const std::vector<Patient>& members, std::size_t from, Progress& progress) {
  for (std::size_t i = from; i < members.size(); ++i) {
    s.add_record("icu", members[i].record, members[i].keys);
    progress.tick();
  }
}



}  // namespace

/// (c): the store in <out_dir>/E7-work (removed afterwards), its erasure, byte scans and probe.
void run_patients(const Settings& p, const ExperimentOptions& o, const DataDir& dir, ErasureResult& res) {
  const Stopwatch watch;
  const Cohort c = choose_patients(p, o, dir, res);
  const std::size_t ne = static_cast<std::size_t>(p.erased);
  std::set<std::int64_t> erased_ids;
  for (std::size_t i = 0; i < ne; ++i) erased_ids.insert(c.members[i].record);
  for (const auto& m : c.members) res.tokens_before += m.keys.rows();
  res.sigma = patient_sigma(c.members, res.tokens_before, o);
  res.C = 1.0 / (kPatientNu * static_cast<double>(res.tokens_before));
  const MemorySettings settings = rbf_memory(res.sigma, res.C);
  const fs::path work = fs::path(o.out_dir) / "E7-work";
  std::error_code ec;
  fs::remove_all(work, ec);
  ensure_dir(work.string());
  const std::string path_a = (work / "patients.svdb").string();
  const std::string path_b = (work / "never-seen.svdb").string();
  const StoreOptions so = work_store_options();
  Progress progress("E7 patients", static_cast<long>(2 * p.members), "store operations", o.progress);
  std::optional<Store> store_a(std::in_place, path_a, so);
  Store& a = *store_a;
  a.create_memory("icu", settings, kNumVitals, kNumVitals);
  Stopwatch aw;
  fill_store(a, c.members, 0, progress);
  res.add_seconds = aw.seconds();
  const Memory before = a.memory("icu");  // copy: the pre-erasure memory
  const State st = before.state();
  res.margin = static_cast<int>(st.partition.margin.size());
  res.error = static_cast<int>(st.partition.error.size());
  res.reserve = static_cast<int>(st.partition.reserve.size());
  // Probe power before erasure: all hours of the erased and the never-seen patients.
  auto dec_before = [&](const Eigen::VectorXd& q) { return before.decision(q); };
  res.erased_before = scores_of(dec_before, c.members, 0, ne);
  const ScoreGroup never_before = scores_of(dec_before, c.never, 0, c.never.size());
  res.auc_before = auc_cluster_bootstrap(res.erased_before.scores, never_before.scores, p.bootstrap,
                                         derive_seed(o.seed, 71));
  const BytePatterns pats = byte_patterns(c.members, ne, res.scan);
  scan_store(path_a, pats, false, res.scan);
  erase_patients(a, c.members, ne, res, progress);
  scan_store(path_a, pats, true, res.scan);
  Stopwatch nw;
  std::optional<Store> store_b(std::in_place, path_b, so);
  Store& b = *store_b;
  b.create_memory("icu", settings, kNumVitals, kNumVitals);
  fill_store(b, c.members, ne, progress);
  res.never_store_seconds = nw.seconds();
  progress.finish();
  res.sha_erased = a.memory_info("icu").state_sha256;
  res.sha_never = b.memory_info("icu").state_sha256;
  res.store_hash_equal = res.sha_erased == res.sha_never && a.memory("icu").state_sha256() == res.sha_never;
  res.tokens_after = a.memory_info("icu").tokens;
  const StoreVerification ver = a.verify();
  res.verify_ok = ver.ok();
  res.verify_problems = ver.problems;
  probe_after(before, st, a.memory("icu"), b.memory("icu"), settings, c, erased_ids, p, o.seed, res);
  // The work stores hold copies of clinical data: closed and removed after the run (the numbers
  // are kept).
  store_a.reset();
  store_b.reset();
  fs::remove_all(work, ec);
  res.seconds = watch.seconds();
}

}  // namespace svattn::experiments::e7_applications
