// The non-template half of the settings field tables (include/svattn/field_table.h): requirement
// texts, range checks, value conversion to and from JSON and command-line text.
#include "svattn/field_table.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "svattn/errors.h"

namespace svattn {
namespace {

// A bound as messages print it: integers plainly, powers of ten below 0.1 as 1e-N, else as
// std::ostream does.
std::string bound_text(double x) {
  if (x == std::floor(x) && std::abs(x) < 1e15) return std::to_string(static_cast<long long>(x));
  if (x > 0 && x < 0.1) {
    const double e = std::round(std::log10(x));
    if (std::pow(10.0, e) == x) return "1e" + std::to_string(static_cast<int>(e));
  }
  std::ostringstream os;
  os << x;
  return os.str();
}

bool is_integer_type(FieldType t) { return t == FieldType::kInt || t == FieldType::kUInt; }

double as_double(const FieldValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  if (const auto* u = std::get_if<std::uint64_t>(&v)) return static_cast<double>(*u);
  return std::nan("");
}

std::string type_words(FieldType t) {
  switch (t) {
    case FieldType::kBool: return "true or false";
    case FieldType::kInt: return "an integer";
    case FieldType::kUInt: return "a non-negative integer";
    case FieldType::kNumber: return "a number";
    case FieldType::kText: return "a text";
  }
  return "?";
}

}  // namespace

std::string python_type(FieldType t) {
  switch (t) {
    case FieldType::kBool: return "bool";
    case FieldType::kInt:
    case FieldType::kUInt: return "int";
    case FieldType::kNumber: return "float";
    case FieldType::kText: return "str";
  }
  return "?";
}

std::string requirement(const FieldSpec& f) {
  const FieldRange& r = f.range;
  if (!r.text.empty()) return r.text;
  if (!r.choices.empty()) {
    std::string s = "one of ";
    for (std::size_t i = 0; i < r.choices.size(); ++i) s += (i ? " | " : "") + r.choices[i];
    return s;
  }
  const bool has_lo = std::isfinite(r.lo), has_hi = std::isfinite(r.hi);
  const std::string finite = is_integer_type(f.type) ? "" : "finite and ";
  if (has_lo && has_hi)
    return std::string("in ") + (r.lo_open ? "(" : "[") + bound_text(r.lo) + ", " + bound_text(r.hi) +
           (r.hi_open ? ")" : "]");
  if (has_lo) return finite + (r.lo_open ? "> " : ">= ") + bound_text(r.lo);
  if (has_hi) return finite + (r.hi_open ? "< " : "<= ") + bound_text(r.hi);
  return f.type == FieldType::kNumber ? "finite" : type_words(f.type);
}

bool in_range(const FieldSpec& f, const FieldValue& v) {
  const FieldRange& r = f.range;
  if (const auto* s = std::get_if<std::string>(&v)) {
    if (r.choices.empty()) return true;
    for (const auto& c : r.choices)
      if (c == *s) return true;
    return false;
  }
  if (std::holds_alternative<bool>(v)) return true;
  const double x = as_double(v);
  if (std::holds_alternative<double>(v) && !std::isfinite(x)) return false;
  if (r.lo_open ? !(x > r.lo) : !(x >= r.lo)) return false;
  if (r.hi_open ? !(x < r.hi) : !(x <= r.hi)) return false;
  return true;
}

std::string value_text(const FieldValue& v) {
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (const auto* u = std::get_if<std::uint64_t>(&v)) return std::to_string(*u);
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  std::ostringstream os;
  os << std::get<double>(v);
  return os.str();
}

std::string exact_text(const FieldValue& v) {
  const auto* d = std::get_if<double>(&v);
  if (!d) return value_text(v);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", *d);
  return buf;
}

nlohmann::json to_json(const FieldValue& v) {
  return std::visit([](const auto& x) { return nlohmann::json(x); }, v);
}

FieldValue value_from_json(const FieldSpec& f, const nlohmann::json& j) {
  const auto wrong = [&]() -> FieldValue {
    throw FormatError(f.name + " must be " + type_words(f.type) + ", got " + j.dump());
  };
  switch (f.type) {
    case FieldType::kBool:
      return j.is_boolean() ? FieldValue(j.get<bool>()) : wrong();
    case FieldType::kInt:
      if (j.is_number_unsigned() && j.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) return wrong();
      return j.is_number_integer() ? FieldValue(j.get<std::int64_t>()) : wrong();
    case FieldType::kUInt:
      if (j.is_number_unsigned()) return FieldValue(j.get<std::uint64_t>());
      return j.is_number_integer() && j.get<std::int64_t>() >= 0
                 ? FieldValue(static_cast<std::uint64_t>(j.get<std::int64_t>()))
                 : wrong();
    case FieldType::kNumber:
      return j.is_number() ? FieldValue(j.get<double>()) : wrong();
    case FieldType::kText:
      return j.is_string() ? FieldValue(j.get<std::string>()) : wrong();
  }
  return wrong();
}

FieldValue parse_field(const FieldSpec& f, const std::string& text) {
  const auto wrong = [&]() -> FieldValue {
    throw InvalidArgument(f.name + " must be " + type_words(f.type) + ", got '" + text + "'");
  };
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  switch (f.type) {
    case FieldType::kBool:
      if (text == "true" || text == "1" || text == "on") return true;
      if (text == "false" || text == "0" || text == "off") return false;
      return wrong();
    case FieldType::kInt: {
      const long long x = std::strtoll(begin, &end, 10);
      if (text.empty() || *end != '\0' || errno == ERANGE) return wrong();
      return static_cast<std::int64_t>(x);
    }
    case FieldType::kUInt: {
      if (text.empty() || text[0] == '-') return wrong();
      const unsigned long long x = std::strtoull(begin, &end, 10);
      if (*end != '\0' || errno == ERANGE) return wrong();
      return static_cast<std::uint64_t>(x);
    }
    case FieldType::kNumber: {
      const double x = std::strtod(begin, &end);
      if (text.empty() || *end != '\0') return wrong();
      return x;
    }
    case FieldType::kText:
      return text;
  }
  return wrong();
}

void bad_field(const std::string& name, const std::string& req, const std::string& value) {
  throw InvalidArgument(name + " must be " + req + ", got " + value);
}

}  // namespace svattn
