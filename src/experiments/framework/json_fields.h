// Field tables of typed results: each JSON key of a result type written once, with the member it
// holds; to_json writes every row and from_json (used only by `--render`) reads every row back,
// naming a missing or mistyped key. The idea of include/svattn/field_table.h, for members of any
// type nlohmann::json converts (vectors, maps, nested result structs).
#pragma once
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "svattn/errors.h"

namespace svattn::experiments {

/// One key of S's JSON: how to write it from an S and read it back into one. `what` names the
/// result in errors ("E2 result").
template <typename S>
struct JsonField {
  std::string name;
  std::function<void(const S&, nlohmann::json&)> write;
  std::function<void(const nlohmann::json&, S&, const std::string& what)> read;
};

template <typename S>
using JsonFields = std::vector<JsonField<S>>;

/// j[key] as T: FormatError "<what>: missing field `key`" or "… has the wrong type".
template <typename T>
T read_json_key(const nlohmann::json& j, const std::string& key, const std::string& what) {
  if (!j.is_object() || !j.contains(key))
    throw FormatError(what + ": missing field `" + key + "`");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw FormatError(what + ": field `" + key + "` has the wrong type");
  }
}

/// The member `member` (of S or of a base B of S) under `name`, converted by nlohmann::json.
template <typename S, typename B, typename M>
JsonField<S> json_member(const char* name, M B::*member) {
  JsonField<S> f;
  f.name = name;
  f.write = [member, key = f.name](const S& s, nlohmann::json& j) { j[key] = s.*member; };
  f.read = [member, key = f.name](const nlohmann::json& j, S& s, const std::string& what) {
    s.*member = read_json_key<M>(j, key, what);
  };
  return f;
}

/// A double member written as null when NaN (JSON has no NaN) and read back null as NaN.
template <typename S, typename B>
JsonField<S> json_number_or_nan(const char* name, double B::*member) {
  JsonField<S> f;
  f.name = name;
  f.write = [member, key = f.name](const S& s, nlohmann::json& j) {
    const double x = s.*member;
    j[key] = x != x ? nlohmann::json(nullptr) : nlohmann::json(x);
  };
  f.read = [member, key = f.name](const nlohmann::json& j, S& s, const std::string& what) {
    if (j.is_object() && j.contains(key) && j.at(key).is_null())
      s.*member = std::numeric_limits<double>::quiet_NaN();
    else
      s.*member = read_json_key<double>(j, key, what);
  };
  return f;
}

/// A key whose JSON `write` makes from an S and `read` puts back into one (`read` gets the key's
/// value; a missing key is a FormatError naming it). Rows read in table order, so `read` may use
/// members of earlier rows.
template <typename S>
JsonField<S> json_custom(const char* name, std::function<nlohmann::json(const S&)> write,
                         std::function<void(const nlohmann::json&, S&)> read) {
  JsonField<S> f;
  f.name = name;
  f.write = [write, key = f.name](const S& s, nlohmann::json& j) { j[key] = write(s); };
  f.read = [read, key = f.name](const nlohmann::json& j, S& s, const std::string& what) {
    read(read_json_key<nlohmann::json>(j, key, what), s);
  };
  return f;
}

/// The rows of `table` followed by those of `more`.
template <typename S>
JsonFields<S> operator+(JsonFields<S> table, const JsonFields<S>& more) {
  table.insert(table.end(), more.begin(), more.end());
  return table;
}

/// One key per row of `table`, into `j` (an object).
template <typename S>
nlohmann::json write_fields(const JsonFields<S>& table, const S& s,
                            nlohmann::json j = nlohmann::json::object()) {
  for (const auto& f : table) f.write(s, j);
  return j;
}

/// An S with every row read from `j`; FormatError naming the key (and `what`) otherwise.
template <typename S>
S read_fields(const JsonFields<S>& table, const nlohmann::json& j, const std::string& what,
              S s = S()) {
  if (!j.is_object()) throw FormatError(what + ": not a JSON object");
  for (const auto& f : table) f.read(j, s, what);
  return s;
}

}  // namespace svattn::experiments
