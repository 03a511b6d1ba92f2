// E3's measurement: every method trained on the selective-copy task and evaluated at every
// padding, per seed, seeds side by side (docs/experiments.md "E3").
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
namespace {

using nlohmann::json;
using detail::number_or_null;


torch::Tensor to_tensor(const std::vector<std::int64_t>& v, int batch, int length) {
  return torch::from_blob(const_cast<std::int64_t*>(v.data()), {batch, length}, torch::kInt64)
      .clone();
}

int sequences_at(const Settings& p, int factor) {
  return factor >= p.long_factor && p.long_eval_sequences > 0 ? p.long_eval_sequences
                                                              : p.eval_sequences;
}

// Recall on `eval_sequences` fresh sequences at padding factor `factor`. The sequences are a pure
// function of (seed, factor), so every method and path sees the same ones.
EvalPoint evaluate_recall(layers::CharLm& model, const Settings& p, int factor, std::uint64_t seed,
                          int sequences) {
  SelectiveCopyTask t = p.task;
  t.prefix = p.task.k + (p.task.prefix - p.task.k) * factor;
  const Stopwatch sw;
  EvalPoint e;
  e.factor = factor;
  e.length = t.length();
  Rng rng(seed * 1000003ULL + static_cast<std::uint64_t>(factor));
  const int per = static_cast<int>(std::max<long>(1, p.eval_tokens_per_forward / t.length()));
  long correct = 0;
  torch::Tensor per_out = torch::zeros({t.k}, torch::kInt64);
  std::vector<std::vector<double>> support_sum, distinct_sum;
  std::vector<double> gate_sum;
  double agree_sum = 0, coef_err = 0;
  long agree_units = 0;
  int diag_count = 0;
  torch::NoGradGuard ng;
  model->eval();
  model->set_record_diagnostics(true);  // the point reports support and gate per layer
  for (int done = 0; done < sequences; done += per) {
    const int b = std::min(per, sequences - done);
    const auto batch = make_selective_copy_batch(t, b, rng);
    const auto x = to_tensor(batch.inputs, b, batch.length);
    const auto y = to_tensor(batch.targets, b, batch.length);
    const auto pred = model->forward(x).argmax(-1);
    const auto mask = y.ne(-100);
    const auto hit = pred.eq(y).logical_and(mask);
    correct += hit.sum().item<long>();
    per_out += hit.narrow(1, t.prefix, t.k).sum(0);
    e.outputs += mask.sum().item<long>();
    const auto diags = model->diagnostics();
    if (model->config().attention.type == layers::AttentionType::kHybrid) {
      if (support_sum.empty()) support_sum.assign(diags.size(), std::vector<double>());
      if (distinct_sum.empty()) distinct_sum.assign(diags.size(), std::vector<double>());
      if (gate_sum.empty()) gate_sum.assign(diags.size(), 0.0);
      for (std::size_t l = 0; l < diags.size(); ++l) {
        auto& s = support_sum[l];
        if (s.empty()) s.assign(diags[l].support_per_head.size(), 0.0);
        for (std::size_t h = 0; h < s.size(); ++h) s[h] += diags[l].support_per_head[h] * b;
        auto& ds = distinct_sum[l];
        if (ds.empty()) ds.assign(diags[l].distinct_support_per_head.size(), 0.0);
        for (std::size_t h = 0; h < ds.size(); ++h)
          ds[h] += diags[l].distinct_support_per_head[h] * b;
        if (!std::isnan(diags[l].duplicate_alpha_spread))
          e.duplicate_alpha_spread =
              std::max(e.duplicate_alpha_spread, diags[l].duplicate_alpha_spread);
        e.duplicate_support_tokens += diags[l].duplicate_support_tokens;
        gate_sum[l] += diags[l].gate_mean * b;
        if (diags[l].agreement_units > 0) {
          agree_sum += diags[l].partition_agreement * static_cast<double>(diags[l].agreement_units);
          agree_units += diags[l].agreement_units;
          coef_err = std::max(coef_err, diags[l].coefficient_error);
        }
      }
      diag_count += b;
    }
  }
  e.recall = e.outputs > 0 ? static_cast<double>(correct) / static_cast<double>(e.outputs) : 0;
  for (int j = 0; j < t.k; ++j)
    e.recall_per_output.push_back(static_cast<double>(per_out[j].item<std::int64_t>()) / sequences);
  if (diag_count > 0) {
    for (auto& s : support_sum)
      for (auto& v : s) v /= diag_count;
    e.support = support_sum;
    for (auto& s : distinct_sum)
      for (auto& v : s) v /= diag_count;
    e.distinct_support = distinct_sum;
    double g = 0;
    for (auto& v : gate_sum) v /= diag_count, g += v;
    e.gate_per_layer = gate_sum;
    e.gate_mean = g / static_cast<double>(gate_sum.size());
  }
  if (agree_units > 0) {
    e.partition_agreement = agree_sum / static_cast<double>(agree_units);
    e.coefficient_error = coef_err;
  }
  e.seconds = sw.seconds();
  return e;
}

// A model with `config` and the parameters and buffers of `src` (same names: the SV path and the
// diagnostics switches do not change the parameters).
layers::CharLm clone_with_config(layers::CharLm& src, const layers::LmConfig& config) {
  layers::CharLm dst(config);
  torch::NoGradGuard ng;
  auto sp = src->named_parameters(true);
  for (auto& kv : dst->named_parameters(true)) kv.value().copy_(sp[kv.key()]);
  auto sb = src->named_buffers(true);
  for (auto& kv : dst->named_buffers(true)) kv.value().copy_(sb[kv.key()]);
  return dst;
}

/// AdamW with weight decay on the matrices only.
torch::optim::AdamW make_optimizer(layers::CharLm& model, const Settings& p) {
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& q : model->parameters()) (q.dim() >= 2 ? decay : no_decay).push_back(q);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                 torch::optim::AdamWOptions(p.lr).weight_decay(p.weight_decay)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                    torch::optim::AdamWOptions(p.lr).weight_decay(0.0)));
  return torch::optim::AdamW(std::move(groups));
}

