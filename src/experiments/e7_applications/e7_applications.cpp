// E7 — applications (docs/experiments.md "E7", docs/paper.md "Limits"):
//  (a) surgical fact forgetting in a fact memory (key = code of subject + relation, value = code of
//      the object): after forgetting one fact its query no longer retrieves it, the state equals a
//      memory that never saw it, and the other facts are still retrieved;
//  (b) knowledge editing: delete the old fact, insert the corrected one; equal to a memory that only
//      ever saw the corrected fact;
//  (c) patient erasure from the audited store (svattn::Store) holding ICU stays (MIMIC-III demo):
//      certificates, equality with a store that never saw the patients, no bytes left in the
//      store's files, and a membership-inference probe, compared with coefficient decay and an
//      approximate projected-gradient removal.
// measure() runs the three parts into a typed Result; render() writes E7.md / E7.json / plots from
// that Result alone.
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
#include "svattn/experiments/e7_applications/tools.h"
#include "svattn/experiments/e7_applications/e7_applications.h"
#include "svattn/experiments/registry.h"
#include "svattn/experiments/icu.h"
#include "svattn/experiments/report.h"
#include "svattn/experiments/streams.h"
#include "svattn/memory.h"
#include "svattn/readout.h"
#include "svattn/store.h"

namespace svattn::experiments::e7_applications {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Settings, subjects, relations, forget, edits, members, erased, never_seen, max_hours, pg_steps, bootstrap)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(FactMemory, n, C, margin, error, reserve, recall_before, ingest_seconds, seconds)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StoreScan, row_patterns, value_patterns, shared_rows_excluded, rows_found_before,
                                   values_found_before, rows_found_after, values_found_after, bytes_scanned_before,
                                   bytes_scanned_after, files_with_hits_after)

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ------------------------------------------------------------------------------------ settings

constexpr int kFactKeyDim = 64;
constexpr int kFactValueDim = 32;
// RBF bandwidth of the fact memory. Keys have squared norm ~1; unrelated keys are at squared
// distance ~2 and keys sharing a subject at ~1, so sigma^2 = 0.2 gives a neighbour weight of e^-5
// (same subject) or e^-10 (unrelated) against 1 for the fact itself.
constexpr double kFactSigma = 0.45;
constexpr double kFactCFactor = 2.0;   // C = 2 / n
constexpr int kFactProbesUnseen = 64;  // queries about subjects the memory never held
constexpr int kMinStayHours = 12;      // as in E4
constexpr double kPatientNu = 0.2;  // C = 1 / (nu * tokens): at least 20 % of the hours carry weight
// sigma = 0.25 x median pairwise distance: narrow enough that a stored hour leaves a detectable bump
// in the decision function (the membership probe has power before erasure; measured, E7.md).
constexpr double kPatientSigmaFactor = 0.25;
constexpr int kHistogramBins = 30;

Settings e7_preset(const std::string& name) {
  if (name == "tiny") return {10, 3, 4, 4, 6, 2, 4, 12, {1, 10}, 200};
  if (name == "paper") return {150, 4, 50, 50, 80, 25, 0, 48, {1, 3, 10, 30, 100, 300, 1000}, 2000};
  return {100, 4, 20, 20, 60, 20, 0, 24, {1, 3, 10, 30, 100, 300}, 1000};
}

MemorySettings rbf_memory(double sigma, double C) {
  MemorySettings s;
  s.problem.kernel.type = KernelType::kRbf;
  s.problem.kernel.bandwidth = sigma;
  s.problem.C = C;
  s.mode = MemoryMode::kAudit;
  return s;
}

double max_abs_diff(const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double m = 0;
  for (Eigen::Index i = 0; i < a.size(); ++i) {
    const bool na = std::isnan(a(i)), nb = std::isnan(b(i));
    if (na || nb) {
      if (na != nb) return std::numeric_limits<double>::infinity();
      continue;
    }
    m = std::max(m, std::abs(a(i) - b(i)));
  }
  return m;
}

std::string count_of(long k, long n) { return std::to_string(k) + " of " + std::to_string(n); }

std::string yes_no(bool b) { return b ? "yes" : "no"; }

/// Support of explicit coefficients over rows of keys/values.
Support support_from(const RowMatrix& keys, const RowMatrix& values, const Eigen::VectorXd& alpha) {
  std::vector<Eigen::Index> rows;
  for (Eigen::Index i = 0; i < alpha.size(); ++i)
    if (alpha(i) > 0) rows.push_back(i);
  Support s;
  s.keys.resize(static_cast<Eigen::Index>(rows.size()), keys.cols());
  s.values.resize(static_cast<Eigen::Index>(rows.size()), values.cols());
  s.alpha.resize(static_cast<Eigen::Index>(rows.size()));
  for (std::size_t r = 0; r < rows.size(); ++r) {
    s.keys.row(static_cast<Eigen::Index>(r)) = keys.row(rows[r]);
    s.values.row(static_cast<Eigen::Index>(r)) = values.row(rows[r]);
    s.alpha(static_cast<Eigen::Index>(r)) = alpha(rows[r]);
  }
  return s;
}

// ------------------------------------------------------------------------- the result's JSON

template <typename T>
T field(const json& j, const char* key) {
  return detail::json_field<T>(j, key, "E7 result");
}

/// A measured double; null (NaN or ±infinity when written) reads back as NaN.
double number(const json& j, const char* key) { return detail::number_or_nan(j, key, "E7 result"); }

json auc_json(const AucInterval& a) { return {{"auc", a.auc}, {"lo", a.lo}, {"hi", a.hi}, {"reps", a.reps}}; }

AucInterval auc_from(const json& j) {
  AucInterval a;
  a.auc = number(j, "auc");
  a.lo = number(j, "lo");
  a.hi = number(j, "hi");
  a.reps = field<int>(j, "reps");
  return a;
}

ScoreGroup scores_from(const json& j, const char* key) {
  return ScoreGroup{field<std::vector<std::vector<double>>>(j, key)};
}

json probe_json(const ProbeScores& s) {
  return {{"erased", s.erased.scores}, {"never", s.never.scores}, {"present", s.present.scores}};
}

ProbeScores probe_from(const json& j) {
  return {scores_from(j, "erased"), scores_from(j, "never"), scores_from(j, "present")};
}

json method_json(const RemovalMethod& m) {
  return {{"name", m.name},           {"label", m.label},
          {"exact", m.exact},         {"dalpha", m.dalpha},
          {"ddecision", m.ddecision}, {"dreadout", m.dreadout},
          {"auc_erased_never", auc_json(m.auc_erased_never)},
          {"auc_present_never", auc_json(m.auc_present_never)}};
}

RemovalMethod method_from(const json& j) {
  RemovalMethod m;
  m.name = field<std::string>(j, "name");
  m.label = field<std::string>(j, "label");
  m.exact = field<bool>(j, "exact");
  m.dalpha = number(j, "dalpha");
  m.ddecision = number(j, "ddecision");
  m.dreadout = number(j, "dreadout");
  m.auc_erased_never = auc_from(field<json>(j, "auc_erased_never"));
  m.auc_present_never = auc_from(field<json>(j, "auc_present_never"));
  return m;
}

json erasure_json(const ErasureResult& r) {
  const json methods = detail::json_array(r.methods, method_json);
  return {{"source", r.source}, {"stays_eligible", r.stays_eligible}, {"members", r.members},
          {"erased", r.erased}, {"never_seen", r.never_seen}, {"max_hours", r.max_hours},
          {"tokens_before", r.tokens_before}, {"tokens_after", r.tokens_after}, {"sigma", r.sigma},
          {"C", r.C}, {"margin", r.margin}, {"error", r.error}, {"reserve", r.reserve},
          {"certificates", r.certificates}, {"certificates_hash_equal", r.certificates_hash_equal},
          {"certificates_kkt_ok", r.certificates_kkt_ok}, {"wal_truncated", r.wal_truncated},
          {"first_certificate", r.first_certificate}, {"store_hash_equal", r.store_hash_equal},
          {"sha_erased", r.sha_erased}, {"sha_never", r.sha_never},
          {"scores_bit_identical", r.scores_bit_identical},
          {"max_abs_dscore_vs_never_store", r.max_abs_dscore_vs_never_store},
          {"verify_ok", r.verify_ok}, {"verify_problems", r.verify_problems}, {"scan", r.scan},
          {"auc_before", auc_json(r.auc_before)}, {"erased_before", r.erased_before.scores},
          {"exact_scores", probe_json(r.exact_scores)}, {"decay_scores", probe_json(r.decay_scores)},
          {"methods", methods},
          {"add_seconds", r.add_seconds}, {"forget_seconds_total", r.forget_seconds_total},
          {"never_store_seconds", r.never_store_seconds}, {"seconds", r.seconds}};
}

