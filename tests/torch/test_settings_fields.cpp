// The torch layers' settings tables (include/svattn/torch/settings_fields.h): every field
// round-trips through the checkpoint's model JSON, and every range is enforced by validate() with
// a message naming the field in the core's format.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "svattn/errors.h"
#include "svattn/torch/settings_fields.h"

namespace svattn::layers {
namespace {

std::string message(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// A value of row `f` other than its value in `s` with which s still validates.
template <typename S>
FieldValue other_valid(const Field<S>& f, const S& s) {
  const FieldValue v = f.get(s);
  std::vector<FieldValue> candidates;
  for (const auto& c : f.range.choices) candidates.emplace_back(c);
  if (const auto* b = std::get_if<bool>(&v)) candidates.emplace_back(!*b);
  if (const auto* i = std::get_if<std::int64_t>(&v))
    for (std::int64_t x : {*i + 1, *i * 2, *i - 1}) candidates.emplace_back(x);
  if (const auto* d = std::get_if<double>(&v))
    for (double x : {*d * 0.5, *d + 0.25, 0.5}) candidates.emplace_back(x);
  for (const auto& c : candidates) {
    if (c == v) continue;
    S t = s;
    f.set(t, c);
    if (message([&] { t.validate(); }) == "(no error)") return c;
  }
  ADD_FAILURE() << f.name << ": no other valid value";
  return v;
}

LmConfig hybrid_lm() {
  LmConfig c;
  c.attention.type = AttentionType::kHybrid;
  return c;
}

TEST(TorchSettingsFields, TablesListEveryField) {
  EXPECT_EQ(field_names(batched_settings_fields()),
            "iterations, solve_ridge, mask_tol, lipschitz, power_iterations, bisections, active_set_rounds, "
            "ipm_iterations, fp64");
  EXPECT_EQ(hybrid_settings_fields().size(), 17u + batched_settings_fields().size());
  EXPECT_EQ(field_names(attention_config_own_fields()), "type, d_model, n_heads, window, scan_chunk, rope, rope_base");
  EXPECT_EQ(field_names(lm_config_own_fields()), "vocab, n_layers, mlp_ratio, tied_head, dropout");
  EXPECT_EQ(lm_config_fields().size(), 5u + 7u + hybrid_settings_fields().size());
  for (const auto& f : lm_config_fields()) EXPECT_FALSE(f.doc.empty()) << f.name;
}

TEST(TorchSettingsFields, EveryFieldRoundTripsThroughTheModelJson) {
  const LmConfig base = hybrid_lm();
  int in_json = 0;
  for (const auto& f : lm_config_fields()) {
    SCOPED_TRACE(f.name);
    const std::string key = lm_config_json_key(f.name);
    if (key.empty()) {  // the evaluation switches the checkpoint does not hold
      EXPECT_TRUE(f.name == "attention.hybrid.certify" || f.name == "attention.hybrid.exact_solver");
      continue;
    }
    ++in_json;
    LmConfig c = base;
    f.set(c, other_valid(f, c));
    const nlohmann::json j = lm_config_to_json(c);
    const LmConfig back = lm_config_from_json(nlohmann::json::parse(j.dump(2)));
    for (const auto& g : lm_config_fields())
      if (!lm_config_json_key(g.name).empty()) EXPECT_EQ(g.get(back), g.get(c)) << g.name;
    EXPECT_EQ(lm_config_to_json(back).dump(2), j.dump(2));
  }
  EXPECT_EQ(in_json, static_cast<int>(lm_config_fields().size()) - 2);
  LmConfig c = base;
  c.attention.hybrid.gate_override = 0.25;
  EXPECT_EQ(lm_config_from_json(lm_config_to_json(c)).attention.hybrid.gate_override, 0.25);
  EXPECT_FALSE(lm_config_from_json(lm_config_to_json(base)).attention.hybrid.gate_override.has_value());
}

TEST(TorchSettingsFields, TheModelJsonKeepsItsKeysAndRefusesAMissingOne) {
  const nlohmann::json j = lm_config_to_json(hybrid_lm());
  const auto& h = j["attention"]["hybrid"];
  for (const char* k : {"C", "bandwidth", "mu", "path", "gate_override"}) EXPECT_TRUE(h.contains(k)) << k;
  EXPECT_TRUE(h["batched"].contains("ridge"));
  EXPECT_FALSE(h.contains("problem") || h.contains("certify") || h.contains("exact_solver"));
  nlohmann::json missing = j;
  missing["attention"]["hybrid"].erase("C");
  EXPECT_EQ(message([&] { lm_config_from_json(missing); }), "model config JSON: missing key 'attention.hybrid.C'");
  nlohmann::json mistyped = j;
  mistyped["attention"]["hybrid"]["chunk"] = "64";
  EXPECT_EQ(message([&] { lm_config_from_json(mistyped); }),
            "model config JSON: attention.hybrid.chunk must be an integer, got \"64\"");
  nlohmann::json older = j;
  older["attention"]["hybrid"]["batched"].erase("ipm_iterations");
  EXPECT_EQ(lm_config_from_json(older).attention.hybrid.batched.ipm_iterations, BatchedSettings{}.ipm_iterations);
}

// Every row with a lower bound: the value just outside it is refused, naming the field with the
// validate() prefix of its struct and the table's requirement.
template <typename S>
void expect_lower_bounds_named(const std::vector<Field<S>>& table, const S& base, const std::string& prefix) {
  for (const auto& f : table) {
    if (f.type == FieldType::kText || f.type == FieldType::kBool || !std::isfinite(f.range.lo)) continue;
    SCOPED_TRACE(f.name);
    S s = base;
    const double below = f.range.lo_open ? f.range.lo : f.range.lo - 1;
    if (f.type == FieldType::kNumber)
      f.set(s, below);
    else
      f.set(s, static_cast<std::int64_t>(below));
    const FieldValue v = f.get(s);
    EXPECT_EQ(message([&] { s.validate(); }), prefix + f.name + " must be " + requirement(f) + ", got " + value_text(v));
  }
}

TEST(TorchSettingsFields, ABadValueIsRefusedNamingTheField) {
  expect_lower_bounds_named(batched_settings_fields(), BatchedSettings{}, "");
  expect_lower_bounds_named(hybrid_settings_fields(), HybridSettings{}, "hybrid.");
  expect_lower_bounds_named(attention_config_own_fields(), hybrid_lm().attention, "attention.");
  expect_lower_bounds_named(lm_config_own_fields(), hybrid_lm(), "model.");
  HybridSettings h;
  h.chunk = 0;
  EXPECT_EQ(message([&] { h.validate(); }), "hybrid.chunk must be >= 1, got 0");
  h = HybridSettings{};
  h.batched.mask_tol = 0.5;
  EXPECT_EQ(message([&] { h.validate(); }), "hybrid.batched.mask_tol must be in (0, 0.5), got 0.5");
  h = HybridSettings{};
  h.gate_bias_init = INFINITY;
  EXPECT_EQ(message([&] { h.validate(); }), "hybrid.gate_bias_init must be finite, got inf");
  AttentionConfig a;
  a.n_heads = 3;
  EXPECT_EQ(message([&] { a.validate(); }), "attention.n_heads must be a divisor of d_model, got 3");
  a.n_heads = 256;
  EXPECT_EQ(message([&] { a.validate(); }), "attention.n_heads must be such that the head dimension is even (rope), got 256");
  a = AttentionConfig{};
  a.rope_base = 1;
  EXPECT_EQ(message([&] { a.validate(); }), "attention.rope_base must be > 1, got 1");
  LmConfig m;
  m.dropout = 1;
  EXPECT_EQ(message([&] { m.validate(); }), "model.dropout must be in [0, 1), got 1");
}

}  // namespace
}  // namespace svattn::layers
