// The experiments' names for the one statistics unit, support/statistics.h (docs/api.md "Support
// layer"): descriptive statistics of the measurements (mean, sd, quantiles, the 95 % CI of a mean)
// and the paired t-test of two methods (E3, E5). Nothing is computed here.
#pragma once
#include <utility>
#include <vector>

#include "support/statistics.h"

namespace svattn::experiments {

using support::MeanCi;
using support::mean_ci95;
using support::PairedTTest;
using support::paired_t_test;
using support::regularized_incomplete_beta;
using support::student_t975;
using support::student_t_cdf;

/// support::mean: left-to-right sum; NaN for an empty vector.
inline double mean_of(const std::vector<double>& v) { return support::mean(v); }
/// support::sd: sample standard deviation (0 for fewer than 2 values).
inline double sd_of(const std::vector<double>& v) { return support::sd(v); }
/// support::median: the linear-interpolated 0.5-quantile; NaN for an empty vector.
inline double median_of(std::vector<double> v) { return support::median(std::move(v)); }
/// support::quantile: linear-interpolated quantile p in [0, 1]; NaN for an empty vector.
inline double quantile_of(std::vector<double> v, double p) { return support::quantile(std::move(v), p); }
/// support::maximum: largest element; NaN for an empty vector.
inline double max_of(const std::vector<double>& v) { return support::maximum(v); }

}  // namespace svattn::experiments
