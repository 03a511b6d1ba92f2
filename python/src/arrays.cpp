// numpy <-> Eigen conversion (see arrays.h).
#include "arrays.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>

namespace svattn::python {

namespace {
constexpr bool kLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

std::string shape_of(const py::array& a) {
  std::ostringstream os;
  os << "(";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) os << (i ? ", " : "") << a.shape(i);
  os << (a.ndim() == 1 ? ",)" : ")");
  return os.str();
}
}  // namespace

MatrixView::MatrixView(py::handle obj, const std::string& what, bool allow_1d) : what_(what) {
  // A numpy array is used as it is (no PyArray_FromAny round trip: this runs on every add);
  // anything else goes through numpy's conversion.
  array_ = py::isinstance<py::array>(obj) ? py::reinterpret_borrow<py::array>(obj)
                                          : py::array::ensure(obj);
  if (!array_) throw py::type_error(what + ": expected an array of numbers");
  const py::dtype dtype = array_.dtype();
  const char kind = dtype.kind();
  // '>' or '<' against this machine's order: the bytes must be swapped, so the array is converted.
  const bool swapped = dtype.byteorder() == (kLittleEndian ? '>' : '<');
  const bool float_ok = kind == 'f' && (array_.itemsize() == 4 || array_.itemsize() == 8);
  if (kind == 'i' || kind == 'u' || kind == 'b' || (float_ok && swapped)) {
    array_ = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(array_);
  } else if (!float_ok) {
    throw py::type_error(what + ": dtype " + std::string(py::str(py::handle(dtype))) +
                         " is not supported (expected float32 or float64)");
  }
  f32_ = array_.itemsize() == 4;
  if (array_.ndim() == 2) {
    rows_ = array_.shape(0);
    cols_ = array_.shape(1);
    row_stride_ = array_.strides(0);
    col_stride_ = array_.strides(1);
  } else if (array_.ndim() == 1 && allow_1d) {
    was_1d_ = true;
    rows_ = 1;
    cols_ = array_.shape(0);
    col_stride_ = array_.strides(0);
  } else {
    throw py::value_error(what + ": expected a " + std::string(allow_1d ? "1-D or " : "") +
                          "2-D array, got shape " + shape_of(array_));
  }
  data_ = static_cast<const char*>(array_.data());
}

double MatrixView::at(py::ssize_t r, py::ssize_t c) const {
  const char* p = data_ + r * row_stride_ + c * col_stride_;
  if (f32_) {
    float f;
    std::memcpy(&f, p, sizeof f);
    return f;
  }
  double d;
  std::memcpy(&d, p, sizeof d);
  return d;
}

const double* MatrixView::row_ptr(py::ssize_t r) const {
  if (f32_ || col_stride_ != static_cast<py::ssize_t>(sizeof(double))) return nullptr;
  const char* p = data_ + r * row_stride_;
  if (reinterpret_cast<std::uintptr_t>(p) % alignof(double) != 0) return nullptr;
  return reinterpret_cast<const double*>(p);
}

void MatrixView::copy_row(py::ssize_t r, double* out) const {
  for (py::ssize_t c = 0; c < cols_; ++c) out[c] = at(r, c);
}

RowMatrix MatrixView::to_matrix() const {
  RowMatrix m(rows_, cols_);
  for (py::ssize_t r = 0; r < rows_; ++r) copy_row(r, m.row(r).data());
  return m;
}

void MatrixView::check_finite() const {
  for (py::ssize_t r = 0; r < rows_; ++r)
    for (py::ssize_t c = 0; c < cols_; ++c)
      if (!std::isfinite(at(r, c))) {
        std::ostringstream os;
        os << what_ << ": row " << r << " column " << c << " is not finite (" << at(r, c) << ")";
        throw py::value_error(os.str());
      }
}

namespace {
[[noreturn]] void id_out_of_range(const std::string& what, const std::string& value) {
  const std::string msg =
      what + ": id " + value + " is outside the int64 range of token ids [-2^63, 2^63 - 1]";
  PyErr_SetString(PyExc_OverflowError, msg.c_str());
  throw py::error_already_set();
}
}  // namespace

namespace {
bool all_python_ints(py::handle seq) {
  for (py::handle h : seq)
    if (!PyLong_Check(h.ptr())) return false;
  return true;
}
}  // namespace

TokenId to_id(py::handle obj, const std::string& what) {
  if (py::isinstance<py::float_>(obj) || !PyIndex_Check(obj.ptr()))
    throw py::type_error(what + ": expected an integer id, got " +
                         std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
  py::object i = py::reinterpret_steal<py::object>(PyNumber_Index(obj.ptr()));
  if (!i) throw py::error_already_set();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow != 0) id_out_of_range(what, std::string(py::str(i)));
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  return static_cast<TokenId>(v);
}

std::vector<TokenId> to_ids(py::handle obj, const std::string& what) {
  py::array a = py::array::ensure(obj);
  // numpy makes object (ints beyond 64 bits) or float64 (ints mixing the int64 and uint64
  // ranges) of a sequence of Python ints: those are converted one by one, so that the value out
  // of range is named instead of rounded or refused as a float.
  if (a && a.ndim() == 1 && (a.dtype().kind() == 'O' || a.dtype().kind() == 'f') &&
      !py::isinstance<py::array>(obj) && all_python_ints(obj)) {
    std::vector<TokenId> out;
    out.reserve(static_cast<std::size_t>(a.size()));
    for (py::handle h : obj) out.push_back(to_id(h, what));
    return out;
  }
  if (!a) throw py::type_error(what + ": expected a sequence of integer ids");
  if (a.size() == 0) return {};
  const char kind = a.dtype().kind();
  if (kind != 'i' && kind != 'u')
    throw py::type_error(what + ": ids must be integers, got dtype " +
                         std::string(py::str(a.dtype())));
  if (a.ndim() != 1) throw py::value_error(what + ": expected a 1-D sequence of ids");
  if (kind == 'u' && a.itemsize() == 8) {  // uint64 above 2^63 - 1 would wrap to a negative id
    auto u = py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    for (py::ssize_t i = 0; i < u.size(); ++i)
      if (u.data()[i] > static_cast<std::uint64_t>(INT64_MAX))
        id_out_of_range(what, std::to_string(u.data()[i]));
  }
  auto ids = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
  return std::vector<TokenId>(ids.data(), ids.data() + ids.size());
}

py::array_t<double> to_numpy(const std::vector<double>& v) {
  py::array_t<double> a(static_cast<py::ssize_t>(v.size()));
  if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(double));
  return a;
}

py::array_t<std::int64_t> to_numpy(const std::vector<TokenId>& v) {
  py::array_t<std::int64_t> a(static_cast<py::ssize_t>(v.size()));
  if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(TokenId));
  return a;
}

py::array_t<double> to_numpy(const RowMatrix& m) {
  py::array_t<double> a({static_cast<py::ssize_t>(m.rows()), static_cast<py::ssize_t>(m.cols())});
  if (m.size()) std::memcpy(a.mutable_data(), m.data(), m.size() * sizeof(double));
  return a;
}

}  // namespace svattn::python
