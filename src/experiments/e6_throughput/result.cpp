// E6's typed result as E6.json: one field table, written by to_json and read back only by
// `--render` (from_json).
#include <cmath>
#include <sstream>

#include "common.h"
#include "internal.h"
#include "lm_run_checks.h"
#include "svattn/errors.h"
#include "svattn/lm/trainer.h"
#include "experiments/framework/json_fields.h"

namespace svattn::experiments::e6_throughput {

using nlohmann::json;

namespace {

constexpr const char* kWhat = "E6 result";

json row_json(const Row& r) {
  json x = {{"preset", r.preset},
            {"parameters", r.parameters},
            {"tokens_per_second", r.tokens_per_second},
            {"seconds_per_step", r.seconds_per_step}};
  if (r.sv_forward_share) x["sv_forward_share"] = *r.sv_forward_share;
  if (r.support_mean) x["support_mean"] = *r.support_mean;
  return x;
}

Row row_from_json(const json& x) {
  Row r;
  r.preset = read_json_key<std::string>(x, "preset", kWhat);
  r.parameters = read_json_key<std::int64_t>(x, "parameters", kWhat);
  r.tokens_per_second = read_json_key<double>(x, "tokens_per_second", kWhat);
  r.seconds_per_step = read_json_key<double>(x, "seconds_per_step", kWhat);
  if (x.contains("sv_forward_share")) r.sv_forward_share = read_json_key<double>(x, "sv_forward_share", kWhat);
  if (x.contains("support_mean")) r.support_mean = read_json_key<double>(x, "support_mean", kWhat);
  return r;
}


const JsonFields<Result>& fields() {
  static const JsonFields<Result> table = [] {
    JsonFields<Result> t = run_header_fields<Result>();
    t.push_back(json_member<Result>("settings", &Result::settings));
    t.push_back(json_member<Result>("data", &Result::corpus));
    JsonField<Result> rows;
    rows.name = "rows";
    rows.write = [](const Result& r, json& j) { j["rows"] = detail::json_array(r.rows, row_json); };
    rows.read = [](const json& j, Result& r, const std::string& what) {
      for (const auto& x : read_json_key<json>(j, "rows", what)) r.rows.push_back(row_from_json(x));
    };
    t.push_back(rows);
    return t;
  }();
  return table;
}

}  // namespace

json Result::to_json() const { return write_fields(fields(), *this); }

Result Result::from_json(const json& j) {
  Result r = read_fields(fields(), j, kWhat);
  if (r.rows.empty()) throw FormatError("E6 result: field `rows` is empty");
  return r;
}

}  // namespace svattn::experiments::e6_throughput
