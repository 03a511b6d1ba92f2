// The run settings' field tables and the typed checkpoint config: every field round-trips through
// JSON and `--set` text, a bad value is refused naming the field, and config.json as the trainer
// wrote it before the config was typed reads and writes back byte for byte.
#include <gtest/gtest.h>

#include "svattn/errors.h"
#include "svattn/lm/checkpoint.h"
#include "svattn/lm/train_settings.h"
#include "svattn/torch/settings_fields.h"

namespace svattn::lm {
namespace {

// config.json of a `svattn train --preset tiny --steps 2 --seq 32 --batch 2 --eval-windows 2` run
// written by the trainer before CheckpointConfig existed (commit ed2be09).
const char* kStoredConfig = R"json({
  "data": {
    "bytes": 6000,
    "corpus": "",
    "file": "d.txt",
    "label": "file d.txt",
    "path_given": "d.txt",
    "sha256": "b69479ceed46694a9a6df3f268028f2a0809056b152fa07d21ecef8b0baae047"
  },
  "description": "test model: d 32, 2 layers, 2 heads, hybrid SV attention (chunk 32, 30 FISTA iterations)",
  "model": {
    "attention": {
      "d_model": 32,
      "hybrid": {
        "C": 0.0625,
        "bandwidth": 1.0,
        "batched": {
          "active_set_rounds": 3,
          "bisections": 0,
          "fp64": false,
          "ipm_iterations": 12,
          "iterations": 30,
          "lipschitz": "tangent",
          "mask_tol": 0.001,
          "power_iterations": 20,
          "ridge": 0.001
        },
        "bounded": false,
        "check_agreement": false,
        "chunk": 32,
        "count_distinct_support": false,
        "gate": "chunk",
        "gate_bias_init": 0.0,
        "gate_override": null,
        "learn_bandwidth": true,
        "local": "chunk",
        "local_window": 64,
        "memory": true,
        "mu": 1e-06,
        "normalize_keys": true,
        "path": "batched"
      },
      "n_heads": 2,
      "rope": true,
      "rope_base": 10000.0,
      "scan_chunk": 32,
      "type": "hybrid",
      "window": 128
    },
    "dropout": 0.0,
    "mlp_ratio": 4,
    "n_layers": 2,
    "tied_head": true,
    "vocab": 256
  },
  "parameters": 33544,
  "preset": "tiny",
  "seed": 1234,
  "steps": 2,
  "train": {
    "batch": 2,
    "beta1": 0.9,
    "beta2": 0.95,
    "checkpoint_every": 50,
    "clip": 1.0,
    "eps": 1e-08,
    "eval_every": 50,
    "eval_windows": 2,
    "gate_weight_decay": false,
    "log_every": 1,
    "lr": 0.01,
    "min_lr_ratio": 0.1,
    "seq": 32,
    "warmup": 10,
    "weight_decay": 0.1
  },
  "version": 1
})json";

