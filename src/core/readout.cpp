#include "svattn/readout.h"

#include <cmath>
#include <limits>
#include <unordered_map>

#include "svattn/errors.h"

namespace svattn {

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
    for (int i = 0; i < m; ++i) w[i] = std::exp(w[i] - wmax);
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