/// Warm-up then cosine decay to a tenth.
double learning_rate(const Settings& p, int step) {
  return step <= p.warmup
             ? p.lr * step / std::max(1, p.warmup)
             : p.lr * (0.1 + 0.9 * 0.5 *
                                 (1 + std::cos(M_PI * (step - p.warmup) /
                                               std::max(1, p.steps - p.warmup))));
}

/// `steps` training steps on fresh batches from `rng`; the loss and gradient-norm curves into r.
void train_steps(layers::CharLm& model, torch::optim::AdamW& opt, const Method& m,
                 const Settings& p, int steps, Rng& rng, Progress& prog, MethodResult& r) {
  const int log_every = std::max(1, p.steps / 30);
  double acc = 0, gacc = 0;
  int acc_n = 0;
  model->train();
  for (int step = 1; step <= steps; ++step) {
    const double lr = learning_rate(p, step);
    for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
    const auto batch = make_selective_copy_batch(p.task, p.batch, rng);
    const auto x = to_tensor(batch.inputs, p.batch, batch.length);
    const auto y = to_tensor(batch.targets, p.batch, batch.length);
    opt.zero_grad();
    const auto logits = model->forward(x);
    const auto loss = torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}), y.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
    loss.backward();
    gacc += torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
    opt.step();
    const double lv = loss.item<double>();
    if (!std::isfinite(lv))
      throw Error("E3 " + m.name + ": loss is not finite at step " + std::to_string(step));
    acc += lv;
    ++acc_n;
    if (step % log_every == 0 || step == steps) {
      r.loss_curve.emplace_back(step, acc / acc_n);
      r.grad_norm_curve.push_back(gacc / acc_n);
      r.final_train_loss = acc / acc_n;
      acc = 0;
      gacc = 0;
      acc_n = 0;
    }
    prog.tick();
  }
  prog.finish();
}