std::string message(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// A valid value of the field other than `v`.
FieldValue other(const FieldSpec& f, const FieldValue& v) {
  for (const auto& c : f.range.choices)
    if (FieldValue(c) != v) return c;
  if (const auto* b = std::get_if<bool>(&v)) return !*b;
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i + 1;
  if (const auto* u = std::get_if<std::uint64_t>(&v)) return *u + 1;
  return std::get<double>(v) * 0.5;
}


TEST(TrainSettings, EveryTrainHyperFieldRoundTripsThroughJson) {
  const auto& table = train_hyper_fields();
  ASSERT_EQ(table.size(), 15u);
  for (const auto& f : table) {
    SCOPED_TRACE(f.name);
    TrainHyper h;
    f.set(h, other(f, f.get(h)));
    const TrainHyper back = train_hyper_from_json(to_json(h));
    for (const auto& g : table) EXPECT_EQ(g.get(back), g.get(h)) << g.name;
  }
  // Written before gate_weight_decay existed: the gate decayed like every matrix.
  auto j = to_json(TrainHyper{});
  j.erase("gate_weight_decay");
  EXPECT_TRUE(train_hyper_from_json(j).gate_weight_decay);
  j.erase("lr");
  EXPECT_THROW(train_hyper_from_json(j), FormatError);
}

TEST(TrainSettings, EveryRunSettingParsesFromItsText) {
  const layers::LmConfig model = make_preset("tiny").model;
  for (const auto& f : run_settings_fields()) {
    SCOPED_TRACE(f.name);
    RunSettings r{TrainHyper{}, model, kDefaultSeed};
    const FieldValue v = other(f, f.get(r));
    const Setting s = parse_setting(f.name + "=" + exact_text(v));
    EXPECT_EQ(s.key, f.name);
    EXPECT_EQ(s.value, v);
    f.set(r, s.value);
    EXPECT_EQ(f.get(r), v);
    EXPECT_FALSE(f.doc.empty());
  }
  EXPECT_EQ(setting_flag("eval_every"), "--eval-every");
  EXPECT_EQ(setting_flag("model.attention.hybrid.chunk"), "--set model.attention.hybrid.chunk");
  EXPECT_EQ(make_setting("lr", std::int64_t{1}).value, FieldValue(1.0));
}

TEST(TrainSettings, ABadValueIsRefusedNamingTheKey) {
  EXPECT_EQ(message([] { parse_setting("batch=x"); }), "batch must be an integer, got 'x'");
  EXPECT_NE(message([] { parse_setting("bach=8"); }).find("unknown key (known: batch, seq"), std::string::npos);
  EXPECT_NE(message([] { parse_setting("batch"); }).find("expected KEY=VALUE"), std::string::npos);
  EXPECT_EQ(message([] { TrainHyper h; h.batch = 0; h.validate(); }), "batch must be in [1, 4096], got 0");
  EXPECT_EQ(message([] { TrainHyper h; h.batch = 4096; h.seq = 4096; h.validate(); }),
            "batch x seq must be <= 1048576 tokens per step, got 16777216");
  EXPECT_NE(message([] { TrainHyper h; h.lr = 1e300; h.validate(); }).find("lr must be finite, > 0 and representable in fp32, got 1e+300"), std::string::npos);
  EXPECT_EQ(message([] { TrainHyper h; h.log_every = 0; h.validate(); }), "log_every must be >= 1, got 0");
  EXPECT_NE(message([] { make_setting("gate", std::string("wide")); }).find("wide"), std::string::npos);
  EXPECT_THROW(make_setting("seq", 1.5), InvalidArgument);
}

// Every hybrid field the checkpoint holds is a --set key model.attention.hybrid.NAME with the torch
// table's range (include/svattn/torch/settings_fields.h), and round-trips through the checkpoint's
// model JSON; the short keys from before set the same fields.
TEST(TrainSettings, EveryHybridFieldIsAModelKeyThatRoundTripsThroughTheCheckpoint) {
  const layers::LmConfig model = make_preset("tiny").model;
  std::size_t keys = 0;
  for (const auto& f : run_settings_fields()) {
    if (!is_model_key(f.name)) continue;
    SCOPED_TRACE(f.name);
    ++keys;
    const auto* row = find_field(layers::lm_config_fields(), f.name.substr(6));
    ASSERT_NE(row, nullptr);
    EXPECT_EQ(requirement(f), requirement(*row));
    RunSettings r{TrainHyper{}, model, kDefaultSeed};
    const Setting s = parse_setting(f.name + "=" + exact_text(other(f, f.get(r))));
    f.set(r, s.value);
    const layers::LmConfig back = lm_config_from_json(nlohmann::json::parse(to_json(r.model).dump(2)));
    EXPECT_EQ(row->get(back), s.value);
  }
  EXPECT_EQ(keys, layers::hybrid_settings_fields().size() - 2);  // not certify, exact_solver
  for (const auto& [short_key, field] : std::vector<std::pair<std::string, std::string>>{
           {"gate", "gate"}, {"local", "local"}, {"C", "problem.C"}, {"chunk", "chunk"},
           {"fista_iterations", "batched.iterations"}, {"global_path", "path"}, {"local_window", "local_window"}}) {
    SCOPED_TRACE(short_key);
    const auto& f = run_settings_field(short_key);
    const auto& full = run_settings_field("model.attention.hybrid." + field);
    RunSettings a{TrainHyper{}, model, kDefaultSeed}, b = a;
    const FieldValue v = other(f, f.get(a));
    f.set(a, v);
    full.set(b, v);
    if (short_key == "local_window") b.model.attention.hybrid.local = layers::LocalPath::kWindow;
    EXPECT_EQ(to_json(a.model), to_json(b.model));
  }
}

TEST(TrainSettings, AModelKeyOutOfItsRangeIsRefusedNamingTheKey) {
  RunSettings r{TrainHyper{}, make_preset("tiny").model, kDefaultSeed};
  for (const char* item : {"model.attention.hybrid.chunk=0", "model.attention.hybrid.batched.mask_tol=0.5"}) {
    const Setting s = parse_setting(item);
    run_settings_field(s.key).set(r, s.value);
  }
  EXPECT_EQ(message([&] { check_model_setting("model.attention.hybrid.chunk", r); }),
            "model.attention.hybrid.chunk must be >= 1, got 0");
  EXPECT_EQ(message([&] { check_model_setting("model.attention.hybrid.batched.mask_tol", r); }),
            "model.attention.hybrid.batched.mask_tol must be in (0, 0.5), got 0.5");
  EXPECT_EQ(message([&] { check_model_setting("chunk", r); }), "(no error)");  // left to LmConfig::validate
  EXPECT_NE(message([] { make_setting("model.attention.hybrid.gate", std::string("wide")); }).find("wide"),
            std::string::npos);
}

TEST(CheckpointConfig, StoredConfigReadsAndWritesBackByteForByte) {
  const std::string text = kStoredConfig;
  const CheckpointConfig c = CheckpointConfig::from_json(nlohmann::json::parse(text));
  EXPECT_EQ(c.preset, "tiny");
  EXPECT_EQ(c.train.seq, 32);
  EXPECT_EQ(c.seed, 1234u);
  EXPECT_EQ(c.data.path_given, "d.txt");
  EXPECT_EQ(c.model.attention.hybrid.chunk, 32);
  EXPECT_EQ(c.to_json().dump(2), text);
  EXPECT_EQ(c.settings().train.batch, 2);
}

TEST(CheckpointConfig, KeysAddedLaterTakeTheirOldMeaningWhenAbsent) {
  auto j = nlohmann::json::parse(kStoredConfig);
  j.erase("description");
  j.erase("parameters");
  j["train"].erase("gate_weight_decay");
  for (const char* k : {"local", "local_window", "memory", "count_distinct_support"})
    j["model"]["attention"]["hybrid"].erase(k);
  const CheckpointConfig c = CheckpointConfig::from_json(j);
  EXPECT_TRUE(c.train.gate_weight_decay);
  EXPECT_EQ(c.model.attention.hybrid.local, layers::LocalPath::kChunk);
  EXPECT_TRUE(c.model.attention.hybrid.memory);
  j.erase("seed");
  EXPECT_THROW(CheckpointConfig::from_json(j), nlohmann::json::exception);
}

TEST(CheckpointState, RoundTripsWithNullBeforeTheFirstValidation) {
  CheckpointState s;
  s.step = 7;
  s.metrics_offset = 1234;
  s.trained_seconds = 1.5;
  s.trained_tokens = 512;
  const auto j = s.to_json();
  EXPECT_NE(j.dump().find("\"last_valid_bpc\":null"), std::string::npos) << j.dump();  // as written
  const CheckpointState back = CheckpointState::from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(back.step, 7);
  EXPECT_EQ(back.metrics_offset, 1234);
  EXPECT_TRUE(std::isnan(back.last_valid_bpc));
  EXPECT_EQ(back.trained_tokens, 512);
}

}  // namespace
}  // namespace svattn::lm
