// Store benchmark: forgetting one record from a large memory costs the in-memory
// decrement plus one small transaction, not a re-solve. One run populates a store record by record
// (add throughput), then forgets records and reports, per forget and in the same run, the in-memory
// decrement, the certificate, and the whole store operation (transaction with secure_delete,
// commit with fsync, WAL checkpoint TRUNCATE). Prints Markdown tables.
//   bench_store [--n 20000] [--d 16] [--record 24] [--C 0.005] [--sigma2-per-dim 1]
//               [--forgets 5] [--seed 42] [--dir /tmp]
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_util.h"
#include "support/random_matrix.h"
#include "svattn/store.h"

using namespace svattn;

namespace {

using svattn::bench::median;
using svattn::bench::now;

struct Args {
  int n = 20000;
  int d = 16;
  int record = 24;
  double C = 0.005;
  double sigma2_per_dim = 1.0;
  int forgets = 5;
  std::uint64_t seed = 42;
  std::string dir = "/tmp";
};

constexpr char kUsage[] =
    "bench_store [--n 20000] [--d 16] [--record 24] [--C 0.005] [--sigma2-per-dim 1] "
    "[--forgets 5] [--seed 42] [--dir /tmp]";

Args parse(int argc, char** argv) {
  Args a;
  bench::parse_options(argc, argv, "bench_store", kUsage,
                       [&](const std::string& k, const std::string& v) {
                         if (k == "--n")
                           a.n = std::stoi(v);
                         else if (k == "--d")
                           a.d = std::stoi(v);
                         else if (k == "--record")
                           a.record = std::stoi(v);
                         else if (k == "--C")
                           a.C = std::stod(v);
                         else if (k == "--sigma2-per-dim")
                           a.sigma2_per_dim = std::stod(v);
                         else if (k == "--forgets")
                           a.forgets = std::stoi(v);
                         else if (k == "--seed")
                           a.seed = std::stoull(v);
                         else if (k == "--dir")
                           a.dir = v;
                         else
                           return false;
                         return true;
                       });
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  std::string tmpl = a.dir + "/svattn_bench_store_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    std::fprintf(stderr, "bench_store: cannot create a directory under %s\n", a.dir.c_str());
    return 2;
  }
  const std::string dir = buf.data();
  const std::string path = dir + "/bench.db";

  MemorySettings ms;
  ms.problem.kernel.type = KernelType::kRbf;
  ms.problem.kernel.bandwidth = std::sqrt(a.sigma2_per_dim * a.d);
  ms.problem.C = a.C;
  const int records = a.n / a.record;
  support::Rng gen(a.seed);

  StoreOptions so;
  so.create = true;
  so.certificate_check = true;  // the long-lived store: the default certificate (no re-solve)
  Store store(path, so);
  store.create_memory("bench", ms, a.d, a.d);

  // ---- add throughput
  std::vector<double> add_total;
  std::vector<double> add_memory;
  const double t_add0 = now();
  for (int r = 0; r < records; ++r) {
    const OpResult res =
        store.add_record("bench", r, support::gaussian_matrix_open(a.record, a.d, gen));
    add_total.push_back(res.total_seconds);
    add_memory.push_back(res.memory_seconds);
  }
  const double t_add = now() - t_add0;
  const State st = store.memory("bench").state();
  const std::size_t db_bytes = std::filesystem::file_size(path);

