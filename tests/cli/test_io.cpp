// Readers and writers of token matrices, ROWS specs and the JSON of a state (src/core/io.cpp).
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>

#include "cli/cli_test_util.h"
#include "svattn/errors.h"
#include "svattn/io.h"

namespace svattn {
namespace {

using test::TempDir;

/// Message of the exception `E` thrown by `f`; fails the test when none or another type is thrown.
template <typename E, typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no exception thrown";
  return "";
}

/// Builds an .npy file by hand (version 1 or 2), so the reader is tested against the format rather
/// than against our own writer.
std::string npy_bytes(const std::string& dict, const std::string& payload, int version = 1) {
  const std::size_t prefix = version == 1 ? 10 : 12;
  std::string header = dict;
  const std::size_t unpadded = prefix + header.size() + 1;
  header.append((16 - unpadded % 16) % 16, ' ');
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(version);
  out += '\0';
  const std::size_t len = header.size();
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>((len >> 8) & 0xff);
  if (version != 1) {
    out += static_cast<char>((len >> 16) & 0xff);
    out += static_cast<char>((len >> 24) & 0xff);
  }
  return out + header + payload;
}

template <typename T>
std::string le_bytes(const std::vector<T>& v) {
  std::string out;
  for (T x : v) {
    unsigned char b[sizeof(T)];
    std::memcpy(b, &x, sizeof(T));  // the test host is little-endian (x86-64 / aarch64)
    out.append(reinterpret_cast<const char*>(b), sizeof(T));
  }
  return out;
}

TEST(IoCsv, ParsesCommentsBlankLinesWhitespaceAndCrlf) {
  TempDir dir("io");
  const std::string p = dir.write("k.csv",
                                  "# a header comment\n"
                                  "1, 2.5 ,-3e-2\r\n"
                                  "\n"
                                  "   # indented comment\n"
                                  "  +4,5,6  \n"
                                  "\t\n"
                                  "7,8,9");  // no trailing newline
  const RowMatrix m = read_matrix(p);
  ASSERT_EQ(m.rows(), 3);
  ASSERT_EQ(m.cols(), 3);
  EXPECT_EQ(m(0, 1), 2.5);
  EXPECT_EQ(m(0, 2), -3e-2);
  EXPECT_EQ(m(1, 0), 4.0);
  EXPECT_EQ(m(2, 2), 9.0);
}

TEST(IoCsv, RoundTripIsBitExact) {
  TempDir dir("io");
  RowMatrix m(3, 4);
  m << 0.1, -1.0 / 3.0, 1e-300, 6.02214076e23, std::nextafter(1.0, 2.0), -0.0, 123456789.123456789,
      5e-324, std::numeric_limits<double>::max(), -std::numeric_limits<double>::min(), 2.0, 3.0;
  const std::string p = dir.file("m.csv");
  write_csv(p, m);
  const RowMatrix r = read_matrix(p);
  ASSERT_EQ(r.rows(), 3);
  ASSERT_EQ(r.cols(), 4);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(std::memcmp(&r(i, j), &m(i, j), sizeof(double)), 0) << i << "," << j;
    }
  }
}

TEST(IoNpy, RoundTripFloat64) {
  TempDir dir("io");
  RowMatrix m(5, 3);
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 3; ++j) m(i, j) = std::sin(1.0 + i * 3 + j) * std::pow(10.0, i - 2);
  }
  const std::string p = dir.file("m.npy");
  write_npy(p, m);
  const std::string bytes = test::read_text(p);
  // Header is padded so that the data starts at a multiple of 64 bytes.
  ASSERT_GT(bytes.size(), 10u);
  const std::size_t header_len =
      static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_EQ(bytes.size(), 10 + header_len + 5 * 3 * 8);
  EXPECT_TRUE(m == read_matrix(p));
}

