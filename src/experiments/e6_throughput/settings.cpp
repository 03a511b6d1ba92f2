// E6's presets and the ranges of its `--set` keys (docs/experiments.md "E6").
#include <cmath>
#include <sstream>

#include "common.h"
#include "internal.h"
#include "lm_run_checks.h"
#include "svattn/errors.h"
#include "svattn/lm/trainer.h"

namespace svattn::experiments::e6_throughput {

using nlohmann::json;

Settings e6_preset(const std::string& name) {
  if (name == "quick") return {{"softmax-3m", "swa-3m", "linear-3m", "deltanet-3m", "hybrid-3m"}, 4, 256, 2, 1, "enwik8", "cpu"};
  if (name == "tiny") return {{"tiny-swa", "tiny"}, 2, 64, 1, 1, "shakespeare", "cpu"};
  return {{"softmax-3m", "swa-3m", "linear-3m", "deltanet-3m", "hybrid-3m", "hybrid-token-3m"}, 16, 256, 3, 1, "enwik8", "cpu"};
}


json preset(const std::string& name) { return e6_preset(name); }

RangeTable ranges() {
  RangeTable t;
  t.keys = {{"presets", 0, 0, false, 1, 16, lm::preset_names()},
            {"batch", 1, static_cast<double>(lm::TrainHyper::kMaxBatch)},
            {"seq", 2, static_cast<double>(lm::TrainHyper::kMaxSeq)},
            {"steps", 1, 1000000},
            {"warmup", 0, 1000000},
            {"corpus", 0, 0, false, 0, 0, {"enwik8", "shakespeare"}},
            {"device"}};
  t.relations = check_lm_run;
  return t;
}

}  // namespace svattn::experiments::e6_throughput
