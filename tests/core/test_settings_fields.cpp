// The settings field tables: every field round-trips through JSON and command-line text, a bad
// value is refused naming the field, and the messages are the documented ones.
#include <gtest/gtest.h>

#include "svattn/errors.h"
#include "svattn/settings_fields.h"

namespace svattn {
namespace {

// A value of the field's type that differs from `v` and is still valid.
FieldValue other_valid(const FieldSpec& f, const FieldValue& v) {
  if (!f.range.choices.empty()) {
    for (const auto& c : f.range.choices)
      if (FieldValue(c) != v) return c;
  }
  switch (f.type) {
    case FieldType::kBool: return !std::get<bool>(v);
    case FieldType::kInt: return std::get<std::int64_t>(v) + 1;
    case FieldType::kUInt: return std::get<std::uint64_t>(v) + 7;
    case FieldType::kNumber: return std::get<double>(v) * 0.5;
    case FieldType::kText: return std::get<std::string>(v) + "x";
  }
  return v;
}


std::string message(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SettingsFields, EveryMemoryFieldRoundTripsThroughJsonAndText) {
  const auto& table = memory_settings_fields();
  ASSERT_EQ(table.size(), 14u);  // the 14 fields of the memory file's settings block
  for (const auto& f : table) {
    SCOPED_TRACE(f.name);
    MemorySettings s;
    const FieldValue changed = other_valid(f, f.get(s));
    f.set(s, changed);
    EXPECT_EQ(f.get(s), changed);
    const MemorySettings back = fields_from_json(table, fields_to_json(table, s), MemorySettings{});
    for (const auto& g : table) EXPECT_EQ(g.get(back), g.get(s)) << g.name;
    EXPECT_EQ(parse_field(f, exact_text(changed)), changed);
    EXPECT_FALSE(f.doc.empty());
  }
}

TEST(SettingsFields, ABadValueIsRefusedNamingTheField) {
  EXPECT_EQ(message([] { ProblemSettings p; p.C = -1; p.validate(); }), "C must be finite and > 0, got -1");
  EXPECT_EQ(message([] { Tolerances t; t.alpha_tol = 0.1; t.validate(); }),
            "tolerances.alpha_tol must be in (0, 1e-3), got 0.1");
  EXPECT_EQ(message([] { KernelSettings k; k.type = KernelType::kPoly; k.degree = 0; k.validate(); }),
            "kernel.degree must be in [1, 64], got 0");
  EXPECT_EQ(message([] { MemorySettings m; m.schur_tol = 1; m.validate(); }), "schur_tol must be in (0, 1e-2), got 1");
  EXPECT_EQ(message([] { MemorySettings m; m.refactor_period = 0; m.validate(); }),
            "refactor_period must be >= 1, got 0");
  // The rbf-only and poly-only rows apply to their kernel only.
  KernelSettings linear;
  linear.type = KernelType::kLinear;
  linear.bandwidth = -1;
  linear.degree = 0;
  EXPECT_NO_THROW(linear.validate());
  EXPECT_NE(message([] { KernelSettings k; k.bandwidth = 1e-200; k.validate(); }).find("kernel.bandwidth must be"),
            std::string::npos);
  // Text that is not of the field's type, and a value that does not fit the member.
  const auto& table = memory_settings_fields();
  EXPECT_EQ(message([&] { parse_field(*find_field(table, "refactor_period"), "1.5"); }),
            "refactor_period must be an integer, got '1.5'");
  EXPECT_NE(message([&] {
              MemorySettings m;
              find_field(table, "refactor_period")->set(m, std::int64_t{1} << 40);
            }).find("refactor_period must be an integer in"),
            std::string::npos);
  EXPECT_NE(message([&] {
              MemorySettings m;
              find_field(table, "mode")->set(m, std::string("eager"));
            }).find("eager"),
            std::string::npos);
}

TEST(SettingsFields, JsonOfAnotherTypeOrAMissingKeyIsAFormatError) {
  const auto& table = memory_settings_fields();
  auto j = fields_to_json(table, MemorySettings{});
  j["schur_tol"] = "small";
  EXPECT_THROW(fields_from_json(table, j, MemorySettings{}), FormatError);
  j = fields_to_json(table, MemorySettings{});
  j.erase("mode");
  EXPECT_THROW(fields_from_json(table, j, MemorySettings{}), FormatError);
}

}  // namespace
}  // namespace svattn
