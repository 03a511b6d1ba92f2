// Building blocks of E7 (e7.h): fact codes, AUC with a cluster bootstrap, projected-gradient
// removal, byte scans of store files.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

#include "common.h"
#include "svattn/errors.h"
#include "experiments/e7_applications/tools.h"
#include "experiments/streams.h"

namespace svattn::experiments::e7_applications {

// ------------------------------------------------------------------------------ fact encoding

FactCodebook::FactCodebook(int key_dim, int value_dim, std::uint64_t seed)
    : key_dim_(key_dim), value_dim_(value_dim), seed_(seed) {
  if (key_dim < 1 || value_dim < 1) throw InvalidArgument("fact code dimensions must be >= 1");
}

Eigen::VectorXd FactCodebook::symbol(const std::string& name, int dim) const {
  Rng rng(derive_seed(seed_, detail::name_hash(name)));
  Eigen::VectorXd v(dim);
  const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
  for (int i = 0; i < dim; ++i) v(i) = scale * rng.normal();
  return v;
}

Eigen::VectorXd FactCodebook::key(int subject, int relation) const {
  return (symbol("subject:" + std::to_string(subject), key_dim_) +
          symbol("relation:" + std::to_string(relation), key_dim_)) /
         std::sqrt(2.0);
}

Eigen::VectorXd FactCodebook::value(int object) const {
  return symbol("object:" + std::to_string(object), value_dim_);
}

int decode_object(const RowMatrix& codes, const Eigen::Ref<const Eigen::VectorXd>& readout) {
  if (codes.rows() == 0 || !readout.allFinite()) return -1;
  const double rn = readout.norm();
  if (!(rn > 0)) return -1;
  int best = -1;
  double best_c = -std::numeric_limits<double>::infinity();
  for (Eigen::Index r = 0; r < codes.rows(); ++r) {
    const double cn = codes.row(r).norm();
    if (!(cn > 0)) continue;
    const double c = codes.row(r).dot(readout) / (cn * rn);
    if (c > best_c) {
      best_c = c;
      best = static_cast<int>(r);
    }
  }
  return best;
}

// ------------------------------------------------------------------------------ membership probe

double auc(const std::vector<double>& pos, const std::vector<double>& neg) {
  if (pos.empty() || neg.empty()) return std::nan("");
  // Mid-ranks over the pooled scores; AUC = (R_pos - m(m+1)/2) / (m n).
  std::vector<std::pair<double, int>> all;
  all.reserve(pos.size() + neg.size());
  for (double s : pos) all.emplace_back(s, 1);
  for (double s : neg) all.emplace_back(s, 0);
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  double rank_sum = 0;
  std::size_t i = 0;
  while (i < all.size()) {
    std::size_t j = i;
    int positives = 0;
    while (j < all.size() && all[j].first == all[i].first) positives += all[j++].second;
    const double mid_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    rank_sum += mid_rank * positives;
    i = j;
  }
  const double m = static_cast<double>(pos.size());
  const double n = static_cast<double>(neg.size());
  return (rank_sum - m * (m + 1) / 2.0) / (m * n);
}

AucInterval auc_cluster_bootstrap(const std::vector<std::vector<double>>& pos,
                                  const std::vector<std::vector<double>>& neg, int reps,
                                  std::uint64_t seed) {
  auto flatten = [](const std::vector<std::vector<double>>& groups) {
    std::vector<double> v;
    for (const auto& g : groups) v.insert(v.end(), g.begin(), g.end());
    return v;
  };
  AucInterval r;
  r.auc = auc(flatten(pos), flatten(neg));
  r.lo = r.hi = r.auc;
  if (pos.empty() || neg.empty() || reps < 1) return r;
  Rng rng(seed);
  std::vector<double> values;
  values.reserve(static_cast<std::size_t>(reps));
  auto draw = [&](const std::vector<std::vector<double>>& groups) {
    std::vector<double> v;
    for (std::size_t k = 0; k < groups.size(); ++k) {
      const auto& g = groups[rng.below(groups.size())];
      v.insert(v.end(), g.begin(), g.end());
    }
    return v;
  };
  for (int b = 0; b < reps; ++b) {
    const std::vector<double> p = draw(pos);
    const std::vector<double> q = draw(neg);
    const double a = auc(p, q);
    if (!std::isnan(a)) values.push_back(a);
  }
  r.reps = static_cast<int>(values.size());
  if (!values.empty()) {
    r.lo = quantile_of(values, 0.025);
    r.hi = quantile_of(values, 0.975);
  }
  return r;
}

// ------------------------------------------------------------------------------ approximate removal

Eigen::VectorXd project_capped_simplex(const Eigen::VectorXd& y, double C) {
  const Eigen::Index n = y.size();
  if (n == 0) throw InvalidArgument("projection of an empty vector");
  if (!(C > 0) || static_cast<double>(n) * C < 1.0 - 1e-12) {
    throw InvalidArgument("capped simplex is empty: n * C < 1");
  }
  auto mass = [&](double tau) {
    double s = 0;
    for (Eigen::Index i = 0; i < n; ++i) s += std::clamp(y(i) - tau, 0.0, C);
    return s;
  };
  // mass(tau) is non-increasing; mass(lo) = n C >= 1, mass(hi) = 0.
  double lo = y.minCoeff() - C;
  double hi = y.maxCoeff();
  for (int it = 0; it < 200 && hi - lo > 0; ++it) {
    const double mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) break;
    if (mass(mid) >= 1.0) lo = mid; else hi = mid;
  }
  Eigen::VectorXd a(n);
  for (Eigen::Index i = 0; i < n; ++i) a(i) = std::clamp(y(i) - lo, 0.0, C);
  return a;
}

