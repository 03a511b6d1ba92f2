#include "cli_common.h"

#include <fmt/core.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>

#include "svattn/errors.h"
#include "svattn/io.h"
#include "svattn/kernel.h"
#include "svattn/settings_fields.h"

namespace svattn::cli {

ProblemSettings ProblemOptions::build() const {
  ProblemSettings s;
  s.kernel.type = kernel_type_from_string(kernel);
  s.kernel.bandwidth = bandwidth;
  s.kernel.degree = degree;
  s.kernel.coef0 = coef0;
  s.C = C;
  s.ridge = ridge;
  s.validate();
  return s;
}

// The flags' docs are the problem's field table's (include/svattn/settings_fields.h).
void add_problem_options(CLI::App* sub, ProblemOptions& opts) {
  const auto doc = [](const char* field) {
    const auto* f = find_field(problem_settings_fields(), field);
    return f->doc + " Must be " + requirement(*f) + ".";
  };
  sub->add_option("--kernel", opts.kernel, doc("kernel.type"))->capture_default_str();
  sub->add_option("--bandwidth", opts.bandwidth, doc("kernel.bandwidth"))->capture_default_str();
  sub->add_option("--degree", opts.degree, doc("kernel.degree"))->capture_default_str();
  sub->add_option("--coef0", opts.coef0, doc("kernel.coef0"))->capture_default_str();
  sub->add_option("--C", opts.C, doc("C"))->required();
  sub->add_option("--ridge", opts.ridge, doc("ridge"))->capture_default_str();
}

void add_token_options(CLI::App* sub, TokenOptions& opts) {
  sub->add_option("--keys", opts.keys, "keys: .csv (one token per row) or .npy (2-D float32/64)")
      ->required();
  sub->add_option("--values", opts.values, "values (same row count); default: the keys");
}

TokenSet load_tokens(const TokenOptions& opts) { return load_tokens(opts.keys, opts.values); }

TokenSet load_tokens(const std::string& keys_path, const std::string& values_path) {
  const RowMatrix keys = read_matrix(keys_path);
  if (values_path.empty()) return TokenSet::from_rows(keys);
  const RowMatrix values = read_matrix(values_path);
  if (values.rows() != keys.rows()) {
    throw FormatError("row count mismatch: keys '" + keys_path + "' has " +
                      std::to_string(keys.rows()) + " rows, values '" + values_path + "' has " +
                      std::to_string(values.rows()));
  }
  return TokenSet::from_rows(keys, &values);
}

namespace {
// CLI11 prefixes every validation message with the option's name ("--record: ...").
void apply_to_option(CLI::Option& opt) {
  const std::string type = opt.get_type_name();
  auto starts = [&](const char* p) { return type.rfind(p, 0) == 0; };
  if (starts("INT") || starts("UINT")) {
    const bool is_unsigned = starts("UINT");
    opt.transform(
        [is_unsigned](std::string v) {
          try {
            if (is_unsigned && !v.empty() && v[0] == '-')
              throw InvalidArgument("'" + v + "' must not be negative");
            // Canonical decimal text: CLI11's own conversion then sees no base prefix or leading 0.
            return std::to_string(parse_decimal(v, std::numeric_limits<std::int64_t>::min(),
                                                std::numeric_limits<std::int64_t>::max(), ""));
          } catch (const InvalidArgument& e) {
            throw CLI::ValidationError(e.what());
          }
        },
        "", "decimal");
  } else if (starts("FLOAT")) {
    opt.transform(
        [](std::string v) {
          const char* first = v.c_str();
          char* end = nullptr;
          errno = 0;
          const double x = std::strtod(first, &end);
          if (v.empty() || std::isspace(static_cast<unsigned char>(v[0])) ||
              end != first + v.size())
            throw CLI::ValidationError("'" + v + "' is not a number");
          if (!std::isfinite(x) || errno == ERANGE)
            throw CLI::ValidationError("'" + v +
                                       "' is not a finite number in the range of a double");
          return v;
        },
        "", "finite");
  } else {
    opt.transform(
        [](std::string v) {
          try {
            check_utf8(v, "");
          } catch (const InvalidArgument& e) {
            throw CLI::ValidationError(e.what());
          }
          return v;
        },
        "", "utf8");
  }
}

void apply_recursive(CLI::App& app) {
  for (CLI::Option* opt :
       app.get_options([](CLI::Option* o) { return o->get_items_expected_max() > 0; }))
    apply_to_option(*opt);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) apply_recursive(*sub);
}
}  // namespace

