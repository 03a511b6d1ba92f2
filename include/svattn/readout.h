// Readout o(q) = sum_i a_i k(q,x_i) v_i / sum_i a_i k(q,x_i) over the support S ∪ E (docs/math.md §5).
#pragma once
#include "svattn/types.h"

namespace svattn {

/// Support tokens only (a_i > 0), in ascending id order.
struct Support {
  RowMatrix keys;
  RowMatrix values;
  Eigen::VectorXd alpha;
};

/// For RBF: weights exp(log a_i - ||q - x_i||^2 / s^2) normalised by log-sum-exp (max shift), summed
/// in ascending id order. A finite query so far from every key that ||q - x||^2 overflows fp64
/// (e.g. 1e308) is read from the differences of the squared distances instead (the limit: the
/// nearest keys carry the weight); a non-finite query, or one fp64 cannot order, throws
/// InvalidArgument. For linear/poly kernels the weights a_i k(q, x_i) are used directly; if
/// their sum is 0 the result is NaN (documented: those kernels do not define a probability).
Eigen::VectorXd readout(const KernelSettings& k, const Support& s,
                        const Eigen::Ref<const Eigen::VectorXd>& q);
/// f(q) = sum_i a_i k(q, x_i) - k(q, q)/2 + b.
double decision_function(const KernelSettings& k, const Support& s, double b,
                         const Eigen::Ref<const Eigen::VectorXd>& q);

/// Support of a canonical state given its token set (any order).
Support support_of(const State& state, const TokenSet& tokens);

}  // namespace svattn
