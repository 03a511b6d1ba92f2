// E7's report: tables, plots, Markdown and the descriptive keys of E7.json, from the typed result
// alone (render).
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
#include "experiments/framework/report_builder.h"

namespace svattn::experiments::e7_applications {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

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
  std::vector<SummaryRow> summary;
};

Headline headline_of(const FactTally& ft, const ErasureResult& pat) {
  Headline h;
  auto add = [&](const std::string& metric, const std::string& paper, const std::string& ours) {
    h.table.add_row({metric, paper, ours});
    h.summary.push_back({metric, paper, ours});
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

/// E7.json's descriptive keys: settings, every per-forget / per-edit / per-method number, and the
/// typed result the report was rendered from.
void describe(const Result& r, const FactTally& ft, const std::string& scale, ReportBuilder& report) {
  report.set_scale(scale);
  report.set_data({{"data_dir", r.data_dir}, {"data_dir_source", r.data_dir_source}, {"icu_source", r.erasure.source},
                   {"facts", "synthetic (src/experiments/e7_applications.cpp)"}});
  report.json("settings") = settings_json(r);
  report.json("facts") = facts_json(r, ft);
  report.json("patients") = patients_json(r.erasure);
  report.json("result") = r.to_json();  // render(Result::from_json(E7.json["result"])) writes this report
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
  md << "# E7 — " << kInfo.title << "\n\n";
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

ExperimentResult render(const Result& res, const ExperimentOptions& o) {
  ReportBuilder report(kInfo, res, o);
  const FactTally ft = tally_facts(res.forgetting, res.editing);
  const E7Tables tables{forget_table_of(res.facts, ft), edit_table_of(ft), erase_table_of(res.erasure),
                        mia_table_of(res.erasure)};
  std::vector<std::string> captions;
  const std::vector<PlotResult> plots = e7_plots(o, res.erasure, captions);
  for (const auto& p : plots) report.add_plot(p);
  const Headline h = headline_of(ft, res.erasure);
  for (const auto& row : h.summary) report.add_summary(row.metric, row.paper, row.ours);
  const std::string scale = scale_of(res.settings, res.facts, res.erasure, ft);
  describe(res, ft, scale, report);
  report.add_table("headline", h.table);
  report.add_table("fact_forgetting", tables.forget);
  report.add_table("knowledge_editing", tables.edit);
  report.add_table("patient_erasure", tables.erase);
  report.add_table("membership_inference", tables.mia);
  report.md() << markdown_of(res, ft, tables, h, plots, captions, scale);
  return report.write(json::object());
}

}  // namespace svattn::experiments::e7_applications
