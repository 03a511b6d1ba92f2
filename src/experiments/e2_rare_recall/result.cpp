// E2's typed result as E2.json: one field table, written by to_json and read back only by
// `--render` (from_json).
#include <string>

#include "internal.h"
#include "svattn/errors.h"
#include "experiments/framework/json_fields.h"

namespace svattn::experiments::e2_rare_recall {
namespace {

const JsonFields<Result>& fields() {
  static const JsonFields<Result> table =
      run_header_fields<Result>() +
      JsonFields<Result>{json_member<Result>("settings", &Result::settings),
                         json_member<Result>("sigmas", &Result::sigmas),
                         json_member<Result>("outcomes", &Result::outcomes)};
  return table;
}

}  // namespace

nlohmann::json Result::to_json() const { return write_fields(fields(), *this); }

Result Result::from_json(const nlohmann::json& j) {
  const Result r = read_fields(fields(), j, "E2 result");
  const std::size_t budgets = r.settings.budgets.size();
  for (Method m : kMethods) {
    const auto it = r.outcomes.find(method_name(m));
    if (it == r.outcomes.end() || it->second.size() != budgets)
      throw FormatError(std::string("E2 result: field `outcomes` lacks method ") + method_name(m) +
                        " at some budget");
    for (const auto& per_seed : it->second)
      if (per_seed.size() != static_cast<std::size_t>(r.settings.seeds))
        throw FormatError(std::string("E2 result: field `outcomes` has not one outcome per seed for ") +
                          method_name(m));
  }
  return r;
}

}  // namespace svattn::experiments::e2_rare_recall
