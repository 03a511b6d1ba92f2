// Byte-level corpora for the character language models (docs/experiments.md "E5", "Data
// directory"): the enwik8 4.15 MB prefix, tiny-shakespeare, or any file, split 90/5/5 in order, and
// deterministic batch/eval windows. Torch-free: batches are plain offsets; the trainer turns them into tensors.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace svattn::lm {

enum class Split { kTrain, kValid, kTest };
std::string to_string(Split s);
/// "train" | "valid" | "test"; throws InvalidArgument otherwise.
Split split_from_string(const std::string& s);

/// Which bytes to read. `path` (--data) wins over `corpus` (--corpus).
struct DataSpec {
  std::string corpus = "enwik8";  ///< "enwik8" | "shakespeare" (ignored when path is set)
  std::string path;               ///< any file, read as bytes
  std::string data_dir;           ///< --data-dir; empty = SVATTN_DATA, then ../shared/data
};

/// Known corpora: relative path under the data directory and where to download it.
struct KnownCorpus {
  std::string name;
  std::string relative_path;
  std::string label;      ///< how results must be labelled
  std::string download;   ///< where users elsewhere get the file
};
const std::vector<KnownCorpus>& known_corpora();

/// The data directory: `explicit_dir` if non-empty (must exist), else $SVATTN_DATA (must exist),
/// else the first existing of ../shared/data (relative to the working directory) and the source
/// tree's ../shared/data. Returns "" when none exists (load reports the missing file then).
/// Throws IoError when an explicitly named directory does not exist.
std::string resolve_data_dir(const std::string& explicit_dir);

class Corpus {
 public:
  /// Reads the whole file. Throws IoError naming the missing file, the directories searched and
  /// where to download it; InvalidArgument for an unknown corpus name; FormatError when the file
  /// is too small to split (fewer than 64 bytes per split).
  static Corpus load(const DataSpec& spec);
  /// A corpus from bytes in memory (tests).
  static Corpus from_bytes(std::string name, std::vector<std::uint8_t> bytes);

  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  /// e.g. "enwik8 4.15 MB prefix"
  const std::string& label() const { return label_; }
  std::size_t size() const { return bytes_.size(); }
  const std::uint8_t* data() const { return bytes_.data(); }
  /// [begin, end) of a split: train = [0, 0.9 n), valid = [0.9 n, 0.95 n), test = [0.95 n, n),
  /// boundaries rounded down.
  std::pair<std::int64_t, std::int64_t> range(Split s) const;
  /// SHA-256 (hex) of the bytes, computed once.
  const std::string& sha256() const;

 private:
  std::string name_, path_, label_;
  std::vector<std::uint8_t> bytes_;
  mutable std::string sha_;
};

/// Start offsets of the `batch` training windows of step `step`: each window holds seq + 1 bytes
/// inside the split. A pure function of (seed, step): resuming needs no generator state.
/// Throws InvalidArgument when the split is shorter than seq + 1.
std::vector<std::int64_t> batch_offsets(const Corpus& corpus, Split split, std::int64_t batch,
                                        std::int64_t seq, std::uint64_t seed, std::int64_t step);

/// Evaluation windows: the split cut into consecutive non-overlapping windows of seq + 1 bytes
/// (stride seq, so every byte after the split's first is a target exactly once, each predicted
/// from the bytes before it in its own window). max_windows > 0 keeps that many, evenly spaced
/// (window floor(i * total / max_windows)); 0 keeps all.
std::vector<std::int64_t> eval_offsets(const Corpus& corpus, Split split, std::int64_t seq,
                                       std::int64_t max_windows);

}  // namespace svattn::lm
