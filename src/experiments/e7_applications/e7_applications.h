// E7 applications: surgical fact forgetting, exact knowledge editing, patient erasure from the audited store (needs svattn_store).
// Entry points for the registry (registry.h); the design and measured numbers are in
// docs/experiments.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/e7_applications/tools.h"
#include "experiments/e7_applications/info.h"
#include "experiments/framework/run_header.h"
#include "experiments/options.h"
#include "experiments/result.h"
#include "svattn/types.h"

namespace svattn::experiments::e7_applications {

/// A preset's fields (the `--set` keys).
struct Settings {
  int subjects = 0;
  int relations = 0;
  int forget = 0;      ///< single-fact forgets, each from the full memory
  int edits = 0;
  int members = 0;     ///< ICU stays in the store
  int erased = 0;      ///< of which erased
  int never_seen = 0;  ///< held-out stays (0 = all remaining)
  int max_hours = 0;   ///< first hours of each stay
  std::vector<int> pg_steps;  ///< projected-gradient steps of the approximate removals
  int bootstrap = 0;          ///< cluster-bootstrap replicates of every AUC
};

/// The fact memory that (a) and (b) start from: every fact ingested once.
struct FactMemory {
  int n = 0;  ///< facts = subjects × relations
  double C = 0;
  int margin = 0, error = 0, reserve = 0;  ///< partition of the full memory
  long recall_before = 0;                  ///< facts whose query decodes to their own object
  double ingest_seconds = 0;
  double seconds = 0;  ///< (a) and (b) together
};

/// (a) One fact forgotten from a copy of the full memory, compared with a memory that never saw it
/// and with coefficient decay.
struct ForgetTrial {
  int fact = 0;
  std::string set;  ///< margin / error / reserve before forgetting
  bool retrieved_before = false, retrieved_after = false;
  int decoded_after = -1;
  bool decoded_same_subject = false;
  bool hash_equal = false;    ///< state hash equal to the never-seen memory's
  double dreadout_never = 0;  ///< max |Δ readout| vs the never-seen memory, all probes
  double ripple = 0;          ///< max |readout after − before| on the other facts' queries
  long others_retrieved_before = 0, others_retrieved_after = 0, others_changed = 0, others = 0;
  double decay_dreadout_never = 0;
  bool decay_retrieved = false;
  double forget_seconds = 0, ingest_seconds = 0;
  nlohmann::json to_json() const;
  static ForgetTrial from_json(const nlohmann::json& j);
};

/// (a) Surgical fact forgetting: one trial per forgotten fact.
struct ForgettingResult {
  std::vector<ForgetTrial> trials;
};

/// (b) One edit (remove the old fact, add the corrected one) against a memory that only ever saw
/// the corrected fact.
struct EditTrial {
  int fact = 0;
  std::string kind;  ///< object | subject
  TokenId new_id = 0;
  bool hash_equal = false;
  double dreadout_reference = 0;
  bool new_retrieved = false;
  bool old_object_gone = false;     ///< object corrections: the old object is no longer returned
  bool old_question_moved = false;  ///< subject corrections: the old question decodes to the moved object
  long others = 0, others_retrieved_after = 0;
  nlohmann::json to_json() const;
  static EditTrial from_json(const nlohmann::json& j);
};

/// (b) Knowledge editing: one trial per edit.
struct EditingResult {
  std::vector<EditTrial> trials;
};

/// Membership scores (the decision function at each hourly key), one inner vector per patient.
struct ScoreGroup {
  std::vector<std::vector<double>> scores;
  std::vector<double> flat() const;
};

/// The scores of the erased, never-seen and present patients under one memory.
struct ProbeScores {
  ScoreGroup erased, never, present;
};

/// (c) One way of removing the erased patients (exact erasure, the never-seen reference store,
/// coefficient decay, decay + k projected-gradient steps): its deviation from retraining and the
/// membership probe against it.
struct RemovalMethod {
  std::string name;  ///< exact | never_seen | decay | pg<k>
  std::string label;
  bool exact = false;
  double dalpha = 0;     ///< max |Δα| vs retrained (the never-seen store's state)
  double ddecision = 0;  ///< max |Δf| over the probe keys
  double dreadout = 0;
  AucInterval auc_erased_never;   ///< erased vs never-seen patients
  AucInterval auc_present_never;  ///< present vs never-seen patients
};

/// (c) What the byte scan of the store's files found, before and after the erasure.
struct StoreScan {
  std::size_t row_patterns = 0, value_patterns = 0, shared_rows_excluded = 0;
  std::size_t rows_found_before = 0, values_found_before = 0;
  std::size_t rows_found_after = 0, values_found_after = 0;
  std::size_t bytes_scanned_before = 0, bytes_scanned_after = 0;
  std::vector<std::string> files_with_hits_after;
};

/// (c) Patient erasure from the audited store.
struct ErasureResult {
  std::string source;
  int stays_eligible = 0, members = 0, erased = 0, never_seen = 0, max_hours = 0;
  long tokens_before = 0, tokens_after = 0;
  double sigma = 0, C = 0;
  int margin = 0, error = 0, reserve = 0;  ///< partition before erasure
  int certificates = 0, certificates_hash_equal = 0, certificates_kkt_ok = 0, wal_truncated = 0;
  nlohmann::json first_certificate;  ///< the first certificate, removed ids summarised by their count
  bool store_hash_equal = false;
  std::string sha_erased, sha_never;
  bool scores_bit_identical = false;
  double max_abs_dscore_vs_never_store = 0;
  bool verify_ok = false;
  std::vector<std::string> verify_problems;
  StoreScan scan;
  AucInterval auc_before;  ///< erased vs never-seen, before the erasure
  /// The scores the report draws (every method is summarised by its AUCs): the erased patients
  /// before the erasure, and the three groups after exact erasure and after coefficient decay.
  ScoreGroup erased_before;
  ProbeScores exact_scores, decay_scores;
  std::vector<RemovalMethod> methods;
  double add_seconds = 0, forget_seconds_total = 0, never_store_seconds = 0, seconds = 0;
};

/// What a run measured: render()'s only input. E7.json holds it under `result` (to_json), so the
/// report can be rendered again from the file (from_json) without the data or the stores.
struct Result : RunHeader {
  Settings settings;  ///< after `--set`
  std::string data_dir, data_dir_source;  ///< where the ICU data were read, and why there
  FactMemory facts;
  ForgettingResult forgetting;
  EditingResult editing;
  ErasureResult erasure;

  nlohmann::json to_json() const;
  /// FormatError naming the field when `j` is not an E7 result.
  static Result from_json(const nlohmann::json& j);
};

/// The preset "tiny" | "quick" | "paper" as a flat JSON object (the `--set` keys).
nlohmann::json preset(const std::string& name);
/// The range of every preset key (the `--set` checks; docs/experiments.md "Ranges of the `--set`
/// keys").
RangeTable ranges();
/// Runs (a), (b) and (c): builds the fact memories, fills and erases the stores in
/// <out_dir>/E7-work (removed afterwards) and scans their files; writes no report.
Result measure(const ExperimentOptions& options);
/// Writes <out_dir>/E7.md, E7.json (the tables derived from the result, and the result) and the plots.
ExperimentResult render(const Result& result, const ExperimentOptions& options);
/// render(measure(options), options).
ExperimentResult run(const ExperimentOptions& options);

}  // namespace svattn::experiments::e7_applications
