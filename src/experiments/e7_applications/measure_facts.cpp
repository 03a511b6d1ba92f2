// E7 (a) surgical fact forgetting and (b) exact knowledge editing in a fact memory: the trials
// measured into the typed result (docs/experiments.md "E7").
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



}  // namespace

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

}  // namespace svattn::experiments::e7_applications
