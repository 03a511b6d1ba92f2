// numpy <-> Eigen conversion for the core module (docs/python.md "Arrays"): float32/float64 arrays
// of any layout are read in place through their strides; a copy is made only where the core must
// own the data (token sets), an integer array is promoted to float64, or an array's byte order is
// not the machine's.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "svattn/types.h"

namespace svattn::python {

namespace py = pybind11;

/// A read-only 2-D view of a float32/float64 numpy array (1-D arrays are one row). Holds a
/// reference to the array, so it may be used with the GIL released.
class MatrixView {
 public:
  /// Throws TypeError (non-numeric dtype) or ValueError (ndim not in {1, 2} when allow_1d, else
  /// not 2) naming `what`.
  MatrixView(py::handle obj, const std::string& what, bool allow_1d);

  py::ssize_t rows() const { return rows_; }
  py::ssize_t cols() const { return cols_; }
  bool was_1d() const { return was_1d_; }
  /// Pointer to row r when it is contiguous float64 (no copy possible), else nullptr.
  const double* row_ptr(py::ssize_t r) const;
  /// Copies row r (converted to float64) into out[0..cols).
  void copy_row(py::ssize_t r, double* out) const;
  /// The whole matrix as an owning row-major fp64 matrix (one copy).
  RowMatrix to_matrix() const;
  /// Throws ValueError naming `what`, the row and the column of the first non-finite entry.
  void check_finite() const;

 private:
  double at(py::ssize_t r, py::ssize_t c) const;

  py::array array_;
  std::string what_;
  const char* data_ = nullptr;
  py::ssize_t rows_ = 0, cols_ = 0, row_stride_ = 0, col_stride_ = 0;  // strides in bytes
  bool f32_ = false, was_1d_ = false;
};

/// Token ids from a sequence or an integer array. Throws TypeError naming `what` otherwise, and
/// OverflowError naming the value for an id outside int64 (a uint64 id above 2^63 - 1).
std::vector<TokenId> to_ids(py::handle obj, const std::string& what);
/// One token id from a Python or numpy integer; the same errors as to_ids.
TokenId to_id(py::handle obj, const std::string& what);
/// A 1-D float64 numpy array (copy of v).
py::array_t<double> to_numpy(const std::vector<double>& v);
py::array_t<std::int64_t> to_numpy(const std::vector<TokenId>& v);
/// A 2-D float64 numpy array (copy of m).
py::array_t<double> to_numpy(const RowMatrix& m);

}  // namespace svattn::python
