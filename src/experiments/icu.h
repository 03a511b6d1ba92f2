// ICU vital-sign streams (E1 ICU keys, E4): readers of the MIMIC-III demo vitals extract and of the
// PhysioNet/CinC 2012 records, hourly aggregation, the documented critical-deterioration thresholds
// and standardised hourly key vectors. Documented in docs/experiments.md ("ICU data").
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "svattn/kernel.h"

namespace svattn::experiments {

/// The seven hourly vitals, in key-vector order.
enum Vital : int {
  kHeartRate = 0,  ///< beats/min
  kSysBp = 1,      ///< systolic blood pressure, mmHg
  kDiasBp = 2,     ///< diastolic blood pressure, mmHg
  kMeanBp = 3,     ///< mean arterial pressure (MAP), mmHg
  kRespRate = 4,   ///< breaths/min
  kSpO2 = 5,       ///< oxygen saturation, % (PhysioNet 2012: arterial SaO2)
  kTempC = 6,      ///< temperature, degrees Celsius
};
constexpr int kNumVitals = 7;
using VitalVector = std::array<double, kNumVitals>;

const char* vital_name(int vital);

/// Values outside [lo, hi] are treated as charting artefacts and dropped before aggregation.
struct PlausibleRange {
  double lo;
  double hi;
};
PlausibleRange plausible_range(int vital);

/// One critical-deterioration rule: vital `op` value. op: '<' and '>' strict, 'l' (<=) and 'g'
/// (>=).
struct CriticalThreshold {
  int vital;
  char op;
  double value;
  const char* label;  ///< e.g. "SpO2 < 90 %"
};
/// Whether the hour's measured value of the rule's vital meets it (false when not measured: NaN).
bool rule_met(const CriticalThreshold& rule, const VitalVector& measured);

/// SpO2 < 90, MAP < 65, HR > 130, HR < 40, RR > 30, SBP < 90 (the "standard" definition below).
const std::vector<CriticalThreshold>& critical_thresholds();

/// An hour is critical when any measured (non-NaN) hourly value meets any threshold. NaN = not
/// measured in that hour: never critical by itself (no imputation for labels).
bool is_critical(const VitalVector& measured);
/// Labels of the thresholds met, in the order of critical_thresholds().
std::vector<std::string> critical_reasons(const VitalVector& measured);

/// One definition of a critical hour for E4's criticality sweep: the hour is critical when at
/// least `min_rules` of `rules` are met by values measured in that hour (docs/experiments.md, "E4
/// criticality sweep"). The definitions are stated clinically and span ≈ 3–30 % of hours.
struct CriticalityDefinition {
  const char* name;      ///< short id, e.g. "standard"
  const char* clinical;  ///< what a clinician would call an hour that meets it
  std::vector<CriticalThreshold> rules;
  int min_rules = 1;
  /// Number of rules met by the hour's measured values.
  int rules_met(const VitalVector& measured) const;
  bool meets(const VitalVector& measured) const { return rules_met(measured) >= min_rules; }
};
/// From the strictest to the widest: peri-arrest range, profound derangement, two-system
/// derangement, standard (critical_thresholds(), the main tables' definition), NEWS2 red single
/// parameter, early warning.
const std::vector<CriticalityDefinition>& criticality_definitions();
/// The definition named `name`; throws InvalidArgument naming it when there is none.
const CriticalityDefinition& criticality_definition(const std::string& name);

/// One clock hour of a stay: the mean of the plausible measurements of each vital in it.
struct IcuHour {
  long hour = 0;  ///< hours since the stay's first hour with a measurement
  VitalVector measured{};  ///< NaN where the vital was not measured in this hour
};

struct IcuStay {
  std::string id;  ///< icustay_id (MIMIC) or RecordID (PhysioNet 2012)
  std::vector<IcuHour> hours;  ///< ascending hour; only hours with at least one measurement
};

struct IcuDataset {
  std::string source;  ///< "MIMIC-III demo v1.4 vitals" or "PhysioNet/CinC 2012 set-a+set-b"
  std::vector<IcuStay> stays;
  long rows_read = 0;          ///< measurements read
  long rows_out_of_range = 0;  ///< dropped as implausible
  long rows_flagged_error = 0; ///< MIMIC rows with error = 1 (dropped)
};

/// Reads `vitals.csv.gz` (gzip or plain CSV; header
/// icustay_id,charttime,itemid,subject_id,hadm_id,vital,valuenum,error,row_id). Hours are clock hours
/// of charttime. Throws IoError / FormatError naming the file and line.
IcuDataset load_mimic_vitals(const std::string& path);

/// Reads PhysioNet/CinC 2012 archives (tar.gz of per-stay `Time,Parameter,Value` files). HR,
/// SysABP|NISysABP, DiasABP|NIDiasABP, MAP|NIMAP, RespRate, SaO2 and Temp are used; hours are
/// floor(minutes since admission / 60). `max_stays` > 0 stops after that many stays.
IcuDataset load_physionet2012(const std::vector<std::string>& archives, int max_stays = 0);

/// Parses one PhysioNet 2012 record (exposed for tests). `id` is used when the text has no
/// RecordID line.
IcuStay parse_physionet_record(const std::string& text, const std::string& id, long* rows_read,
                               long* rows_out_of_range);

/// Hourly key vectors of a dataset, stays contiguous in dataset order.
struct IcuKeys {
  RowMatrix keys;             ///< rows = hours, 7 standardised columns
  std::vector<int> stay_begin;  ///< stay s covers rows [stay_begin[s], stay_begin[s+1])
  std::vector<char> critical;   ///< per row: is_critical(measured)
  VitalVector mean{};         ///< per-vital mean of the measured hourly values (dataset-wide)
  VitalVector std{};          ///< per-vital standard deviation (1 when degenerate)
  int stays() const { return static_cast<int>(stay_begin.size()) - 1; }
};

/// Key of an hour = standardised vitals, (x - mean) / std with dataset-wide statistics of the
/// measured hourly values; a vital not measured in the hour carries the stay's last measured value
/// forward, or the dataset mean (0 after standardising) before its first measurement.
IcuKeys icu_keys(const IcuDataset& data);

}  // namespace svattn::experiments
