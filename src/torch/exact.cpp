// Exact-path SV attention as an autograd function: the forward fits every (batch, head) with the
// lean solver (or svattn::Memory) on a thread pool and reads out; the backward applies the
// KKT-inverse gradient of each memory (exact_unit.cpp; docs/layers.md §1).
#include "svattn/torch/exact.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <string>

#include "check_settings.h"
#include "exact_unit.h"
#include "host_transfer.h"
#include "support/clock.h"
#include "svattn/errors.h"

namespace svattn::layers {

void ExactSettings::validate() const { check_problem(problem, "problem."); }

MemorySettings ExactSettings::memory_settings(double sigma) const {
  MemorySettings m;
  m.problem = problem;
  m.problem.kernel.bandwidth = sigma;
  m.mode = MemoryMode::kAudit;
  return m;
}

namespace {

using detail::ExactUnit;
using detail::Slice;
using torch::Tensor;

// The units of one forward, kept for the backward without a copy (an autograd capsule).
struct SavedUnits : torch::CustomClassHolder {
  std::vector<ExactUnit> units;
};

// Process-wide timers (exact_times()).
std::mutex g_times_mutex;
ExactTimes g_times;
void add_time(double ExactTimes::*field, const support::Stopwatch& watch) {
  const double dt = watch.seconds();
  std::lock_guard<std::mutex> lock(g_times_mutex);
  g_times.*field += dt;
}

struct Shapes {
  std::int64_t B, H, N, M, d, dv;
};

Shapes check_inputs(const Tensor& keys, const Tensor& values, const Tensor& queries,
                    const Tensor& log_sigma, bool same_length) {
  auto fail = [](const std::string& msg) { throw InvalidArgument("sv_exact_attention: " + msg); };
  if (keys.dim() != 4 || values.dim() != 4 || queries.dim() != 4)
    fail("keys, values and queries must be 4-D [B, H, N, *]");
  if (!keys.is_floating_point() || !values.is_floating_point() || !queries.is_floating_point())
    fail("keys, values and queries must be floating point");
  Shapes s{keys.size(0), keys.size(1), keys.size(2), queries.size(2), keys.size(3), values.size(3)};
  if (values.size(0) != s.B || values.size(1) != s.H || values.size(2) != s.N)
    fail("values must be [B, H, N, dv] with the keys' B, H, N");
  if (queries.size(0) != s.B || queries.size(1) != s.H || queries.size(3) != s.d)
    fail("queries must be [B, H, M, d] with the keys' B, H, d");
  if (same_length && s.M != s.N) fail("chunked attention needs queries and keys of equal length");
  if (log_sigma.defined() && (log_sigma.dim() != 1 || log_sigma.size(0) != s.H))
    fail("log_sigma must be undefined or [H]");
  return s;
}

// ls: the host fp64 copy of log_sigma (undefined: `bandwidth` for every head).
std::vector<double> head_sigmas(const Tensor& ls, std::int64_t H, double bandwidth) {
  std::vector<double> out(static_cast<std::size_t>(H), bandwidth);
  if (ls.defined()) {
    for (std::int64_t h = 0; h < H; ++h)
      out[static_cast<std::size_t>(h)] = std::exp(ls.data_ptr<double>()[h]);
  }
  for (double s : out)
    if (!std::isfinite(s) || s <= 0)
      throw InvalidArgument("sv_exact_attention: bandwidth exp(log_sigma) must be finite and > 0");
  return out;
}

// The units of one (b, h): units_per of them, chunk c's at units[c] (chunk 0 of a chunked memory
// has none). chunk == 0: one memory of all N keys read by all M queries.
struct SliceJob {
  Slice s;
  std::int64_t N, M, chunk, n_chunks;
  double sigma;
  double* O;
  double* LZ;
};

// The lean solver (one per thread, its workspaces reused across calls).
void solve_slice_lean(const SliceJob& j, const ExactSettings& st, ExactUnit* units) {
  thread_local LeanSolver solver;
  ProblemSettings p = st.problem;
  p.kernel.bandwidth = j.sigma;
  solver.reset(p, static_cast<int>(j.s.d), static_cast<int>(j.N));
  if (j.chunk == 0) {
    solver.add(j.s.X, 0, static_cast<int>(j.N));
    units[0] = detail::capture_lean(solver, j.s, 0, j.M, st.certify);
    detail::unit_readout(units[0], j.s, j.sigma, j.O, j.LZ);
    return;
  }
  for (std::int64_t c = 1; c < j.n_chunks; ++c) {
    const std::int64_t qb = c * j.chunk, qe = std::min(j.N, qb + j.chunk);
    solver.add(j.s.X + (qb - j.chunk) * j.s.d, qb - j.chunk, static_cast<int>(j.chunk));
    if (st.bounded) solver.evict_reserve();
    units[c] = detail::capture_lean(solver, j.s, qb, qe, st.certify);
    detail::unit_readout(units[c], j.s, j.sigma, j.O, j.LZ);
  }
  units[0].q_end = std::min(j.N, j.chunk);  // chunk 0: no memory, output rows 0
}

TokenSet token_rows(const double* X, const double* V, std::int64_t begin, std::int64_t end,
                    std::int64_t d, std::int64_t dv) {
  TokenSet ts;
  const auto n = static_cast<Eigen::Index>(end - begin);
  ts.ids.resize(static_cast<std::size_t>(n));
  for (Eigen::Index i = 0; i < n; ++i) ts.ids[static_cast<std::size_t>(i)] = begin + i;
  ts.keys = Eigen::Map<const RowMatrix>(X + begin * d, n, static_cast<Eigen::Index>(d));
  ts.values = Eigen::Map<const RowMatrix>(V + begin * dv, n, static_cast<Eigen::Index>(dv));
  return ts;
}

// The core: one svattn::Memory per (b, h), its canonical state captured after every chunk.
void solve_slice_memory(const SliceJob& j, const ExactSettings& st, ExactUnit* units) {
  Memory mem(st.memory_settings(j.sigma), static_cast<int>(j.s.d), static_cast<int>(j.s.dv));
  auto add = [&](std::int64_t begin, std::int64_t end, std::int64_t qb, std::int64_t qe) {
    OpDiagnostics dg = mem.add_batch(token_rows(j.s.X, j.s.V, begin, end, j.s.d, j.s.dv));
    if (st.bounded && j.chunk > 0) mem.evict_reserve(&dg);
    ExactUnit u = detail::capture_memory(mem, qb, qe, st.certify);
    u.events = dg.events;
    u.fallbacks = dg.batch_fallbacks;
    detail::unit_readout(u, j.s, j.sigma, j.O, j.LZ);
    return u;
  };
  if (j.chunk == 0) {
    units[0] = add(0, j.N, 0, j.M);
    return;
  }
  units[0].q_end = std::min(j.N, j.chunk);
  for (std::int64_t c = 1; c < j.n_chunks; ++c) {
    const std::int64_t qb = c * j.chunk, qe = std::min(j.N, qb + j.chunk);
    units[c] = add(qb - j.chunk, qb, qb, qe);
  }
}

// The lean solver's counters are cumulative over a slice: per-unit counts are the differences.
void lean_counts_per_unit(std::vector<ExactUnit>& units, std::int64_t units_per) {
  for (std::size_t k = units.size(); k-- > 0;) {
    if (k % static_cast<std::size_t>(units_per) == 0) continue;
    const ExactUnit& prev = units[k - 1];
    units[k].events -= prev.events;
    units[k].fallbacks -= prev.fallbacks;
  }
}

void fill_info(const std::vector<ExactUnit>& units, const Shapes& s, std::int64_t chunk,
               std::int64_t n_chunks, double secs, ExactInfo* info) {
  std::vector<std::int64_t> shape = {s.B, s.H};
  if (chunk > 0) shape.push_back(n_chunks);
  std::vector<std::int64_t> full = shape;
  full.push_back(s.N);
  info->role = torch::zeros(full, torch::kInt8);
  info->alpha = torch::zeros(full, torch::kFloat64);
  info->b = torch::zeros(shape, torch::kFloat64);
  info->support = torch::zeros(shape, torch::kInt64);
  info->memory_size = torch::zeros(shape, torch::kInt64);
  info->verified = torch::full(shape, -1, torch::kInt8);
  info->status.assign(units.size(), Status::kEmpty);
  info->events = 0;
  info->batch_fallbacks = 0;
  info->seconds = secs;
  auto* rp = info->role.data_ptr<std::int8_t>();
  auto* ap = info->alpha.data_ptr<double>();
  for (std::size_t k = 0; k < units.size(); ++k) {
    const ExactUnit& u = units[k];
    const auto row = static_cast<std::int64_t>(k) * s.N;
    for (std::size_t j = 0; j < u.support.size(); ++j) {
      rp[row + u.support[j]] = u.role[j];
      ap[row + u.support[j]] = u.alpha[j];
    }
    info->b.data_ptr<double>()[k] = u.b;
    info->support.data_ptr<std::int64_t>()[k] = static_cast<std::int64_t>(u.support.size());
    info->memory_size.data_ptr<std::int64_t>()[k] = u.mem_size;
    info->verified.data_ptr<std::int8_t>()[k] = u.verified;
    info->status[k] = u.status;
    info->events += u.events;
    info->batch_fallbacks += u.fallbacks;
  }
}

class ExactFunction : public torch::autograd::Function<ExactFunction> {
 public:
  // chunk == 0: one memory of all N keys per (b, h) read by all M queries. chunk > 0: causal
  // chunked memory (queries of chunk c read the memory of chunks 0..c-1).
  // Returns {output [B,H,M,dv], log-normaliser [B,H,M] (-inf where the memory is empty)}.
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const Tensor& keys, const Tensor& values,
                                                const Tensor& queries, const Tensor& log_sigma,
                                                std::int64_t chunk, const ExactSettings& settings,
                                                ExactInfo* info, const std::vector<Tensor>* host) {
    const support::Stopwatch watch;
    settings.validate();
    const Shapes s = check_inputs(keys, values, queries, log_sigma, chunk > 0);
    if (chunk < 0) throw InvalidArgument("sv_exact_chunked_attention: chunk must be >= 1");
    // host: the fp64 host copies {keys, values, queries, log_sigma} the caller checked.
    const Tensor &X = (*host)[0], &V = (*host)[1], &Q = (*host)[2];
    const std::vector<double> sig =
        head_sigmas((*host)[3], s.H, settings.problem.kernel.bandwidth);
    const torch::Device dev = queries.device();
    Tensor O = detail::host_result({s.B, s.H, s.M, s.dv}, dev);
    Tensor LZ = detail::host_result({s.B, s.H, s.M}, dev, -std::numeric_limits<double>::infinity());
    const std::int64_t n_chunks = chunk > 0 ? (s.N + chunk - 1) / chunk : 1;
    auto saved = c10::make_intrusive<SavedUnits>();
    std::vector<ExactUnit>& units = saved->units;
    units.resize(static_cast<std::size_t>(s.B * s.H * n_chunks));
    const bool lean = settings.solver == ExactSolver::kLean;
    at::parallel_for(0, s.B * s.H, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t bh = begin; bh < end; ++bh) {
        const SliceJob job{Slice{X.data_ptr<double>() + bh * s.N * s.d,
                                 V.data_ptr<double>() + bh * s.N * s.dv,
                                 Q.data_ptr<double>() + bh * s.M * s.d, s.d, s.dv},
                           s.N,
                           s.M,
                           chunk,
                           n_chunks,
                           sig[static_cast<std::size_t>(bh % s.H)],
                           O.data_ptr<double>() + bh * s.M * s.dv,
                           LZ.data_ptr<double>() + bh * s.M};
        ExactUnit* out = units.data() + bh * n_chunks;
        if (lean)
          solve_slice_lean(job, settings, out);
        else
          solve_slice_memory(job, settings, out);
      }
    });
    if (lean && chunk > 0) lean_counts_per_unit(units, n_chunks);
    const double secs = watch.seconds();
    if (info != nullptr) fill_info(units, s, chunk, n_chunks, secs, info);

