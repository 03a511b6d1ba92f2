// `svattn demo`: the interim main job. Solves a Gaussian problem in batch, streams the same tokens
// into an exact memory, forgets 20 tokens (at most n/2; margin and error tokens among them) and checks the
// result against retraining from scratch.
#include <fmt/core.h>

#include <algorithm>
#include <filesystem>

#include "cli_common.h"
#include "commands.h"
#include "svattn/batch_solver.h"
#include "svattn/certificate.h"
#include "svattn/errors.h"
#include "svattn/io.h"
#include "svattn/memory.h"

namespace svattn::cli {
namespace {

struct DemoOptions {
  std::string out = "out/demo";
  int n = 2000;
  int dim = 8;
  double scale = 0.5;  // keys ~ N(0, 0.25 I): with sigma = 2 both margin and error tokens occur
  std::uint64_t seed = 20240601;
  int remove = 20;
};

/// Picks `count` distinct ids: about a third from each of margin, error and reserve (as available).
std::vector<TokenId> pick_removals(const Partition& p, int count, Rng& rng) {
  std::vector<std::vector<TokenId>> pools = {p.margin, p.error, p.reserve};
  std::vector<TokenId> out;
  int quota[3] = {count / 3 + (count % 3 > 0 ? 1 : 0), count / 3 + (count % 3 > 1 ? 1 : 0),
                  count / 3};
  for (int k = 0; k < 3; ++k) {
    auto& pool = pools[k];
    for (int t = 0; t < quota[k] && !pool.empty(); ++t) {
      const std::size_t i = rng.below(pool.size());
      out.push_back(pool[i]);
      pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  // Fill up from whatever remains when a set was too small.
  for (int k = 0; k < 3 && static_cast<int>(out.size()) < count; ++k) {
    auto& pool = pools[k];
    while (!pool.empty() && static_cast<int>(out.size()) < count) {
      const std::size_t i = rng.below(pool.size());
      out.push_back(pool[i]);
      pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

int run_demo(const DemoOptions& o) {
  // Bounds keep the demo's memory (n x dim keys, its kernel cache) within a workstation.
  if (o.n < 2 || o.n > 1000000)
    throw InvalidArgument("--n must be in [2, 1000000] (got " + std::to_string(o.n) + ")");
  if (o.dim < 1 || o.dim > 4096)
    throw InvalidArgument("--dim must be in [1, 4096] (got " + std::to_string(o.dim) + ")");
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec) throw IoError("cannot create output directory '" + o.out + "': " + ec.message());

  ProblemSettings problem;
  problem.kernel.type = KernelType::kRbf;
  problem.kernel.bandwidth = 2.0;
  problem.C = 0.02;
  problem.validate();

  fmt::print(
      "svattn demo: Gaussian keys, n = {}, d = {}, RBF sigma = {}, C = {}, ridge = {}, "
      "seed {}\n",
      o.n, o.dim, problem.kernel.bandwidth, problem.C, problem.ridge, o.seed);
  Rng rng(o.seed);
  const RowMatrix keys = gaussian_matrix(o.n, o.dim, rng) * o.scale;
  const TokenSet tokens = TokenSet::from_rows(keys);

  // 1. Batch reference solve.
  fmt::print("[1/4] batch solve ...\n");
  std::fflush(stdout);
  BatchSettings batch;
  batch.problem = problem;
  Stopwatch watch;
  const BatchResult solved = solve_batch(tokens, batch);
  const double batch_seconds = watch.seconds();
  const State& s = solved.state;
  fmt::print("      status {}, |S| = {}, |E| = {}, |R| = {}, b = {:.6g}, {:.3f} s\n",
             to_string(s.status), s.partition.margin.size(), s.partition.error.size(),
             s.partition.reserve.size(), s.b, batch_seconds);
  fmt::print("      KKT: max violation {:.2e}, |sum(a)-1| {:.2e}, box {:.2e}\n",
             s.kkt.max_violation, s.kkt.sum_error, s.kkt.box_violation);

  // 2. Stream the same tokens into an exact memory, one by one.
  fmt::print("[2/4] streaming {} tokens into the exact memory ...\n", o.n);
  std::fflush(stdout);
  MemorySettings ms;
  ms.problem = problem;
  Memory memory(ms, o.dim, o.dim);
  OpDiagnostics stream_diag;
  watch.restart();
  const int step = std::max(1, o.n / 4);
  for (int i = 0; i < o.n; ++i) {
    stream_diag += memory.add(i, keys.row(i).transpose(), keys.row(i).transpose());
    if ((i + 1) % step == 0 || i + 1 == o.n) {
      const double t = watch.seconds();
      fmt::print("      {:>6}/{} tokens, {:.0f} tokens/s, |S u E| = {}\n", i + 1, o.n,
                 t > 0 ? (i + 1) / t : 0.0,
                 memory.state().partition.margin.size() + memory.state().partition.error.size());
      std::fflush(stdout);
    }
  }
  const double stream_seconds = watch.seconds();
  const State streamed = memory.state();
  const bool stream_equal = streamed.state_sha256 == s.state_sha256;
  fmt::print("      streamed state hash {} batch hash ({} events, {} repairs, {} fallbacks)\n",
             stream_equal ? "EQUALS" : "DIFFERS FROM", stream_diag.events, stream_diag.repairs,
             stream_diag.batch_fallbacks);

  // 3. Forget 20 tokens, margin and error tokens among them.
  Rng pick_rng(o.seed + 1);
  // At most half of the tokens, so the forgetting check always compares two non-empty memories.
  const int remove_count = std::min(o.remove, o.n / 2);
  const std::vector<TokenId> removed = pick_removals(streamed.partition, remove_count, pick_rng);
  const auto count_in = [](const std::vector<TokenId>& ids, const std::vector<TokenId>& set) {
    long c = 0;
    for (TokenId id : ids) c += std::binary_search(set.begin(), set.end(), id) ? 1 : 0;
    return c;
  };
  fmt::print("[3/4] removing {} tokens ({} margin, {} error, {} reserve) ...\n", removed.size(),
             count_in(removed, streamed.partition.margin),
             count_in(removed, streamed.partition.error),
             count_in(removed, streamed.partition.reserve));
  std::fflush(stdout);
  watch.restart();
  const OpDiagnostics diag = memory.remove_batch(removed);
  const double remove_seconds = watch.seconds();

  // 4. Certificate with an independent re-solve from scratch.
  fmt::print("[4/4] certificate (re-solve from scratch on the remaining {} tokens) ...\n",
             memory.size());
  std::fflush(stdout);
  const RowMatrix probes = probes_around(keys, 64, o.seed + 2);
  watch.restart();
  const RemovalCertificate cert =
      removal_certificate(streamed, memory, removed, "", diag, true, probes);
  const double cert_seconds = watch.seconds();
  const ResolveCheck& check = cert.check;
  const bool partition_equal = check.partition_equal;
  const bool hash_equal = check.hash_equal;
  fmt::print(
      "      partition match {}, hashes equal {}, max |d alpha| {:.3e}, "
      "max |d readout| {:.3e}\n",
      partition_equal ? "yes" : "NO", hash_equal ? "yes" : "NO",
      check.max_abs_dalpha, check.max_abs_dreadout);
  fmt::print("      remove {:.4f} s vs certificate with re-solve {:.3f} s\n", remove_seconds,
             cert_seconds);

  nlohmann::json report;
  report["problem"] = {{"generator", "gaussian"},
                       {"n", o.n},
                       {"dim", o.dim},
                       {"seed", o.seed},
                       {"settings", settings_to_json(problem)}};
  report["batch"] = {{"status", to_string(s.status)},
                     {"margin", s.partition.margin.size()},
                     {"error", s.partition.error.size()},
                     {"reserve", s.partition.reserve.size()},
                     {"b", s.b},
                     {"kkt",
                      {{"max_violation", s.kkt.max_violation},
                       {"sum_error", s.kkt.sum_error},
                       {"box_violation", s.kkt.box_violation}}},
                     {"state_sha256", s.state_sha256},
                     {"seconds", batch_seconds}};
  report["stream"] = {{"state_sha256", streamed.state_sha256},
                      {"equals_batch", stream_equal},
                      {"events", stream_diag.events},
                      {"repairs", stream_diag.repairs},
                      {"batch_fallbacks", stream_diag.batch_fallbacks},
                      {"seconds", stream_seconds},
                      {"tokens_per_second", stream_seconds > 0 ? o.n / stream_seconds : 0.0}};
  report["removal"] = {{"ids", removed}, {"seconds", remove_seconds}};
  report["certificate"] = cert.to_json();
  const std::string path = (std::filesystem::path(o.out) / "demo.json").string();
  write_json(path, report);
  fmt::print("wrote {}\n", path);
  return stream_equal && hash_equal && partition_equal ? 0 : 1;
}

Registrar reg("demo", [](CLI::App& app, int& exit_code) {
  static DemoOptions opts;  // outlives parsing: CLI11 binds to it
  DemoOptions* o = &opts;
  auto* sub = app.add_subcommand(
      "demo",
      "Solve a Gaussian problem, stream it into an exact memory, forget 20 tokens, certify");
  sub->add_option("--out", o->out, "output directory (demo.json)")->capture_default_str();
  sub->add_option("--n", o->n, "tokens")->capture_default_str();
  sub->add_option("--dim", o->dim, "key dimension")->capture_default_str();
  sub->add_option("--seed", o->seed, "seed")->capture_default_str();
  sub->add_option("--scale", o->scale, "standard deviation of the keys")->capture_default_str();
  sub->callback([o, &exit_code] { exit_code = run_demo(*o); });
});

}  // namespace
}  // namespace svattn::cli
