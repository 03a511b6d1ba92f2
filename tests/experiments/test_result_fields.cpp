// The field tables of typed results (src/experiments/framework/json_fields.h): every
// kind of row writes its key once and reads it back, and a missing or mistyped key is a
// FormatError naming the key and the struct.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "svattn/errors.h"
#include "experiments/framework/json_fields.h"

namespace ex = svattn::experiments;
using nlohmann::json;

namespace {

struct Inner {
  std::string name;
  double x = 0;
};

struct Outer {
  int n = 0;
  double mean = 0;
  double deviation = 0;
  double zero_a = 0, zero_b = 0;
  Inner best;
  std::vector<Inner> inners;
  std::string status = "ok";
  std::optional<double> share;
  long extra = 0;
  std::vector<double> older;
};

const ex::JsonFields<Inner>& inner_fields() {
  static const ex::JsonFields<Inner> t = {ex::json_member<Inner>("name", &Inner::name),
                                          ex::json_number_or_nan<Inner>("x", &Inner::x)};
  return t;
}

const ex::JsonFields<Outer>& outer_fields() {
  static const ex::JsonFields<Outer> t = {
      ex::json_member<Outer>("n", &Outer::n),
      ex::json_number_or_nan<Outer>("mean", &Outer::mean),
      ex::json_number_or_null<Outer>("deviation", &Outer::deviation,
                                     std::numeric_limits<double>::infinity()),
      ex::json_group<Outer>("zero",
                            {ex::json_member<Outer>("a", &Outer::zero_a),
                             ex::json_member<Outer>("b", &Outer::zero_b)},
                            "test outer zero"),
      ex::json_struct<Outer>("best", &Outer::best, inner_fields, "test inner"),
      ex::json_struct_array<Outer>("inners", &Outer::inners, inner_fields, "test inner"),
      ex::json_checked(ex::json_member<Outer>("status", &Outer::status),
                       [](const Outer& o) {
                         if (o.status != "ok") throw svattn::FormatError("test outer: bad status");
                       }),
      ex::json_optional_member<Outer>("share", &Outer::share),
      ex::json_optional(ex::json_member<Outer>("extra", &Outer::extra),
                        [](const Outer& o) { return o.extra > 0; }),
      ex::json_optional(ex::json_member<Outer>("older", &Outer::older)),
      ex::json_written_only<Outer>("twice_n", [](const Outer& o) { return json(2 * o.n); })};
  return t;
}

Outer sample() {
  Outer o;
  o.n = 3;
  o.mean = std::nan("");
  o.deviation = std::numeric_limits<double>::infinity();
  o.zero_a = 1.5;
  o.zero_b = -2;
  o.best = {"b", 0.25};
  o.inners = {{"p", 1}, {"q", std::nan("")}};
  o.share = 0.5;
  o.older = {1, 2};
  return o;
}

std::string error_of(const json& j) {
  try {
    ex::read_fields(outer_fields(), j, "test outer");
  } catch (const svattn::FormatError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ResultFields, EveryKindOfRowRoundTripsToTheSameJson) {
  const json j = ex::write_fields(outer_fields(), sample());
  EXPECT_TRUE(j.at("mean").is_null());
  EXPECT_EQ(j.at("zero").dump(), R"({"a":1.5,"b":-2.0})");
  EXPECT_EQ(j.at("twice_n"), 6);
  EXPECT_FALSE(j.contains("extra"));  // written only when it applies
  const Outer o = ex::read_fields(outer_fields(), json::parse(j.dump()), "test outer");
  EXPECT_TRUE(std::isnan(o.mean));
  EXPECT_EQ(o.deviation, std::numeric_limits<double>::infinity());  // null read back as +inf
  EXPECT_EQ(o.best.name, "b");
  ASSERT_EQ(o.inners.size(), 2u);
  EXPECT_TRUE(std::isnan(o.inners[1].x));
  EXPECT_EQ(o.share, 0.5);
  EXPECT_EQ(ex::write_fields(outer_fields(), o).dump(), j.dump());
}

TEST(ResultFields, OptionalKeysMayBeAbsent) {
  json j = ex::write_fields(outer_fields(), sample());
  j.erase("share");
  j.erase("older");
  j.erase("twice_n");
  const Outer o = ex::read_fields(outer_fields(), j, "test outer");
  EXPECT_FALSE(o.share);
  EXPECT_TRUE(o.older.empty());
}

TEST(ResultFields, AMissingOrMistypedKeyNamesTheKeyAndTheStruct) {
  const json good = ex::write_fields(outer_fields(), sample());
  json j = good;
  j.erase("n");
  EXPECT_EQ(error_of(j), "test outer: missing field `n`");
  j = good;
  j["mean"] = "x";
  EXPECT_EQ(error_of(j), "test outer: field `mean` has the wrong type");
  j = good;
  j["zero"].erase("b");
  EXPECT_EQ(error_of(j), "test outer zero: missing field `b`");
  j = good;
  j.erase("zero");
  EXPECT_EQ(error_of(j), "test outer: missing field `zero`");
  j = good;
  j["best"]["x"] = true;
  EXPECT_EQ(error_of(j), "test inner: field `x` has the wrong type");
  j = good;
  j["inners"][1].erase("name");
  EXPECT_EQ(error_of(j), "test inner: missing field `name`");
  j = good;
  j["inners"] = 7;
  EXPECT_EQ(error_of(j), "test outer: field `inners` has the wrong type");
  j = good;
  j["share"] = "half";
  EXPECT_EQ(error_of(j), "test outer: field `share` has the wrong type");
  j = good;
  j["status"] = "bad";
  EXPECT_EQ(error_of(j), "test outer: bad status");
  EXPECT_EQ(error_of(json::array()), "test outer: not a JSON object");
}