/// The learned bandwidths σ of a hybrid, per layer (parameters and buffers named *log_sigma).
void collect_sigmas(layers::CharLm& model, MethodResult& r) {
  auto collect = [&](const torch::OrderedDict<std::string, torch::Tensor>& d) {
    for (const auto& kv : d) {
      const std::string& key = kv.key();
      if (key.size() < 9 || key.compare(key.size() - 9, 9, "log_sigma") != 0) continue;
      torch::Tensor sg = kv.value().detach().exp().to(torch::kFloat64).contiguous();
      r.sigma.emplace_back(sg.data_ptr<double>(), sg.data_ptr<double>() + sg.numel());
    }
  };
  collect(model->named_parameters(true));
  collect(model->named_buffers(true));
}

/// Recall at every factor; for the hybrid with the evaluation's switches (the distinct-support
/// count, off in training, where nobody reads it, and the evaluation path when it differs) and
/// the per-output diagnosis.
void evaluate_trained(layers::CharLm& model, const Method& m, const layers::LmConfig& config,
                      const Settings& p, std::uint64_t eval_seed, MethodResult& r) {
  if (m.type == layers::AttentionType::kHybrid) {
    layers::LmConfig ec = config;
    ec.attention.hybrid.count_distinct_support = true;
    if (!p.eval_path.empty())
      ec.attention.hybrid.path = layers::global_path_from_string(p.eval_path);
    layers::CharLm em = clone_with_config(model, ec);
    for (int f : p.factors)
      r.eval.push_back(evaluate_recall(em, p, f, eval_seed, sequences_at(p, f)));
    r.outputs = diagnose_outputs(em, p.task, p.eval_sequences, eval_seed + 1);
  } else {
    for (int f : p.factors)
      r.eval.push_back(evaluate_recall(model, p, f, eval_seed, sequences_at(p, f)));
  }
}

/// The same weights through the other SV path (the certified exact path, fp64 Memory per batch,
/// head and chunk, when trained with the batched path; else the batched path), and the batched
/// path's partition agreement with the exact path on the keys of the first factor.
void evaluate_other_path(layers::CharLm& model, const layers::LmConfig& config, const Settings& p,
                         std::uint64_t eval_seed, MethodResult& r) {
  const Stopwatch se;
  const bool trained_batched = config.attention.hybrid.path == layers::GlobalPath::kBatched;
  layers::LmConfig ec = config;
  ec.attention.hybrid.path =
      trained_batched ? layers::GlobalPath::kExact : layers::GlobalPath::kBatched;
  layers::CharLm other = clone_with_config(model, ec);
  for (int f : p.factors)
    r.eval_exact.push_back(evaluate_recall(other, p, f, eval_seed, sequences_at(p, f)));
  layers::LmConfig ac = config;
  ac.attention.hybrid.path = layers::GlobalPath::kBatched;
  ac.attention.hybrid.check_agreement = true;
  layers::CharLm check = clone_with_config(model, ac);
  const EvalPoint a =
      evaluate_recall(check, p, p.factors.front(), eval_seed, std::min(p.eval_sequences, 16));
  r.eval.front().partition_agreement = a.partition_agreement;
  r.eval.front().coefficient_error = a.coefficient_error;
  r.eval_exact_seconds = se.seconds();
}