ErasureResult erasure_from(const json& j) {
  ErasureResult r;
  r.source = field<std::string>(j, "source");
  r.stays_eligible = field<int>(j, "stays_eligible");
  r.members = field<int>(j, "members");
  r.erased = field<int>(j, "erased");
  r.never_seen = field<int>(j, "never_seen");
  r.max_hours = field<int>(j, "max_hours");
  r.tokens_before = field<long>(j, "tokens_before");
  r.tokens_after = field<long>(j, "tokens_after");
  r.sigma = number(j, "sigma");
  r.C = number(j, "C");
  r.margin = field<int>(j, "margin");
  r.error = field<int>(j, "error");
  r.reserve = field<int>(j, "reserve");
  r.certificates = field<int>(j, "certificates");
  r.certificates_hash_equal = field<int>(j, "certificates_hash_equal");
  r.certificates_kkt_ok = field<int>(j, "certificates_kkt_ok");
  r.wal_truncated = field<int>(j, "wal_truncated");
  r.first_certificate = field<json>(j, "first_certificate");
  r.store_hash_equal = field<bool>(j, "store_hash_equal");
  r.sha_erased = field<std::string>(j, "sha_erased");
  r.sha_never = field<std::string>(j, "sha_never");
  r.scores_bit_identical = field<bool>(j, "scores_bit_identical");
  r.max_abs_dscore_vs_never_store = number(j, "max_abs_dscore_vs_never_store");
  r.verify_ok = field<bool>(j, "verify_ok");
  r.verify_problems = field<std::vector<std::string>>(j, "verify_problems");
  r.scan = field<StoreScan>(j, "scan");
  r.auc_before = auc_from(field<json>(j, "auc_before"));
  r.erased_before = scores_from(j, "erased_before");
  r.exact_scores = probe_from(field<json>(j, "exact_scores"));
  r.decay_scores = probe_from(field<json>(j, "decay_scores"));
  r.methods = detail::json_array_field(j, "methods", "E7 result", method_from);
  for (const char* name : {"exact", "never_seen", "decay"}) {
    if (std::none_of(r.methods.begin(), r.methods.end(), [&](const RemovalMethod& m) { return m.name == name; }))
      throw FormatError(std::string("E7 result: field `methods` lacks the method ") + name);
  }
  r.add_seconds = number(j, "add_seconds");
  r.forget_seconds_total = number(j, "forget_seconds_total");
  r.never_store_seconds = number(j, "never_store_seconds");
  r.seconds = number(j, "seconds");
  return r;
}

template <typename Trial>
json trials_json(const std::vector<Trial>& trials) {
  return {{"trials", detail::json_array(trials, [](const Trial& t) { return t.to_json(); })}};
}

template <typename Trial>
std::vector<Trial> trials_from(const json& j) {
  return detail::json_array_field(j, "trials", "E7 result", Trial::from_json);
}

// ============================================================================ (a) + (b) facts

struct FactWorld {
  explicit FactWorld(const FactCodebook& b) : book(b) {}
  FactCodebook book;
  int n = 0;
  int subjects = 0, relations = 0;
  RowMatrix keys, values;   // fact f: row f (token id f), object f
  RowMatrix objects;        // decoding vocabulary: objects 0 .. n + edits - 1
  RowMatrix probes;         // all fact queries, then queries about unseen subjects
  MemorySettings settings;
};

FactWorld make_world(const Settings& p, const ExperimentOptions& o) {
  FactWorld w(FactCodebook(kFactKeyDim, kFactValueDim, derive_seed(o.seed, detail::name_hash("E7 facts"))));
  const FactCodebook& book = w.book;
  w.subjects = p.subjects;
  w.relations = p.relations;
  w.n = p.subjects * p.relations;
  w.keys.resize(w.n, kFactKeyDim);
  w.values.resize(w.n, kFactValueDim);
  for (int f = 0; f < w.n; ++f) {
    w.keys.row(f) = book.key(f / w.relations, f % w.relations).transpose();
    w.values.row(f) = book.value(f).transpose();
  }
  w.objects.resize(w.n + p.edits, kFactValueDim);
  for (int k = 0; k < w.n + p.edits; ++k) w.objects.row(k) = book.value(k).transpose();
  w.probes.resize(w.n + kFactProbesUnseen, kFactKeyDim);
  w.probes.topRows(w.n) = w.keys;
  for (int k = 0; k < kFactProbesUnseen; ++k) {
    // Subjects far beyond the memory's (and the edits') range: questions it cannot answer.
    w.probes.row(w.n + k) = book.key(1000000 + k, k % w.relations).transpose();
  }
  w.settings = rbf_memory(kFactSigma, kFactCFactor / w.n);
  return w;
}

Memory ingest(const MemorySettings& s, const std::vector<TokenId>& ids, const RowMatrix& keys,
              const RowMatrix& values) {
  Memory m(s, static_cast<int>(keys.cols()), static_cast<int>(values.cols()));
  for (std::size_t i = 0; i < ids.size(); ++i) {
    m.add(ids[i], keys.row(static_cast<Eigen::Index>(i)).transpose(),
          values.row(static_cast<Eigen::Index>(i)).transpose());
  }
  return m;
}

std::vector<Eigen::VectorXd> readouts(const Memory& m, const RowMatrix& q) {
  std::vector<Eigen::VectorXd> out;
  out.reserve(static_cast<std::size_t>(q.rows()));
  for (Eigen::Index r = 0; r < q.rows(); ++r) out.push_back(m.readout(q.row(r).transpose()));
  return out;
}

double max_dev(const std::vector<Eigen::VectorXd>& a, const std::vector<Eigen::VectorXd>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, max_abs_diff(a[i], b[i]));
  return m;
}

std::string set_of(const Partition& p, TokenId id) {
  if (std::binary_search(p.margin.begin(), p.margin.end(), id)) return "margin";
  if (std::binary_search(p.error.begin(), p.error.end(), id)) return "error";
  return "reserve";
}

/// The memory holding every fact, and its answers before any forgetting.
struct FullMemory {
  Memory memory;
  State state;
  std::vector<Eigen::VectorXd> before;  // readouts of every probe
  std::vector<int> decoded_before;      // per fact
};

FullMemory ingest_all(const FactWorld& w, FactMemory& info) {
  std::vector<TokenId> all_ids(static_cast<std::size_t>(w.n));
  for (int f = 0; f < w.n; ++f) all_ids[static_cast<std::size_t>(f)] = f;
  Stopwatch ing;
  FullMemory full{ingest(w.settings, all_ids, w.keys, w.values), {}, {}, {}};
  info.ingest_seconds = ing.seconds();
  full.state = full.memory.state();
  info.margin = static_cast<int>(full.state.partition.margin.size());
  info.error = static_cast<int>(full.state.partition.error.size());
  info.reserve = static_cast<int>(full.state.partition.reserve.size());
  full.before = readouts(full.memory, w.probes);
  full.decoded_before.resize(static_cast<std::size_t>(w.n));
  for (int f = 0; f < w.n; ++f) {
    full.decoded_before[static_cast<std::size_t>(f)] = decode_object(w.objects, full.before[static_cast<std::size_t>(f)]);
    info.recall_before += full.decoded_before[static_cast<std::size_t>(f)] == f ? 1 : 0;
  }
  return full;
}