Eigen::VectorXd projected_gradient_steps(const Eigen::MatrixXd& K, double ridge, double C,
                                         Eigen::VectorXd start, int steps) {
  if (K.rows() != K.cols() || K.rows() != start.size()) {
    throw InvalidArgument("projected gradient: K and the start point disagree in size");
  }
  const double L = 2.0 * (K.cwiseAbs().rowwise().sum().maxCoeff() + ridge);
  const Eigen::VectorXd diag = K.diagonal();
  Eigen::VectorXd a = project_capped_simplex(start, C);
  for (int s = 0; s < steps; ++s) {
    const Eigen::VectorXd grad = 2.0 * (K * a + ridge * a) - diag;
    a = project_capped_simplex(a - grad / L, C);
  }
  return a;
}

double refit_offset(const Eigen::MatrixXd& K, double ridge, double C, const Eigen::VectorXd& alpha,
                    double fallback) {
  const Eigen::VectorXd ka = K * alpha + ridge * alpha;
  double sum = 0;
  int count = 0;
  for (Eigen::Index i = 0; i < alpha.size(); ++i) {
    if (alpha(i) > 0 && alpha(i) < C) {
      sum += K(i, i) / 2 - ka(i);
      ++count;
    }
  }
  return count > 0 ? sum / count : fallback;
}

// ------------------------------------------------------------------------------ byte scan

std::vector<std::uint8_t> fp64_bytes(const double* v, int n) {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(n) * 8);
  for (int i = 0; i < n; ++i) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, v + i, 8);
    for (int b = 0; b < 8; ++b) {
      out[static_cast<std::size_t>(i) * 8 + static_cast<std::size_t>(b)] =
          static_cast<std::uint8_t>(bits >> (8 * b));
    }
  }
  return out;
}

ByteScan scan_files(const std::vector<std::string>& files,
                    const std::vector<std::vector<std::uint8_t>>& patterns) {
  ByteScan r;
  r.patterns = patterns.size();
  std::vector<char> found(patterns.size(), 0);
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) continue;
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    r.bytes_scanned += bytes.size();
    bool hit = false;
    for (std::size_t p = 0; p < patterns.size(); ++p) {
      const auto& pat = patterns[p];
      if (pat.empty() || pat.size() > bytes.size()) continue;
      const void* at = ::memmem(bytes.data(), bytes.size(), pat.data(), pat.size());
      if (at != nullptr) {
        found[p] = 1;
        hit = true;
      }
    }
    if (hit) r.files_with_hits.push_back(f);
  }
  for (char c : found) r.patterns_found += static_cast<std::size_t>(c);
  return r;
}

std::vector<std::string> store_files(const std::string& db_path) {
  return {db_path, db_path + "-wal", db_path + "-journal", db_path + "-shm"};
}

}  // namespace svattn::experiments::e7_applications
