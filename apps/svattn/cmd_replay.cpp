// `svattn replay`: runs a script of add/remove/evict operations through the exact memory and prints
// the final canonical state (the fields of `svattn solve --json`) plus operation diagnostics.
#include <fmt/core.h>

#include <unordered_set>

#include "cli_common.h"
#include "commands.h"
#include "svattn/errors.h"
#include "svattn/io.h"
#include "svattn/memory.h"

namespace svattn::cli {
namespace {

struct ReplayOptions {
  TokenOptions tokens;
  ProblemOptions problem;
  std::string ops;
  std::string mode = "audit";
  long budget = 0;
  bool budget_given = false;  // --budget appeared on the command line
  bool json = false;
};

enum class OpKind { kAdd, kRemove, kEvict };

struct Op {
  OpKind kind = OpKind::kAdd;
  std::vector<TokenId> ids;
  int line = 0;
};

std::string trim(const std::string& s) {
  const char* ws = " \t\r\n\v\f";
  const auto first = s.find_first_not_of(ws);
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(ws) - first + 1);
}

/// Reads the whole ops file before anything runs, so a bad line changes nothing.
std::vector<Op> read_ops(const std::string& path, int n) {
  const std::vector<char> bytes = read_file(path);  // the readers' one input policy
  std::vector<Op> ops;
  int line_no = 0;
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    std::size_t end = pos;
    while (end < bytes.size() && bytes[end] != '\n') ++end;
    const std::string raw(bytes.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    // '#' starts a comment, on its own line or after an op.
    const std::string line = trim(raw.substr(0, raw.find('#')));
    if (line.empty()) continue;
    const auto space = line.find_first_of(" \t");
    const std::string verb = line.substr(0, space);
    const std::string arg = space == std::string::npos ? "" : trim(line.substr(space));
    const std::string where = path + ": line " + std::to_string(line_no) + ": ";
    Op op;
    op.line = line_no;
    if (verb == "add" || verb == "remove") {
      op.kind = verb == "add" ? OpKind::kAdd : OpKind::kRemove;
      if (arg.empty()) throw FormatError(where + "'" + verb + "' needs ROWS (e.g. 'add 0-99')");
      try {
        op.ids = parse_rows(arg, n);
      } catch (const InvalidArgument& e) {
        throw FormatError(where + e.what());
      }
    } else if (verb == "evict") {
      op.kind = OpKind::kEvict;
      if (!arg.empty()) throw FormatError(where + "'evict' takes no argument");
    } else {
      throw FormatError(where + "unknown op '" + verb +
                        "' (expected add ROWS, remove ROWS, evict)");
    }
    ops.push_back(std::move(op));
  }
  return ops;
}

TokenSet subset(const TokenSet& all, const std::vector<TokenId>& ids) {
  TokenSet s;
  s.ids = ids;
  s.keys.resize(static_cast<Eigen::Index>(ids.size()), all.keys.cols());
  s.values.resize(static_cast<Eigen::Index>(ids.size()), all.values.cols());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    // Ids are row indices of `all` (TokenSet::from_rows).
    s.keys.row(static_cast<Eigen::Index>(i)) = all.keys.row(ids[i]);
    s.values.row(static_cast<Eigen::Index>(i)) = all.values.row(ids[i]);
  }
  return s;
}

template <typename E>
[[noreturn]] void rethrow_at(const E& e, const std::string& path, int line) {
  throw E(path + ": line " + std::to_string(line) + ": " + e.what());
}