/// Max |Δ readout| of coefficient decay (the fact's α zeroed, the rest renormalised, b refitted;
/// no re-solve) against the never-seen memory's readouts `rn`; whether decay still retrieves f.
void decay_trial(const FactWorld& w, const FullMemory& full, int f, const RowMatrix& k, const RowMatrix& v,
                 const std::vector<Eigen::VectorXd>& rn, ForgetTrial& t) {
  Eigen::VectorXd a(w.n - 1);
  double mass = 0;
  for (int i = 0, r = 0; i < w.n; ++i) {
    if (i == f) {
      mass += full.state.alpha[static_cast<std::size_t>(i)];
      continue;
    }
    a(r++) = full.state.alpha[static_cast<std::size_t>(i)];
  }
  if (mass < 1) a /= (1.0 - mass);
  const Support ds = support_from(k, v, a);
  double dmax = 0;
  for (Eigen::Index q = 0; q < w.probes.rows(); ++q) {
    const Eigen::VectorXd o_decay = readout(w.settings.problem.kernel, ds, w.probes.row(q).transpose());
    dmax = std::max(dmax, max_abs_diff(o_decay, rn[static_cast<std::size_t>(q)]));
    if (q == f) t.decay_retrieved = decode_object(w.objects, o_decay) == f;
  }
  t.decay_dreadout_never = dmax;
}

/// (a) Forgets fact f from a copy of the full memory and compares it with a memory that never saw f.
ForgetTrial forget_trial(const FactWorld& w, const FullMemory& full, int f) {
  ForgetTrial t;
  t.fact = f;
  t.set = set_of(full.state.partition, f);
  Memory after = full.memory;
  Stopwatch fw;
  after.remove(f);
  t.forget_seconds = fw.seconds();
  std::vector<TokenId> ids;
  RowMatrix k(w.n - 1, kFactKeyDim), v(w.n - 1, kFactValueDim);
  for (int i = 0, r = 0; i < w.n; ++i) {
    if (i == f) continue;
    ids.push_back(i);
    k.row(r) = w.keys.row(i);
    v.row(r++) = w.values.row(i);
  }
  Stopwatch nw;
  const Memory never = ingest(w.settings, ids, k, v);
  t.ingest_seconds = nw.seconds();
  t.hash_equal = after.state_sha256() == never.state_sha256();
  const std::vector<Eigen::VectorXd> ra = readouts(after, w.probes);
  const std::vector<Eigen::VectorXd> rn = readouts(never, w.probes);
  t.dreadout_never = max_dev(ra, rn);
  t.retrieved_before = full.decoded_before[static_cast<std::size_t>(f)] == f;
  t.decoded_after = decode_object(w.objects, ra[static_cast<std::size_t>(f)]);
  t.retrieved_after = t.decoded_after == f;
  t.decoded_same_subject = t.decoded_after >= 0 && t.decoded_after < w.n &&
                           t.decoded_after / w.relations == f / w.relations;
  for (int i = 0; i < w.n; ++i) {
    if (i == f) continue;
    ++t.others;
    const auto si = static_cast<std::size_t>(i);
    const int d = decode_object(w.objects, ra[si]);
    t.others_retrieved_before += full.decoded_before[si] == i ? 1 : 0;
    t.others_retrieved_after += d == i ? 1 : 0;
    t.others_changed += d != full.decoded_before[si] ? 1 : 0;
    t.ripple = std::max(t.ripple, max_abs_diff(ra[si], full.before[si]));
  }
  decay_trial(w, full, f, k, v, rn, t);
  return t;
}

/// (b) Edit e of fact f: remove the old token, add the corrected one, compare with a memory that
/// only ever saw the corrected fact.
EditTrial edit_trial(const FactWorld& w, const FullMemory& full, int f, std::size_t e) {
  EditTrial t;
  t.fact = f;
  t.kind = e % 2 == 0 ? "object" : "subject";
  t.new_id = w.n + static_cast<TokenId>(e);
  const int new_object = t.kind == "object" ? w.n + static_cast<int>(e) : f;
  // A subject correction files the fact under a subject no other fact uses.
  const Eigen::VectorXd new_key =
      t.kind == "object" ? Eigen::VectorXd(w.keys.row(f).transpose())
                         : w.book.key(w.subjects + static_cast<int>(e), f % w.relations);
  const Eigen::VectorXd new_value = w.book.value(new_object);
  Memory edited = full.memory;
  edited.remove(f);
  edited.add(t.new_id, new_key, new_value);
  std::vector<TokenId> ids;
  RowMatrix k(w.n, kFactKeyDim), v(w.n, kFactValueDim);
  int r = 0;
  for (int i = 0; i < w.n; ++i) {
    if (i == f) continue;
    ids.push_back(i);
    k.row(r) = w.keys.row(i);
    v.row(r++) = w.values.row(i);
  }
  ids.push_back(t.new_id);
  k.row(r) = new_key.transpose();
  v.row(r) = new_value.transpose();
  const Memory reference = ingest(w.settings, ids, k, v);
  t.hash_equal = edited.state_sha256() == reference.state_sha256();
  RowMatrix probes(w.probes.rows() + 1, kFactKeyDim);
  probes.topRows(w.probes.rows()) = w.probes;
  probes.row(w.probes.rows()) = new_key.transpose();
  const std::vector<Eigen::VectorXd> re = readouts(edited, probes);
  t.dreadout_reference = max_dev(re, readouts(reference, probes));
  t.new_retrieved = decode_object(w.objects, re.back()) == new_object;
  // The old question (the old key). Object correction: it must no longer return the old object.
  // Subject correction: the object is still held (under the new key, which shares the relation
  // code with the old question), so similarity retrieval may still return it; what matters is
  // that the answer equals that of a memory that never held the old fact (dreadout above).
  const int old_q = decode_object(w.objects, re[static_cast<std::size_t>(f)]);
  if (t.kind == "object") t.old_object_gone = old_q != f;
  if (t.kind == "subject") t.old_question_moved = old_q == f;
  for (int i = 0; i < w.n; ++i) {
    if (i == f) continue;
    ++t.others;
    t.others_retrieved_after += decode_object(w.objects, re[static_cast<std::size_t>(i)]) == i ? 1 : 0;
  }
  return t;
}

/// (a) and (b): fills res.facts, res.forgetting and res.editing.
void run_facts(const Settings& p, const ExperimentOptions& o, Result& res) {
  const Stopwatch watch;
  const FactWorld w = make_world(p, o);
  res.facts.n = w.n;
  res.facts.C = w.settings.problem.C;
  const FullMemory full = ingest_all(w, res.facts);
  Rng rng(derive_seed(o.seed, detail::name_hash("E7 fact choice")));
  const std::vector<int> to_forget = sample_without_replacement(w.n, std::min(p.forget, w.n), rng);
  const std::vector<int> to_edit = sample_without_replacement(w.n, std::min(p.edits, w.n), rng);
  Progress progress("E7 facts", static_cast<long>(to_forget.size() + to_edit.size()), "operations",
                    o.progress);
  for (int f : to_forget) {
    res.forgetting.trials.push_back(forget_trial(w, full, f));
    progress.tick();
  }
  for (std::size_t e = 0; e < to_edit.size(); ++e) {
    res.editing.trials.push_back(edit_trial(w, full, to_edit[e], e));
    progress.tick();
  }
  progress.finish();
  res.facts.seconds = watch.seconds();
}

// ============================================================================ (c) patients

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

// ============================================================================ plots, report

Series histogram_series(const std::string& title, const std::vector<double>& v, double lo, double hi) {
  Series s;
  s.title = title + " (n = " + std::to_string(v.size()) + ")";
  const double w = (hi - lo) / kHistogramBins;
  std::vector<double> counts(kHistogramBins, 0);
  for (double x : v) {
    int b = w > 0 ? static_cast<int>((x - lo) / w) : 0;
    b = std::clamp(b, 0, kHistogramBins - 1);
    counts[static_cast<std::size_t>(b)] += 1;
  }
  for (int b = 0; b < kHistogramBins; ++b) {
    s.x.push_back(lo + (b + 0.5) * w);
    s.y.push_back(v.empty() || w <= 0 ? 0.0 : counts[static_cast<std::size_t>(b)] / (static_cast<double>(v.size()) * w));
  }
  return s;
}

