// Field tables of settings structs: each field's name, type, range and doc written once; the
// validation messages, JSON and dict conversion, `--set`/CLI parsing and the Python stub's docs are
// derived from them (the defaults are the struct's own member initialisers).
#pragma once
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "svattn/errors.h"

namespace svattn {

/// The value of one field; enums are their names (kText).
using FieldValue = std::variant<bool, std::int64_t, std::uint64_t, double, std::string>;

enum class FieldType { kBool, kInt, kUInt, kNumber, kText };

/// The allowed values: a number in [lo, hi] (an end excluded when open; a double must also be
/// finite), a text one of `choices` (any when empty). `text`, when set, replaces the requirement
/// derived from the range in messages and docs (and `Field::ok` then decides).
struct FieldRange {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;
  std::vector<std::string> choices;
  std::string text;
};

/// What a table says of a field, independent of the struct it belongs to.
struct FieldSpec {
  std::string name;  ///< key in JSON, dotted path in nested dicts, `--set` key
  FieldType type = FieldType::kNumber;
  std::string doc;
  FieldRange range;
};

/// One row of the table of struct S: its spec and how to read and write the member. `applies`
/// (when set) says whether the range is checked for this value of S (e.g. only for the poly
/// kernel); `ok` (when set) replaces the range check.
template <typename S>
struct Field : FieldSpec {
  std::function<FieldValue(const S&)> get;
  std::function<void(S&, const FieldValue&)> set;
  std::function<bool(const S&)> applies;
  std::function<bool(const S&)> ok;
};

/// "int", "float", "bool" or "str" (the Python type).
std::string python_type(FieldType t);
/// The requirement a valid value meets, as messages and docs print it ("in (0, 1e-3)", ">= 1",
/// "finite and > 0", "one of audit | bounded").
std::string requirement(const FieldSpec& f);
/// Whether `v` satisfies the spec's range (type is not checked).
bool in_range(const FieldSpec& f, const FieldValue& v);
/// The value as messages print it (a double as `std::ostream` does).
std::string value_text(const FieldValue& v);
/// The value as text that parse_field reads back exactly (a double with 17 significant digits).
std::string exact_text(const FieldValue& v);
nlohmann::json to_json(const FieldValue& v);
/// The value of JSON `j` as the spec's type; throws FormatError naming the field when the JSON has
/// another type or an integer does not fit.
FieldValue value_from_json(const FieldSpec& f, const nlohmann::json& j);
/// Parses command-line text ("16", "1e-3", "true", "token") as the spec's type; throws
/// InvalidArgument "NAME must be TYPE, got 'TEXT'".
FieldValue parse_field(const FieldSpec& f, const std::string& text);
/// Throws InvalidArgument "<prefix><name> must be <requirement>, got <value>".
[[noreturn]] void bad_field(const std::string& name, const std::string& requirement,
                            const std::string& value);
/// The value as T (bool, an integer type, double or std::string): throws InvalidArgument naming
/// the field when it holds another kind or does not fit T.
template <typename T>
T field_as(const std::string& name, const FieldValue& v) {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string>) {
    if (const T* x = std::get_if<T>(&v)) return *x;
  } else if constexpr (std::is_floating_point_v<T>) {
    if (const double* x = std::get_if<double>(&v)) return static_cast<T>(*x);
    if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<T>(*i);
    if (const auto* u = std::get_if<std::uint64_t>(&v)) return static_cast<T>(*u);
  } else {
    using L = std::numeric_limits<T>;
    if (const auto* i = std::get_if<std::int64_t>(&v)) {
      if (*i >= 0 ? static_cast<std::uint64_t>(*i) <= static_cast<std::uint64_t>(L::max())
                  : L::is_signed && *i >= static_cast<std::int64_t>(L::min()))
        return static_cast<T>(*i);
      bad_field(name, "an integer in [" + std::to_string(L::min()) + ", " + std::to_string(L::max()) + "]",
                value_text(v));
    }
    if (const auto* u = std::get_if<std::uint64_t>(&v)) {
      if (*u <= static_cast<std::uint64_t>(L::max())) return static_cast<T>(*u);
      bad_field(name, "an integer <= " + std::to_string(L::max()), value_text(v));
    }
  }
  throw InvalidArgument(name + ": a value of another type (" + value_text(v) + ")");
}

/// A FieldValue of a C++ value: integers as int64 (signed) or uint64 (unsigned).
template <typename T>
FieldValue field_value(const T& x) {
  if constexpr (std::is_same_v<T, bool>) return x;
  else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return static_cast<std::int64_t>(x);
  else if constexpr (std::is_integral_v<T>) return static_cast<std::uint64_t>(x);
  else if constexpr (std::is_floating_point_v<T>) return static_cast<double>(x);
  else return std::string(x);
}

