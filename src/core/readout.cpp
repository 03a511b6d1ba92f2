#include "svattn/readout.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "svattn/errors.h"

namespace svattn {

namespace {

// log(a_i k(q, x_i)) - log(a_r k(q, x_r)) for the RBF kernel without forming ||q - x||^2, which
// overflows for a far query (||q - x||^2 > 1.8e308; e.g. q = 1e308): ||q - x_i||^2 - ||q - x_r||^2
// = sum_c (x_ic - x_rc)(x_ic + x_rc - 2 q_c) = 8 sum_c e_c g_c with e_c, g_c the factors halved
// (and quartered) so that neither overflows, and the factor 8 applied to the sum. A difference beyond fp64 is +-inf, which is the
// exact limit of the weight ratio (0 or total dominance).
double log_weight_difference(const Support& s, double s2, int i, int r,
                             const Eigen::Ref<const Eigen::VectorXd>& q) {
  const double* xi = s.keys.row(i).data();
  const double* xr = s.keys.row(r).data();
  double diff = 0.0;
  for (Eigen::Index c = 0; c < q.size(); ++c) {
    const double e = xi[c] / 2 - xr[c] / 2;
    if (e == 0) continue;
    const double g = xi[c] / 4 + xr[c] / 4 - q[c] / 2;
    diff += e * (g / s2);
  }
  return std::log(s.alpha[i]) - std::log(s.alpha[r]) - 8 * diff;
}

// The max-shifted RBF weights when ||q - x||^2 / sigma^2 overflowed for every support key: the
// log weights relative to a reference key, the reference moved to any key that is infinitely
// heavier until none is. Throws InvalidArgument when fp64 cannot order the keys (a NaN
// difference: opposite infinite terms).
void far_query_weights(const Support& s, double s2, const Eigen::Ref<const Eigen::VectorXd>& q,
                       std::vector<double>& w) {
  const int m = static_cast<int>(w.size());
  int r = 0;
  for (int round = 0; round <= m; ++round) {
    int heavier = -1;
    for (int i = 0; i < m; ++i) {
      w[i] = i == r ? 0.0 : log_weight_difference(s, s2, i, r, q);
      if (std::isnan(w[i]))
        throw InvalidArgument("readout: the query is too far from the keys for fp64 to order "
                              "their kernel weights (||q - x||^2 / sigma^2 overflows)");
      if (w[i] == std::numeric_limits<double>::infinity() && heavier < 0) heavier = i;
    }
    if (heavier < 0) break;
    r = heavier;
  }
  const double wmax = *std::max_element(w.begin(), w.end());
  for (int i = 0; i < m; ++i) w[i] = std::exp(w[i] - wmax);
}

}  // namespace

Eigen::VectorXd readout(const KernelSettings& k, const Support& s,
                        const Eigen::Ref<const Eigen::VectorXd>& q) {
  const int m = static_cast<int>(s.alpha.size());
  const int d = static_cast<int>(s.keys.cols());
  const int dv = static_cast<int>(s.values.cols());
  if (q.size() != d)
    throw InvalidArgument("readout: query has dimension " + std::to_string(q.size()) +
                          ", keys have " + std::to_string(d));
  Eigen::VectorXd out = Eigen::VectorXd::Zero(dv);
  if (m == 0) {
    out.setConstant(std::numeric_limits<double>::quiet_NaN());
    return out;
  }
  std::vector<double> w(m);
  if (k.type == KernelType::kRbf) {
    // log(a_i k(q, x_i)) = log a_i - ||q - x_i||^2 / s^2 ; max-shifted softmax over the support.
    const double s2 = k.bandwidth * k.bandwidth;
    double wmax = -std::numeric_limits<double>::infinity();
    for (int i = 0; i < m; ++i) {
      double dist = 0.0;
      const double* xi = s.keys.row(i).data();
      for (int c = 0; c < d; ++c) {
        const double t = q[c] - xi[c];
        dist += t * t;
      }
      w[i] = std::log(s.alpha[i]) - dist / s2;
      if (w[i] > wmax) wmax = w[i];
    }
    if (std::isfinite(wmax)) {
      for (int i = 0; i < m; ++i) w[i] = std::exp(w[i] - wmax);
    } else {  // every squared distance overflowed (or a non-finite query): no shift exists
      for (Eigen::Index c = 0; c < q.size(); ++c)
        if (!std::isfinite(q[c]))
          throw InvalidArgument("readout: query entry " + std::to_string(c) + " is not finite");
      far_query_weights(s, s2, q, w);
    }
  } else {
    for (int i = 0; i < m; ++i) w[i] = s.alpha[i] * kernel(k, q.data(), s.keys.row(i).data(), d);
  }
  double z = 0.0;
  for (int i = 0; i < m; ++i) {
    z += w[i];
    const double* vi = s.values.row(i).data();
    for (int c = 0; c < dv; ++c) out[c] += w[i] * vi[c];
  }
  if (z == 0.0) {
    out.setConstant(std::numeric_limits<double>::quiet_NaN());
    return out;
  }
  for (int c = 0; c < dv; ++c) out[c] /= z;
  return out;
}

double decision_function(const KernelSettings& k, const Support& s, double b,
                         const Eigen::Ref<const Eigen::VectorXd>& q) {
  const int d = static_cast<int>(s.keys.cols());
  if (q.size() != d) throw InvalidArgument("decision_function: query dimension mismatch");
  double acc = 0.0;
  for (Eigen::Index i = 0; i < s.alpha.size(); ++i)
    acc += s.alpha[i] * kernel(k, q.data(), s.keys.row(i).data(), d);
  return acc - kernel(k, q.data(), q.data(), d) / 2 + b;
}

Support support_of(const State& state, const TokenSet& tokens) {
  std::unordered_map<TokenId, Eigen::Index> row;
  for (Eigen::Index r = 0; r < static_cast<Eigen::Index>(tokens.ids.size()); ++r) row[tokens.ids[r]] = r;
  std::vector<Eigen::Index> rows;
  std::vector<double> a;
  for (size_t t = 0; t < state.ids.size(); ++t) {
    if (state.alpha[t] > 0) {
      auto it = row.find(state.ids[t]);
      if (it == row.end())
        throw NotFound("support_of: token " + std::to_string(state.ids[t]) + " not in token set");
      rows.push_back(it->second);
      a.push_back(state.alpha[t]);
    }
  }
  Support s;
  s.keys.resize(static_cast<Eigen::Index>(rows.size()), tokens.keys.cols());
  s.values.resize(static_cast<Eigen::Index>(rows.size()), tokens.values.cols());
  s.alpha.resize(static_cast<Eigen::Index>(rows.size()));
  for (size_t t = 0; t < rows.size(); ++t) {
    s.keys.row(t) = tokens.keys.row(rows[t]);
    s.values.row(t) = tokens.values.row(rows[t]);
    s.alpha[t] = a[t];
  }
  return s;
}

}  // namespace svattn