    ctx->save_for_backward({keys, values, queries, log_sigma});
    ctx->saved_data["units"] = c10::IValue::make_capsule(saved);
    ctx->saved_data["chunk"] = chunk;
    ctx->saved_data["n_chunks"] = n_chunks;
    ctx->saved_data["bandwidth"] = settings.problem.kernel.bandwidth;
    auto outs = torch::autograd::variable_list{detail::to_device(O, queries.options()),
                                               detail::to_device(LZ, queries.options())};
    add_time(&ExactTimes::forward_seconds, watch);
    return outs;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const support::Stopwatch watch;
    const auto saved = ctx->get_saved_variables();
    const Tensor &keys = saved[0], &values = saved[1], &queries = saved[2], &log_sigma = saved[3];
    const auto holder = c10::static_intrusive_pointer_cast<SavedUnits>(
        ctx->saved_data["units"].toCapsule());
    const std::vector<ExactUnit>& units = holder->units;
    const std::int64_t chunk = ctx->saved_data["chunk"].toInt();
    const std::int64_t units_per = ctx->saved_data["n_chunks"].toInt();
    const double bandwidth = ctx->saved_data["bandwidth"].toDouble();
    const Shapes s = check_inputs(keys, values, queries, log_sigma, chunk > 0);
    const bool has_gz = grads.size() > 1 && grads[1].defined();
    const std::vector<Tensor> host = detail::to_host64(
        {keys, values, queries, log_sigma, grads[0], has_gz ? grads[1] : Tensor()});
    const Tensor &X = host[0], &V = host[1], &Q = host[2], &GZ = host[5];
    const std::vector<double> sig = head_sigmas(host[3], s.H, bandwidth);
    const Tensor G =
        host[4].defined() ? host[4] : torch::zeros({s.B, s.H, s.M, s.dv}, torch::kFloat64);
    const torch::Device dev = queries.device();
    Tensor Xg = detail::host_result(X.sizes(), keys.device());
    Tensor Vg = detail::host_result(V.sizes(), values.device());
    Tensor Qg = detail::host_result(Q.sizes(), dev);
    Tensor Sg = torch::zeros({s.B, s.H}, torch::kFloat64);
    at::parallel_for(0, s.B * s.H, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t bh = begin; bh < end; ++bh) {
        const Slice sl{X.data_ptr<double>() + bh * s.N * s.d,
                       V.data_ptr<double>() + bh * s.N * s.dv,
                       Q.data_ptr<double>() + bh * s.M * s.d, s.d, s.dv};
        const detail::SliceGrad g{Xg.data_ptr<double>() + bh * s.N * s.d,
                                  Vg.data_ptr<double>() + bh * s.N * s.dv,
                                  Qg.data_ptr<double>() + bh * s.M * s.d, Sg.data_ptr<double>() + bh};
        for (std::int64_t c = 0; c < units_per; ++c)
          detail::unit_backward(units[static_cast<std::size_t>(bh * units_per + c)], sl,
                                G.data_ptr<double>() + bh * s.M * s.dv,
                                has_gz ? GZ.data_ptr<double>() + bh * s.M : nullptr,
                                sig[static_cast<std::size_t>(bh % s.H)], g);
      }
    });
    Tensor lsg;
    if (log_sigma.defined()) {
      // d loss / d log sigma = sigma * d loss / d sigma.
      Tensor sig_t = torch::exp(host[3]);
      lsg = detail::to_device(Sg.sum(0) * sig_t, log_sigma.options());
    }
    torch::autograd::variable_list out = {detail::to_device(Xg, keys.options()),
                                          detail::to_device(Vg, values.options()),
                                          detail::to_device(Qg, queries.options()),
                                          lsg,
                                          Tensor(),
                                          Tensor(),
                                          Tensor(),
                                          Tensor()};
    add_time(&ExactTimes::backward_seconds, watch);
    return out;
  }
};