/// The FieldType of a C++ member type.
template <typename T>
constexpr FieldType field_type() {
  if constexpr (std::is_same_v<T, bool>) return FieldType::kBool;
  else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return FieldType::kInt;
  else if constexpr (std::is_integral_v<T>) return FieldType::kUInt;
  else if constexpr (std::is_floating_point_v<T>) return FieldType::kNumber;
  else return FieldType::kText;
}

/// Ranges: [lo, inf), (lo, inf), (lo, hi), [lo, hi], [lo, hi).
inline FieldRange at_least(double lo) { return {lo, INFINITY, false, false, {}, {}}; }
inline FieldRange above(double lo) { return {lo, INFINITY, true, false, {}, {}}; }
inline FieldRange open_range(double lo, double hi) { return {lo, hi, true, true, {}, {}}; }
inline FieldRange closed_range(double lo, double hi) { return {lo, hi, false, false, {}, {}}; }
inline FieldRange half_open_range(double lo, double hi) { return {lo, hi, false, true, {}, {}}; }

/// A row reading and writing the member `member` of S directly.
template <typename S, typename M>
Field<S> member_field(const char* name, M S::*member, FieldRange range, const char* doc) {
  Field<S> f;
  f.name = name;
  f.type = field_type<M>();
  f.doc = doc;
  f.range = std::move(range);
  f.get = [member](const S& s) { return field_value(s.*member); };
  f.set = [member, n = f.name](S& s, const FieldValue& v) { s.*member = field_as<M>(n, v); };
  return f;
}

/// A row of an enum member of S, held as its name (`name_of` / `parse` convert).
template <typename S, typename E>
Field<S> enum_field(const char* name, E S::*member, std::string (*name_of)(E),
                    E (*parse)(const std::string&), std::vector<std::string> choices, const char* doc) {
  Field<S> f;
  f.name = name;
  f.type = FieldType::kText;
  f.doc = doc;
  f.range.choices = std::move(choices);
  f.get = [member, name_of](const S& s) { return FieldValue(name_of(s.*member)); };
  f.set = [member, parse, n = f.name](S& s, const FieldValue& v) { s.*member = parse(field_as<std::string>(n, v)); };
  return f;
}

/// Checks every field of `s` that applies against its range; throws as bad_field.
template <typename S>
void validate_fields(const std::vector<Field<S>>& table, const S& s, const std::string& prefix = "") {
  for (const auto& f : table) {
    if (f.applies && !f.applies(s)) continue;
    const FieldValue v = f.get(s);
    if (f.ok ? !f.ok(s) : !in_range(f, v)) bad_field(prefix + f.name, requirement(f), value_text(v));
  }
}

/// The row named `name`, or nullptr.
template <typename S>
const Field<S>* find_field(const std::vector<Field<S>>& table, const std::string& name) {
  for (const auto& f : table)
    if (f.name == name) return &f;
  return nullptr;
}

/// "a, b, c": the names of a table (for messages listing the known keys).
template <typename S>
std::string field_names(const std::vector<Field<S>>& table) {
  std::string out;
  for (const auto& f : table) out += (out.empty() ? "" : ", ") + f.name;
  return out;
}

/// The rows of `inner` as rows of Outer, reaching the member through `member` and with
/// `prefix` before each name (nested tables: "tolerances." + "alpha_tol").
template <typename Outer, typename Inner>
std::vector<Field<Outer>> nest_fields(const std::vector<Field<Inner>>& inner, Inner Outer::*member,
                                      const std::string& prefix) {
  std::vector<Field<Outer>> out;
  for (const auto& f : inner) {
    Field<Outer> o;
    static_cast<FieldSpec&>(o) = f;
    o.name = prefix + f.name;
    o.get = [g = f.get, member](const Outer& s) { return g(s.*member); };
    o.set = [st = f.set, member](Outer& s, const FieldValue& v) { st(s.*member, v); };
    if (f.applies) o.applies = [a = f.applies, member](const Outer& s) { return a(s.*member); };
    if (f.ok) o.ok = [k = f.ok, member](const Outer& s) { return k(s.*member); };
    out.push_back(std::move(o));
  }
  return out;
}

/// A flat JSON object with one key per field (dotted names stay as they are).
template <typename S>
nlohmann::json fields_to_json(const std::vector<Field<S>>& table, const S& s) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : table) j[f.name] = to_json(f.get(s));
  return j;
}

/// `base` with every field read from the flat object `j`. A missing key takes `absent(name)`'s
/// value when it returns one (keys added after files were first written), else throws FormatError
/// naming the key.
template <typename S>
S fields_from_json(const std::vector<Field<S>>& table, const nlohmann::json& j, S base,
                   const std::function<bool(const std::string&, FieldValue*)>& absent = {}) {
  for (const auto& f : table) {
    FieldValue v;
    if (j.contains(f.name))
      v = value_from_json(f, j.at(f.name));
    else if (!absent || !absent(f.name, &v))
      throw FormatError("missing key '" + f.name + "'");
    f.set(base, v);
  }
  return base;
}

}  // namespace svattn