int run_replay(const ReplayOptions& o) {
  MemorySettings settings;
  settings.problem = o.problem.build();
  settings.mode = memory_mode_from_string(o.mode);
  if (o.budget_given) {
    if (o.budget < 0) {
      throw InvalidArgument("--budget must be >= 0, got " + std::to_string(o.budget));
    }
    if (settings.mode != MemoryMode::kBounded) {
      throw InvalidArgument("--budget applies to --mode bounded only");
    }
    settings.token_budget = static_cast<std::size_t>(o.budget);
  }
  settings.validate();
  const TokenSet all = load_tokens(o.tokens);
  const std::vector<Op> ops = read_ops(o.ops, all.size());

  Memory memory(settings, static_cast<int>(all.keys.cols()), static_cast<int>(all.values.cols()));
  OpDiagnostics total;
  long adds = 0;
  long removes = 0;
  long explicit_evictions = 0;
  std::unordered_set<TokenId> added;  // added and not removed (present, or evicted since)
  const Stopwatch watch;
  for (const Op& op : ops) {
    try {
      switch (op.kind) {
        case OpKind::kAdd:
          total += memory.add_batch(subset(all, op.ids));
          added.insert(op.ids.begin(), op.ids.end());
          adds += static_cast<long>(op.ids.size());
          break;
        case OpKind::kRemove:
          for (TokenId id : op.ids)
            if (added.count(id) && !memory.contains(id))
              throw NotFound("remove: token " + std::to_string(id) +
                             " was evicted earlier (as a reserve token, by an 'evict' op or by " +
                             "bounded mode), so it is no longer in the memory");
          total += memory.remove_batch(op.ids);
          removes += static_cast<long>(op.ids.size());
          for (TokenId id : op.ids) added.erase(id);
          break;
        case OpKind::kEvict: {
          OpDiagnostics d;
          explicit_evictions += static_cast<long>(memory.evict_reserve(&d).size());
          total += d;
          break;
        }
      }
    } catch (const NotFound& e) {
      rethrow_at(e, o.ops, op.line);
    } catch (const AlreadyExists& e) {
      rethrow_at(e, o.ops, op.line);
    } catch (const InvalidArgument& e) {
      rethrow_at(e, o.ops, op.line);
    }
  }
  const double seconds = watch.seconds();
  const State state = memory.state();
  // Tokens that left without an explicit remove were evicted (explicitly or by bounded mode).
  const long evictions = adds - removes - static_cast<long>(state.ids.size());
  const Status status = memory.status();

  nlohmann::json j = state_to_json(state);
  j["mode"] = to_string(settings.mode);
  if (settings.mode == MemoryMode::kBounded) j["budget"] = settings.token_budget;
  j["ops"] = {{"count", ops.size()},
              {"adds", adds},
              {"removes", removes},
              {"evictions", evictions},
              {"events", total.events},
              {"zero_steps", total.zero_steps},
              {"refused_entrants", total.refused_entrants},
              {"refactorizations", total.refactorizations},
              {"canonical_solves", total.canonical_solves},
              {"repairs", total.repairs},
              {"batch_fallbacks", total.batch_fallbacks},
              {"seconds", seconds}};
  if (o.json) {
    print_json(j);
  } else {
    print_state_summary(state);
    fmt::print("mode        {}{}\n", to_string(settings.mode),
               settings.mode == MemoryMode::kBounded
                   ? fmt::format(" (budget {})", settings.token_budget)
                   : std::string());
    fmt::print(
        "ops         {} lines: {} adds, {} removes, {} evictions ({} explicit); {} events, {} "
        "zero steps, {} refactorizations, {} canonical solves, {} repairs, {} batch fallbacks, "
        "{:.3f} s\n",
        ops.size(), adds, removes, evictions, explicit_evictions, total.events, total.zero_steps,
        total.refactorizations, total.canonical_solves, total.repairs, total.batch_fallbacks,
        seconds);
  }
  return exit_code_for(status);
}

Registrar reg("replay", [](CLI::App& app, int& exit_code) {
  static ReplayOptions opts;  // outlives parsing: CLI11 binds to it
  ReplayOptions* o = &opts;
  auto* sub = app.add_subcommand(
      "replay", "Run add/remove/evict operations through the exact memory; print the final state");
  add_token_options(sub, o->tokens);
  sub->add_option("--ops", o->ops,
                  "ops file: one 'add ROWS' | 'remove ROWS' | 'evict' per line, '#' comments")
      ->required();
  add_problem_options(sub, o->problem);
  sub->add_option("--mode", o->mode, "audit (keep every token) | bounded (evict reserve tokens)")
      ->capture_default_str();
  CLI::Option* budget =
      sub->add_option("--budget", o->budget,
                      "bounded mode: evict reserve tokens only while the memory holds more than N");
  add_json_flag(sub, o->json);
  sub->callback([o, budget, &exit_code] {
    o->budget_given = budget->count() > 0;
    exit_code = run_replay(*o);
  });
});

}  // namespace
}  // namespace svattn::cli