  std::printf("# svattn store benchmark (%d CPUs)\n\n",
              static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  std::printf(
      "Gaussian keys N(0, I_%d), RBF sigma^2 = %.3g, C = %.4g, ridge = %.1e; %d records of "
      "%d tokens = %d tokens; audit mode; SQLite WAL, synchronous=FULL, secure_delete=ON; "
      "store in %s.\n\n",
      a.d, a.sigma2_per_dim * a.d, a.C, ms.problem.ridge, records, a.record, records * a.record,
      dir.c_str());
  std::printf(
      "Final memory: |S| = %zu margin, |E| = %zu error, |R| = %zu reserve; store file %.1f "
      "MiB.\n\n",
      st.partition.margin.size(), st.partition.error.size(), st.partition.reserve.size(),
      static_cast<double>(db_bytes) / (1 << 20));
  std::printf("## Adding records\n\n");
  std::printf(
      "| records | tokens | total s | records/s | tokens/s | median add: memory ms | median add: "
      "store op ms |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|\n");
  std::printf("| %d | %d | %.2f | %.1f | %.0f | %.2f | %.2f |\n\n", records, records * a.record,
              t_add, records / t_add, records * a.record / t_add, 1e3 * median(add_memory),
              1e3 * median(add_total));

  // ---- forgetting: decrement vs whole store operation, in the same run
  std::printf("## Forgetting one %d-token record from the %d-token memory\n\n", a.record,
              records * a.record);
  std::printf(
      "Each row is one forget. *decrement*: Memory::remove_batch of the record's tokens "
      "(path + canonical refinement). *certificate*: removal_certificate (KKT re-check on "
      "every token; with re-solve: plus a batch solve of the remaining tokens). *store op*: "
      "the whole Store::forget_record (lock, decrement, certificate, DELETE with "
      "secure_delete, support/audit rows, COMMIT with fsync, wal_checkpoint(TRUNCATE)).\n\n");
  // Records holding support tokens (their removal moves the path) and reserve-only records (their
  // removal leaves alpha unchanged), alternating; the last forget adds the certificate's re-solve.
  std::vector<std::int64_t> support_records;
  for (const auto* part : {&st.partition.margin, &st.partition.error}) {
    for (TokenId id : *part) support_records.push_back(record_of(id));
  }
  std::sort(support_records.begin(), support_records.end());
  support_records.erase(std::unique(support_records.begin(), support_records.end()),
                        support_records.end());
  std::vector<std::int64_t> reserve_records;
  for (std::int64_t r = 0; r < records; ++r) {
    if (!std::binary_search(support_records.begin(), support_records.end(), r)) {
      reserve_records.push_back(r);
    }
  }
  struct Pick {
    std::int64_t record;
    bool support;
  };
  std::vector<Pick> picks;
  for (int k = 0; k < a.forgets; ++k) {
    if (!support_records.empty()) {
      picks.push_back(
          {support_records[(static_cast<std::size_t>(k) * 7919 + 13) % support_records.size()],
           true});
    }
    if (!reserve_records.empty()) {
      picks.push_back(
          {reserve_records[(static_cast<std::size_t>(k) * 7919 + 13) % reserve_records.size()],
           false});
    }
  }
  std::printf(
      "| record | holds support | re-solve check | events | decrement ms | certificate ms | "
      "commit ms | checkpoint ms | store op ms | store op - decrement - certificate ms |\n");
  std::printf("|---:|:---:|:---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::vector<double> dec;
  std::vector<double> cert;
  std::vector<double> tot;
  std::vector<double> overhead;
  std::vector<std::int64_t> done;
  for (std::size_t k = 0; k <= picks.size(); ++k) {
    const bool check = k == picks.size();
    Pick p = check ? picks.front() : picks[k];
    if (check) {  // a support record not forgotten yet
      for (std::int64_t r : support_records) {
        if (std::find(done.begin(), done.end(), r) == done.end()) {
          p = {r, true};
          break;
        }
      }
    }
    if (std::find(done.begin(), done.end(), p.record) != done.end()) continue;
    done.push_back(p.record);
    ForgetResult f;
    if (check) {
      StoreOptions fo;
      fo.certificate_resolve = true;
      Store s2(path, fo);
      (void)s2.memory("bench");  // restore outside the timed region
      f = s2.forget_record("bench", p.record);
    } else {
      f = store.forget_record("bench", p.record);
    }
    const double over = f.total_seconds - f.memory_seconds - f.certificate_seconds;
    std::printf("| %lld | %s | %s | %ld | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
                static_cast<long long>(p.record), p.support ? "yes" : "no", check ? "yes" : "no",
                f.diagnostics.events, 1e3 * f.memory_seconds, 1e3 * f.certificate_seconds,
                1e3 * f.commit_seconds, 1e3 * (f.shred_seconds + f.checkpoint_seconds),
                1e3 * f.total_seconds, 1e3 * over);
    if (!check && p.support) {
      dec.push_back(f.memory_seconds);
      cert.push_back(f.certificate_seconds);
      tot.push_back(f.total_seconds);
      overhead.push_back(over);
    }
    if (!f.certificate.verify.kkt_ok) {
      std::fprintf(stderr, "bench_store: certificate reports a KKT failure\n");
      return 1;
    }
  }
  const double md = median(dec);
  const double mo = median(overhead);
  std::printf(
      "\nMedians over the %zu forgets of records holding support tokens (no re-solve): "
      "decrement %.2f ms; certificate (independent O(n |S u E| d) KKT check) %.2f ms; "
      "store transaction + secure delete + commit + checkpoint %.2f ms; whole store "
      "operation %.2f ms. Store operation without the certificate / decrement = %.2f.\n",
      dec.size(), 1e3 * md, 1e3 * median(cert), 1e3 * mo, 1e3 * median(tot),
      md > 0 ? (md + mo) / md : 0.0);
  Store final_store(path);
  const bool ok = final_store.verify().ok();
  std::printf("Store verify after the run: %s.\n", ok ? "ok" : "MISMATCH");
  std::filesystem::remove_all(dir);
  return ok ? 0 : 1;
}