TEST(IoNpy, ReadsFloat32CorderAndFortranOrder) {
  TempDir dir("io");
  // The matrix [[1, 2, 3], [4, 5, 6.5]] stored both ways.
  const std::string c =
      dir.write("c.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                                   le_bytes<float>({1, 2, 3, 4, 5, 6.5f})));
  const std::string f =
      dir.write("f.npy", npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }",
                                   le_bytes<double>({1, 4, 2, 5, 3, 6.5})));
  const std::string f32 = dir.write(
      "f32.npy", npy_bytes("{\"shape\": (2,3), \"fortran_order\": True, \"descr\": \"<f4\"}",
                           le_bytes<float>({1, 4, 2, 5, 3, 6.5f}), 2));
  RowMatrix expected(2, 3);
  expected << 1, 2, 3, 4, 5, 6.5;
  EXPECT_TRUE(read_matrix(c) == expected);
  EXPECT_TRUE(read_matrix(f) == expected);
  EXPECT_TRUE(read_matrix(f32) == expected);
  // float32 values are widened exactly.
  const std::string third = dir.write(
      "third.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1), }",
                             le_bytes<float>({1.0f / 3.0f})));
  EXPECT_EQ(read_matrix(third)(0, 0), static_cast<double>(1.0f / 3.0f));
}

TEST(IoErrors, MissingFileIsIoErrorNamingTheFile) {
  TempDir dir("io");
  const std::string p = dir.file("does-not-exist.csv");
  const std::string msg = message_of<IoError>([&] { read_matrix(p); });
  EXPECT_NE(msg.find(p), std::string::npos) << msg;
}

TEST(IoErrors, DirectoryIsNotReadableAsMatrix) {
  TempDir dir("io");
  const std::string msg = message_of<IoError>([&] { read_matrix(dir.path().string()); });
  EXPECT_NE(msg.find("directory"), std::string::npos) << msg;
}

TEST(IoErrors, EmptyFilesAreFormatErrors) {
  TempDir dir("io");
  for (const std::string& contents :
       {std::string(""), std::string("\n\n"), std::string("# only a comment\n  \n")}) {
    const std::string p = dir.write("empty.csv", contents);
    const std::string msg = message_of<FormatError>([&] { read_matrix(p); });
    EXPECT_NE(msg.find(p), std::string::npos) << msg;
    EXPECT_NE(msg.find("empty"), std::string::npos) << msg;
  }
}

struct BadCsvCase {
  std::string contents;
  std::string line;    // expected "line N"
  std::string column;  // expected "column M" or "" when not applicable
  std::string what;    // expected fragment
};

TEST(IoErrors, BadCsvCellsNameFileLineAndColumn) {
  TempDir dir("io");
  const std::vector<BadCsvCase> cases = {
      {"1,2\n3,nan\n", "line 2", "column 2", "non-finite"},
      {"# c\n1,2\n3,4\n-inf,1\n", "line 4", "column 1", "non-finite"},
      {"1,2\n3,Inf\n", "line 2", "column 2", "non-finite"},
      {"1,2\n3,abc\n", "line 2", "column 2", "non-numeric"},
      {"1,2\n3,4x\n", "line 2", "column 2", "non-numeric"},
      {"1,,2\n", "line 1", "column 2", "empty cell"},
      {"1,2,\n", "line 1", "column 3", "empty cell"},
      {"1,2\n3,1e999\n", "line 2", "column 2", "range"},
      {"1,2,3\n4,5\n", "line 2", "", "ragged"},
      {"1,2\n\n4,5,6\n", "line 3", "", "ragged"},
  };
  for (const auto& c : cases) {
    const std::string p = dir.write("bad.csv", c.contents);
    const std::string msg = message_of<FormatError>([&] { read_matrix(p); });
    EXPECT_NE(msg.find(p), std::string::npos) << msg;
    const auto at = msg.find(c.line);
    ASSERT_NE(at, std::string::npos) << c.contents << " -> " << msg;
    const std::size_t after = at + c.line.size();
    EXPECT_TRUE(after == msg.size() || !std::isdigit(static_cast<unsigned char>(msg[after])))
        << msg;
    if (!c.column.empty()) EXPECT_NE(msg.find(c.column), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.what), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message must be one line: " << msg;
  }
}