MethodResult train_method(const Method& m, const Settings& p, std::int64_t window,
                          std::int64_t recurrent_heads, std::uint64_t seed,
                          const ExperimentOptions& o) {
  MethodResult r;
  const layers::LmConfig config = model_config(p, m.type, window, recurrent_heads);
  r.method = m.name;
  r.heads = config.attention.n_heads;
  r.window = config.attention.window;
  layers::CharLm model = lm::seeded_char_lm(config, seed);
  r.parameters = layers::count_parameters(*model);
  torch::optim::AdamW opt = make_optimizer(model, p);
  Rng rng(seed);  // the same training sequences for every method
  const std::string model_file =
      o.out_dir + "/E3-" + m.name + (p.seeds.size() > 1 ? "-s" + std::to_string(seed) : "") + ".pt";
  if (p.reuse_models && std::filesystem::exists(model_file)) {
    torch::load(model, model_file);
    r.reused = true;
  }
  const int steps = r.reused ? 0 : p.steps;
  const Stopwatch sw;
  Progress prog("E3 train " + m.name + (p.seeds.size() > 1 ? " seed " + std::to_string(seed) : ""),
                steps, "steps", o.progress);
  train_steps(model, opt, m, p, steps, rng, prog, r);
  r.train_seconds = sw.seconds();
  if (p.save_models && !r.reused) torch::save(model, model_file);
  if (m.type == layers::AttentionType::kHybrid) collect_sigmas(model, r);
  const std::uint64_t eval_seed = seed ^ 0x5e1ec7ULL;
  evaluate_trained(model, m, config, p, eval_seed, r);
  if (m.type == layers::AttentionType::kHybrid && p.eval_exact)
    evaluate_other_path(model, config, p, eval_seed, r);
  return r;
}

// Heads of a linear-attention / DeltaNet layer whose fixed state (H * d_k * d_v floats, plus H *
// d_k for linear attention's normaliser) is closest, in ratio, to `target` floats per layer; H
// divides d_model with an even head dimension. Ties go to fewer heads (more state for the
// baseline).
std::int64_t matched_recurrent_heads(const Settings& p, layers::AttentionType type, double target) {
  std::int64_t best = 1;
  double best_gap = 1e300;
  for (std::int64_t h = 1; h <= p.d_model; ++h) {
    if (p.d_model % h != 0 || (p.d_model / h) % 2 != 0) continue;
    layers::LmConfig c = model_config(p, type, 1, h);
    const double st = static_cast<double>(h) * state_floats_per_head(c.attention, 0.0, 1);
    const double gap = std::fabs(std::log(st / target));
    if (gap < best_gap - 1e-12) best_gap = gap, best = h;
  }
  return best;
}



}  // namespace

constexpr std::int64_t kScanChunk = 32;

layers::LmConfig model_config(const Settings& p, layers::AttentionType type, std::int64_t window,
                              std::int64_t recurrent_heads) {
  layers::LmConfig m;
  m.vocab = p.task.vocab();
  m.n_layers = p.n_layers;
  m.mlp_ratio = 4;
  m.tied_head = true;
  m.dropout = 0;
  auto& a = m.attention;
  a.type = type;
  a.d_model = p.d_model;
  const bool recurrent =
      type == layers::AttentionType::kLinear || type == layers::AttentionType::kDeltaNet;
  a.n_heads = recurrent ? recurrent_heads : p.n_heads;
  a.window = std::max<std::int64_t>(1, window);
  // Linear attention's and DeltaNet's chunkwise forms are exact at any chunk; 32 instead of the
  // hybrid's chunk 1 turns a token-by-token scan into a few matrix products.
  a.scan_chunk = kScanChunk;
  a.rope = true;
  auto& h = a.hybrid;
  h.chunk = p.chunk;
  h.local = layers::local_path_from_string(p.local);
  if (h.local == layers::LocalPath::kWindow) h.local_window = p.local_window;
  h.path = layers::global_path_from_string(p.path);
  h.gate = layers::gate_type_from_string(p.gate);
  h.problem.C = p.C;
  h.problem.kernel.bandwidth = p.sigma;
  h.learn_bandwidth = p.learn_sigma;
  h.normalize_keys = true;
  h.bounded = p.bounded;
  h.problem.ridge = p.mu;
  h.gate_bias_init = p.gate_bias;
  h.batched.iterations = p.fista_iterations;
  h.batched.mask_tol = p.mask_tol;
  m.validate();
  return m;
}

// The configuration a method was trained with, from the settings and what the result records.
layers::LmConfig config_of(const Settings& p, const MethodResult& r) {
  return model_config(p, method_of(r).type, r.window, r.heads);
}