void apply_input_policy(CLI::App& app) { apply_recursive(app); }

void add_json_flag(CLI::App* sub, bool& json) {
  sub->add_flag("--json", json, "print JSON on stdout");
}

int exit_code_for(Status s) {
  switch (s) {
    case Status::kOptimal:
    case Status::kWarmup:
    case Status::kEmpty:
      return 0;
    case Status::kSingular:
      std::fprintf(stderr,
                   "svattn: status singular: the margin system is singular (e.g. duplicate keys "
                   "with ridge 0), so the optimum is not unique and the state is not certified\n");
      return 1;
    case Status::kIterationLimit:
      std::fprintf(stderr,
                   "svattn: status iteration_limit: the solver stopped before optimality\n");
      return 1;
    case Status::kKktViolated:
      std::fprintf(stderr,
                   "svattn: status kkt_violated: the state violates the KKT conditions beyond "
                   "tolerance\n");
      return 1;
  }
  return 1;
}

void print_json(const nlohmann::json& j) {
  const std::string text = j.dump(2);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void write_json(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw IoError("cannot open '" + path + "' for writing");
  out << j.dump(2) << '\n';
  out.close();
  if (!out) throw IoError("cannot write '" + path + "'");
}

std::string id_list(const std::vector<TokenId>& ids, std::size_t max_items) {
  std::string s;
  for (std::size_t i = 0; i < ids.size() && i < max_items; ++i) {
    if (i > 0) s += ",";
    s += std::to_string(ids[i]);
  }
  if (ids.size() > max_items) s += ",...";
  if (ids.empty()) s = "-";
  return s;
}

void print_state_summary(const State& s) {
  const ProblemSettings& p = s.settings;
  std::string kernel = to_string(p.kernel.type);
  if (p.kernel.type == KernelType::kRbf) {
    kernel += fmt::format(" (bandwidth {})", p.kernel.bandwidth);
  } else if (p.kernel.type == KernelType::kPoly) {
    kernel += fmt::format(" (degree {}, coef0 {})", p.kernel.degree, p.kernel.coef0);
  }
  fmt::print("tokens      n = {}, dim = {}\n", s.ids.size(), s.dim);
  fmt::print("settings    kernel {}, C = {}, ridge = {}\n", kernel, p.C, p.ridge);
  fmt::print("status      {}{}\n", to_string(s.status), s.warmup ? " (warm-up: n*C <= 1)" : "");
  fmt::print("partition   |S| = {} margin, |E| = {} error, |R| = {} reserve\n",
             s.partition.margin.size(), s.partition.error.size(), s.partition.reserve.size());
  fmt::print("b           {:.17g}\n", s.b + 0.0);  // + 0.0: no "-0"
  fmt::print("kkt         max violation {:.3e}, |sum(a)-1| {:.3e}, box violation {:.3e}\n",
             s.kkt.max_violation, s.kkt.sum_error, s.kkt.box_violation);
  fmt::print("margin ids  {}\n", id_list(s.partition.margin));
  fmt::print("error ids   {}\n", id_list(s.partition.error));
  fmt::print("sha256      {}\n", s.state_sha256);
  std::fflush(stdout);
}

RowMatrix probes_around(const RowMatrix& keys, int count, std::uint64_t seed) {
  const int d = static_cast<int>(keys.cols());
  const Eigen::RowVectorXd mean = keys.colwise().mean();
  Eigen::RowVectorXd stddev(d);
  for (int j = 0; j < d; ++j) {
    const double var = (keys.col(j).array() - mean(j)).square().mean();
    stddev(j) = std::sqrt(var);
  }
  Rng rng(seed);
  RowMatrix probes(count, d);
  for (int i = 0; i < count; ++i) {
    for (int j = 0; j < d; ++j) probes(i, j) = mean(j) + stddev(j) * rng.normal();
  }
  return probes;
}

}  // namespace svattn::cli