TEST(IoErrors, RaggedMessageNamesBothCounts) {
  TempDir dir("io");
  const std::string p = dir.write("r.csv", "1,2,3\n4,5,6\n7,8\n");
  const std::string msg = message_of<FormatError>([&] { read_matrix(p); });
  EXPECT_NE(msg.find("line 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2 columns"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected 3"), std::string::npos) << msg;
}

TEST(IoErrors, BadNpyFilesAreFormatErrors) {
  TempDir dir("io");
  const std::string ok_dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }";
  const std::string four = le_bytes<double>({1, 2, 3, 4});
  struct Case {
    std::string bytes;
    std::string what;
  };
  const std::vector<Case> cases = {
      {"NOTNUMPY-at-all-but-long-enough", "magic"},
      {npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }",
                 le_bytes<std::int32_t>({1, 2, 3, 4})),
       "dtype"},
      {npy_bytes("{'descr': '>f8', 'fortran_order': False, 'shape': (2, 2), }", four), "dtype"},
      {npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", four), "dimensions"},
      {npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2, 2), }", four),
       "dimensions"},
      {npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (0, 2), }", ""), "empty"},
      {npy_bytes(ok_dict, four.substr(0, 31)), "truncated"},
      {npy_bytes(ok_dict, four + "x"), "trailing"},
      {npy_bytes("{'descr': '<f8', 'shape': (2, 2), }", four), "fortran_order"},
      {npy_bytes("{'descr': '<f8', 'fortran_order': Maybe, 'shape': (2, 2), }", four), "header"},
      {npy_bytes("{'descr': '<f8' 'fortran_order': False, 'shape': (2, 2), }", four), "header"},
      {npy_bytes("['descr', '<f8']", four), "header"},
      {npy_bytes(ok_dict, four).substr(0, 20), "truncated"},
      {npy_bytes(ok_dict, four, 7), "version"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string p = dir.write("bad" + std::to_string(i) + ".npy", cases[i].bytes);
    const std::string msg = message_of<FormatError>([&] { read_matrix(p); });
    EXPECT_NE(msg.find(p), std::string::npos) << msg;
    EXPECT_NE(msg.find(cases[i].what), std::string::npos) << "case " << i << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(IoErrors, NonFiniteNpyValueNamesRowAndColumn) {
  TempDir dir("io");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  // C order: element (1, 0) is NaN.
  const std::string c =
      dir.write("c.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }",
                                   le_bytes<double>({1, 2, nan, 4})));
  std::string msg = message_of<FormatError>([&] { read_matrix(c); });
  EXPECT_NE(msg.find("row 1, column 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("NaN"), std::string::npos) << msg;
  // Fortran order: storage index 1 is element (1, 0) too; float32 Inf.
  const std::string f =
      dir.write("f.npy", npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                                   le_bytes<float>({1, static_cast<float>(inf), 2, 4})));
  msg = message_of<FormatError>([&] { read_matrix(f); });
  EXPECT_NE(msg.find("row 1, column 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Inf"), std::string::npos) << msg;
}

TEST(IoErrors, WritingToAMissingDirectoryIsIoError) {
  TempDir dir("io");
  RowMatrix m(1, 1);
  m << 1;
  EXPECT_THROW(write_npy(dir.file("no/such/dir/m.npy"), m), IoError);
  EXPECT_THROW(write_csv(dir.file("no/such/dir/m.csv"), m), IoError);
}

TEST(ParseRows, ParsesListsAndRanges) {
  EXPECT_EQ(parse_rows("3,10-12", 20), (std::vector<TokenId>{3, 10, 11, 12}));
  EXPECT_EQ(parse_rows(" 12 , 3 ,3, 11-12 ", 20), (std::vector<TokenId>{3, 11, 12}));
  EXPECT_EQ(parse_rows("0", 1), (std::vector<TokenId>{0}));
  EXPECT_EQ(parse_rows("4-4", 5), (std::vector<TokenId>{4}));
  EXPECT_EQ(parse_rows("0-999", 1000).size(), 1000u);
}

TEST(ParseRows, BadItemsAreInvalidArgumentNamingTheItem) {
  struct Case {
    std::string spec;
    std::string item;  // must appear in the message
  };
  const std::vector<Case> cases = {
      {"", "empty"},
      {"1,,2", "empty"},
      {"5-3", "'5-3'"},
      {"-1", "'-1'"},
      {"1,-2", "'-2'"},
      {"10", "'10'"},
      {"3,9-10", "'9-10'"},
      {"abc", "'abc'"},
      {"1.5", "'1.5'"},
      {"1-2-3", "'1-2-3'"},
      {"2-", "'2-'"},
      {"0x3", "'0x3'"},
      {"99999999999999999999", "out of range"},
  };
  for (const auto& c : cases) {
    const std::string msg = message_of<InvalidArgument>([&] { parse_rows(c.spec, 10); });
    EXPECT_NE(msg.find(c.item), std::string::npos) << "'" << c.spec << "' -> " << msg;
  }
  // Reversed ranges say so.
  EXPECT_NE(message_of<InvalidArgument>([] { parse_rows("5-3", 10); }).find("reversed"),
            std::string::npos);
  EXPECT_NE(message_of<InvalidArgument>([] { parse_rows("10", 10); }).find("out of range"),
            std::string::npos);
}

TEST(StateJson, FieldNamesAreExact) {
  State s;
  s.settings.kernel.type = KernelType::kPoly;
  s.settings.kernel.degree = 3;
  s.settings.C = 0.25;
  s.dim = 2;
  s.ids = {0, 2, 5};
  s.alpha = {0.25, 0.1 + 0.2, 1.0 - 0.25 - (0.1 + 0.2)};
  s.b = -1.0 / 3.0;
  s.partition.error = {0};
  s.partition.margin = {2, 5};
  s.status = Status::kOptimal;
  s.state_sha256 = std::string(64, 'a');
  const nlohmann::json j = state_to_json(s);
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"n", "dim", "settings", "status", "warmup", "ids", "alpha",
                                         "b", "partition", "kkt", "state_sha256"}));
  std::set<std::string> settings;
  for (const auto& [k, v] : j["settings"].items()) settings.insert(k);
  EXPECT_EQ(settings,
            (std::set<std::string>{"kernel", "bandwidth", "degree", "coef0", "C", "ridge"}));
  std::set<std::string> partition;
  for (const auto& [k, v] : j["partition"].items()) partition.insert(k);
  EXPECT_EQ(partition, (std::set<std::string>{"margin", "error", "reserve"}));
  std::set<std::string> kkt;
  for (const auto& [k, v] : j["kkt"].items()) kkt.insert(k);
  EXPECT_EQ(kkt, (std::set<std::string>{"max_violation", "sum_error", "box_violation"}));
  EXPECT_EQ(j["settings"]["kernel"], "poly");
  EXPECT_EQ(j["settings"]["degree"], 3);
  EXPECT_EQ(j["n"], 3);
  EXPECT_EQ(j["ids"], (std::vector<TokenId>{0, 2, 5}));
  EXPECT_EQ(j["partition"]["margin"], (std::vector<TokenId>{2, 5}));
  EXPECT_EQ(j["partition"]["reserve"].size(), 0u);
  // Doubles survive a dump/parse round trip bit for bit.
  const nlohmann::json back = nlohmann::json::parse(j.dump(2));
  for (std::size_t i = 0; i < s.alpha.size(); ++i) {
    EXPECT_EQ(back["alpha"][i].get<double>(), s.alpha[i]);
  }
  EXPECT_EQ(back["b"].get<double>(), s.b);
}

}  // namespace
}  // namespace svattn
