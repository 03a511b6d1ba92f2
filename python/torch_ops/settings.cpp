// TORCH_LIBRARY_FRAGMENT(svattn, ...): op settings_fields, the field tables of the torch layers'
// settings (include/svattn/torch/settings_fields.h) as JSON for svattn.torch.settings_fields,
// from which python/svattn/torch/settings.py takes its field docs and range checks
// (docs/python.md "Torch settings").
#include <torch/library.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "svattn/errors.h"
#include "svattn/torch/settings_fields.h"

namespace svattn::python {

namespace {

using nlohmann::json;

json bound(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

// One object per row: the spec (name, Python type, doc, requirement, range) and the value of a
// default-constructed S. `custom`: the row's own check replaces the range (Field::ok);
// `conditional`: the range applies to some values of S only (Field::applies).
template <typename S>
std::string describe(const std::vector<Field<S>>& table) {
  const S defaults{};
  json out = json::array();
  for (const auto& f : table) {
    out.push_back({{"name", f.name},
                   {"type", python_type(f.type)},
                   {"doc", f.doc},
                   {"requirement", requirement(f)},
                   {"default", to_json(f.get(defaults))},
                   {"lo", bound(f.range.lo)},
                   {"hi", bound(f.range.hi)},
                   {"lo_open", f.range.lo_open},
                   {"hi_open", f.range.hi_open},
                   {"choices", f.range.choices},
                   {"custom", static_cast<bool>(f.ok)},
                   {"conditional", static_cast<bool>(f.applies)}});
  }
  return out.dump();
}

// "batched", "hybrid", "attention" or "lm": the full tables (nested rows dotted).
std::string settings_fields(const std::string& name) {
  if (name == "batched") return describe(layers::batched_settings_fields());
  if (name == "hybrid") return describe(layers::hybrid_settings_fields());
  if (name == "attention") return describe(layers::attention_config_fields());
  if (name == "lm") return describe(layers::lm_config_fields());
  TORCH_CHECK_VALUE(false, "settings_fields: no table '", name, "' (expected batched, hybrid, attention or lm)");
}

}  // namespace

}  // namespace svattn::python

TORCH_LIBRARY_FRAGMENT(svattn, m) {
  m.def("settings_fields(str name) -> str", &svattn::python::settings_fields);
}
