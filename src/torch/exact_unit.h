// One memory state of the exact path and the queries that read it (internal to src/torch): its
// capture from the lean solver or from svattn::Memory, its readout and its backward as blocked
// matrix products over the support (docs/layers.md §1).
#pragma once
#include <Eigen/Dense>
#include <cstdint>
#include <vector>

#include "svattn/memory.h"
#include "svattn/torch/lean_solver.h"

namespace svattn::layers::detail {

using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct ExactUnit {
  std::int64_t q_begin = 0, q_end = 0;  // query rows of this unit
  std::int64_t mem_size = 0;
  bool warmup = false;
  double b = 0;
  Status status = Status::kEmpty;
  std::vector<std::int64_t> support;  // positions of S ∪ E, ascending
  std::vector<double> alpha;          // aligned with support
  std::vector<std::int8_t> role;      // aligned with support: 1 margin, 2 error
  std::vector<int> margin;            // indices into support, in the row order of R (after row 0)
  Eigen::MatrixXd R;                  // bordered inverse, (|margin| + 1)^2; 0 x 0 when S = ∅
  long events = 0, fallbacks = 0;
  std::int8_t verified = -1;  // certify: 1 the verifier accepts the state, 0 it does not
};

/// One (batch, head) slice, row-major: keys X [N, d], values V [N, dv], queries Q [M, d].
struct Slice {
  const double* X;
  const double* V;
  const double* Q;
  std::int64_t d, dv;
};

/// The unit of the lean solver's current state (positions are the token ids). With `certify` the
/// state is checked by the independent verifier (svattn::verify_state) against the tokens held,
/// whose values are read from the slice.
ExactUnit capture_lean(const LeanSolver& solver, const Slice& s, std::int64_t q_begin,
                       std::int64_t q_end, bool certify);
/// The same from a core memory (ExactSolver::kMemory).
ExactUnit capture_memory(const Memory& mem, std::int64_t q_begin, std::int64_t q_end,
                         bool certify);

/// Rows [q_begin, q_end) of the output O [M, dv] and, if LZ is not null, of the log-normaliser
/// log sum_j a_j k(q, x_j) [M] (-inf for an empty memory).
void unit_readout(const ExactUnit& u, const Slice& s, double sigma, double* O, double* LZ);

/// Gradient buffers of one slice: Xg [N, d], Vg [N, dv], Qg [M, d], *sg (d loss / d sigma).
struct SliceGrad {
  double* Xg;
  double* Vg;
  double* Qg;
  double* sg;
};

/// Adds the unit's gradients (readout and the implicit term of the bordered system) to g.
/// G: d loss / d output [M, dv]; GZ (may be null): d loss / d log-normaliser [M].
void unit_backward(const ExactUnit& u, const Slice& s, const double* G, const double* GZ,
                   double sigma, const SliceGrad& g);

}  // namespace svattn::layers::detail
