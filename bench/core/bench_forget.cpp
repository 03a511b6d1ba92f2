// Exact forgetting performance: single-token decremental removal vs retraining from
// scratch (ours and LIBSVM), streaming ingest vs re-solving with LIBSVM every 64-token chunk, and
// bytes of memory per token. Prints Markdown tables.
//   bench_forget [--n 1000,5000,20000] [--stream-n 1000,5000,20000] [--d 64] [--sigma2-per-dim 1]
//                [--C 0.01] [--tokens 20] [--random-tokens 200] [--reps 3]
//                [--stream-budget-s 60] [--seed 42]
//   bench_forget --scaling-n 1000,5000,20000,100000,200000 [--scaling-clustered-n 20000]
//                [--margin-tokens 20] [--records 5] [--random-tokens 200] [--reps 1]
//                [--old-bound-n N,...] [--scan-n N,...] [--path-length-n N,...]
//                [--drift-only-n N,...] [--canonical-ab-n N,...] ...
//   bench_forget --canonical-interleaved-n 20000,200000 [--interleaved-tokens 12]
//     the canonical refinement's kernel configurations interleaved on one memory per n.
//   bench_forget --bound-study-n 20000 [--study-removals 10]
//     measured evaluation of screening bounds (bound_study.h).
//     prints only the scaling tables (forget_scaling.h).
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "bench_common.h"
#include "bound_study.h"
#include "core/canonical.h"  // detail::g_reuse_row_prefixes
#include "core/fixed_sum.h"
#include "core/memory_impl.h"  // detail::g_exact_offset_screening
#include "forget_scaling.h"
#include "svattn/batch_solver.h"
#include "svattn/memory.h"

using namespace svattn;

