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

template <typename T>
T field(const nlohmann::json& j, const char* key) {
  return detail::json_field<T>(j, key, "E4 result");
}

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

const auto kTallyJson = [](const Tally& t) { return nlohmann::json(t); };
const auto kTallyOf = [](const nlohmann::json& j) { return j.get<Tally>(); };

nlohmann::json dataset_json(const DatasetResult& r, const std::vector<double>& fr) {
  nlohmann::json sweep = nlohmann::json::array();
  for (const auto& d : r.sweep) {
    sweep.push_back({{"critical_hours", d.critical_hours},
                     {"stays_with_critical", d.stays_with_critical},
                     {"cells", by_fraction(d.cells, fr, [](const DatasetResult::SweepCell& c) {
                        return nlohmann::json{{"methods", by_method(c.methods, kTallyJson)},
                                              {"upper", nlohmann::json(c.upper)}};
                      })}});
  }
  return {{"name", r.name}, {"source", r.source}, {"stays_total", r.stays_total},
          {"stays_used", r.stays_used}, {"stays_with_critical", r.stays_with_critical},
          {"hours", r.hours}, {"critical_hours", r.critical_hours}, {"rows_read", r.rows_read},
          {"rows_out_of_range", r.rows_out_of_range}, {"rows_flagged_error", r.rows_flagged_error},
          {"tallies", by_method(r.tallies, [&](const std::map<double, Tally>& m) {
             return by_fraction(m, fr, kTallyJson);
           })},
          {"upper", by_fraction(r.upper, fr, kTallyJson)}, {"reason_counts", r.reason_counts},
          {"sweep", sweep}, {"seconds", r.seconds}};
}

DatasetResult dataset_from_json(const nlohmann::json& j, const std::vector<double>& fr) {
  DatasetResult r;
  r.name = field<std::string>(j, "name");
  r.source = field<std::string>(j, "source");
  r.stays_total = field<int>(j, "stays_total");
  r.stays_used = field<int>(j, "stays_used");
  r.stays_with_critical = field<int>(j, "stays_with_critical");
  r.hours = field<long>(j, "hours");
  r.critical_hours = field<long>(j, "critical_hours");
  r.rows_read = field<long>(j, "rows_read");
  r.rows_out_of_range = field<long>(j, "rows_out_of_range");
  r.rows_flagged_error = field<long>(j, "rows_flagged_error");
  r.tallies = from_methods<std::map<double, Tally>>(field<nlohmann::json>(j, "tallies"), "tallies",
                                                    [&](const nlohmann::json& a) {
                                                      return from_fractions<Tally>(a, fr, "tallies", kTallyOf);
                                                    });
  r.upper = from_fractions<Tally>(field<nlohmann::json>(j, "upper"), fr, "upper", kTallyOf);
  r.reason_counts = field<std::vector<long>>(j, "reason_counts");
  if (r.reason_counts.size() != critical_thresholds().size())
    throw FormatError("E4 result: field `reason_counts` has not one count per threshold");
  const nlohmann::json sweep = field<nlohmann::json>(j, "sweep");
  if (!sweep.is_array() || sweep.size() != criticality_definitions().size())
    throw FormatError("E4 result: field `sweep` has not one entry per criticality definition");
  for (const auto& d : sweep) {
    DatasetResult::Definition def;
    def.critical_hours = field<long>(d, "critical_hours");
    def.stays_with_critical = field<int>(d, "stays_with_critical");
    def.cells = from_fractions<DatasetResult::SweepCell>(
        field<nlohmann::json>(d, "cells"), fr, "sweep.cells", [](const nlohmann::json& c) {
          DatasetResult::SweepCell cell;
          cell.methods = from_methods<Tally>(field<nlohmann::json>(c, "methods"), "sweep.cells.methods",
                                             kTallyOf);
          cell.upper = field<Tally>(c, "upper");
          return cell;
        });
    r.sweep.push_back(std::move(def));
  }
  r.seconds = field<double>(j, "seconds");
  return r;
}

}  // namespace

const JsonFields<Result>& fields() {
  static const JsonFields<Result> table =
      run_header_fields<Result>() +
      JsonFields<Result>{
          json_member<Result>("settings", &Result::settings),
          json_member<Result>("data_dir", &Result::data_dir),
          json_member<Result>("data_dir_source", &Result::data_dir_source),
          json_custom<Result>(
              "datasets",
              [](const Result& r) {
                nlohmann::json ds = nlohmann::json::array();
                for (const auto& d : r.datasets) ds.push_back(dataset_json(d, r.settings.fractions));
                return ds;
              },
              [](const nlohmann::json& v, Result& r) {  // after settings: its fractions key the maps
                for (const auto& d : v) r.datasets.push_back(dataset_from_json(d, r.settings.fractions));
              })};
  return table;
}

nlohmann::json Result::to_json() const { return write_fields(fields(), *this); }

Result Result::from_json(const nlohmann::json& j) { return read_fields(fields(), j, "E4 result"); }

}  // namespace svattn::experiments::e4_icu
