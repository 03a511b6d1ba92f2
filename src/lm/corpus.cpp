// Byte corpora, data-directory resolution and deterministic windows.
#include "svattn/lm/corpus.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/data_dir.h"
#include "support/random.h"
#include "svattn/errors.h"
#include "svattn/hash.h"

namespace svattn::lm {

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kMinSplitBytes = 64;

}  // namespace

std::string to_string(Split s) {
  switch (s) {
    case Split::kTrain: return "train";
    case Split::kValid: return "valid";
    case Split::kTest: return "test";
  }
  return "?";
}

Split split_from_string(const std::string& s) {
  if (s == "train") return Split::kTrain;
  if (s == "valid") return Split::kValid;
  if (s == "test") return Split::kTest;
  throw InvalidArgument("unknown split '" + s + "' (train|valid|test)");
}

const std::vector<KnownCorpus>& known_corpora() {
  static const std::vector<KnownCorpus> k{
      {"enwik8", "enwik8/enwik8.prefix-4154064", "enwik8 4.15 MB prefix",
       "http://mattmahoney.net/dc/enwik8.zip, then `head -c 4154064 enwik8 > "
       "enwik8/enwik8.prefix-4154064` (sha256 d8b3b95f...5d6a, see the data README)"},
      {"shakespeare", "tinyshakespeare/input.txt", "tiny-shakespeare",
       "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"},
  };
  return k;
}

std::string resolve_data_dir(const std::string& explicit_dir) {
  return support::find_data_dir(explicit_dir, SVATTN_SOURCE_DIR).path;
}

Corpus Corpus::load(const DataSpec& spec) {
  Corpus c;
  std::string path;
  if (!spec.path.empty()) {
    path = spec.path;
    c.name_ = fs::path(path).filename().string();
    c.label_ = "file " + path;
    if (!fs::is_regular_file(path)) throw IoError("--data " + path + ": no such file");
  } else {
    const KnownCorpus* known = nullptr;
    for (const auto& k : known_corpora())
      if (k.name == spec.corpus) known = &k;
    if (known == nullptr)
      throw InvalidArgument("unknown corpus '" + spec.corpus + "' (enwik8|shakespeare, or --data PATH)");
    const support::DataDirChoice found = support::find_data_dir(spec.data_dir, SVATTN_SOURCE_DIR);
    const std::string& dir = found.path;
    c.name_ = known->name;
    c.label_ = known->label;
    if (dir.empty()) {
      std::string tried;
      for (const auto& d : found.tried) tried += (tried.empty() ? "" : ", ") + d;
      throw IoError("data file " + known->relative_path + " not found: no data directory (tried " +
                    tried + "; set --data-dir or SVATTN_DATA). Download: " + known->download);
    }
    path = (fs::path(dir) / known->relative_path).string();
    if (!fs::is_regular_file(path))
      throw IoError("data file " + path + " not found. Download: " + known->download);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open " + path);
  in.seekg(0, std::ios::end);
  const auto n = static_cast<std::size_t>(in.tellg());
  in.seekg(0, std::ios::beg);
  c.bytes_.resize(n);
  if (n > 0 && !in.read(reinterpret_cast<char*>(c.bytes_.data()), static_cast<std::streamsize>(n)))
    throw IoError("cannot read " + path);
  c.path_ = path;
  if (static_cast<std::int64_t>(n) < 20 * kMinSplitBytes)
    throw FormatError(path + ": " + std::to_string(n) + " bytes is too small to split 90/5/5 (need >= " +
                      std::to_string(20 * kMinSplitBytes) + ")");
  return c;
}

Corpus Corpus::from_bytes(std::string name, std::vector<std::uint8_t> bytes) {
  Corpus c;
  c.name_ = name;
  c.label_ = std::move(name);
  c.path_ = "(memory)";
  c.bytes_ = std::move(bytes);
  if (static_cast<std::int64_t>(c.bytes_.size()) < 20 * kMinSplitBytes)
    throw FormatError("corpus " + c.name_ + " is too small to split 90/5/5");
  return c;
}

std::pair<std::int64_t, std::int64_t> Corpus::range(Split s) const {
  const auto n = static_cast<std::int64_t>(bytes_.size());
  const std::int64_t a = n * 90 / 100, b = n * 95 / 100;
  switch (s) {
    case Split::kTrain: return {0, a};
    case Split::kValid: return {a, b};
    case Split::kTest: return {b, n};
  }
  return {0, 0};
}

const std::string& Corpus::sha256() const {
  if (sha_.empty()) sha_ = sha256_hex(bytes_.data(), bytes_.size());
  return sha_;
}

std::vector<std::int64_t> batch_offsets(const Corpus& corpus, Split split, std::int64_t batch,
                                        std::int64_t seq, std::uint64_t seed, std::int64_t step) {
  const auto [b, e] = corpus.range(split);
  if (batch < 1 || seq < 1) throw InvalidArgument("batch_offsets: batch and seq must be >= 1");
  if (e - b < seq + 1)
    throw InvalidArgument("split " + to_string(split) + " of " + corpus.name() + " has " +
                          std::to_string(e - b) + " bytes, fewer than seq + 1 = " + std::to_string(seq + 1));
  const auto span = static_cast<std::uint64_t>(e - b - seq);  // starts in [b, e - seq - 1]
  std::vector<std::int64_t> out(static_cast<std::size_t>(batch));
  // Each window is a hash of (seed, step, i), so a resumed run draws the same ones.
  using support::hash_below;
  using support::splitmix64;
  const std::uint64_t base = splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(step)));
  for (std::int64_t i = 0; i < batch; ++i)
    out[static_cast<std::size_t>(i)] =
        b + static_cast<std::int64_t>(hash_below(splitmix64(base + static_cast<std::uint64_t>(i)), span));
  return out;
}

std::vector<std::int64_t> eval_offsets(const Corpus& corpus, Split split, std::int64_t seq,
                                       std::int64_t max_windows) {
  const auto [b, e] = corpus.range(split);
  if (seq < 1) throw InvalidArgument("eval_offsets: seq must be >= 1");
  if (max_windows < 0) throw InvalidArgument("eval_offsets: windows must be >= 0");
  const std::int64_t total = (e - b - 1) / seq;
  if (total < 1)
    throw InvalidArgument("split " + to_string(split) + " of " + corpus.name() + " has " +
                          std::to_string(e - b) + " bytes, fewer than seq + 1 = " + std::to_string(seq + 1));
  std::vector<std::int64_t> out;
  if (max_windows == 0 || max_windows >= total) {
    for (std::int64_t k = 0; k < total; ++k) out.push_back(b + k * seq);
  } else {
    for (std::int64_t i = 0; i < max_windows; ++i) out.push_back(b + (i * total / max_windows) * seq);
  }
  return out;
}

}  // namespace svattn::lm
