// Settings structs <-> Python dicts (see settings_dict.h).
#include "settings_dict.h"

#include <string>

namespace svattn::python {

namespace {
py::object field(const py::dict& d, const char* name) {
  if (!d.contains(name))
    throw py::key_error(std::string("settings dict: missing field '") + name + "'");
  return d[name];
}
}  // namespace

py::dict settings_to_dict(const KernelSettings& s) {
  py::dict d;
  d["type"] = to_string(s.type);
  d["bandwidth"] = s.bandwidth;
  d["degree"] = s.degree;
  d["coef0"] = s.coef0;
  return d;
}

py::dict settings_to_dict(const ProblemSettings& s) {
  py::dict d;
  d["kernel"] = settings_to_dict(s.kernel);
  d["C"] = s.C;
  d["ridge"] = s.ridge;
  return d;
}

py::dict settings_to_dict(const Tolerances& s) {
  py::dict d;
  d["alpha_tol"] = s.alpha_tol;
  d["kkt_tol"] = s.kkt_tol;
  d["max_refine_iterations"] = s.max_refine_iterations;
  return d;
}

py::dict settings_to_dict(const MemorySettings& s) {
  py::dict d;
  d["problem"] = settings_to_dict(s.problem);
  d["tolerances"] = settings_to_dict(s.tolerances);
  d["mode"] = to_string(s.mode);
  d["token_budget"] = s.token_budget;
  d["refactor_period"] = s.refactor_period;
  d["max_steps_per_op"] = s.max_steps_per_op;
  d["schur_tol"] = s.schur_tol;
  return d;
}

py::dict settings_to_dict(const BatchSettings& s) {
  py::dict d;
  d["problem"] = settings_to_dict(s.problem);
  d["tolerances"] = settings_to_dict(s.tolerances);
  d["smo_tol"] = s.smo_tol;
  d["max_smo_iterations"] = s.max_smo_iterations;
  d["cache_mib"] = s.cache_mib;
  return d;
}

template <>
KernelSettings settings_from_dict<KernelSettings>(const py::dict& d) {
  KernelSettings s;
  s.type = kernel_type_from_string(field(d, "type").cast<std::string>());
  s.bandwidth = field(d, "bandwidth").cast<double>();
  s.degree = field(d, "degree").cast<int>();
  s.coef0 = field(d, "coef0").cast<double>();
  return s;
}

template <>
ProblemSettings settings_from_dict<ProblemSettings>(const py::dict& d) {
  ProblemSettings s;
  s.kernel = settings_from_dict<KernelSettings>(field(d, "kernel").cast<py::dict>());
  s.C = field(d, "C").cast<double>();
  s.ridge = field(d, "ridge").cast<double>();
  return s;
}

template <>
Tolerances settings_from_dict<Tolerances>(const py::dict& d) {
  Tolerances s;
  s.alpha_tol = field(d, "alpha_tol").cast<double>();
  s.kkt_tol = field(d, "kkt_tol").cast<double>();
  s.max_refine_iterations = field(d, "max_refine_iterations").cast<int>();
  return s;
}

template <>
MemorySettings settings_from_dict<MemorySettings>(const py::dict& d) {
  MemorySettings s;
  s.problem = settings_from_dict<ProblemSettings>(field(d, "problem").cast<py::dict>());
  s.tolerances = settings_from_dict<Tolerances>(field(d, "tolerances").cast<py::dict>());
  s.mode = memory_mode_from_string(field(d, "mode").cast<std::string>());
  s.token_budget = field(d, "token_budget").cast<std::size_t>();
  s.refactor_period = field(d, "refactor_period").cast<int>();
  s.max_steps_per_op = field(d, "max_steps_per_op").cast<int>();
  s.schur_tol = field(d, "schur_tol").cast<double>();
  return s;
}

template <>
BatchSettings settings_from_dict<BatchSettings>(const py::dict& d) {
  BatchSettings s;
  s.problem = settings_from_dict<ProblemSettings>(field(d, "problem").cast<py::dict>());
  s.tolerances = settings_from_dict<Tolerances>(field(d, "tolerances").cast<py::dict>());
  s.smo_tol = field(d, "smo_tol").cast<double>();
  s.max_smo_iterations = field(d, "max_smo_iterations").cast<long>();
  s.cache_mib = field(d, "cache_mib").cast<std::size_t>();
  return s;
}

}  // namespace svattn::python