namespace {

struct RemoveRow {
  int n = 0;
  std::size_t margin = 0, error = 0;
  int tokens = 0;
  double remove_median = 0, remove_max = 0, readd_median = 0, events_median = 0;
  int restore_mismatches = 0;
  double ours_retrain = 0, lib3_retrain = 0, lib12_retrain = 0;
  // Uniformly random tokens (the typical erasure request): mean cost, and mean per set.
  int random_tokens = 0, random_margin = 0, random_error = 0, random_reserve = 0;
  int random_restore_mismatches = 0;
  double random_mean = 0, random_max = 0, random_mean_reserve = 0, random_mean_support = 0;
  double serialized_per_token = 0, heap_per_token = 0;
  // Margin removals in three regimes (where a removal's time goes).
  struct Regime {
    const char* name = "";
    int removals = 0;
    double mean_seconds = 0, median_seconds = 0;
    double tracked = 0, kernel_values = 0, canonical_seconds = 0;  // per removal
  };
  std::vector<Regime> regimes;
};

// Accumulates the diagnostics of margin removals into a regime row.
struct RegimeAcc {
  std::vector<double> seconds;
  double tracked = 0, kernel_values = 0, canonical = 0;
  void add(const OpDiagnostics& d) {
    seconds.push_back(d.seconds);
    tracked += static_cast<double>(d.tracked);
    kernel_values += static_cast<double>(d.kernel_evaluations);
    canonical += d.canonical_seconds;
  }
  RemoveRow::Regime row(const char* name) const {
    RemoveRow::Regime r;
    r.name = name;
    r.removals = static_cast<int>(seconds.size());
    if (seconds.empty()) return r;
    double sum = 0;
    for (double t : seconds) sum += t;
    const double k = static_cast<double>(seconds.size());
    r.mean_seconds = sum / k;
    r.median_seconds = bench::median(seconds);
    r.tracked = tracked / k;
    r.kernel_values = kernel_values / k;
    r.canonical_seconds = canonical / k;
    return r;
  }
};

RemoveRow bench_remove(int n, const bench::BenchProblem& p, int max_tokens, int random_tokens,
                       int reps) {
  RemoveRow row;
  row.n = n;
  const RowMatrix keys = bench::bench_keys(n, p);
  const TokenSet tokens = TokenSet::from_rows(keys);
  BatchSettings bs;
  bs.problem = p.settings();
  const State state = solve_batch(tokens, bs).state;
  row.margin = state.partition.margin.size();
  row.error = state.partition.error.size();

  MemorySettings ms;
  ms.problem = p.settings();
  const std::size_t heap0 = bench::heap_in_use();
  Memory memory = Memory::restore(ms, tokens, state);
  const std::size_t heap1 = bench::heap_in_use();
  row.heap_per_token = static_cast<double>(heap1 - heap0) / n;
  row.serialized_per_token = static_cast<double>(memory.serialize().size()) / n;
  const std::string sha = memory.state_sha256();
  if (sha != state.state_sha256) {
    std::fprintf(stderr, "restore changed the state at n = %d\n", n);
    std::exit(1);
  }

  // Margin tokens spread over the margin set; each is removed (timed) and re-added.
  const auto& margin = state.partition.margin;
  const int count = std::min<int>(max_tokens, static_cast<int>(margin.size()));
  std::vector<double> removes, readds, events;
  RegimeAcc loop;
  for (int k = 0; k < count; ++k) {
    const TokenId id = margin[static_cast<std::size_t>(k) * margin.size() / count];
    OpDiagnostics diag;
    removes.push_back(bench::time_once([&] { diag = memory.remove(id); }));
    events.push_back(static_cast<double>(diag.events));
    loop.add(diag);
    readds.push_back(bench::time_once(
        [&] { memory.add(id, keys.row(id).transpose(), keys.row(id).transpose()); }));
    if (memory.state_sha256() != sha) ++row.restore_mismatches;
  }
  row.tokens = count;
  row.remove_median = bench::median(removes);
  row.remove_max = removes.empty() ? 0 : *std::max_element(removes.begin(), removes.end());
  row.readd_median = bench::median(readds);
  row.events_median = bench::median(events);

  // Regimes: the first removal from a freshly restored memory (no screening drift accumulated yet;
  // a few restores), the remove/re-add loop above, and `count` different margin tokens removed one
  // after another from a copy (a sustained erasure workload: the drift accumulates).
  {
    RegimeAcc fresh, sequence;
    const int fresh_count = std::min(count, 5);
    for (int k = 0; k < fresh_count; ++k) {
      Memory m = Memory::restore(ms, tokens, state);
      fresh.add(m.remove(margin[static_cast<std::size_t>(k) * margin.size() / count]));
    }
    Memory m = memory;
    for (int k = 0; k < count; ++k)
      sequence.add(m.remove(margin[static_cast<std::size_t>(k) * margin.size() / count]));
    row.regimes = {fresh.row("first removal after Memory::restore"),
                   loop.row("remove / re-add loop (table above)"),
                   sequence.row("different margin tokens removed in a row")};
  }

  // Uniformly random tokens (seeded), each removed (timed) and re-added.
  {
    std::vector<char> in_support(static_cast<std::size_t>(n), 0);
    for (TokenId id : state.partition.margin) in_support[id] = 1;
    for (TokenId id : state.partition.error) in_support[id] = 2;
    std::mt19937_64 rng(p.seed + 7);
    std::uniform_int_distribution<int> pick(0, n - 1);
    double sum = 0, sum_reserve = 0, sum_support = 0;
    for (int k = 0; k < random_tokens; ++k) {
      const TokenId id = static_cast<TokenId>(pick(rng));
      const double t = bench::time_once([&] { memory.remove(id); });
      memory.add(id, keys.row(id).transpose(), keys.row(id).transpose());
      if (memory.state_sha256() != sha) ++row.random_restore_mismatches;
      sum += t;
      row.random_max = std::max(row.random_max, t);
      if (in_support[id] == 0) {
        ++row.random_reserve;
        sum_reserve += t;
      } else {
        (in_support[id] == 1 ? row.random_margin : row.random_error) += 1;
        sum_support += t;
      }
    }
    row.random_tokens = random_tokens;
    if (random_tokens > 0) row.random_mean = sum / random_tokens;
    if (row.random_reserve > 0) row.random_mean_reserve = sum_reserve / row.random_reserve;
    const int sup = row.random_margin + row.random_error;
    if (sup > 0) row.random_mean_support = sum_support / sup;
  }

  // Retraining from scratch without the first of those tokens.
  const TokenId gone = margin.empty() ? 0 : margin[0];
  const TokenSet rest = tokens.without({gone});
  row.ours_retrain = bench::median_time(reps, [&] { solve_batch(rest, bs); });
  bench::LibsvmData data(rest.keys);
  row.lib3_retrain =
      bench::median_time(reps, [&] { data.train(n - 1, p.sigma(), p.C, 1e-3, 1024); });
  row.lib12_retrain =
      bench::median_time(reps, [&] { data.train(n - 1, p.sigma(), p.C, 1e-12, 1024); });
  return row;
}

struct StreamRow {
  int n = 0;
  int streamed = 0;
  double ours_seconds = 0;
  double ours_rate = 0;
  std::size_t support = 0;
  double libsvm_total = 0;
  int chunks = 0;
  int sampled = 0;
};

StreamRow bench_stream(int n, const bench::BenchProblem& p, double budget_s) {
  StreamRow row;
  row.n = n;
  const RowMatrix keys = bench::bench_keys(n, p);
  MemorySettings ms;
  ms.problem = p.settings();
  Memory memory(ms, p.d, p.d);
  const double t0 = bench::now_seconds();
  int i = 0;
  for (; i < n; ++i) {
    memory.add(i, keys.row(i).transpose(), keys.row(i).transpose());
    if ((i & 63) == 63 && bench::now_seconds() - t0 > budget_s) {
      ++i;
      break;
    }
  }
  row.ours_seconds = bench::now_seconds() - t0;
  row.streamed = i;
  row.ours_rate = i / row.ours_seconds;
  const State s = memory.state();
  row.support = s.partition.margin.size() + s.partition.error.size();

  // LIBSVM re-solved on the prefix after every 64-token chunk (prefixes with m C < 1 are the
  // warm-up point and cost nothing). With many chunks, the solve time is measured at 12 prefix
  // sizes and linearly interpolated between them.
  bench::LibsvmData data(keys);
  std::vector<int> prefixes;
  for (int m = 64; m <= n; m += 64) {
    if (m * p.C >= 1.0) prefixes.push_back(m);
  }
  if (n % 64 != 0 && n * p.C >= 1.0) prefixes.push_back(n);
  row.chunks = static_cast<int>(prefixes.size());
  const int kSamples = 12;
  if (row.chunks <= kSamples) {
    for (int m : prefixes)
      row.libsvm_total += bench::time_once([&] { data.train(m, p.sigma(), p.C, 1e-3, 1024); });
    row.sampled = row.chunks;
  } else {
    std::vector<int> at;
    std::vector<double> t;
    for (int k = 0; k < kSamples; ++k) {
      const int idx =
          static_cast<int>(std::lround(static_cast<double>(k) * (row.chunks - 1) / (kSamples - 1)));
      at.push_back(prefixes[idx]);
      t.push_back(bench::time_once([&] { data.train(prefixes[idx], p.sigma(), p.C, 1e-3, 1024); }));
    }
    for (int m : prefixes) {
      std::size_t k = 1;
      while (k + 1 < at.size() && at[k] < m) ++k;
      const double w =
          at[k] == at[k - 1] ? 0.0 : static_cast<double>(m - at[k - 1]) / (at[k] - at[k - 1]);
      row.libsvm_total += (1 - w) * t[k - 1] + w * t[k];
    }
    row.sampled = kSamples;
  }
  return row;
}

// Kernel configurations of the canonical refinement (same bits; docs/math.md §3 "Row forms").
struct KernelMode {
  const char* name;
  bool vector, row_blocks, reuse;
};
constexpr KernelMode kKernelModes[] = {{"row forms + row reuse", true, true, true},
                                       {"row forms, no row reuse", true, true, false},
                                       {"scalar lanes", false, true, true},
                                       {"single sums, no row reuse", true, false, false}};
constexpr int kNumKernelModes = static_cast<int>(sizeof kKernelModes / sizeof kKernelModes[0]);

// Sets one configuration for its lifetime, then the defaults.
struct KernelModeScope {
  bool vector;
  explicit KernelModeScope(const KernelMode& km) : vector(detail::set_vector_sums(km.vector)) {
    detail::g_row_blocks = km.row_blocks;
    detail::g_reuse_row_prefixes = km.reuse;
  }
  ~KernelModeScope() {
    detail::set_vector_sums(vector);
    detail::g_row_blocks = true;
    detail::g_reuse_row_prefixes = true;
  }
};

// Interleaved A/B on one memory: every one of `count` margin tokens is removed (and re-added; the
// hash must come back) once under each kernel configuration, the order rotating per token, so the
// configurations time the same operations and load drifts on a shared machine hit all alike.
// Ratios are per token (paired), against the first configuration (the default).
void canonical_interleaved(int n, const bench::BenchProblem& p, int count) {
  const RowMatrix keys = bench::scaling_keys(n, p, false);
  const TokenSet tokens = TokenSet::from_rows(keys);
  BatchSettings bs;
  bs.problem = p.settings();
  const State state = solve_batch(tokens, bs).state;
  MemorySettings ms;
  ms.problem = p.settings();
  Memory memory = Memory::restore(ms, tokens, state);
  const auto& margin = state.partition.margin;
  std::vector<double> canonical[kNumKernelModes], total[kNumKernelModes], ratio[kNumKernelModes];
  int restored = 0, removals = 0;
  for (int k = 0; k < count && !margin.empty(); ++k) {
    const TokenId id = margin[static_cast<std::size_t>(k) * margin.size() / count];
    double c[kNumKernelModes];
    for (int r = 0; r < kNumKernelModes; ++r) {
      const int mode = (r + k) % kNumKernelModes;
      {
        const KernelModeScope scope(kKernelModes[mode]);
        const OpDiagnostics d = memory.remove(id);
        c[mode] = d.canonical_seconds;
        canonical[mode].push_back(d.canonical_seconds);
        total[mode].push_back(d.seconds);
        TokenSet t;
        t.ids = {id};
        t.keys = keys.row(id);
        t.values = t.keys;
        memory.add_batch(t);
      }
      ++removals;
      restored += memory.state_sha256() == state.state_sha256 ? 1 : 0;
    }
    for (int m = 0; m < kNumKernelModes; ++m) ratio[m].push_back(c[m] / c[0]);
  }
  std::printf("\n#### Canonical refinement, configurations interleaved (n = %d, |S| / |E| = "
              "%zu / %zu)\n\n",
              n, margin.size(), state.partition.error.size());
  std::printf("| configuration | margin removals | canonical refinement median / mean (ms) | "
              "canonical / default, per token (median) | margin removal median (ms) |\n"
              "|---|---:|---:|---:|---:|\n");
  for (int m = 0; m < kNumKernelModes; ++m) {
    double sum = 0;
    for (double t : canonical[m]) sum += t;
    std::printf("| %s | %zu | %.3f / %.3f | %.2f | %.3f |\n", kKernelModes[m].name,
                canonical[m].size(), 1e3 * bench::median(canonical[m]),
                canonical[m].empty() ? 0.0 : 1e3 * sum / static_cast<double>(canonical[m].size()),
                bench::median(ratio[m]), 1e3 * bench::median(total[m]));
  }
  std::printf("\nhash restored after %d/%d re-adds\n", restored, removals);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  bench::Args args(argc, argv);
  const std::vector<int> sizes = args.ints("n", "1000,5000,20000");
  const std::vector<int> stream_sizes = args.ints("stream-n", "1000,5000,20000");
  bench::BenchProblem p;
  p.d = static_cast<int>(args.num("d", 64));
  p.sigma2_per_dim = args.num("sigma2-per-dim", 1.0);
  p.C = args.num("C", 0.01);
  p.seed = static_cast<std::uint64_t>(args.num("seed", 42));
  const int max_tokens = static_cast<int>(args.num("tokens", 20));
  const int random_tokens = static_cast<int>(args.num("random-tokens", 200));
  const int reps = static_cast<int>(args.num("reps", 3));
  const double budget = args.num("stream-budget-s", 60);
  const std::vector<int> scaling = args.ints("scaling-n", "");
  const std::vector<int> scaling_clustered = args.ints("scaling-clustered-n", "");
  const int margin_tokens = static_cast<int>(args.num("margin-tokens", 20));
  const int records = static_cast<int>(args.num("records", 5));
  // Retrain repetitions from n = 100k on (a 200k retrain takes minutes).
  const int large_reps = static_cast<int>(args.num("large-reps", 1));
  // 1: the fixed four-lane sums run on the scalar lanes (A/B of the AVX code; same bits).
  const bool scalar_sums = args.num("scalar-sums", 0) != 0;
  // Extra rows at these n with the earlier screening bound (|db| counted as drift): A/B of the
  // gradients recomputed per removal in the same run.
  const std::vector<int> old_bound = args.ints("old-bound-n", "");
  // Extra rows at these n whose screening candidates come from a scan of every slot instead of the
  // slack index (same bound, same tokens rechecked): A/B of the bookkeeping in the same run.
  const std::vector<int> scan_rows = args.ints("scan-n", "");
  // Extra rows at these n where each operation adds its path length to the screening drift (the
  // looser bound) instead of its net displacement: A/B of the rechecks.
  const std::vector<int> path_length_rows = args.ints("path-length-n", "");
  // Extra rows at these n with the drift bound alone (no spread bound): A/B of the rechecks.
  const std::vector<int> drift_only_rows = args.ints("drift-only-n", "");
  // Rows at these n under four kernel configurations of the canonical refinement, in this order
  // per n (same bits, so the same path and the same gradients recomputed): the vector row forms
  // with row reuse (the default), the row forms without row reuse, the fixed sums on the scalar
  // lanes, and the single-sum vector code without row reuse (the code before the row forms).
  // Both canonical-state forms, A/B in one run.
  const std::vector<int> canonical_ab = args.ints("canonical-ab-n", "");
  // The same four configurations interleaved on one memory per n: --interleaved-tokens margin
  // tokens, each removed (and re-added) once under every configuration.
  const std::vector<int> interleaved = args.ints("canonical-interleaved-n", "");
  const int interleaved_tokens = static_cast<int>(args.num("interleaved-tokens", 12));
  // Measured evaluation of screening bounds (bound_study.h) at these n: a sustained sequence of
  // --study-removals margin-token removals, every reserve gradient change computed from the keys.
  const std::vector<int> study = args.ints("bound-study-n", "");
  const int study_removals = static_cast<int>(args.num("study-removals", 10));
  // From n = 100k on: fewer margin tokens, records and random draws (each re-add hashes 200k
  // tokens).
  const int large_tokens = static_cast<int>(args.num("large-margin-tokens", 10));
  const int large_records = static_cast<int>(args.num("large-records", 3));
  const int large_random = static_cast<int>(args.num("large-random-tokens", 60));
  args.check();
  if (scalar_sums) detail::set_vector_sums(false);
  std::printf("<!-- fixed-order sums: %s -->\n\n",
              detail::g_vector_sums ? "AVX vector lanes" : "scalar lanes");
  const bool scaling_tables = !scaling.empty() || !scaling_clustered.empty() ||
                              !old_bound.empty() || !scan_rows.empty() ||
                              !path_length_rows.empty() || !drift_only_rows.empty() ||
                              !canonical_ab.empty();
  for (int n : study) bench::bound_study(n, p, study_removals);
  for (int n : interleaved) canonical_interleaved(n, p, interleaved_tokens);
  if ((!study.empty() || !interleaved.empty()) && !scaling_tables) return 0;
  if (scaling_tables) {
    std::printf("### Exact removal at scale (RBF, d = %d, sigma^2 = %g d, C = %g, ridge = %g)\n\n",
                p.d, p.sigma2_per_dim, p.C, p.settings().ridge);
    std::printf(
        "Memory built by solve_batch + Memory::restore. Margin removal: Memory::remove of up to "
        "%d margin tokens spread over the margin set, each re-added. Record: remove_batch of 24 "
        "tokens (3 margin tokens + 21 uniform draws), re-added; %d records. Random: %d uniform "
        "draws, each removed and re-added (from n = 100k: %d margin tokens, %d records, %d "
        "draws). Every re-add must restore the state hash. Retrain: "
        "batch solve / LIBSVM one-class eps 1e-3 on the n - 1 tokens, median of %d runs (%d from n "
        "= 100k). Heap: "
        "mallinfo2 uordblks + hblkhd added by Memory::restore, / n.\n\n",
        margin_tokens, records, random_tokens, large_tokens, large_records, large_random, reps,
        large_reps);
    std::vector<bench::ScalingRow> rows;
    for (int n : scaling) {
      const bool large = n >= 100000;
      rows.push_back(
          bench::scaling_row("gaussian", n, p, false, large ? large_tokens : margin_tokens,
                             large ? large_records : records, large ? large_random : random_tokens,
                             large ? large_reps : reps));
      bench::print_scaling({rows.back()});
    }
    for (int n : old_bound) {
      detail::g_exact_offset_screening = false;
      rows.push_back(bench::scaling_row("gaussian, earlier bound", n, p, false, margin_tokens,
                                        records, random_tokens, reps));
      detail::g_exact_offset_screening = true;
      bench::print_scaling({rows.back()});
    }
    // A/B rows: the same scaling row with one screening switch turned off for its duration.
    auto ab_rows = [&](const std::vector<int>& ns, const char* name, bool& flag) {
      for (int n : ns) {
        const bool large = n >= 100000;
        flag = false;
        rows.push_back(bench::scaling_row(name, n, p, false, large ? large_tokens : margin_tokens,
                                          large ? large_records : records,
                                          large ? large_random : random_tokens,
                                          large ? large_reps : reps));
        flag = true;
        bench::print_scaling({rows.back()});
      }
    };
    ab_rows(scan_rows, "gaussian, slot scan", detail::g_slack_index);
    ab_rows(drift_only_rows, "gaussian, drift bound only", detail::g_spread_bound);
    ab_rows(path_length_rows, "gaussian, path-length drift", detail::g_net_displacement);
    // A/B rows of the canonical refinement's kernels (the switches are restored after each row).
    for (int n : canonical_ab) {
      const bool large = n >= 100000;
      for (const KernelMode& km : kKernelModes) {
        const KernelModeScope scope(km);
        rows.push_back(bench::scaling_row(
            std::string("gaussian, ") + km.name, n, p, false,
            large ? large_tokens : margin_tokens, large ? large_records : records,
            large ? large_random : random_tokens, large ? large_reps : reps));
        bench::print_scaling({rows.back()});
      }
    }
    for (int n : scaling_clustered) {
      rows.push_back(
          bench::scaling_row("clustered", n, p, true, margin_tokens, records, random_tokens, reps));
      bench::print_scaling({rows.back()});
    }
    std::printf("\nAll rows:\n\n");
    bench::print_scaling(rows);
    bench::print_exponents(rows, "gaussian");
    bench::print_exponents(rows, "clustered");
    return 0;
  }

  std::printf("### Single-token removal vs retraining (RBF, Gaussian keys N(0, I_d), d = %d)\n\n",
              p.d);
  std::printf(
      "sigma^2 = %g * d, C = %g, ridge = %g. Remove: Memory::remove of a margin token "
      "(median over up to %d tokens spread over the margin set; each is re-added after "
      "its removal so n stays fixed, and the hash must come back). Retrain: batch solve "
      "on the n - 1 remaining tokens, median of %d runs; LIBSVM one-class with its default "
      "eps = 1e-3 and with eps = 1e-12, shrinking on.\n\n",
      p.sigma2_per_dim, p.C, p.settings().ridge, max_tokens, reps);
  std::printf(
      "| n | \\|S\\| | \\|E\\| | path events / remove | remove median (ms) | remove max (ms) | "
      "re-add median (ms) | "
      "hash restored | retrain ours (s) | retrain LIBSVM 1e-3 (s) | retrain LIBSVM "
      "1e-12 (s) | ours retrain / remove | LIBSVM-1e-3 / remove |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::fflush(stdout);
  std::vector<RemoveRow> rows;
  for (int n : sizes) {
    const RemoveRow r = bench_remove(n, p, max_tokens, random_tokens, reps);
    rows.push_back(r);
    std::printf(
        "| %d | %zu | %zu | %.0f | %.3f | %.3f | %.3f | %d/%d | %.4f | %.4f | %.4f | %.0fx | "
        "%.0fx |\n",
        r.n, r.margin, r.error, r.events_median, 1e3 * r.remove_median, 1e3 * r.remove_max,
        1e3 * r.readd_median, r.tokens - r.restore_mismatches, r.tokens, r.ours_retrain,
        r.lib3_retrain, r.lib12_retrain, r.ours_retrain / r.remove_median,
        r.lib3_retrain / r.remove_median);
    std::fflush(stdout);
  }

  std::printf("\n### Removal of a uniformly random token (the typical erasure request)\n\n");
  std::printf(
      "Same memories. %d token ids drawn uniformly (seeded, with replacement); each is "
      "removed (timed) and re-added, and the hash must come back. Most tokens are reserve "
      "tokens, whose removal moves no coefficient; the mean is the expected cost of erasing "
      "an arbitrary token. Ratio: ours retrain (table above) / mean remove.\n\n",
      random_tokens);
  std::printf(
      "| n | tokens | reserve / margin / error | mean remove (ms) | max remove (ms) | "
      "mean, reserve (ms) | mean, support (ms) | hash restored | ours retrain / mean remove "
      "|\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& r : rows) {
    std::printf("| %d | %d | %d / %d / %d | %.4f | %.3f | %.4f | %.3f | %d/%d | %.0fx |\n", r.n,
                r.random_tokens, r.random_reserve, r.random_margin, r.random_error,
                1e3 * r.random_mean, 1e3 * r.random_max, 1e3 * r.random_mean_reserve,
                1e3 * r.random_mean_support, r.random_tokens - r.random_restore_mismatches,
                r.random_tokens, r.random_mean > 0 ? r.ours_retrain / r.random_mean : 0.0);
  }
  std::fflush(stdout);

  std::printf("\n### Where a margin removal's time goes\n\n");
  std::printf(
      "Same memories. Per removal, from Memory::remove's diagnostics (OpDiagnostics): wall time, "
      "reserve gradients recomputed because their screening bound failed (`tracked`), kernel "
      "values computed for the support columns of the rows read (`kernel_evaluations`) and the "
      "time in the canonical refinement (`canonical_seconds`, which includes the Cholesky rows "
      "after the removed position). Regimes: the first removal from a freshly restored memory "
      "(up to 5 restores), the remove/re-add loop of the first table, and the same margin tokens "
      "removed one after another without re-adding (drift accumulates). Ratio: ours retrain / "
      "mean remove.\n\n");
  std::printf(
      "| n | regime | removals | mean remove (ms) | median remove (ms) | gradients recomputed | "
      "kernel values | canonical refinement (ms) | ours retrain / mean remove |\n");
  std::printf("|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& r : rows)
    for (const auto& g : r.regimes)
      std::printf("| %d | %s | %d | %.3f | %.3f | %.0f | %.0f | %.3f | %.0fx |\n", r.n, g.name,
                  g.removals, 1e3 * g.mean_seconds, 1e3 * g.median_seconds, g.tracked,
                  g.kernel_values, 1e3 * g.canonical_seconds,
                  g.mean_seconds > 0 ? r.ours_retrain / g.mean_seconds : 0.0);
  std::fflush(stdout);

  std::printf("\n### Bytes of memory per token (d = dv = %d)\n\n", p.d);
  std::printf(
      "Serialized: Memory::serialize().size() / n (tokens' keys and values in fp64, "
      "coefficients, ids, header and checksum). Heap: glibc mallinfo2 bytes in use added "
      "by Memory::restore, / n; it also counts the exact path's cached kernel columns of "
      "the support tokens and the bordered inverse. Keys + values alone take %d bytes.\n\n",
      16 * p.d);
  std::printf("| n | \\|S u E\\| | serialized bytes/token | heap bytes/token |\n");
  std::printf("|---:|---:|---:|---:|\n");
  for (const auto& r : rows) {
    std::printf("| %d | %zu | %.0f | %.0f |\n", r.n, r.margin + r.error, r.serialized_per_token,
                r.heap_per_token);
  }
  std::fflush(stdout);

  std::printf("\n### Streaming ingest vs re-solving with LIBSVM every 64 tokens\n\n");
  std::printf(
      "Ours: Memory::add one token at a time from empty (stopped after %.0f s if not "
      "finished; the rate is then over the streamed prefix). LIBSVM (eps 1e-3, shrinking "
      "on) re-solved on the prefix after every 64-token chunk (chunks with m*C < 1 are "
      "the warm-up point and are free); with more than 12 chunks the solve time is "
      "measured at 12 prefix sizes and interpolated linearly in between (column "
      "'LIBSVM solves timed').\n\n",
      budget);
  std::printf(
      "| n | streamed | ours (s) | ours tokens/s | \\|S u E\\| at end | LIBSVM chunks | "
      "LIBSVM solves timed | LIBSVM total (s) | LIBSVM tokens/s | speed-up |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::fflush(stdout);
  for (int n : stream_sizes) {
    const StreamRow s = bench_stream(n, p, budget);
    const double lib_rate = s.libsvm_total > 0 ? n / s.libsvm_total : 0;
    std::printf("| %d | %d%s | %.3f | %.0f | %zu | %d | %d%s | %.3f | %.0f | %.1fx |\n", s.n,
                s.streamed, s.streamed < n ? " (budget)" : "", s.ours_seconds, s.ours_rate,
                s.support, s.chunks, s.sampled, s.sampled < s.chunks ? " (interpolated)" : "",
                s.libsvm_total, lib_rate, lib_rate > 0 ? s.ours_rate / lib_rate : 0.0);
    std::fflush(stdout);
  }
  return 0;
}