LinePlot score_plot(const std::string& title, const std::vector<std::pair<std::string, std::vector<double>>>& groups) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto& g : groups)
    for (double x : g.second) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
  if (!(hi > lo)) {
    lo = std::isfinite(lo) ? lo - 1 : -1;
    hi = lo + 2;
  }
  LinePlot lp;
  lp.title = title;
  lp.xlabel = "decision function f(q) of the memory at the patient's hourly keys (higher = inside)";
  lp.ylabel = "density";
  for (const auto& g : groups) lp.series.push_back(histogram_series(g.first, g.second, lo, hi));
  return lp;
}

std::string auc_cell(const AucInterval& a) {
  return fmt_fixed(a.auc, 3) + " [" + fmt_fixed(a.lo, 3) + ", " + fmt_fixed(a.hi, 3) + "]";
}

/// (a) and (b) aggregated over the single-fact forgets and the edits.
struct FactTally {
  long nf = 0, f_ret_after = 0, f_ret_before = 0, f_hash = 0, f_decay_ret = 0, same_subject = 0;
  long others = 0, others_before = 0, others_after = 0, others_changed = 0;
  double f_dro = 0, f_ripple = 0, f_decay_dro = 0;
  std::vector<double> forget_t, ingest_t;
  double recall_others_before = std::nan(""), recall_others_after = std::nan("");
  long ned = 0, e_hash = 0, e_new = 0, e_gone = 0, e_moved = 0, e_obj = 0, e_subj = 0, e_others = 0;
  long e_others_after = 0;
  double e_dro = 0;
  std::map<std::string, std::pair<long, long>> by_kind;  // kind -> (edits, hash equal)
};

FactTally tally_facts(const ForgettingResult& forgetting, const EditingResult& editing) {
  FactTally ft;
  for (const auto& t : forgetting.trials) {
    ft.f_ret_after += t.retrieved_after;
    ft.f_ret_before += t.retrieved_before;
    ft.f_hash += t.hash_equal;
    ft.f_decay_ret += t.decay_retrieved;
    ft.same_subject += t.decoded_same_subject;
    ft.others += t.others;
    ft.others_before += t.others_retrieved_before;
    ft.others_after += t.others_retrieved_after;
    ft.others_changed += t.others_changed;
    ft.f_dro = std::max(ft.f_dro, t.dreadout_never);
    ft.f_ripple = std::max(ft.f_ripple, t.ripple);
    ft.f_decay_dro = std::max(ft.f_decay_dro, t.decay_dreadout_never);
    ft.forget_t.push_back(t.forget_seconds);
    ft.ingest_t.push_back(t.ingest_seconds);
  }
  ft.nf = static_cast<long>(forgetting.trials.size());
  ft.recall_others_before = ft.others > 0 ? static_cast<double>(ft.others_before) / ft.others : std::nan("");
  ft.recall_others_after = ft.others > 0 ? static_cast<double>(ft.others_after) / ft.others : std::nan("");
  for (const auto& t : editing.trials) {
    ft.e_hash += t.hash_equal;
    ft.e_new += t.new_retrieved;
    ft.e_gone += t.old_object_gone;
    ft.e_moved += t.old_question_moved;
    ft.e_obj += t.kind == "object";
    ft.e_subj += t.kind == "subject";
    ft.e_others += t.others;
    ft.e_others_after += t.others_retrieved_after;
    ft.e_dro = std::max(ft.e_dro, t.dreadout_reference);
    ft.by_kind[t.kind].first += 1;
    ft.by_kind[t.kind].second += t.hash_equal;
  }
  ft.ned = static_cast<long>(editing.trials.size());
  return ft;
}

/// (a) the fact-forgetting table, exact forgetting beside coefficient decay.
Table forget_table_of(const FactMemory& facts, const FactTally& ft) {
  Table forget_table({"quantity", "svattn exact forgetting", "coefficient decay (no re-solve)"});
  forget_table.add_row({"facts forgotten (one at a time, each from the full memory)", std::to_string(ft.nf), std::to_string(ft.nf)});
  forget_table.add_row({"forgotten fact retrieved before forgetting", count_of(ft.f_ret_before, ft.nf), count_of(ft.f_ret_before, ft.nf)});
  forget_table.add_row({"forgotten fact still retrieved after", count_of(ft.f_ret_after, ft.nf), count_of(ft.f_decay_ret, ft.nf)});
  forget_table.add_row({"state hash equal to a memory that never saw the fact", count_of(ft.f_hash, ft.nf), "— (no state)"});
  forget_table.add_row({"max |Δ readout| vs never-seen memory (all " + std::to_string(facts.n + kFactProbesUnseen) + " probes)",
                        fmt_sci(ft.f_dro), fmt_sci(ft.f_decay_dro)});
  forget_table.add_row({"recall of the other facts, before → after", fmt_pct(ft.recall_others_before) + " → " + fmt_pct(ft.recall_others_after), "—"});
  forget_table.add_row({"other facts whose decoded object changed", count_of(ft.others_changed, ft.others), "—"});
  forget_table.add_row({"max |Δ readout| on other facts' queries, before → after (α re-balanced)", fmt_sci(ft.f_ripple), "—"});
  forget_table.add_row({"forgotten query now decodes to a same-subject fact's object", count_of(ft.same_subject, ft.nf), "—"});
  forget_table.add_row({"median time: forget / ingest a never-seen memory",
                        fmt_sci(median_of(ft.forget_t)) + " s / " + fmt_sci(median_of(ft.ingest_t)) + " s", "—"});

  return forget_table;
}

/// (b) the knowledge-editing table.
Table edit_table_of(const FactTally& ft) {
  Table edit_table({"quantity", "value"});
  edit_table.add_row({"edits (delete the old fact, insert the corrected one)", std::to_string(ft.ned)});
  for (const auto& [kind, c] : ft.by_kind) {
    edit_table.add_row({kind == "object" ? "  object corrections (same key, new object)"
                                         : "  subject corrections (new key: fact filed under another subject)",
                        std::to_string(c.first) + " (hash equal: " + std::to_string(c.second) + ")"});
  }
  edit_table.add_row({"state hash equal to a memory that only ever saw the corrected fact", count_of(ft.e_hash, ft.ned)});
  edit_table.add_row({"max |Δ readout| vs that memory (all probes + the corrected query)", fmt_sci(ft.e_dro)});
  edit_table.add_row({"corrected fact retrieved", count_of(ft.e_new, ft.ned)});
  edit_table.add_row({"object corrections: old object no longer returned to the question", count_of(ft.e_gone, ft.e_obj)});
  edit_table.add_row({"subject corrections: old question still decodes to the moved object (shared relation code; "
                      "identical in the reference memory)", count_of(ft.e_moved, ft.e_subj)});
  edit_table.add_row({"recall of the other facts after the edit",
                      fmt_pct(ft.e_others > 0 ? static_cast<double>(ft.e_others_after) / ft.e_others : std::nan(""))});

  return edit_table;
}

