// Replay driver (every build, `unit` label): runs a fuzz target on its seeds, on every file of
// the directories or files given after the target name (e.g. regression inputs of crashes found
// by libFuzzer), and on deterministic mutations of the seeds (byte flips, truncations, inserted
// bytes; fixed seed). `fuzz_replay TARGET --write-seeds DIR` writes the seeds as a libFuzzer
// corpus.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "fuzz_targets.h"
#include "support/random.h"

namespace fs = std::filesystem;
using svattn::fuzz::Target;

namespace {

std::vector<std::uint8_t> mutate(std::vector<std::uint8_t> b, svattn::support::Rng& gen) {
  const int kind = static_cast<int>(gen.next() % 4);
  if (b.empty() || kind == 3) {
    b.insert(b.begin() + static_cast<long>(b.empty() ? 0 : gen.next() % b.size()),
             static_cast<std::uint8_t>(gen.next()));
  } else if (kind == 0) {
    b[gen.next() % b.size()] ^= static_cast<std::uint8_t>(1u << (gen.next() % 8));
  } else if (kind == 1) {
    b.resize(gen.next() % b.size());
  } else {
    b[gen.next() % b.size()] = static_cast<std::uint8_t>(gen.next());
  }
  return b;
}

int run_file(Target t, const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  const std::vector<std::uint8_t> b((std::istreambuf_iterator<char>(in)),
                                    std::istreambuf_iterator<char>());
  return t(b.data(), b.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: fuzz_replay csv|npy|memory|store [--mutations N] "
                 "[--write-seeds DIR] [FILE|DIR...]\n");
    return 2;
  }
  const std::string name = argv[1];
  const Target t = svattn::fuzz::target_named(name);
  if (t == nullptr) {
    std::fprintf(stderr, "fuzz_replay: unknown target %s\n", name.c_str());
    return 2;
  }
  long mutations = 300;
  const auto seeds = svattn::fuzz::seeds(name);
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mutations" && i + 1 < argc) {
      mutations = std::stol(argv[++i]);
    } else if (a == "--write-seeds" && i + 1 < argc) {
      fs::create_directories(argv[++i]);
      for (std::size_t k = 0; k < seeds.size(); ++k) {
        std::ofstream out(fs::path(argv[i]) / ("seed" + std::to_string(k)), std::ios::binary);
        out.write(reinterpret_cast<const char*>(seeds[k].data()),
                  static_cast<std::streamsize>(seeds[k].size()));
      }
      return 0;
    } else if (!fs::exists(a)) {
      continue;  // e.g. a target without regression inputs yet
    } else if (fs::is_directory(a)) {
      for (const auto& e : fs::directory_iterator(a))
        if (e.is_regular_file()) run_file(t, e.path());
    } else {
      run_file(t, a);
    }
  }
  svattn::support::Rng gen(20260101);
  long runs = 0;
  for (const auto& s : seeds) {
    t(s.data(), s.size());
    ++runs;
    std::vector<std::uint8_t> cur = s;
    for (long m = 0; m < mutations; ++m) {
      cur = (m % 8 == 0) ? s : mutate(cur, gen);  // restart from the seed now and then
      t(cur.data(), cur.size());
      ++runs;
    }
  }
  std::printf("fuzz_replay %s: %ld inputs, no crash\n", name.c_str(), runs);
  return 0;
}
