// Regression tests of hostile-but-fair `train` / `eval` input: a chunk longer than the sequence
// costs what the sequence costs, every split is checked before the first step (nothing written), a
// learning rate fp32 cannot hold is exit 2, eval's --seq, --check-agreement and --certify are
// validated, and an edited checkpoint config is a plain FormatError.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"
#include "svattn/hash.h"

namespace {

namespace fs = std::filesystem;
using svattn::test::RunResult;
using svattn::test::TempDir;
using svattn::test::expect_bad_input;

#ifdef SVATTN_CLI
RunResult run(const std::vector<std::string>& args, const TempDir& dir, int timeout_s = 120) {
  std::vector<std::string> a = {std::to_string(timeout_s), SVATTN_CLI};
  a.insert(a.end(), args.begin(), args.end());
  return svattn::test::run_binary("/usr/bin/timeout", a, dir);
}

/// n pseudo-text bytes.
std::string bytes_file(const TempDir& dir, const std::string& name, std::size_t n) {
  std::string b(n, 'a');
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<char>('a' + (i * 7 + i / 13) % 26);
  return dir.write(name, b);
}


std::vector<std::string> train_args(const std::string& data, const std::string& out,
                                    const std::string& preset = "tiny") {
  return {"train", "--preset", preset, "--data", data, "--out", out, "--quiet", "--no-plot",
          "--threads", "1"};
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Row 11: the cost of the chunked attentions follows min(chunk, seq), so a huge --chunk trains (and
// evaluates) like a chunk of the whole sequence instead of allocating gigabytes.
TEST(LmHostile, ChunkLongerThanTheSequence) {
  TempDir dir("lm-hostile");
  const std::string data = bytes_file(dir, "b5000.txt", 5000);
  const std::string out = dir.file("x");
  const auto r = run(plus(train_args(data, out), {"--steps", "1", "--chunk", "100000"}), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto e = run({"eval", "--checkpoint", out, "--data", data, "--windows", "2", "--threads",
                      "1"},
                     dir);
  EXPECT_EQ(e.code, 0) << e.err;
}

// Row 12: a split shorter than seq + 1 is found before training starts; no run directory is left.
TEST(LmHostile, EverySplitCheckedBeforeTheFirstStep) {
  TempDir dir("lm-hostile");
  const std::string data = bytes_file(dir, "b5000.txt", 5000);
  const std::string out = dir.file("x");
  expect_bad_input(run(plus(train_args(data, out), {"--steps", "4", "--seq", "251"}), dir),
                   {"split valid", "250 bytes", "seq + 1 = 252"});
  EXPECT_FALSE(fs::exists(out)) << "a refused run created its directory";
}

TEST(LmHostile, LearningRateBeyondFp32) {
  TempDir dir("lm-hostile");
  const std::string data = bytes_file(dir, "b5000.txt", 5000);
  expect_bad_input(run(plus(train_args(data, dir.file("x")), {"--steps", "1", "--lr", "1e300"}),
                       dir),
                   {"lr", "fp32"});
}

// A model.attention.hybrid.* key out of its table range (docs/lm.md "Training settings") is exit 2
// naming the key before anything is written; on --resume a changed one names `--set KEY`.
TEST(LmHostile, ModelKeysAreCheckedAgainstTheirRange) {
  TempDir dir("lm-hostile");
  const std::string data = bytes_file(dir, "b5000.txt", 5000);
  const std::string out = dir.file("x");
  expect_bad_input(run(plus(train_args(data, out), {"--steps", "1", "--set", "model.attention.hybrid.chunk=0"}), dir),
                   {"model.attention.hybrid.chunk must be >= 1, got 0"});
  EXPECT_FALSE(fs::exists(out)) << "a refused run created its directory";
  ASSERT_EQ(run(plus(train_args(data, out), {"--steps", "1", "--set", "model.attention.hybrid.batched.iterations=7"}),
                dir)
                .code,
            0);
  expect_bad_input(run({"train", "--resume", "--out", out, "--data", data, "--quiet", "--no-plot", "--threads", "1",
                        "--steps", "2", "--fista-iterations", "8"},
                       dir),
                   {"--fista-iterations 8 differs from the checkpoint's 7"});
  expect_bad_input(run({"train", "--resume", "--out", out, "--data", data, "--quiet", "--no-plot", "--threads", "1",
                        "--steps", "2", "--set", "model.attention.hybrid.batched.iterations=8"},
                       dir),
                   {"--set model.attention.hybrid.batched.iterations 8 differs from the checkpoint's 7"});
}

TEST(LmHostile, EvalOptionsAreValidated) {
  TempDir dir("lm-hostile");
  const std::string data = bytes_file(dir, "b5000.txt", 5000);
  const std::string swa = dir.file("swa");
  ASSERT_EQ(run(plus(train_args(data, swa, "tiny-swa"), {"--steps", "1"}), dir).code, 0);
  for (const std::string seq : {"0", "1", "-3"}) {
    SCOPED_TRACE(seq);
    expect_bad_input(run({"eval", "--checkpoint", swa, "--data", data, "--seq", seq}, dir),
                     {"--seq"});
  }
  expect_bad_input(run({"eval", "--checkpoint", swa, "--data", data, "--check-agreement"}, dir),
                   {"--check-agreement", "hybrid"});
  expect_bad_input(run({"eval", "--checkpoint", swa, "--data", data, "--certify"}, dir),
                   {"--certify", "hybrid"});
}

// An edited config (shapes no longer those of model.pt, manifest updated to match) is exit 2
// naming the checkpoint file and the tensor, not a LibTorch message from inside a forward.
TEST(LmHostile, EditedCheckpointConfigIsAFormatError) {
  TempDir dir("lm-hostile");
  const std::string data = bytes_file(dir, "b5000.txt", 5000);
  const std::string out = dir.file("x");
  ASSERT_EQ(run(plus(train_args(data, out, "tiny-swa"), {"--steps", "1"}), dir).code, 0);
  std::string latest = svattn::test::read_text(out + "/LATEST");
  while (!latest.empty() && (latest.back() == '\n' || latest.back() == ' ')) latest.pop_back();
  const std::string ck = out + "/" + latest;
  const std::string cfg_path = ck + "/config.json";
  auto cfg = nlohmann::json::parse(svattn::test::read_text(cfg_path));
  cfg["model"]["vocab"] = cfg["model"].value("vocab", 256) * 2;
  const std::string text = cfg.dump(2);
  std::ofstream(cfg_path, std::ios::trunc) << text;
  const std::string man_path = ck + "/MANIFEST.json";
  auto man = nlohmann::json::parse(svattn::test::read_text(man_path));
  man["files"]["config.json"]["bytes"] = text.size();
  man["files"]["config.json"]["sha256"] =
      svattn::sha256_hex(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  std::ofstream(man_path, std::ios::trunc) << man.dump(2);
  expect_bad_input(run({"eval", "--checkpoint", out, "--data", data, "--windows", "1"}, dir),
                   {"model.pt", "shape"});
}
// Resource options have documented upper bounds (docs/lm.md "Resource bounds"): a thread count,
// batch or FISTA budget far beyond them is exit 2 naming the option, before anything runs, not
// minutes of oversubscribed threads, a 52 GB allocation or an endless forward.
TEST(LmHostile, ResourceOptionsAreBounded) {
  TempDir dir("lm-hostile");
  const std::string data = bytes_file(dir, "b5000.txt", 5000);
  const std::string out = dir.file("x");
  const auto train = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> a = {"train", "--preset", "tiny", "--data", data, "--out", out,
                                  "--quiet", "--no-plot", "--steps", "1"};
    return run(plus(a, extra), dir, 30);
  };
  expect_bad_input(train({"--threads", "100000"}), {"--threads", "100000"});
  expect_bad_input(train({"--threads", "1", "--batch", "100000000"}), {"batch"});
  expect_bad_input(train({"--threads", "1", "--seq", "10000000"}), {"seq"});
  expect_bad_input(train({"--threads", "1", "--batch", "4096", "--seq", "4096"}), {"batch x seq"});
  expect_bad_input(train({"--threads", "1", "--fista-iterations", "1000000000"}),
                   {"iterations", "10000"});
  EXPECT_FALSE(fs::exists(out)) << "a refused run created its directory";
  ASSERT_EQ(train({"--threads", "1"}).code, 0);
  expect_bad_input(run({"eval", "--checkpoint", out, "--data", data, "--threads", "100000"}, dir, 30),
                   {"--threads"});
  expect_bad_input(run({"dump-keys", "--checkpoint", out, "--data", data, "--layer", "0",
                        "--head", "0", "--out", dir.file("k.npy"), "--threads", "100000"},
                       dir, 30),
                   {"--threads"});
}

// On --resume an architecture or schedule override that differs from the checkpoint's is refused
// by name (it used to be dropped silently); the checkpoint's own value is accepted.
TEST(LmHostile, ResumeRefusesChangedSettings) {
  TempDir dir("lm-hostile");
  const std::string data = bytes_file(dir, "b5000.txt", 5000);
  const std::string out = dir.file("x");
  ASSERT_EQ(run(plus(train_args(data, out), {"--steps", "1"}), dir).code, 0);
  const std::vector<std::string> resume = {"train", "--resume", "--out", out, "--data", data,
                                           "--quiet", "--no-plot", "--threads", "1", "--steps", "2"};
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--C", "0.5"}, {"--chunk", "3"}, {"--fista-iterations", "7"}, {"--gate", "token"},
           {"--eval-every", "9"}}) {
    SCOPED_TRACE(flag);
    expect_bad_input(run(plus(resume, {flag, value}), dir), {flag});
  }
  EXPECT_EQ(run(resume, dir).code, 0);
  // A sliding-window run: a support that gives another window is refused.
  const std::string swa = dir.file("swa");
  ASSERT_EQ(run(plus(train_args(data, swa, "tiny-swa"), {"--steps", "1"}), dir).code, 0);
  expect_bad_input(run({"train", "--resume", "--out", swa, "--data", data, "--quiet", "--no-plot",
                        "--threads", "1", "--steps", "2", "--matched-support", "40"},
                       dir),
                   {"--matched-support", "window"});
}
#else
TEST(LmHostile, NeedsTheCli) { GTEST_SKIP() << "svattn CLI not built"; }
#endif

}  // namespace
