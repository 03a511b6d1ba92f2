// What E7's settings, measure, result and report units share (not installed): the fixed
// constants of the fact memory and the patient probe, small helpers, the JSON of the plain structs
// and the entry points of each part.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "experiments/e7_applications/e7_applications.h"
#include "experiments/framework/data_dir.h"
#include "svattn/memory.h"
#include "svattn/readout.h"

namespace svattn::experiments::e7_applications {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Settings, subjects, relations, forget, edits, members, erased, never_seen, max_hours, pg_steps, bootstrap)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(FactMemory, n, C, margin, error, reserve, recall_before, ingest_seconds, seconds)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StoreScan, row_patterns, value_patterns, shared_rows_excluded, rows_found_before,
                                   values_found_before, rows_found_after, values_found_after, bytes_scanned_before,
                                   bytes_scanned_after, files_with_hits_after)

inline constexpr int kFactKeyDim = 64;
inline constexpr int kFactValueDim = 32;
// RBF bandwidth of the fact memory. Keys have squared norm ~1; unrelated keys are at squared
// distance ~2 and keys sharing a subject at ~1, so sigma^2 = 0.2 gives a neighbour weight of e^-5
// (same subject) or e^-10 (unrelated) against 1 for the fact itself.
inline constexpr double kFactSigma = 0.45;
inline constexpr double kFactCFactor = 2.0;   // C = 2 / n
inline constexpr int kFactProbesUnseen = 64;  // queries about subjects the memory never held
inline constexpr int kMinStayHours = 12;      // as in E4
inline constexpr double kPatientNu = 0.2;  // C = 1 / (nu * tokens): at least 20 % of the hours carry weight
// sigma = 0.25 x median pairwise distance: narrow enough that a stored hour leaves a detectable bump
// in the decision function (the membership probe has power before erasure; measured, E7.md).
inline constexpr double kPatientSigmaFactor = 0.25;
inline constexpr int kHistogramBins = 30;

/// The preset "tiny" | "quick" | "paper" (any other name: quick).
Settings preset_settings(const std::string& name);

inline MemorySettings rbf_memory(double sigma, double C) {
  MemorySettings s;
  s.problem.kernel.type = KernelType::kRbf;
  s.problem.kernel.bandwidth = sigma;
  s.problem.C = C;
  s.mode = MemoryMode::kAudit;
  return s;
}

inline double max_abs_diff(const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
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

inline std::string count_of(long k, long n) { return std::to_string(k) + " of " + std::to_string(n); }

inline std::string yes_no(bool b) { return b ? "yes" : "no"; }

/// Support of explicit coefficients over rows of keys/values.
inline Support support_from(const RowMatrix& keys, const RowMatrix& values, const Eigen::VectorXd& alpha) {
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

/// (a) + (b): the fact memory, its forgetting and editing trials (measure_facts.cpp).
void run_facts(const Settings& p, const ExperimentOptions& o, Result& res);
/// (c): patient erasure from the audited store (measure_patients.cpp).
void run_patients(const Settings& p, const ExperimentOptions& o, const DataDir& dir, ErasureResult& res);

}  // namespace svattn::experiments::e7_applications
