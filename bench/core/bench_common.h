// Shared pieces of the core benchmarks: problem generation, LIBSVM one-class runs (docs/math.md §9
// mapping) and command-line parsing of "--name value" pairs (timing: bench_util.h).
#pragma once
#include <malloc.h>
#include <svm.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.h"
#include "support/random_matrix.h"
#include "svattn/types.h"

namespace svattn::bench {

/// Heap bytes in use (glibc mallinfo2).
inline std::size_t heap_in_use() { return mallinfo2().uordblks; }

/// The benchmark problem: Gaussian keys N(0, I_d); RBF with sigma^2 = sigma2_per_dim * d.
struct BenchProblem {
  int d = 64;
  double sigma2_per_dim = 1.0;
  double C = 0.01;
  std::uint64_t seed = 42;
  double sigma() const { return std::sqrt(sigma2_per_dim * d); }
  ProblemSettings settings() const {
    ProblemSettings p;
    p.kernel.type = KernelType::kRbf;
    p.kernel.bandwidth = sigma();
    p.C = C;
    return p;
  }
};

inline RowMatrix bench_keys(int n, const BenchProblem& p) {
  support::Rng rng(p.seed);
  return support::gaussian_matrix(n, p.d, rng);
}

/// LIBSVM one-class on rows [0, n) of x, nu = 1/(n C), gamma = 1/sigma^2, shrinking on (its
/// default), kernel cache `cache_mb`. Returns the number of support vectors.
class LibsvmData {
 public:
  explicit LibsvmData(const RowMatrix& x) : d_(static_cast<int>(x.cols())) {
    const int n = static_cast<int>(x.rows());
    nodes_.resize(static_cast<std::size_t>(n) * (d_ + 1));
    rows_.resize(n);
    y_.assign(n, 1.0);
    for (int i = 0; i < n; ++i) {
      svm_node* r = &nodes_[static_cast<std::size_t>(i) * (d_ + 1)];
      for (int j = 0; j < d_; ++j) r[j] = svm_node{j + 1, x(i, j)};
      r[d_] = svm_node{-1, 0.0};
      rows_[i] = r;
    }
  }
  int train(int n, double sigma, double C, double eps, double cache_mb) {
    static bool quiet = false;
    if (!quiet) {
      svm_set_print_string_function([](const char*) {});
      quiet = true;
    }
    svm_problem prob{n, y_.data(), rows_.data()};
    svm_parameter param{};
    param.svm_type = ONE_CLASS;
    param.kernel_type = RBF;
    param.gamma = 1.0 / (sigma * sigma);
    param.nu = 1.0 / (n * C);
    param.eps = eps;
    param.cache_size = cache_mb;
    param.shrinking = 1;
    param.C = 1;
    if (const char* err = svm_check_parameter(&prob, &param)) {
      std::fprintf(stderr, "LIBSVM rejected the parameters: %s\n", err);
      std::exit(2);
    }
    svm_model* model = svm_train(&prob, &param);
    const int nsv = model->l;
    svm_free_and_destroy_model(&model);
    return nsv;
  }

 private:
  int d_;
  std::vector<svm_node> nodes_;
  std::vector<svm_node*> rows_;
  std::vector<double> y_;
};

/// "--name value" options with defaults; unknown names are an error.
class Args {
 public:
  Args(int argc, char** argv) : argv_(argv + 1, argv + argc) {}
  std::string get(const std::string& name, const std::string& def) {
    known_.push_back(name);
    for (std::size_t i = 0; i + 1 < argv_.size(); ++i) {
      if (argv_[i] == "--" + name) return argv_[i + 1];
    }
    return def;
  }
  double num(const std::string& name, double def) {
    const std::string v = get(name, "");
    return v.empty() ? def : std::atof(v.c_str());
  }
  std::vector<int> ints(const std::string& name, const std::string& def) {
    std::vector<int> out;
    std::string s = get(name, def);
    std::size_t start = 0;
    while (start <= s.size()) {
      const std::size_t c = s.find(',', start);
      const std::string item =
          s.substr(start, c == std::string::npos ? std::string::npos : c - start);
      if (!item.empty()) out.push_back(std::atoi(item.c_str()));
      if (c == std::string::npos) break;
      start = c + 1;
    }
    return out;
  }
  /// Exits with a usage message when an option was not recognised.
  void check() const {
    for (std::size_t i = 0; i < argv_.size(); i += 2) {
      const std::string& a = argv_[i];
      bool ok = false;
      for (const auto& k : known_) ok = ok || a == "--" + k;
      if (!ok || i + 1 >= argv_.size()) {
        std::fprintf(stderr, "unknown or incomplete option '%s'; options:", a.c_str());
        for (const auto& k : known_) std::fprintf(stderr, " --%s", k.c_str());
        std::fprintf(stderr, "\n");
        std::exit(2);
      }
    }
  }

 private:
  std::vector<std::string> argv_;
  std::vector<std::string> known_;
};

}  // namespace svattn::bench
