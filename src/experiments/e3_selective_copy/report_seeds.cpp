// E3's tables over several seeds: each method's recall and support as mean ± sd over seeds and the
// recall of every seed (docs/experiments.md "E3").
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>

#include "common.h"
#include "internal.h"
#include "svattn/errors.h"
#include "experiments/framework/statistics.h"
#include "svattn/lm/trainer.h"
#include "svattn/torch/model.h"

namespace svattn::experiments::e3_selective_copy {

/// "0.992 ± 0.004 (0.99, 1.00, ...)": mean ± sd and the per-seed values; one seed: the value.
std::string seeds_cell(const std::vector<double>& v, int digits) {
  if (v.empty()) return "not run";
  if (v.size() == 1) return fmt_fixed(v.front(), digits);
  std::string per;
  for (double x : v) per += (per.empty() ? "" : ", ") + fmt_fixed(x, digits);
  return fmt_mean_sd(v, digits) + " (" + per + ")";
}

/// `value` of method `name`'s evaluation at padding index `fi`, one per seed (seeds without the
/// method are skipped).
std::vector<double> over_seeds(const std::vector<SeedRuns>& all, const std::string& name,
                               std::size_t fi,
                               const std::function<double(const EvalPoint&)>& value) {
  std::vector<double> v;
  for (const auto& runs : all) {
    const MethodResult* r = runs.find(name);
    if (r != nullptr && fi < r->eval.size()) v.push_back(value(r->eval[fi]));
  }
  return v;
}

double recall_of(const EvalPoint& e) { return e.recall; }


/// Recall per method and padding over the seeds: mean ± sd.
Table seeds_recall_table(const Settings& p, const std::vector<SeedRuns>& all) {
  std::vector<std::string> cols = {"method", "seeds"};
  for (int f : p.factors) cols.push_back(std::to_string(f) + "x");
  Table t(cols);
  for (const auto& name : p.methods) {
    std::vector<std::string> row = {method_named(name).label, ""};
    std::size_t n = 0;
    for (std::size_t fi = 0; fi < p.factors.size(); ++fi) {
      const auto v = over_seeds(all, name, fi, recall_of);
      n = std::max(n, v.size());
      row.push_back(fmt_mean_sd(v, 3));
    }
    row[1] = std::to_string(n);
    t.add_row(row);
  }
  return t;
}

/// Recall of every method and seed (rows) per padding, with the matched window of that seed.
Table per_seed_recall_table(const Settings& p, const std::vector<SeedRuns>& all) {
  std::vector<std::string> cols = {"method", "seed", "heads / window"};
  for (int f : p.factors) cols.push_back(std::to_string(f) + "x");
  Table t(cols);
  for (const auto& name : p.methods) {
    for (const auto& runs : all) {
      const MethodResult* r = runs.find(name);
      if (r == nullptr) continue;
      const auto& a = config_of(p, *r).attention;
      std::vector<std::string> row = {
          method_of(*r).label, std::to_string(runs.seed),
          std::to_string(a.n_heads) + (a.type == layers::AttentionType::kSlidingWindow
                                           ? " / W " + std::to_string(a.window)
                                           : "")};
      for (const auto& e : r->eval) row.push_back(fmt_fixed(e.recall, 3));
      t.add_row(row);
    }
  }
  return t;
}

/// The hybrid's support over the seeds per padding: |S ∪ E| and distinct keys per head (all
/// layers, then per layer), and the largest coefficient spread among duplicate support keys.
Table seeds_support_table(const Settings& p, const std::vector<SeedRuns>& all) {
  std::vector<std::string> cols = {"padding", "|S ∪ E| / head", "distinct keys / head",
                                   "distinct / |S ∪ E|"};
  for (std::int64_t l = 0; l < p.n_layers; ++l) {
    cols.push_back("L" + std::to_string(l) + " |S ∪ E|");
    cols.push_back("L" + std::to_string(l) + " distinct");
  }
  cols.push_back("max |Δα| among duplicates");
  Table t(cols);
  for (std::size_t fi = 0; fi < p.factors.size(); ++fi) {
    const auto sup = over_seeds(all, "hybrid", fi, mean_support);
    if (sup.empty()) continue;
    const auto dis = over_seeds(
        all, "hybrid", fi, [](const EvalPoint& e) { return mean_of_layers(e.distinct_support); });
    const auto share = over_seeds(all, "hybrid", fi, [](const EvalPoint& e) {
      return mean_of_layers(e.distinct_support) / mean_support(e);
    });
    std::vector<std::string> row = {std::to_string(p.factors[fi]) + "x", fmt_mean_sd(sup, 1),
                                    fmt_mean_sd(dis, 1), fmt_mean_sd(share, 3)};
    for (std::size_t l = 0; l < static_cast<std::size_t>(p.n_layers); ++l) {
      auto layer = [l](const std::vector<std::vector<double>>& t) {
        return l < t.size() ? mean_of_layers({t[l]}) : std::nan("");
      };
      row.push_back(fmt_mean_sd(
          over_seeds(all, "hybrid", fi, [&](const EvalPoint& e) { return layer(e.support); }), 1));
      row.push_back(
          fmt_mean_sd(over_seeds(all, "hybrid", fi,
                                 [&](const EvalPoint& e) { return layer(e.distinct_support); }),
                      1));
    }
    const auto spread =
        over_seeds(all, "hybrid", fi, [](const EvalPoint& e) { return e.duplicate_alpha_spread; });
    row.push_back(fmt_sci(max_of(spread), 1));
    t.add_row(row);
  }
  return t;
}

}  // namespace svattn::experiments::e3_selective_copy