/// (c) the patient-erasure table.
Table erase_table_of(const ErasureResult& pat) {
  Table erase_table({"quantity", "value"});
  erase_table.add_row({"stays in the store / erased / never seen",
                       std::to_string(pat.members) + " / " + std::to_string(pat.erased) + " / " + std::to_string(pat.never_seen)});
  erase_table.add_row({"tokens (hours) before → after erasure", std::to_string(pat.tokens_before) + " → " + std::to_string(pat.tokens_after)});
  erase_table.add_row({"certificates with re-solve hash equal", count_of(pat.certificates_hash_equal, pat.certificates)});
  erase_table.add_row({"certificates with KKT verified", count_of(pat.certificates_kkt_ok, pat.certificates)});
  erase_table.add_row({"WAL truncated after each erasure", count_of(pat.wal_truncated, pat.certificates)});
  erase_table.add_row({"store state hash equal to a store that never saw them", yes_no(pat.store_hash_equal)});
  erase_table.add_row({"decision scores bit-identical to that store (all probe keys)",
                       yes_no(pat.scores_bit_identical) + " (max |Δ| " + fmt_sci(pat.max_abs_dscore_vs_never_store) + ")"});
  erase_table.add_row({"`Store::verify()` after erasure (integrity, audit chain, re-solve)", pat.verify_ok ? "ok" : "FAILED"});
  erase_table.add_row({"erased key rows (56-byte fp64 blobs) found in db/-wal/-journal/-shm, before → after",
                       std::to_string(pat.scan.rows_found_before) + " of " + std::to_string(pat.scan.row_patterns) + " → " +
                           std::to_string(pat.scan.rows_found_after)});
  erase_table.add_row({"erased fp64 numbers (not held by a retained patient) found, before → after",
                       std::to_string(pat.scan.values_found_before) + " of " + std::to_string(pat.scan.value_patterns) + " → " +
                           std::to_string(pat.scan.values_found_after)});
  erase_table.add_row({"erased rows also held by a retained patient (excluded from the scan)", std::to_string(pat.scan.shared_rows_excluded)});
  erase_table.add_row({"bytes scanned before / after", std::to_string(pat.scan.bytes_scanned_before) + " / " + std::to_string(pat.scan.bytes_scanned_after)});

  return erase_table;
}

/// (c) the membership-inference table, one row per removal method.
Table mia_table_of(const ErasureResult& pat) {
  Table mia({"method", "max |Δα| vs retrained", "max |Δf| vs retrained", "max |Δ readout| vs retrained",
             "AUC erased vs never-seen [95 % CI]", "CI covers 0.5", "AUC present vs never-seen [95 % CI]"});
  mia.add_row({"before erasure (probe power: the erased patients are still members)", "—", "—", "—",
               auc_cell(pat.auc_before), yes_no(pat.auc_before.covers(0.5)), "—"});
  for (const auto& m : pat.methods) {
    mia.add_row({m.label, fmt_sci(m.dalpha), fmt_sci(m.ddecision), fmt_sci(m.dreadout), auc_cell(m.auc_erased_never),
                 yes_no(m.auc_erased_never.covers(0.5)), auc_cell(m.auc_present_never)});
  }

  return mia;
}

const RemovalMethod* find_method(const ErasureResult& pat, const std::string& name) {
  for (const auto& m : pat.methods)
    if (m.name == name) return &m;
  throw Error("E7: no result of the method " + name);
}

/// The membership-score plots of exact erasure and decay, and the residual of approximate
/// removal; `captions` receives one caption per plot.
std::vector<PlotResult> e7_plots(const ExperimentOptions& o, const ErasureResult& pat,
                                 std::vector<std::string>& captions) {
  std::vector<PlotResult> plots;
  const ProbeScores& exact = pat.exact_scores;
  const ProbeScores& decay = pat.decay_scores;
  plots.push_back(detail::maybe_line_plot(
      o, "E7_mia_scores_exact",
      score_plot("E7 (c): membership probe after exact erasure — " + std::to_string(pat.erased) + " erased, " +
                     std::to_string(pat.never_seen) + " never-seen patients",
                 {{"erased patients, before erasure", pat.erased_before.flat()},
                  {"erased patients, after exact erasure", exact.erased.flat()},
                  {"never-seen patients", exact.never.flat()},
                  {"present patients", exact.present.flat()}})));
  captions.push_back("Decision-function scores by group, exact erasure (after erasure the erased and never-seen "
                     "distributions are exchangeable)");
  plots.push_back(detail::maybe_line_plot(
      o, "E7_mia_scores_decay",
      score_plot("E7 (c): membership probe after coefficient decay (no re-solve)",
                 {{"erased patients, after decay", decay.erased.flat()},
                  {"never-seen patients", decay.never.flat()},
                  {"present patients", decay.present.flat()}})));
  captions.push_back("Decision-function scores by group, coefficient-decay baseline");
  {
    LinePlot lp;
    lp.title = "E7 (c): residual influence of approximate removal vs retraining (exact erasure: 0)";
    lp.xlabel = "projected-gradient steps after zeroing the erased patients' α";
    lp.ylabel = "max deviation from the retrained memory";
    lp.logx = true;
    lp.logy = true;
    Series sf, sa, sr;
    sf.title = "max |Δf| (decision function)";
    sa.title = "max |Δα|";
    sr.title = "max |Δ readout|";
    for (const auto& m : pat.methods) {
      if (m.name.rfind("pg", 0) != 0) continue;
      const double steps = std::stod(m.name.substr(2));
      // A log axis cannot show 0: an exactly converged point is left out (stated in the caption).
      if (m.ddecision > 0) { sf.x.push_back(steps); sf.y.push_back(m.ddecision); }
      if (m.dalpha > 0) { sa.x.push_back(steps); sa.y.push_back(m.dalpha); }
      if (m.dreadout > 0) { sr.x.push_back(steps); sr.y.push_back(m.dreadout); }
    }
    lp.series = {sf, sa, sr};
    plots.push_back(detail::maybe_line_plot(o, "E7_approx_removal_residual", lp));
    captions.push_back("Residual influence of the approximate removal vs steps (coefficient decay = 0 steps: max |Δf| " +
                       fmt_sci(find_method(pat, "decay")->ddecision) + "; exact erasure: exactly 0, not drawable on a log axis)");
  }

  return plots;
}

/// The headline: one row per claim, the paper's statement beside ours.
struct Headline {
  Table table{{"claim", "paper", "ours"}};
  json summary = json::array();
};

Headline headline_of(const FactTally& ft, const ErasureResult& pat) {
  Headline h;
  auto add = [&](const std::string& metric, const std::string& paper, const std::string& ours) {
    h.table.add_row({metric, paper, ours});
    h.summary.push_back({{"metric", metric}, {"paper", paper}, {"ours", ours}});
  };
  const RemovalMethod* exact = find_method(pat, "exact");
  const RemovalMethod* decay = find_method(pat, "decay");
  const RemovalMethod* pg_last = nullptr;
  const RemovalMethod* pg_first = nullptr;
  for (const auto& m : pat.methods) {
    if (m.name.rfind("pg", 0) == 0) {
      if (!pg_first) pg_first = &m;
      pg_last = &m;
    }
  }
  add("(a) forgotten fact still retrieved after forgetting", "no (surgical fact forgetting, qualitative)",
      count_of(ft.f_ret_after, ft.nf));
  add("(a) state hash equal to a memory that never saw the fact", "— (qualitative)", count_of(ft.f_hash, ft.nf));
  add("(a) max |Δ readout| vs that memory, all probes", "\"zero leakage\"", fmt_sci(ft.f_dro));
  add("(a) recall of the other facts, before → after", "untouched (qualitative)",
      fmt_pct(ft.recall_others_before) + " → " + fmt_pct(ft.recall_others_after));
  add("(b) edit hash equal to a memory that only saw the corrected fact", "exact knowledge editing (qualitative)",
      count_of(ft.e_hash, ft.ned));
  add("(b) corrected fact retrieved; old object gone (object corrections)", "—",
      count_of(ft.e_new, ft.ned) + "; " + count_of(ft.e_gone, ft.e_obj));
  add("(c) erased store hash equal to a store that never saw the patients", "zero leakage (qualitative)",
      yes_no(pat.store_hash_equal));
  add("(c) erased key rows found in the store files, before → after", "— (storage-level erasure, docs/paper.md \"Limits\")",
      std::to_string(pat.scan.rows_found_before) + " → " + std::to_string(pat.scan.rows_found_after));
  add("(c) membership AUC erased vs never-seen before erasure [95 % CI]", "—", auc_cell(pat.auc_before));
  add("(c) membership AUC erased vs never-seen after exact erasure [95 % CI]", "chance (\"zero leakage\")",
      auc_cell(exact->auc_erased_never));
  add("(c) coefficient decay: max |Δf| vs retrained; AUC", "— (decay 1e-2 … 1e-1 in E1)",
      fmt_sci(decay->ddecision) + "; " + auc_cell(decay->auc_erased_never));
  if (pg_first) {
    add("(c) approximate removal, " + pg_first->name.substr(2) + " PG step(s): max |Δf|; AUC", "—",
        fmt_sci(pg_first->ddecision) + "; " + auc_cell(pg_first->auc_erased_never));
  }
  if (pg_last && pg_last != pg_first) {
    add("(c) approximate removal, " + pg_last->name.substr(2) + " PG steps: max |Δf|; AUC", "—",
        fmt_sci(pg_last->ddecision) + "; " + auc_cell(pg_last->auc_erased_never));
  }

  return h;
}

