// Settings structs: KernelSettings, ProblemSettings, Tolerances, MemorySettings, BatchSettings.
// Field names and defaults are the C++ ones (include/svattn/*.h); enums are strings. The problem's
// fields are also accepted flat by the MemorySettings/BatchSettings constructors.
#include <pybind11/stl.h>

#include <optional>

#include "module.h"
#include "settings_dict.h"
#include "svattn/batch_solver.h"
#include "svattn/memory.h"

namespace svattn::python {

namespace {

// Flat problem keywords shared by the MemorySettings and BatchSettings constructors.
struct FlatProblem {
  std::optional<std::string> kernel;
  std::optional<double> bandwidth, coef0, C, ridge;
  std::optional<int> degree;
  void apply(ProblemSettings& p) const {
    if (kernel) p.kernel.type = kernel_type_from_string(*kernel);
    if (bandwidth) p.kernel.bandwidth = *bandwidth;
    if (degree) p.kernel.degree = *degree;
    if (coef0) p.kernel.coef0 = *coef0;
    if (C) p.C = *C;
    if (ridge) p.ridge = *ridge;
  }
};

#define SVATTN_FLAT_ARGS                                                                    \
  py::arg("kernel") = py::none(), py::arg("bandwidth") = py::none(),                        \
  py::arg("degree") = py::none(), py::arg("coef0") = py::none(), py::arg("C") = py::none(), \
  py::arg("ridge") = py::none(), py::arg("problem") = py::none(),                           \
  py::arg("tolerances") = py::none()

ProblemSettings& problem_of(ProblemSettings& p) { return p; }
const ProblemSettings& problem_of(const ProblemSettings& p) { return p; }
template <typename T>
auto problem_of(T& s) -> decltype((s.problem)) {
  return s.problem;
}

// Flat read/write properties kernel, bandwidth, degree, coef0, C, ridge of the problem.
template <typename T, typename Cls>
void def_flat_problem(Cls& cls) {
  cls.def_property(
         "kernel", [](const T& s) { return to_string(problem_of(s).kernel.type); },
         [](T& s, const std::string& k) { problem_of(s).kernel.type = kernel_type_from_string(k); },
         "Kernel type of problem.kernel: 'rbf' | 'linear' | 'poly'.")
      .def_property(
          "bandwidth", [](const T& s) { return problem_of(s).kernel.bandwidth; },
          [](T& s, double v) { problem_of(s).kernel.bandwidth = v; }, "problem.kernel.bandwidth.")
      .def_property(
          "degree", [](const T& s) { return problem_of(s).kernel.degree; },
          [](T& s, int v) { problem_of(s).kernel.degree = v; }, "problem.kernel.degree.")
      .def_property(
          "coef0", [](const T& s) { return problem_of(s).kernel.coef0; },
          [](T& s, double v) { problem_of(s).kernel.coef0 = v; }, "problem.kernel.coef0.")
      .def_property(
          "C", [](const T& s) { return problem_of(s).C; },
          [](T& s, double v) { problem_of(s).C = v; }, "problem.C (box bound).")
      .def_property(
          "ridge", [](const T& s) { return problem_of(s).ridge; },
          [](T& s, double v) { problem_of(s).ridge = v; }, "problem.ridge (mu).");
}

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
                      [](const py::dict& d) { return settings_from_dict<T>(d); }));
}

