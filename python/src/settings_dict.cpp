// Settings structs <-> Python dicts (see settings_dict.h), walking the field tables of
// include/svattn/settings_fields.h: a dotted field name is a path through nested dicts.
#include "settings_dict.h"

#include <string>

namespace svattn::python {

namespace {

py::object field(const py::dict& d, const std::string& name) {
  if (!d.contains(name))
    throw py::key_error("settings dict: missing field '" + name + "'");
  return d[py::str(name)];
}

std::vector<std::string> path_of(const std::string& name) {
  std::vector<std::string> parts;
  std::size_t at = 0;
  for (std::size_t dot; (dot = name.find('.', at)) != std::string::npos; at = dot + 1)
    parts.push_back(name.substr(at, dot - at));
  parts.push_back(name.substr(at));
  return parts;
}

template <typename S>
py::dict table_to_dict(const std::vector<Field<S>>& table, const S& s) {
  py::dict root;
  for (const auto& f : table) {
    const auto parts = path_of(f.name);
    py::dict d = root;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
      if (!d.contains(parts[i])) d[py::str(parts[i])] = py::dict();
      d = py::cast<py::dict>(d[py::str(parts[i])]);
    }
    d[py::str(parts.back())] = field_to_py(f.get(s));
  }
  return root;
}

template <typename S>
S table_from_dict(const std::vector<Field<S>>& table, const py::dict& root) {
  S s;
  for (const auto& f : table) {
    const auto parts = path_of(f.name);
    py::dict d = root;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) d = py::cast<py::dict>(field(d, parts[i]));
    f.set(s, field_from_py(f, field(d, parts.back())));
  }
  return s;
}

}  // namespace

py::object field_to_py(const FieldValue& v) {
  return std::visit([](const auto& x) { return py::cast(x); }, v);
}

FieldValue field_from_py(const FieldSpec& f, const py::handle& o) {
  switch (f.type) {
    case FieldType::kBool: return o.cast<bool>();
    case FieldType::kInt: return o.cast<std::int64_t>();
    case FieldType::kUInt: return o.cast<std::uint64_t>();
    case FieldType::kNumber: return o.cast<double>();
    case FieldType::kText: return o.cast<std::string>();
  }
  throw py::type_error("settings field " + f.name + ": unknown type");
}

py::dict settings_to_dict(const KernelSettings& s) { return table_to_dict(kernel_settings_fields(), s); }
py::dict settings_to_dict(const ProblemSettings& s) { return table_to_dict(problem_settings_fields(), s); }
py::dict settings_to_dict(const Tolerances& s) { return table_to_dict(tolerances_fields(), s); }
py::dict settings_to_dict(const MemorySettings& s) { return table_to_dict(memory_settings_fields(), s); }
py::dict settings_to_dict(const BatchSettings& s) { return table_to_dict(batch_settings_fields(), s); }

template <>
KernelSettings settings_from_dict<KernelSettings>(const py::dict& d) {
  return table_from_dict(kernel_settings_fields(), d);
}
template <>
ProblemSettings settings_from_dict<ProblemSettings>(const py::dict& d) {
  return table_from_dict(problem_settings_fields(), d);
}
template <>
Tolerances settings_from_dict<Tolerances>(const py::dict& d) {
  return table_from_dict(tolerances_fields(), d);
}
template <>
MemorySettings settings_from_dict<MemorySettings>(const py::dict& d) {
  return table_from_dict(memory_settings_fields(), d);
}
template <>
BatchSettings settings_from_dict<BatchSettings>(const py::dict& d) {
  return table_from_dict(batch_settings_fields(), d);
}

}  // namespace svattn::python