/// The one-line data-and-scale statement of the report.
std::string scale_of(const Settings& p, const FactMemory& facts, const ErasureResult& pat, const FactTally& ft) {
  return
      "(a, b) " + std::to_string(facts.n) + " synthetic facts (" + std::to_string(p.subjects) + " subjects × " +
      std::to_string(p.relations) + " relations), " + std::to_string(ft.nf) + " forgets, " + std::to_string(ft.ned) +
      " edits; (c) " + pat.source + ": " + std::to_string(pat.members) + " stays in an audited store (first ≤ " +
      std::to_string(pat.max_hours) + " h each, " + std::to_string(pat.tokens_before) + " hourly keys), " +
      std::to_string(pat.erased) + " erased, " + std::to_string(pat.never_seen) + " never seen";
}


/// The tables of E7.md and E7.json.
struct E7Tables {
  Table forget, edit, erase, mia;
};

/// E7.json `settings`: the settings and rules of (a, b) and of (c).
json settings_json(const Result& r) {
  const Settings& p = r.settings;
  const FactMemory& facts = r.facts;
  const ErasureResult& pat = r.erasure;
  return {{"facts", {{"subjects", p.subjects}, {"relations", p.relations}, {"n", facts.n},
                     {"key_dim", kFactKeyDim}, {"value_dim", kFactValueDim}, {"kernel", "rbf"},
                     {"bandwidth", kFactSigma}, {"C", facts.C}, {"C_rule", "C = 2 / n"},
                     {"ridge", ProblemSettings{}.ridge}, {"mode", "audit"},
                     {"unseen_subject_probes", kFactProbesUnseen},
                     {"key_rule", "(code(subject) + code(relation)) / sqrt(2), codes N(0, I/64) from hashed symbol names"},
                     {"value_rule", "code(object), N(0, I/32); every fact has its own object"},
                     {"decode_rule", "object code of largest cosine similarity with the readout, over all objects ever used"}}},
          {"patients", {{"members", pat.members}, {"erased", pat.erased}, {"never_seen", pat.never_seen},
                        {"max_hours", pat.max_hours}, {"min_stay_hours", kMinStayHours},
                        {"kernel", "rbf"}, {"bandwidth", pat.sigma},
                        {"bandwidth_rule", "0.25 × median pairwise distance of the members' keys (2000 pairs)"},
                        {"C", pat.C}, {"C_rule", "C = 1 / (0.2 × tokens)"}, {"ridge", ProblemSettings{}.ridge},
                        {"values", "= keys"}, {"pg_steps", p.pg_steps}, {"bootstrap_reps", p.bootstrap},
                        {"score", "decision function f(q) = Σ α_j κ(q, x_j) − κ(q, q)/2 + b"}}}};
}

/// E7.json `facts`: the fact memory, every forget and edit, and their aggregates.
json facts_json(const Result& r, const FactTally& ft) {
  const FactMemory& facts = r.facts;
  json forgets = json::array(), edits = json::array();
  for (const auto& t : r.forgetting.trials) forgets.push_back(t.to_json());
  for (const auto& t : r.editing.trials) edits.push_back(t.to_json());
  return {{"n", facts.n}, {"partition", {{"margin", facts.margin}, {"error", facts.error}, {"reserve", facts.reserve}}},
          {"recall_before", facts.recall_before}, {"ingest_seconds", facts.ingest_seconds},
          {"forgets", forgets}, {"edits", edits},
          {"forgotten_retrieved_after", ft.f_ret_after}, {"hash_equal_never_seen", ft.f_hash},
          {"max_abs_dreadout_vs_never_seen", ft.f_dro}, {"decay_max_abs_dreadout_vs_never_seen", ft.f_decay_dro},
          {"others_recall_before", ft.recall_others_before}, {"others_recall_after", ft.recall_others_after},
          {"others_decode_changed", ft.others_changed}, {"max_abs_ripple_other_facts", ft.f_ripple},
          {"edit_hash_equal_reference", ft.e_hash}, {"edit_max_abs_dreadout_vs_reference", ft.e_dro},
          {"edit_corrected_retrieved", ft.e_new}, {"edit_object_corrections", ft.e_obj},
          {"edit_old_object_gone", ft.e_gone}, {"edit_subject_corrections", ft.e_subj},
          {"edit_old_question_decodes_moved_object", ft.e_moved}, {"seconds", facts.seconds}};
}

/// One removal method in E7.json `patients.methods` (deviations and AUCs; the scores are in `result`).
json method_report_json(const RemovalMethod& m) {
  return {{"name", m.name}, {"label", m.label}, {"exact", m.exact},
          {"max_abs_dalpha_vs_retrained", m.dalpha}, {"max_abs_ddecision_vs_retrained", m.ddecision},
          {"max_abs_dreadout_vs_retrained", m.dreadout},
          {"auc_erased_vs_never_seen", {{"auc", m.auc_erased_never.auc}, {"ci95_lo", m.auc_erased_never.lo},
                                        {"ci95_hi", m.auc_erased_never.hi},
                                        {"covers_chance", m.auc_erased_never.covers(0.5)}}},
          {"auc_present_vs_never_seen", {{"auc", m.auc_present_never.auc}, {"ci95_lo", m.auc_present_never.lo},
                                         {"ci95_hi", m.auc_present_never.hi}}}};
}

/// E7.json `patients`: the store, the certificates, the byte scan and the membership probe.
json patients_json(const ErasureResult& pat) {
  json methods = json::array();
  for (const auto& m : pat.methods) methods.push_back(method_report_json(m));
  return {{"source", pat.source}, {"stays_eligible", pat.stays_eligible}, {"members", pat.members},
          {"erased", pat.erased}, {"never_seen", pat.never_seen}, {"tokens_before", pat.tokens_before},
          {"tokens_after", pat.tokens_after}, {"sigma", pat.sigma}, {"C", pat.C},
          {"partition_before", {{"margin", pat.margin}, {"error", pat.error}, {"reserve", pat.reserve}}},
          {"certificates", pat.certificates}, {"certificates_hash_equal", pat.certificates_hash_equal},
          {"certificates_kkt_ok", pat.certificates_kkt_ok}, {"wal_truncated", pat.wal_truncated},
          {"first_certificate", pat.first_certificate},
          {"store_hash_equal_never_seen", pat.store_hash_equal}, {"sha256_erased_store", pat.sha_erased},
          {"sha256_never_seen_store", pat.sha_never}, {"scores_bit_identical_never_seen", pat.scores_bit_identical},
          {"max_abs_dscore_vs_never_seen_store", pat.max_abs_dscore_vs_never_store},
          {"verify_ok", pat.verify_ok}, {"verify_problems", pat.verify_problems},
          {"byte_scan", pat.scan},
          {"auc_before_erasure", {{"auc", pat.auc_before.auc}, {"ci95_lo", pat.auc_before.lo}, {"ci95_hi", pat.auc_before.hi}}},
          {"methods", methods},
          {"add_seconds", pat.add_seconds}, {"forget_seconds_total", pat.forget_seconds_total},
          {"never_seen_store_seconds", pat.never_store_seconds}, {"seconds", pat.seconds}};
}

