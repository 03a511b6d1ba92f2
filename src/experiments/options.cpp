// ExperimentOptions::validate, the `--set KEY=VALUE` overrides of a preset and the ranges every key
// is checked against (options.h).
#include "experiments/options.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace svattn::experiments {
namespace {

using nlohmann::json;

std::string kind_of(const json& v) {
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "a list";
  return "an object";
}

/// The text as JSON, or as a JSON string when it is not JSON.
json parse_value(const std::string& text) {
  json v = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return json(text);
  return v;
}

/// "a/b" with numbers a and b as a/b, else discarded.
json fraction(const std::string& text) {
  const auto slash = text.find('/');
  if (slash == std::string::npos) return json(json::value_t::discarded);
  const json a = json::parse(text.substr(0, slash), nullptr, false);
  const json b = json::parse(text.substr(slash + 1), nullptr, false);
  if (!a.is_number() || !b.is_number() || b.get<double>() == 0)
    return json(json::value_t::discarded);
  return json(a.get<double>() / b.get<double>());
}

/// `value` converted to the type of `field`, or discarded when it has another type.
json coerce(const json& field, const json& value, const std::string& text) {
  if (field.is_boolean()) return value.is_boolean() ? value : json(json::value_t::discarded);
  if (field.is_number_integer() || field.is_number_unsigned()) {
    if (value.is_number_integer() || value.is_number_unsigned()) {
      if (field.is_number_unsigned() && value.is_number_integer() && value.get<std::int64_t>() < 0)
        return json(json::value_t::discarded);
      return value;
    }
    return json(json::value_t::discarded);
  }
  if (field.is_number()) {
    if (value.is_number()) return json(value.get<double>());
    return fraction(text);  // "1/8"
  }
  if (field.is_string()) return json(text);
  if (field.is_array()) {
    json items = value;
    if (!items.is_array()) {  // "1,2,4" or "a,b"
      items = json::array();
      std::string cur;
      for (char c : text + ",") {
        if (c == ',') {
          if (!cur.empty()) items.push_back(parse_value(cur));
          cur.clear();
        } else if (c != ' ') {
          cur += c;
        }
      }
    }
    if (field.empty()) return items;
    json out = json::array();
    for (const auto& it : items) {
      const json c = coerce(field.front(), it, it.is_string() ? it.get<std::string>() : it.dump());
      if (c.is_discarded()) return c;
      out.push_back(c);
    }
    return out;
  }
  return value.type() == field.type() ? value : json(json::value_t::discarded);
}

std::string known_keys(const json& preset) {
  std::string s;
  for (auto it = preset.begin(); it != preset.end(); ++it) s += (s.empty() ? "" : ", ") + it.key();
  return s;
}

}  // namespace

std::string Override::text() const {
  return (scope.empty() ? "" : scope + ".") + key + "=" + value;
}

Override parse_override(const std::string& item) {
  const auto eq = item.find('=');
  const std::string lhs = item.substr(0, eq);
  if (eq == std::string::npos) throw SettingError(lhs, "expected KEY=VALUE");
  Override o;
  o.value = item.substr(eq + 1);
  const auto dot = lhs.find('.');
  if (dot != std::string::npos && dot >= 2 && (lhs[0] == 'E' || lhs[0] == 'e') &&
      std::all_of(lhs.begin() + 1, lhs.begin() + static_cast<std::ptrdiff_t>(dot),
                  [](unsigned char c) { return std::isdigit(c); })) {
    o.scope = lhs.substr(0, dot);
    o.scope[0] = 'E';
    o.key = lhs.substr(dot + 1);
  } else {
    o.key = lhs;
  }
  if (o.key.empty()) throw SettingError(lhs, "empty key");
  return o;
}

json apply_overrides(json preset, const std::string& id, const std::vector<Override>& overrides) {
  for (const auto& o : overrides) {
    if (!o.scope.empty() && o.scope != id) continue;
    const std::string name = (o.scope.empty() ? "" : o.scope + ".") + o.key;
    if (!preset.contains(o.key)) {
      throw SettingError(name, "unknown key of " + id + " (known: " + known_keys(preset) + ")");
    }
    const json& field = preset[o.key];
    const json v = coerce(field, parse_value(o.value), o.value);
    if (v.is_discarded()) {
      throw SettingError(name, "'" + o.value + "' is not " + kind_of(field) + " (the type of " +
                                   id + "'s " + o.key + ", preset value " + field.dump() + ")");
    }
    preset[o.key] = v;
  }
  return preset;
}

void bad(const std::string& field, const std::string& requirement, const json& value) {
  throw SettingError(field, "must be " + requirement + ", got " + value.dump());
}

namespace {

std::string number_text(double x) {
  json j = x;
  if (x == std::floor(x) && std::abs(x) < 1e15) j = static_cast<std::int64_t>(x);
  return j.dump();
}

std::string interval(const KeyRange& r) {
  return std::string(r.min_open ? "(" : "[") + number_text(r.min) + ", " + number_text(r.max) +
         "]";
}

// One scalar of key `r.key` (`field` names it, with the item's index for a list).
void check_scalar(const KeyRange& r, const std::string& field, const json& v) {
  if (v.is_boolean()) return;
  if (v.is_number()) {
    const double x = v.get<double>();
    const bool integer = v.is_number_integer() || v.is_number_unsigned();
    const bool below = r.min_open ? !(x > r.min) : !(x >= r.min);
    if (!std::isfinite(x) || below || x > r.max)
      bad(field, std::string(integer ? "an integer" : "a number") + " in " + interval(r), v);
    return;
  }
  if (v.is_string()) {
    if (r.choices.empty()) return;
    const std::string t = v.get<std::string>();
    if (std::find(r.choices.begin(), r.choices.end(), t) != r.choices.end()) return;
    std::string list;
    for (const auto& c : r.choices) list += (list.empty() ? "" : " | ") + json(c).dump();
    bad(field, "one of " + list, v);
  }
}

}  // namespace

void check_ranges(const json& settings, const std::string& id, const RangeTable& table) {
  if (table.keys.empty()) return;
  for (auto it = settings.begin(); it != settings.end(); ++it) {
    const auto r = std::find_if(table.keys.begin(), table.keys.end(),
                                [&](const KeyRange& k) { return k.key == it.key(); });
    SVATTN_ASSERT(r != table.keys.end(), id + "'s key " + it.key() + " has no range");
    const std::string field = id + "." + it.key();
    const json& v = it.value();
    if (!v.is_array()) {
      check_scalar(*r, field, v);
      continue;
    }
    if (v.size() < r->min_items || v.size() > r->max_items)
      bad(field, "a list of " + std::to_string(r->min_items) + " to " +
                     std::to_string(r->max_items) + " items",
          v);
    for (std::size_t i = 0; i < v.size(); ++i)
      check_scalar(*r, field + "[" + std::to_string(i) + "]", v[i]);
  }
  if (table.relations) table.relations(id, settings);
}

void ExperimentOptions::validate() const {
  // "cpu" is E3's and E5's own (the registry checks that every experiment run has the preset).
  if (preset != "quick" && preset != "paper" && preset != "tiny" && preset != "cpu") {
    throw InvalidArgument("unknown preset '" + preset + "' (expected quick, paper, tiny or cpu)");
  }
  if (out_dir.empty()) throw InvalidArgument("the output directory must not be empty");
}

}  // namespace svattn::experiments
