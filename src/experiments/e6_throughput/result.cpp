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

/// One preset's throughput; the SV forward share and the support only where they were measured.
const JsonFields<Row>& row_fields() {
  static const JsonFields<Row> table = {
      json_member<Row>("preset", &Row::preset),
      json_member<Row>("parameters", &Row::parameters),
      json_member<Row>("tokens_per_second", &Row::tokens_per_second),
      json_member<Row>("seconds_per_step", &Row::seconds_per_step),
      json_optional_member<Row>("sv_forward_share", &Row::sv_forward_share),
      json_optional_member<Row>("support_mean", &Row::support_mean)};
  return table;
}

const JsonFields<Result>& fields() {
  static const JsonFields<Result> table =
      run_header_fields<Result>() +
      JsonFields<Result>{json_member<Result>("settings", &Result::settings),
                         json_member<Result>("data", &Result::corpus),
                         json_struct_array<Result>("rows", &Result::rows, row_fields, kWhat)};
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
