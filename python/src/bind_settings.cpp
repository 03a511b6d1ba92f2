// Settings structs: KernelSettings, ProblemSettings, Tolerances, MemorySettings, BatchSettings.
// Their fields, keyword arguments, docs and dicts come from the field tables
// (include/svattn/settings_fields.h); enums are strings. The problem's fields are also accepted
// flat (kernel, bandwidth, degree, coef0, C, ridge) by the MemorySettings/BatchSettings
// constructors and read/written flat as properties.
#include <pybind11/stl.h>

#include <deque>
#include <string>

#include "module.h"
#include "settings_dict.h"
#include "svattn/settings_fields.h"

namespace svattn::python {

namespace {

// Property docs outlive the bindings (pybind11 keeps the pointer of a property's doc).
const char* keep(std::string text) {
  static std::deque<std::string> docs;
  docs.push_back(std::move(text));
  return docs.back().c_str();
}

std::string field_doc(const FieldSpec& f) { return f.doc + " Must be " + requirement(f) + "."; }

// The flat Python name of a problem field: "kernel" for kernel.type, else the last component.
std::string flat_name(const FieldSpec& f) {
  if (f.name == "kernel.type") return "kernel";
  const auto dot = f.name.rfind('.');
  return dot == std::string::npos ? f.name : f.name.substr(dot + 1);
}

template <typename S>
ProblemSettings& problem_of(S& s) {
  if constexpr (std::is_same_v<S, ProblemSettings>) return s;
  else return s.problem;
}

// One read/write property per row of `table` (named by `name_of`, through `part`).
template <typename S, typename T, typename Cls, typename Part>
void def_fields(Cls& cls, const std::vector<Field<T>>& table, Part part,
                std::string (*name_of)(const FieldSpec&)) {
  for (const auto& f : table) {
    const Field<T>* p = &f;
    cls.def_property(
        keep(name_of(f)), [p, part](S& s) { return field_to_py(p->get(part(s))); },
        [p, part](S& s, const py::object& v) { p->set(part(s), field_from_py(*p, v)); },
        keep(field_doc(f)));
  }
}

std::string own_name(const FieldSpec& f) { return f.name; }

// to_dict / __eq__ / __repr__ / pickling from the dict functions of settings_dict.h.
template <typename T, typename Cls>
void def_dict_protocol(Cls& cls, const char* name) {
  cls.def(
         "to_dict", [](const T& s) { return settings_to_dict(s); },
         "All fields as a nested dict (enums as strings).")
      .def("__eq__",
           [](const T& a, const T& b) { return settings_to_dict(a).equal(settings_to_dict(b)); })
      .def("__repr__",
           [name](const T& s) {
             return std::string(name) + "(" + std::string(py::repr(settings_to_dict(s))) + ")";
           })
      .def(py::pickle([](const T& s) { return settings_to_dict(s); },
                      [](const py::dict& d) { return settings_from_dict<T>(d); }))
      .def("validate", [](const T& s) { s.validate(); }, "Raises ValueError naming the bad field.");
}

// S from keyword arguments: the rows of `own` by name, and for structs holding a problem its flat
// fields and problem= / tolerances= objects. Unknown keywords are a TypeError naming them.
template <typename S>
S from_kwargs(const char* cls, const py::kwargs& kw, const std::vector<Field<S>>& own) {
  S s;
  std::size_t used = 0;
  auto take = [&](const std::string& key) -> py::object {
    if (!kw.contains(key.c_str())) return py::none();
    const py::object v = kw[key.c_str()];
    ++used;
    return v;
  };
  if constexpr (!std::is_same_v<S, KernelSettings> && !std::is_same_v<S, ProblemSettings> &&
                !std::is_same_v<S, Tolerances>) {
    if (auto v = take("problem"); !v.is_none()) s.problem = py::cast<ProblemSettings>(v);
    if (auto v = take("tolerances"); !v.is_none()) s.tolerances = py::cast<Tolerances>(v);
  }
  if constexpr (!std::is_same_v<S, KernelSettings> && !std::is_same_v<S, Tolerances>) {
    for (const auto& f : problem_settings_fields())
      if (auto v = take(flat_name(f)); !v.is_none()) f.set(problem_of(s), field_from_py(f, v));
  }
  if constexpr (!std::is_same_v<S, ProblemSettings>) {
    for (const auto& f : own)
      if (auto v = take(f.name); !v.is_none()) f.set(s, field_from_py(f, v));
  }
  if (used != kw.size())
    for (const auto& item : kw) {
      const auto key = py::cast<std::string>(item.first);
      bool known = key == "problem" || key == "tolerances";
      for (const auto& f : problem_settings_fields()) known = known || flat_name(f) == key;
      for (const auto& f : own) known = known || f.name == key;
      if (!known) throw py::type_error(std::string(cls) + "() got an unexpected keyword argument '" + key + "'");
    }
  return s;
}

template <typename S>
void def_flat_problem(py::class_<S>& cls) {
  def_fields<S>(cls, problem_settings_fields(), [](S& s) -> ProblemSettings& { return problem_of(s); },
                &flat_name);
}

void register_kernel_problem(py::module_& m) {
  using K = KernelSettings;
  py::class_<K> k(m, "KernelSettings", "Kernel of the problem (docs/math.md §1).");
  k.def(py::init([](const py::kwargs& kw) { return from_kwargs<K>("KernelSettings", kw, kernel_settings_fields()); }));
  def_fields<K>(k, kernel_settings_fields(), [](K& s) -> K& { return s; }, &own_name);
  def_dict_protocol<K>(k, "KernelSettings");

  using P = ProblemSettings;
  py::class_<P> p(m, "ProblemSettings",
                  "The optimisation problem (docs/math.md §1); every field enters the state hash.");
  p.def(py::init([](const py::kwargs& kw) { return from_kwargs<P>("ProblemSettings", kw, {}); }))
      .def_readwrite("kernel_settings", &P::kernel, "The KernelSettings (C++ `kernel`).");
  def_flat_problem<P>(p);
  def_dict_protocol<P>(p, "ProblemSettings");
}

void register_tolerances(py::module_& m) {
  using T = Tolerances;
  py::class_<T> t(m, "Tolerances", "Tolerances of the canonical refinement (docs/math.md §4).");
  t.def(py::init([](const py::kwargs& kw) { return from_kwargs<T>("Tolerances", kw, tolerances_fields()); }));
  def_fields<T>(t, tolerances_fields(), [](T& s) -> T& { return s; }, &own_name);
  def_dict_protocol<T>(t, "Tolerances");
}

template <typename S>
void register_problem_holder(py::module_& m, const char* name, const char* doc,
                             const std::vector<Field<S>>& own) {
  py::class_<S> s(m, name, doc);
  s.def(py::init([name, &own](const py::kwargs& kw) { return from_kwargs<S>(name, kw, own); }))
      .def_readwrite("problem", &S::problem, "The ProblemSettings (enters the hash).")
      .def_readwrite("tolerances", &S::tolerances, "The Tolerances.");
  def_fields<S>(s, own, [](S& x) -> S& { return x; }, &own_name);
  def_flat_problem<S>(s);
  def_dict_protocol<S>(s, name);
}

// Every field of a table as dicts (name, type, doc, requirement, default), for the stub check.
template <typename S>
py::list describe(const std::vector<Field<S>>& table, std::string (*name_of)(const FieldSpec&)) {
  py::list out;
  const S defaults{};
  for (const auto& f : table)
    out.append(py::dict(py::arg("name") = name_of(f), py::arg("type") = python_type(f.type),
                        py::arg("doc") = field_doc(f), py::arg("default") = field_to_py(f.get(defaults))));
  return out;
}

}  // namespace

void register_settings(py::module_& m) {
  register_kernel_problem(m);
  register_tolerances(m);
  register_problem_holder<MemorySettings>(
      m, "MemorySettings",
      "Settings of an exact Memory (include/svattn/memory.h). The problem's fields are accepted flat "
      "(kernel, bandwidth, degree, coef0, C, ridge) or as problem=ProblemSettings(...).",
      memory_settings_own_fields());
  register_problem_holder<BatchSettings>(m, "BatchSettings",
                                         "Settings of the batch reference solver (docs/math.md §9).",
                                         batch_settings_own_fields());
  m.def(
      "_settings_fields",
      [](const std::string& cls) {
        if (cls == "KernelSettings") return describe(kernel_settings_fields(), &own_name);
        if (cls == "_FlatProblem") return describe(problem_settings_fields(), &flat_name);
        if (cls == "Tolerances") return describe(tolerances_fields(), &own_name);
        if (cls == "MemorySettings") return describe(memory_settings_own_fields(), &own_name);
        if (cls == "BatchSettings") return describe(batch_settings_own_fields(), &own_name);
        throw py::key_error("no field table for " + cls);
      },
      "The field table of a settings class (name, type, doc, default), for the stub's checks.");
}

}  // namespace svattn::python
