// C++ exceptions -> Python exceptions (docs/python.md "Errors"). The message is the C++ one.
#include "svattn/errors.h"

#include <stdexcept>

#include "module.h"
#ifdef SVATTN_PYTHON_WITH_STORE
#include "svattn/store.h"
#endif

namespace svattn::python {

namespace {
PyObject* new_exception(py::module_& m, const char* name, PyObject* base, const char* doc) {
  const std::string full = std::string("svattn.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(full.c_str(), doc, base, nullptr);
  if (!type) throw py::error_already_set();
  m.add_object(name, py::handle(type));
  return type;
}
}  // namespace

void register_errors(py::module_& m) {
  static PyObject* format_error =
      new_exception(m, "FormatError", PyExc_ValueError,
                    "A file or buffer was read but its contents are malformed.");
  static PyObject* already_exists = new_exception(
      m, "AlreadyExistsError", PyExc_KeyError, "A token id, record or memory name already exists.");
  static PyObject* store_error =
      new_exception(m, "StoreError", PyExc_RuntimeError,
                    "A store operation failed outside the caller's arguments.");
  static PyObject* store_busy = new_exception(
      m, "StoreBusyError", store_error, "The store stayed locked by another connection too long.");
  static PyObject* store_full = new_exception(
      m, "StoreFullError", store_error, "The disk is full; the store operation was rolled back.");
  (void)store_busy;
  (void)store_full;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
#ifdef SVATTN_PYTHON_WITH_STORE
    } catch (const StoreBusy& e) {
      PyErr_SetString(store_busy, e.what());
    } catch (const StoreFull& e) {
      PyErr_SetString(store_full, e.what());
    } catch (const StoreError& e) {
      PyErr_SetString(store_error, e.what());
#endif
    } catch (const InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const FormatError& e) {
      PyErr_SetString(format_error, e.what());
    } catch (const NotFound& e) {
      PyErr_SetString(PyExc_KeyError, e.what());
    } catch (const AlreadyExists& e) {
      PyErr_SetString(already_exists, e.what());
    } catch (const IoError& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    }
  });
}

}  // namespace svattn::python