void register_kernel_problem(py::module_& m) {
  py::class_<KernelSettings> k(m, "KernelSettings", "Kernel of the problem (docs/math.md §1).");
  k.def(py::init([](const std::string& type, std::optional<double> bandwidth,
                    std::optional<int> degree, std::optional<double> coef0) {
          ProblemSettings p;
          FlatProblem{type, bandwidth, coef0, std::nullopt, std::nullopt, degree}.apply(p);
          return p.kernel;
        }),
        py::kw_only(), py::arg("type") = "rbf", py::arg("bandwidth") = py::none(),
        py::arg("degree") = py::none(), py::arg("coef0") = py::none())
      .def_property(
          "type", [](const KernelSettings& s) { return to_string(s.type); },
          [](KernelSettings& s, const std::string& t) { s.type = kernel_type_from_string(t); },
          "'rbf' exp(-|a-b|^2/bandwidth^2) | 'linear' a.b | 'poly' (a.b + coef0)^degree.")
      .def_readwrite("bandwidth", &KernelSettings::bandwidth, "RBF bandwidth sigma, finite > 0.")
      .def_readwrite("degree", &KernelSettings::degree, "Polynomial degree >= 1.")
      .def_readwrite("coef0", &KernelSettings::coef0, "Polynomial offset, finite >= 0.")
      .def("validate", &KernelSettings::validate, "Raises ValueError naming the bad field.");
  def_dict_protocol<KernelSettings>(k, "KernelSettings");

  py::class_<ProblemSettings> p(
      m, "ProblemSettings",
      "The optimisation problem (docs/math.md §1); every field enters the state hash.");
  p.def(py::init([](std::optional<std::string> kernel, std::optional<double> bandwidth,
                    std::optional<int> degree, std::optional<double> coef0, std::optional<double> C,
                    std::optional<double> ridge) {
          ProblemSettings s;
          FlatProblem{kernel, bandwidth, coef0, C, ridge, degree}.apply(s);
          return s;
        }),
        py::kw_only(), py::arg("kernel") = py::none(), py::arg("bandwidth") = py::none(),
        py::arg("degree") = py::none(), py::arg("coef0") = py::none(), py::arg("C") = py::none(),
        py::arg("ridge") = py::none())
      .def_readwrite("kernel_settings", &ProblemSettings::kernel,
                     "The KernelSettings (C++ `kernel`).")
      .def("validate", &ProblemSettings::validate, "Raises ValueError naming the bad field.");
  def_flat_problem<ProblemSettings>(p);
  def_dict_protocol<ProblemSettings>(p, "ProblemSettings");
}

void register_tolerances(py::module_& m) {
  py::class_<Tolerances> t(m, "Tolerances", "Tolerances of the canonical refinement (docs/math.md §4).");
  t.def(py::init([](std::optional<double> alpha_tol, std::optional<double> kkt_tol,
                    std::optional<int> max_refine_iterations) {
          Tolerances s;
          if (alpha_tol) s.alpha_tol = *alpha_tol;
          if (kkt_tol) s.kkt_tol = *kkt_tol;
          if (max_refine_iterations) s.max_refine_iterations = *max_refine_iterations;
          return s;
        }),
        py::kw_only(), py::arg("alpha_tol") = py::none(), py::arg("kkt_tol") = py::none(),
        py::arg("max_refine_iterations") = py::none())
      .def_readwrite("alpha_tol", &Tolerances::alpha_tol, "Reserve/error threshold, in (0, 1e-3).")
      .def_readwrite("kkt_tol", &Tolerances::kkt_tol,
                     "Gradient-check rounding floor, in (0, 1e-2).")
      .def_readwrite("max_refine_iterations", &Tolerances::max_refine_iterations, ">= 1.")
      .def("validate", &Tolerances::validate, "Raises ValueError naming the bad field.");
  def_dict_protocol<Tolerances>(t, "Tolerances");
}