/// E7.json: settings, every per-forget / per-edit / per-method number, tables, summary, plots, and
/// the typed result under `result`.
json report_json(const Result& r, const FactTally& ft, const E7Tables& tables, const Headline& h,
                 const std::vector<PlotResult>& plots, const std::string& scale) {
  return {
      {"experiment", "E7"},
      {"title", find_experiment("E7").title},
      {"preset", r.preset},
      {"seed", r.seed},
      {"created", r.created},
      {"machine", r.machine},
      {"scale", scale},
      {"data", {{"data_dir", r.data_dir}, {"data_dir_source", r.data_dir_source}, {"icu_source", r.erasure.source},
                {"facts", "synthetic (src/experiments/e7_applications.cpp)"}}},
      {"settings", settings_json(r)},
      {"facts", facts_json(r, ft)},
      {"patients", patients_json(r.erasure)},
      {"summary", h.summary},
      {"tables", {{"headline", h.table.json()}, {"fact_forgetting", tables.forget.json()},
                  {"knowledge_editing", tables.edit.json()}, {"patient_erasure", tables.erase.json()},
                  {"membership_inference", tables.mia.json()}}},
      {"plots", detail::plots_json(plots)},
      {"runtime_seconds", r.measure_seconds},
      {"result", r.to_json()},  // render(Result::from_json(E7.json["result"])) writes this report
  };
}

/// E7.md (a): the fact memory and the forgetting table.
std::string forgetting_markdown(const Result& r, const FactTally& ft, const E7Tables& tables) {
  const Settings& p = r.settings;
  const FactMemory& facts = r.facts;
  std::ostringstream md;
  md << "## (a) Surgical fact forgetting\n\n"
     << "A fact memory holds " << facts.n << " facts (" << p.subjects << " subjects × " << p.relations
     << " relations, each with its own object). Key = (code(subject) + code(relation))/√2, value = code(object); "
        "codes are Gaussian vectors N(0, I/d) drawn from hashed symbol names (d = "
     << kFactKeyDim << " for keys, " << kFactValueDim
     << " for values), so facts sharing a subject have correlated keys. Audit-mode `svattn::Memory`, RBF σ = "
     << fmt_fixed(kFactSigma, 2) << ", C = 2/n, ridge " << fmt_sci(ProblemSettings{}.ridge, 0)
     << ". A query is the fact's key; its answer is the object whose code has the largest cosine similarity with the readout. Partition of "
        "the full memory: " << facts.margin << " margin, " << facts.error << " error, " << facts.reserve
     << " reserve; " << count_of(facts.recall_before, facts.n)
     << " facts retrieved before any forgetting (only support tokens carry the readout).\n\n"
     << "Each of " << ft.nf << " random facts is forgotten from a copy of the full memory (`Memory::remove`) and "
        "compared with a memory that ingested every other fact one at a time and never saw it: state hash and, on "
     << facts.n + kFactProbesUnseen << " probes (every fact's query + " << kFactProbesUnseen
     << " queries about subjects the memory never held), max |Δ readout|. Coefficient decay (α of the fact "
        "zeroed, the rest renormalised, no re-solve) is shown beside it.\n\n"
     << tables.forget.markdown() << "\n"
     << "\"Untouched\" means the other facts are still retrieved; their readouts do move slightly (the "
        "forgotten fact's coefficient mass is re-distributed by the exact re-solve — exactly as in a memory that "
        "never saw it).\n\n";
  return md.str();
}

/// E7.md (b): the editing table.
std::string editing_markdown(const FactTally& ft, const E7Tables& tables) {
  std::ostringstream md;
  md << "## (b) Knowledge editing\n\n"
     << "Each of " << ft.ned << " random facts is edited from a copy of the full memory: `remove` the old token, "
        "`add` the corrected one (a new token id). Even edits correct the object (same key, a new object code); "
        "odd edits correct the subject (the fact was filed under the wrong subject: new key, same object). The "
        "reference ingests all other facts and the corrected fact, never the old one.\n\n"
     << tables.edit.markdown() << "\n";
  return md.str();
}

/// E7.md (c): the store, the erasure table and the membership probe.
std::string erasure_markdown(const Result& r, const E7Tables& tables) {
  const ErasureResult& pat = r.erasure;
  std::ostringstream md;
  md << "## (c) Patient erasure from the audited store\n\n"
     << "Data: " << pat.source << ", " << pat.stays_eligible << " stays of ≥ " << kMinStayHours
     << " h. A random " << pat.members << " stays are records of an audited `svattn::Store` (SQLite, WAL, "
        "secure_delete), one record per stay, keys = the first ≤ " << pat.max_hours
     << " standardised hourly vital vectors (7-d, docs/experiments.md \"ICU data\"), values = keys; RBF σ = "
     << fmt_fixed(pat.sigma, 3) << " (0.25 × median pairwise distance), C = 1/(0.2 n) = " << fmt_sci(pat.C)
     << ", audit mode; partition before erasure " << pat.margin << " margin / " << pat.error << " error / "
     << pat.reserve << " reserve. " << pat.erased << " of the stays are erased one by one with "
     << "`Store::forget_record` (certificate with batch re-solve); " << pat.never_seen
     << " other stays were never stored. A second store receives only the retained stays.\n\n"
     << tables.erase.markdown() << "\n"
     << "**Membership-inference probe.** An attacker who can query the memory scores each hourly key of a "
        "patient by the decision function f(q) (higher = inside the description, the typical signature of a "
        "training member). AUC = P(score of an erased patient's key > score of a never-seen patient's key); "
        "95 % CI from a cluster bootstrap over patients (" << r.settings.bootstrap
     << " replicates). \"Retrained\" = the store that never saw the erased patients. Coefficient decay and the "
        "approximate (\"gradient-style\") removal start from the pre-erasure state: the erased tokens' α are "
        "zeroed and the rest renormalised (decay), then projected-gradient steps on the SVDD dual over the capped "
        "simplex (step 1/L, Gershgorin L) move towards the optimum without re-solving; b is refitted on the "
        "margin.\n\n"
     << tables.mia.markdown() << "\n"
     << "After exact erasure the memory *is* the never-seen store (same hash, bit-identical scores), so the "
        "erased patients are exchangeable with never-seen ones: any AUC away from 0.5 in that row is sampling "
        "noise of the patient split, identical to what the reference store shows. The row before erasure shows "
        "how much the probe detects actual membership; the approximate rows show what survives without an exact "
        "re-solve.\n\n";
  return md.str();
}

/// E7.md: the header and headline, (a), (b), (c), the plots and the honest scale statement.
std::string markdown_of(const Result& r, const FactTally& ft, const E7Tables& tables, const Headline& h,
                        const std::vector<PlotResult>& plots, const std::vector<std::string>& captions,
                        const std::string& scale) {
  std::ostringstream md;
  md << "# E7 — " << find_experiment("E7").title << "\n\n";
  md << "Preset `" << r.preset << "`, seed " << r.seed << ". Run time " << fmt_fixed(r.measure_seconds, 1)
     << " s on " << r.machine["cpu"].get<std::string>() << " (1 thread). Scale: " << scale << ".\n\n";
  md << "## Paper vs ours\n\nThe paper's E7 is qualitative (\"surgical fact forgetting, exact knowledge editing, "
        "patient-record deletion with zero leakage\"); here each claim is measured.\n\n"
     << h.table.markdown() << "\n";
  md << forgetting_markdown(r, ft, tables) << editing_markdown(ft, tables) << erasure_markdown(r, tables);
  md << "## Plots\n\n" << detail::plots_markdown(plots, captions) << "\n";
  md << "## Scale and data, honestly\n\n"
     << "- The paper states E7 qualitatively, without data or numbers; every setting above is ours.\n"
     << "- Facts are synthetic symbol codes, not facts extracted from a trained language model; forgetting acts on "
        "the memory's tokens only. Where a deep model mixes records before the memory, its later activations are "
        "not covered by the certificate (docs/paper.md \"Limits\").\n"
     << "- ICU data: the open MIMIC-III demo instead of MIMIC-IV; hours are capped per stay to keep the quick "
        "preset within minutes.\n"
     << "- The store files of the run (patients' vitals) are deleted after the run; their hashes and the byte "
        "scans are kept in E7.json.\n";
  return md.str();
}

}  // namespace