// Autograd needs every tensor input defined: an absent log_sigma becomes a constant [H] tensor.
Tensor defined_log_sigma(const Tensor& keys, const Tensor& log_sigma,
                         const ExactSettings& settings) {
  if (log_sigma.defined()) return log_sigma;
  return torch::full({keys.size(1)}, std::log(settings.problem.kernel.bandwidth), torch::kFloat64);
}

// The inputs' fp64 host copies {keys, values, queries, log_sigma} (one transfer from a device)
// after the data checks of docs/layers.md "Inputs", run on the copies: no other host sync.
// n_mem: the keys any memory holds (the equal-key check with ridge 0).
std::vector<Tensor> checked_host_inputs(const Tensor& keys, const Tensor& values,
                                        const Tensor& queries, const Tensor& log_sigma,
                                        std::int64_t n_mem, const ExactSettings& settings,
                                        const std::string& who) {
  std::vector<Tensor> host = detail::to_host64({keys, values, queries, log_sigma});
  check_sv_data(host[0], host[1], host[2], who);
  const bool key_gradient = keys.requires_grad() && torch::GradMode::is_enabled();
  check_distinct_keys_for_gradient(host[0], n_mem, settings.problem.ridge, key_gradient, who);
  return host;
}

}  // namespace

ExactTimes exact_times() {
  std::lock_guard<std::mutex> lock(g_times_mutex);
  return g_times;
}