// Mean over layers and heads of a [layer][head] table (NaN when empty).
double mean_of_layers(const std::vector<std::vector<double>>& per_layer_head) {
  double s = 0;
  int n = 0;
  for (const auto& l : per_layer_head)
    for (double v : l) s += v, ++n;
  return n > 0 ? s / n : std::nan("");
}

double mean_support(const EvalPoint& e) { return mean_of_layers(e.support); }



/// 1. the hybrid first; its measured support at the training length sets the sliding window and
/// the recurrent head split; then the others.
SeedRuns train_all(const Settings& p, const ExperimentOptions& o, std::uint64_t seed) {
  SeedRuns runs;
  runs.seed = seed;
  std::vector<MethodResult>& results = runs.results;
  double& support = runs.support;
  double& hybrid_state = runs.hybrid_state;
  runs.window = p.window;
  std::int64_t& window = runs.window;
  for (const auto& name : p.methods) {
    const Method& m = method_named(name);
    std::int64_t rh = p.recurrent_heads > 0 ? p.recurrent_heads : 1;
    if (p.recurrent_heads < 1 && !std::isnan(hybrid_state))
      rh = matched_recurrent_heads(p, m.type, hybrid_state);
    results.push_back(train_method(m, p, window > 0 ? window : 1, rh, seed, o));
    if (m.type == layers::AttentionType::kHybrid && std::isnan(support)) {
      support = mean_support(results.back().eval.front());
      if (p.window < 1)
        window = layers::state_matched_window(
            model_config(p, layers::AttentionType::kHybrid, 1).attention.hybrid.local_width(), support);
      hybrid_state =
          static_cast<double>(p.n_heads) *
          state_floats_per_head(config_of(p, results.back()).attention, support, p.task.length());
    }
  }
  const MethodResult* hyb = runs.find("hybrid");
  // State carried at the longest evaluation length (the window is then shorter than the context).
  const std::int64_t longest = runs.longest = results.front().eval.back().length;
  for (auto& r : results) {
    r.state_per_layer =
        static_cast<double>(config_of(p, r).attention.n_heads) *
        state_floats_per_head(config_of(p, r).attention, std::isnan(support) ? 0.0 : support, longest);
  }
  const MethodResult* lin = runs.find("linear");
  const MethodResult* dn = runs.find("deltanet");
  runs.recurrent_covers =
      hyb != nullptr && lin != nullptr && dn != nullptr &&
      std::min(lin->state_per_layer, dn->state_per_layer) >= hyb->state_per_layer;

  return runs;
}

Result measure(const ExperimentOptions& o) {
  o.validate();
  const Stopwatch total;
  Result res;
  res.preset = o.preset;
  res.settings = detail::with_overrides(preset_settings(o.preset), kInfo.id, o);
  const Settings& p = res.settings;
  for (const auto& ov : o.overrides)
    if (ov.scope.empty() || ov.scope == "E3")
      res.overrides += (res.overrides.empty() ? "" : " ") + ov.text();
  validate_preset(p);
  lm::set_threads(1);
  ensure_dir(o.out_dir);
  // Every seed trains and evaluates every method; seeds run side by side on p.workers threads.
  std::vector<std::uint64_t> seeds;
  for (const auto s : p.seeds) seeds.push_back(static_cast<std::uint64_t>(s));
  if (seeds.empty()) seeds.push_back(o.seed);
  res.runs.resize(seeds.size());
  std::vector<std::function<void()>> jobs;
  for (std::size_t i = 0; i < seeds.size(); ++i)
    jobs.emplace_back([&, i] {
      lm::set_threads(1);  // per thread: the worker's own LibTorch/BLAS thread count
      res.runs[i] = train_all(p, o, seeds[i]);
    });
  detail::run_jobs(jobs, p.workers);
  res.machine = detail::machine_info();
  res.created = utc_now();
  res.measure_seconds = total.seconds();
  return res;
}

ExperimentResult run(const ExperimentOptions& o) { return render(measure(o), o); }

}  // namespace svattn::experiments::e3_selective_copy