void register_memory_settings(py::module_& m) {
  py::class_<MemorySettings> s(
      m, "MemorySettings",
      "Settings of an exact Memory (include/svattn/memory.h). The problem's "
      "fields are accepted flat (kernel, bandwidth, degree, coef0, C, ridge) "
      "or as problem=ProblemSettings(...).");
  s.def(py::init([](std::optional<std::string> kernel, std::optional<double> bandwidth,
                    std::optional<int> degree, std::optional<double> coef0, std::optional<double> C,
                    std::optional<double> ridge, std::optional<ProblemSettings> problem,
                    std::optional<Tolerances> tolerances, const std::string& mode,
                    std::optional<std::size_t> token_budget, std::optional<int> refactor_period,
                    std::optional<int> max_steps_per_op, std::optional<double> schur_tol) {
          MemorySettings r;
          if (problem) r.problem = *problem;
          FlatProblem{kernel, bandwidth, coef0, C, ridge, degree}.apply(r.problem);
          if (tolerances) r.tolerances = *tolerances;
          r.mode = memory_mode_from_string(mode);
          if (token_budget) r.token_budget = *token_budget;
          if (refactor_period) r.refactor_period = *refactor_period;
          if (max_steps_per_op) r.max_steps_per_op = *max_steps_per_op;
          if (schur_tol) r.schur_tol = *schur_tol;
          return r;
        }),
        py::kw_only(), SVATTN_FLAT_ARGS, py::arg("mode") = "audit",
        py::arg("token_budget") = py::none(), py::arg("refactor_period") = py::none(),
        py::arg("max_steps_per_op") = py::none(), py::arg("schur_tol") = py::none())
      .def_readwrite("problem", &MemorySettings::problem, "The ProblemSettings (enters the hash).")
      .def_readwrite("tolerances", &MemorySettings::tolerances, "The Tolerances.")
      .def_property(
          "mode", [](const MemorySettings& s) { return to_string(s.mode); },
          [](MemorySettings& s, const std::string& v) { s.mode = memory_mode_from_string(v); },
          "'audit' (every token kept) | 'bounded' (reserve tokens evicted).")
      .def_readwrite("token_budget", &MemorySettings::token_budget,
                     "Bounded mode: evict above this size.")
      .def_readwrite("refactor_period", &MemorySettings::refactor_period, ">= 1.")
      .def_readwrite("max_steps_per_op", &MemorySettings::max_steps_per_op, ">= 1.")
      .def_readwrite("schur_tol", &MemorySettings::schur_tol, "In (0, 1e-2).")
      .def("validate", &MemorySettings::validate, "Raises ValueError naming the bad field.");
  def_flat_problem<MemorySettings>(s);
  def_dict_protocol<MemorySettings>(s, "MemorySettings");
}

void register_batch_settings(py::module_& m) {
  py::class_<BatchSettings> s(m, "BatchSettings",
                              "Settings of the batch reference solver (docs/math.md §9).");
  s.def(py::init([](std::optional<std::string> kernel, std::optional<double> bandwidth,
                    std::optional<int> degree, std::optional<double> coef0, std::optional<double> C,
                    std::optional<double> ridge, std::optional<ProblemSettings> problem,
                    std::optional<Tolerances> tolerances, std::optional<double> smo_tol,
                    std::optional<long> max_smo_iterations, std::optional<std::size_t> cache_mib) {
          BatchSettings r;
          if (problem) r.problem = *problem;
          FlatProblem{kernel, bandwidth, coef0, C, ridge, degree}.apply(r.problem);
          if (tolerances) r.tolerances = *tolerances;
          if (smo_tol) r.smo_tol = *smo_tol;
          if (max_smo_iterations) r.max_smo_iterations = *max_smo_iterations;
          if (cache_mib) r.cache_mib = *cache_mib;
          return r;
        }),
        py::kw_only(), SVATTN_FLAT_ARGS, py::arg("smo_tol") = py::none(),
        py::arg("max_smo_iterations") = py::none(), py::arg("cache_mib") = py::none())
      .def_readwrite("problem", &BatchSettings::problem)
      .def_readwrite("tolerances", &BatchSettings::tolerances)
      .def_readwrite("smo_tol", &BatchSettings::smo_tol, "In (0, 1e-2).")
      .def_readwrite("max_smo_iterations", &BatchSettings::max_smo_iterations,
                     "0 = max(1e7, 100 n).")
      .def_readwrite("cache_mib", &BatchSettings::cache_mib, ">= 1.")
      .def("validate", &BatchSettings::validate, "Raises ValueError naming the bad field.");
  def_flat_problem<BatchSettings>(s);
  def_dict_protocol<BatchSettings>(s, "BatchSettings");
}

}  // namespace

void register_settings(py::module_& m) {
  register_kernel_problem(m);
  register_tolerances(m);
  register_memory_settings(m);
  register_batch_settings(m);
}

}  // namespace svattn::python