// ------------------------------------------------------------------------- the typed result

std::vector<double> ScoreGroup::flat() const {
  std::vector<double> v;
  for (const auto& g : scores) v.insert(v.end(), g.begin(), g.end());
  return v;
}

json ForgetTrial::to_json() const {
  return {{"fact", fact}, {"set_before", set}, {"retrieved_before", retrieved_before},
          {"retrieved_after", retrieved_after}, {"decoded_after", decoded_after},
          {"decoded_same_subject", decoded_same_subject}, {"hash_equal_never_seen", hash_equal},
          {"max_abs_dreadout_vs_never_seen", dreadout_never}, {"max_abs_ripple_other_facts", ripple},
          {"others", others}, {"others_retrieved_before", others_retrieved_before},
          {"others_retrieved_after", others_retrieved_after}, {"others_decode_changed", others_changed},
          {"decay", {{"max_abs_dreadout_vs_never_seen", decay_dreadout_never},
                     {"retrieved_after", decay_retrieved}}},
          {"forget_seconds", forget_seconds}, {"never_seen_ingest_seconds", ingest_seconds}};
}

ForgetTrial ForgetTrial::from_json(const json& j) {
  ForgetTrial t;
  t.fact = field<int>(j, "fact");
  t.set = field<std::string>(j, "set_before");
  t.retrieved_before = field<bool>(j, "retrieved_before");
  t.retrieved_after = field<bool>(j, "retrieved_after");
  t.decoded_after = field<int>(j, "decoded_after");
  t.decoded_same_subject = field<bool>(j, "decoded_same_subject");
  t.hash_equal = field<bool>(j, "hash_equal_never_seen");
  t.dreadout_never = number(j, "max_abs_dreadout_vs_never_seen");
  t.ripple = number(j, "max_abs_ripple_other_facts");
  t.others = field<long>(j, "others");
  t.others_retrieved_before = field<long>(j, "others_retrieved_before");
  t.others_retrieved_after = field<long>(j, "others_retrieved_after");
  t.others_changed = field<long>(j, "others_decode_changed");
  const json decay = field<json>(j, "decay");
  t.decay_dreadout_never = number(decay, "max_abs_dreadout_vs_never_seen");
  t.decay_retrieved = field<bool>(decay, "retrieved_after");
  t.forget_seconds = number(j, "forget_seconds");
  t.ingest_seconds = number(j, "never_seen_ingest_seconds");
  return t;
}

json EditTrial::to_json() const {
  return {{"fact", fact}, {"kind", kind}, {"corrected_token_id", new_id},
          {"hash_equal_reference", hash_equal}, {"max_abs_dreadout_vs_reference", dreadout_reference},
          {"corrected_fact_retrieved", new_retrieved}, {"old_object_gone", old_object_gone},
          {"old_question_decodes_moved_object", old_question_moved},
          {"others", others}, {"others_retrieved_after", others_retrieved_after}};
}

EditTrial EditTrial::from_json(const json& j) {
  EditTrial t;
  t.fact = field<int>(j, "fact");
  t.kind = field<std::string>(j, "kind");
  t.new_id = field<TokenId>(j, "corrected_token_id");
  t.hash_equal = field<bool>(j, "hash_equal_reference");
  t.dreadout_reference = number(j, "max_abs_dreadout_vs_reference");
  t.new_retrieved = field<bool>(j, "corrected_fact_retrieved");
  t.old_object_gone = field<bool>(j, "old_object_gone");
  t.old_question_moved = field<bool>(j, "old_question_decodes_moved_object");
  t.others = field<long>(j, "others");
  t.others_retrieved_after = field<long>(j, "others_retrieved_after");
  return t;
}

json Result::to_json() const {
  return {{"preset", preset},
          {"seed", seed},
          {"settings", settings},
          {"data_dir", data_dir},
          {"data_dir_source", data_dir_source},
          {"facts", facts},
          {"forgetting", trials_json(forgetting.trials)},
          {"editing", trials_json(editing.trials)},
          {"erasure", erasure_json(erasure)},
          {"machine", machine},
          {"created", created},
          {"measure_seconds", measure_seconds}};
}

Result Result::from_json(const json& j) {
  Result r;
  r.preset = field<std::string>(j, "preset");
  r.seed = field<std::uint64_t>(j, "seed");
  r.settings = field<Settings>(j, "settings");
  r.data_dir = field<std::string>(j, "data_dir");
  r.data_dir_source = field<std::string>(j, "data_dir_source");
  r.facts = field<FactMemory>(j, "facts");
  r.forgetting.trials = trials_from<ForgetTrial>(field<json>(j, "forgetting"));
  r.editing.trials = trials_from<EditTrial>(field<json>(j, "editing"));
  r.erasure = erasure_from(field<json>(j, "erasure"));
  r.machine = field<json>(j, "machine");
  if (!r.machine.is_object() || !r.machine.contains("cpu") || !r.machine["cpu"].is_string())
    throw FormatError("E7 result: field `machine` lacks the string `cpu`");
  r.created = field<std::string>(j, "created");
  r.measure_seconds = field<double>(j, "measure_seconds");
  return r;
}

// ------------------------------------------------------------------------- entry points

nlohmann::json preset(const std::string& name) { return e7_preset(name); }

RangeTable ranges() {
  RangeTable t;
  t.keys = {{"subjects", 1, 2000},     {"relations", 1, 64},   {"forget", 0, 10000},
            {"edits", 0, 10000},       {"members", 2, 10000},  {"erased", 1, 9999},
            {"never_seen", 0, 100000}, {"max_hours", 1, 1000}, {"pg_steps", 1, 100000, false, 0, 16},
            {"bootstrap", 1, 100000}};
  t.relations = [](const std::string& id, const nlohmann::json& s) {
    if (s["erased"].get<int>() >= s["members"].get<int>())
      bad(id + ".erased", "< members (" + s["members"].dump() + ")", s["erased"]);
    const long facts = s["subjects"].get<long>() * s["relations"].get<long>();
    if (facts > 20000)
      bad(id + ".subjects", "such that subjects x relations <= 20000 facts (relations " +
                                s["relations"].dump() + ")",
          s["subjects"]);
  };
  return t;
}

Result measure(const ExperimentOptions& o) {
  o.validate();
  const Stopwatch total;
  Result res;
  res.preset = o.preset;
  res.seed = o.seed;
  res.settings = detail::with_overrides(e7_preset(o.preset), "E7", o);
  ensure_dir(o.out_dir);
  const DataDir dir = resolve_data_dir(o.data_dir);
  res.data_dir = dir.path;
  res.data_dir_source = dir.source;
  res.machine = detail::machine_info();
  res.created = utc_now();
  run_facts(res.settings, o, res);
  run_patients(res.settings, o, dir, res.erasure);
  res.measure_seconds = total.seconds();
  return res;
}

ExperimentResult render(const Result& res, const ExperimentOptions& o) {
  ensure_dir(o.out_dir);
  const FactTally ft = tally_facts(res.forgetting, res.editing);
  const E7Tables tables{forget_table_of(res.facts, ft), edit_table_of(ft), erase_table_of(res.erasure),
                        mia_table_of(res.erasure)};
  std::vector<std::string> captions;
  const std::vector<PlotResult> plots = e7_plots(o, res.erasure, captions);
  const Headline h = headline_of(ft, res.erasure);
  const std::string scale = scale_of(res.settings, res.facts, res.erasure, ft);
  json j = report_json(res, ft, tables, h, plots, scale);
  detail::write_outputs(o, "E7", j, markdown_of(res, ft, tables, h, plots, captions, scale));
  return ExperimentResult::from_json(j);
}

ExperimentResult run(const ExperimentOptions& o) { return render(measure(o), o); }

}  // namespace svattn::experiments::e7_applications
