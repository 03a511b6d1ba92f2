// Field tables of typed results: each JSON key of a result type written once, with the member it
// holds; to_json writes every row and from_json (used only by `--render`) reads every row back,
// naming a missing or mistyped key. The idea of include/svattn/field_table.h, for members of any
// type nlohmann::json converts (vectors, maps, nested result structs).
#pragma once
#include <functional>
#include <limits>
#include <optional>
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

/// j[key], a JSON object (a nested struct's): FormatError naming the key otherwise.
inline nlohmann::json read_json_object(const nlohmann::json& j, const std::string& key,
                                       const std::string& what) {
  nlohmann::json v = read_json_key<nlohmann::json>(j, key, what);
  if (!v.is_object()) throw FormatError(what + ": field `" + key + "` has the wrong type");
  return v;
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

/// A double member written as null when NaN (JSON has no NaN; nlohmann also writes ±infinity as
/// null) and read back null as `on_null`: +infinity where the member is never NaN (a deviation
/// that counts a NaN difference as infinite), NaN by default.
template <typename S, typename B>
JsonField<S> json_number_or_null(const char* name, double B::*member,
                                 double on_null = std::numeric_limits<double>::quiet_NaN()) {
  JsonField<S> f;
  f.name = name;
  f.write = [member, key = f.name](const S& s, nlohmann::json& j) {
    const double x = s.*member;
    j[key] = x != x ? nlohmann::json(nullptr) : nlohmann::json(x);
  };
  f.read = [member, on_null, key = f.name](const nlohmann::json& j, S& s, const std::string& what) {
    if (j.is_object() && j.contains(key) && j.at(key).is_null())
      s.*member = on_null;
    else
      s.*member = read_json_key<double>(j, key, what);
  };
  return f;
}

/// A double member written as null when NaN and read back null as NaN.
template <typename S, typename B>
JsonField<S> json_number_or_nan(const char* name, double B::*member) {
  return json_number_or_null<S>(name, member);
}

/// The table of a nested result struct M (a function returning its static table, so tables may
/// name each other in any order of static initialisation).
template <typename M>
using JsonTable = const JsonFields<M>& (*)();

/// A member of struct type M, written as the object of M's table and read back by it (errors name
/// `what`, e.g. "E1 comparison").
template <typename S, typename B, typename M>
JsonField<S> json_struct(const char* name, M B::*member, JsonTable<M> table, std::string what);

/// A vector of structs M, written as an array of objects of M's table; a value that is not an
/// array is a FormatError naming the key, an element's missing key names the key and `what`.
template <typename S, typename B, typename M>
JsonField<S> json_struct_array(const char* name, std::vector<M> B::*member, JsonTable<M> table,
                               std::string what);

/// As json_struct_array, with the table of each element made from the S read so far (a table
/// that depends on an earlier row, e.g. budgets that key the element's maps).
template <typename S, typename B, typename M, typename TableOf>
JsonField<S> json_struct_array_of(const char* name, std::vector<M> B::*member, TableOf table_of,
                                  std::string what);

/// The member `inner` of the member `outer` (a struct written as one of its members, e.g. a score
/// group as its array).
template <typename S, typename B, typename O, typename M>
JsonField<S> json_member_in(const char* name, O B::*outer, M O::*inner);

/// A vector of doubles written as an array with null for NaN and read back null as NaN; an
/// element that is neither a number nor null is a FormatError naming the key.
template <typename S, typename B>
JsonField<S> json_numbers_or_nan(const char* name, std::vector<double> B::*member);

/// Members of S itself grouped under one key as a sub-object (`rows` written into it and read
/// from it; errors in it name `what`, e.g. "E1 comparison decay_zero").
template <typename S, typename B, typename M, typename TableOf>
JsonField<S> json_struct_array_of(const char* name, std::vector<M> B::*member, TableOf table_of,
                                  std::string what) {
  JsonField<S> f;
  f.name = name;
  f.write = [member, table_of, key = f.name](const S& s, nlohmann::json& j) {
    const JsonFields<M> table = table_of(s);
    nlohmann::json a = nlohmann::json::array();
    for (const M& m : s.*member) a.push_back(write_fields(table, m));
    j[key] = std::move(a);
  };
  f.read = [member, table_of, what, key = f.name](const nlohmann::json& j, S& s,
                                                  const std::string& outer) {
    const JsonFields<M> table = table_of(s);
    std::vector<M> v;
    for (const auto& x : read_json_key<std::vector<nlohmann::json>>(j, key, outer)) {
      if (!x.is_object()) throw FormatError(outer + ": an element of `" + key + "` is not an object");
      v.push_back(read_fields(table, x, what));
    }
    s.*member = std::move(v);
  };
  return f;
}

template <typename S, typename B, typename O, typename M>
JsonField<S> json_member_in(const char* name, O B::*outer, M O::*inner) {
  JsonField<S> f;
  f.name = name;
  f.write = [outer, inner, key = f.name](const S& s, nlohmann::json& j) { j[key] = s.*outer.*inner; };
  f.read = [outer, inner, key = f.name](const nlohmann::json& j, S& s, const std::string& what) {
    s.*outer.*inner = read_json_key<M>(j, key, what);
  };
  return f;
}

template <typename S, typename B>
JsonField<S> json_numbers_or_nan(const char* name, std::vector<double> B::*member) {
  JsonField<S> f;
  f.name = name;
  f.write = [member, key = f.name](const S& s, nlohmann::json& j) {
    nlohmann::json a = nlohmann::json::array();
    for (double x : s.*member) a.push_back(x != x ? nlohmann::json(nullptr) : nlohmann::json(x));
    j[key] = std::move(a);
  };
  f.read = [member, key = f.name](const nlohmann::json& j, S& s, const std::string& what) {
    const nlohmann::json a = read_json_key<nlohmann::json>(j, key, what);
    if (!a.is_array()) throw FormatError(what + ": field `" + key + "` has the wrong type");
    std::vector<double> v;
    for (const auto& x : a) {
      if (!x.is_null() && !x.is_number())
        throw FormatError(what + ": field `" + key + "` holds a non-number");
      v.push_back(x.is_null() ? std::numeric_limits<double>::quiet_NaN() : x.get<double>());
    }
    s.*member = std::move(v);
  };
  return f;
}

template <typename S>
JsonField<S> json_group(const char* name, JsonFields<S> rows, std::string what);

/// `f` followed by `check` on the S read so far (it throws a FormatError when the value is not
/// one the result can hold, e.g. a status neither ok nor pending).
template <typename S, typename Check>
JsonField<S> json_checked(JsonField<S> f, Check check);

/// `f`, written only when `when(s)` and read only when its key is present (a key that applies to
/// some results only). Without `when`, written always: a key that results written before it
/// existed lack.
template <typename S>
JsonField<S> json_optional(JsonField<S> f);
template <typename S, typename When>
JsonField<S> json_optional(JsonField<S> f, When when);

/// A std::optional member: written when set, read when present.
template <typename S, typename B, typename M>
JsonField<S> json_optional_member(const char* name, std::optional<M> B::*member);

/// A key derived from S when written (e.g. a statistic of other members) and ignored when read.
template <typename S>
JsonField<S> json_written_only(const char* name, std::function<nlohmann::json(const S&)> write);

/// A key whose JSON `write` makes from an S and `read` puts back into one (`read` gets the key's
/// value; a missing key, or a nlohmann::json conversion failing inside `read`, is a FormatError
/// naming it). Rows read in table order, so `read` may use members of earlier rows.
template <typename S>
JsonField<S> json_custom(const char* name, std::function<nlohmann::json(const S&)> write,
                         std::function<void(const nlohmann::json&, S&)> read) {
  JsonField<S> f;
  f.name = name;
  f.write = [write, key = f.name](const S& s, nlohmann::json& j) { j[key] = write(s); };
  f.read = [read, key = f.name](const nlohmann::json& j, S& s, const std::string& what) {
    const nlohmann::json v = read_json_key<nlohmann::json>(j, key, what);
    try {
      read(v, s);
    } catch (const nlohmann::json::exception&) {  // a conversion inside `read`
      throw FormatError(what + ": field `" + key + "` has the wrong type");
    }
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

template <typename S, typename B, typename M>
JsonField<S> json_struct(const char* name, M B::*member, JsonTable<M> table, std::string what) {
  JsonField<S> f;
  f.name = name;
  f.write = [member, table, key = f.name](const S& s, nlohmann::json& j) {
    j[key] = write_fields(table(), s.*member);
  };
  f.read = [member, table, what, key = f.name](const nlohmann::json& j, S& s, const std::string& outer) {
    s.*member = read_fields(table(), read_json_object(j, key, outer), what);
  };
  return f;
}

template <typename S, typename B, typename M>
JsonField<S> json_struct_array(const char* name, std::vector<M> B::*member, JsonTable<M> table,
                               std::string what) {
  JsonField<S> f;
  f.name = name;
  f.write = [member, table, key = f.name](const S& s, nlohmann::json& j) {
    nlohmann::json a = nlohmann::json::array();
    for (const M& m : s.*member) a.push_back(write_fields(table(), m));
    j[key] = std::move(a);
  };
  f.read = [member, table, what, key = f.name](const nlohmann::json& j, S& s, const std::string& outer) {
    std::vector<M> v;
    for (const auto& x : read_json_key<std::vector<nlohmann::json>>(j, key, outer)) {
      if (!x.is_object()) throw FormatError(outer + ": an element of `" + key + "` is not an object");
      v.push_back(read_fields(table(), x, what));
    }
    s.*member = std::move(v);
  };
  return f;
}

template <typename S>
JsonField<S> json_group(const char* name, JsonFields<S> rows, std::string what) {
  JsonField<S> f;
  f.name = name;
  f.write = [rows, key = f.name](const S& s, nlohmann::json& j) { j[key] = write_fields(rows, s); };
  f.read = [rows, what, key = f.name](const nlohmann::json& j, S& s, const std::string& outer) {
    s = read_fields(rows, read_json_object(j, key, outer), what, std::move(s));
  };
  return f;
}

template <typename S, typename Check>
JsonField<S> json_checked(JsonField<S> f, Check check) {
  f.read = [read = f.read, check](const nlohmann::json& j, S& s, const std::string& what) {
    read(j, s, what);
    check(s);
  };
  return f;
}

template <typename S, typename When>
JsonField<S> json_optional(JsonField<S> f, When when) {
  f.write = [write = f.write, when](const S& s, nlohmann::json& j) {
    if (when(s)) write(s, j);
  };
  return json_optional(std::move(f));
}

template <typename S>
JsonField<S> json_optional(JsonField<S> f) {
  f.read = [read = f.read, key = f.name](const nlohmann::json& j, S& s, const std::string& what) {
    if (j.contains(key)) read(j, s, what);
  };
  return f;
}

template <typename S, typename B, typename M>
JsonField<S> json_optional_member(const char* name, std::optional<M> B::*member) {
  JsonField<S> f;
  f.name = name;
  f.write = [member, key = f.name](const S& s, nlohmann::json& j) {
    if (s.*member) j[key] = *(s.*member);
  };
  f.read = [member, key = f.name](const nlohmann::json& j, S& s, const std::string& what) {
    if (j.contains(key)) s.*member = read_json_key<M>(j, key, what);
  };
  return f;
}

template <typename S>
JsonField<S> json_written_only(const char* name, std::function<nlohmann::json(const S&)> write) {
  JsonField<S> f;
  f.name = name;
  f.write = [write, key = f.name](const S& s, nlohmann::json& j) { j[key] = write(s); };
  f.read = [](const nlohmann::json&, S&, const std::string&) {};
  return f;
}

}  // namespace svattn::experiments