Tensor sv_exact_attention(const Tensor& keys, const Tensor& values, const Tensor& queries,
                          const Tensor& log_sigma, const ExactSettings& settings, ExactInfo* info) {
  settings.validate();
  check_inputs(keys, values, queries, log_sigma, false);
  const Tensor ls = defined_log_sigma(keys, log_sigma, settings);
  const std::vector<Tensor> host =
      checked_host_inputs(keys, values, queries, ls, keys.size(2), settings, "sv_exact_attention");
  return ExactFunction::apply(keys, values, queries, ls, std::int64_t{0}, settings, info,
                              &host)[0];
}

Tensor sv_exact_chunked_attention(const Tensor& keys, const Tensor& values, const Tensor& queries,
                                  const Tensor& log_sigma, std::int64_t chunk,
                                  const ExactSettings& settings, ExactInfo* info,
                                  Tensor* log_normalizer) {
  if (chunk < 1) throw InvalidArgument("sv_exact_chunked_attention: chunk must be >= 1");
  settings.validate();
  check_inputs(keys, values, queries, log_sigma, true);
  const Tensor ls = defined_log_sigma(keys, log_sigma, settings);
  const std::int64_t N = keys.size(2);
  const std::vector<Tensor> host =
      checked_host_inputs(keys, values, queries, ls, ((N + chunk - 1) / chunk - 1) * chunk,
                          settings, "sv_exact_chunked_attention");
  auto outs = ExactFunction::apply(keys, values, queries, ls, chunk, settings, info, &host);
  if (log_normalizer != nullptr) *log_normalizer = outs[1];
  return outs[0];
}

}  // namespace svattn::layers
