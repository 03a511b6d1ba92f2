// E4's typed result as E4.json["result"]: written by to_json, read back only by `--render`.
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "common.h"
#include "internal.h"
#include "experiments/framework/json_fields.h"
#include "svattn/errors.h"
#include "experiments/icu.h"
#include "experiments/report.h"
#include "experiments/selection.h"
#include "experiments/streams.h"

namespace svattn::experiments::e4_icu {
namespace {

// ------------------------------------------------------------------------- the result's JSON
// Maps keyed by a method become objects keyed by method_name; maps keyed by a budget fraction
// become arrays in Settings::fractions order (doubles are not JSON keys).

template <typename V, typename F>
nlohmann::json by_fraction(const std::map<double, V>& m, const std::vector<double>& fractions, F f) {
  nlohmann::json a = nlohmann::json::array();
  for (double x : fractions) a.push_back(f(m.at(x)));
  return a;
}

template <typename V, typename F>
std::map<double, V> from_fractions(const nlohmann::json& a, const std::vector<double>& fractions,
                                   const char* what, F f) {
  if (!a.is_array() || a.size() != fractions.size())
    throw FormatError(std::string("E4 result: field `") + what + "` has not one entry per budget");
  std::map<double, V> m;
  for (std::size_t i = 0; i < fractions.size(); ++i) m[fractions[i]] = f(a[i]);
  return m;
}

template <typename V, typename F>
nlohmann::json by_method(const std::map<Method, V>& m, F f) {
  nlohmann::json o = nlohmann::json::object();
  for (Method x : kMethods) o[method_name(x)] = f(m.at(x));
  return o;
}

template <typename V, typename F>
std::map<Method, V> from_methods(const nlohmann::json& o, const char* what, F f) {
  std::map<Method, V> m;
  for (Method x : kMethods) {
    if (!o.is_object() || !o.contains(method_name(x)))
      throw FormatError(std::string("E4 result: field `") + what + "` lacks method " + method_name(x));
    m[x] = f(o.at(method_name(x)));
  }
  return m;
}

constexpr const char* kWhat = "E4 result";
const auto kTallyJson = [](const Tally& t) { return nlohmann::json(t); };
const auto kTallyOf = [](const nlohmann::json& j) { return j.get<Tally>(); };

using Cell = DatasetResult::SweepCell;
using Definition = DatasetResult::Definition;

const JsonFields<Cell>& cell_fields() {
  static const JsonFields<Cell> table = {
      json_custom<Cell>(
          "methods", [](const Cell& c) { return by_method(c.methods, kTallyJson); },
          [](const nlohmann::json& v, Cell& c) {
            c.methods = from_methods<Tally>(v, "sweep.cells.methods", kTallyOf);
          }),
      json_member<Cell>("upper", &Cell::upper)};
  return table;
}

/// A criticality definition's row of the sweep; its cells keyed by the budgets `fr`.
JsonFields<Definition> definition_fields(const std::vector<double>& fr) {
  return {json_member<Definition>("critical_hours", &Definition::critical_hours),
          json_member<Definition>("stays_with_critical", &Definition::stays_with_critical),
          json_custom<Definition>(
              "cells",
              [fr](const Definition& d) {
                return by_fraction(d.cells, fr, [](const Cell& c) { return write_fields(cell_fields(), c); });
              },
              [fr](const nlohmann::json& v, Definition& d) {
                d.cells = from_fractions<Cell>(v, fr, "sweep.cells", [](const nlohmann::json& c) {
                  return read_fields(cell_fields(), c, kWhat);
                });
              })};
}

/// A dataset's keys; maps keyed by a method are objects keyed by method_name, maps keyed by a
/// budget fraction arrays in `fr` (Settings::fractions) order (doubles are not JSON keys).
JsonFields<DatasetResult> dataset_fields(const std::vector<double>& fr) {
  using D = DatasetResult;
  return {
      json_member<D>("name", &D::name), json_member<D>("source", &D::source),
      json_member<D>("stays_total", &D::stays_total), json_member<D>("stays_used", &D::stays_used),
      json_member<D>("stays_with_critical", &D::stays_with_critical),
      json_member<D>("hours", &D::hours), json_member<D>("critical_hours", &D::critical_hours),
      json_member<D>("rows_read", &D::rows_read),
      json_member<D>("rows_out_of_range", &D::rows_out_of_range),
      json_member<D>("rows_flagged_error", &D::rows_flagged_error),
      json_custom<D>(
          "tallies",
          [fr](const D& r) {
            return by_method(r.tallies, [&](const std::map<double, Tally>& m) { return by_fraction(m, fr, kTallyJson); });
          },
          [fr](const nlohmann::json& v, D& r) {
            r.tallies = from_methods<std::map<double, Tally>>(v, "tallies", [&](const nlohmann::json& a) {
              return from_fractions<Tally>(a, fr, "tallies", kTallyOf);
            });
          }),
      json_custom<D>(
          "upper", [fr](const D& r) { return by_fraction(r.upper, fr, kTallyJson); },
          [fr](const nlohmann::json& v, D& r) { r.upper = from_fractions<Tally>(v, fr, "upper", kTallyOf); }),
      json_checked(json_member<D>("reason_counts", &D::reason_counts),
                   [](const D& r) {
                     if (r.reason_counts.size() != critical_thresholds().size())
                       throw FormatError("E4 result: field `reason_counts` has not one count per threshold");
                   }),
      json_checked(json_struct_array_of<D>(
                       "sweep", &D::sweep, [fr](const D&) { return definition_fields(fr); }, kWhat),
                   [](const D& r) {
                     if (r.sweep.size() != criticality_definitions().size())
                       throw FormatError("E4 result: field `sweep` has not one entry per criticality definition");
                   }),
      json_member<D>("seconds", &D::seconds)};
}

}  // namespace

const JsonFields<Result>& fields() {
  static const JsonFields<Result> table =
      run_header_fields<Result>() +
      JsonFields<Result>{
          json_member<Result>("settings", &Result::settings),
          json_member<Result>("data_dir", &Result::data_dir),
          json_member<Result>("data_dir_source", &Result::data_dir_source),
          // after settings: its fractions key the maps
          json_struct_array_of<Result>(
              "datasets", &Result::datasets,
              [](const Result& r) { return dataset_fields(r.settings.fractions); }, kWhat)};
  return table;
}

nlohmann::json Result::to_json() const { return write_fields(fields(), *this); }

Result Result::from_json(const nlohmann::json& j) { return read_fields(fields(), j, "E4 result"); }

}  // namespace svattn::experiments::e4_icu
