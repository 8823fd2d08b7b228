#include "core/json_input.h"

#include <gtest/gtest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace shardsim {
namespace {

using nlohmann::json;

TEST(ParseJsonTextTest, ReportsLineAndColumn) {
  try {
    ParseJsonText("{\n  \"a\": 1,\n  \"b\": ]\n}", "f.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "f.json:3:8");
    EXPECT_NE(std::string(e.what()).find("malformed JSON"), std::string::npos);
  }
}

// The error of `text` parsed as "f.json" (fails the test when it parses).
InputError ParseError(const std::string& text) {
  try {
    ParseJsonText(text, "f.json");
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e;
  }
  ADD_FAILURE() << "parsed: " << text;
  return InputError("", "");
}

TEST(ParseJsonTextTest, NumberOutOfRangeNamesFieldAndLine) {
  const InputError e = ParseError("{\n  \"mesh\": {\"data\": 2},\n  \"hidden_size\": 1e999\n}");
  EXPECT_EQ(e.where(), "f.json:/hidden_size");
  EXPECT_EQ(e.problem(), "number 1e999 (line 3, column 18) is out of range");
  EXPECT_NE(e.valid().find("finite"), std::string::npos);
  EXPECT_EQ(ParseError("{\"a\": {\"b~/\": [1, 2, -1e999]}}").where(), "f.json:/a/b~0~1/2");
  EXPECT_EQ(ParseError("[{}, [1E400]]").where(), "f.json:/1/0");
  EXPECT_EQ(ParseError("1e999").where(), "f.json:/");
  // Underflow is a number (0), not an error; so is an integer past 64 bits (a float).
  EXPECT_EQ(ParseJsonText("{\"a\": 1e-999, \"b\": 99999999999999999999}", "f.json")["a"], 0.0);
}

TEST(ParseJsonTextTest, DeepNestingIsRefusedWithItsPosition) {
  const InputError e = ParseError("{\"a\":\n" + std::string(100000, '[') + std::string(100000, ']') + "}");
  EXPECT_EQ(e.where(), "f.json:2:64");  // the bracket that opens level 65
  EXPECT_NE(e.problem().find("deeper than 64"), std::string::npos);
  EXPECT_NO_THROW(ParseJsonText(std::string(64, '[') + std::string(64, ']'), "f.json"));
}

TEST(ParseJsonTextTest, DuplicateKeyIsNamed) {
  const InputError e = ParseError("{\"mesh\": {\"data\": 2, \"data\": 4}}");
  EXPECT_EQ(e.where(), "f.json:/mesh/data");
  EXPECT_NE(e.problem().find("'data' appears twice"), std::string::npos);
}

TEST(ParseJsonTextTest, InvalidUtf8IsOneLineOfText) {
  const InputError e = ParseError("{\n\"name\": \"a\xff\"}");
  EXPECT_EQ(e.where().substr(0, 8), "f.json:2");
  for (const char c : std::string(e.what())) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << e.what();
  EXPECT_EQ(ParseError("{} trailing").where(), "f.json:1:6");  // the 'a' that cannot continue "true"
  EXPECT_EQ(ParseError("").where(), "f.json:1:1");
}

TEST(JsonReaderTest, UnknownKeyNamesClosestKnown) {
  const json j = {{"num_layer", 4}};
  JsonReader r(j, "m.json");
  EXPECT_EQ(r.IntOr("num_layers", 2, 1, 10), 2);
  try {
    r.Finish();
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "m.json:/num_layer");
    EXPECT_NE(e.problem().find("did you mean 'num_layers'"), std::string::npos);
  }
}

TEST(JsonReaderTest, TypesAndRanges) {
  const json j = {{"s", "x"}, {"n", -3}, {"f", 2.5}, {"w", 4096.0}, {"big", 18446744073709551615ull}, {"b", 1}};
  JsonReader r(j, "p.json");
  EXPECT_THROW(r.Int("s", 1, 10), InputError);
  EXPECT_THROW(r.Int("n", 1, 10), InputError);
  EXPECT_THROW(r.Int("f", 1, 10), InputError);
  EXPECT_EQ(r.Int("w", 1, 10000), 4096);
  EXPECT_THROW(r.Int("big", 1, 1 << 20), InputError);
  EXPECT_THROW(r.Bool("b"), InputError);
  EXPECT_THROW(r.Int("missing", 1, 10), InputError);
  EXPECT_THROW(r.Enum("s", {"a", "b"}), InputError);
}

TEST(JsonReaderTest, NestedPointerInWhere) {
  const json j = {{"mesh", {{"tensor", 0}}}};
  JsonReader r(j, "plan.json");
  auto mesh = r.Object("mesh");
  ASSERT_TRUE(mesh.has_value());
  try {
    mesh->Int("tensor", 1, 100);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "plan.json:/mesh/tensor");
    EXPECT_NE(e.problem().find("must be positive"), std::string::npos);
  }
}

// A missing key names what it takes, as a wrong value does.
TEST(JsonReaderTest, MissingKeyNamesWhatIsValid) {
  const json j = json::object();
  JsonReader r(j, "p.json");
  auto valid_of = [](const std::function<void()>& read) {
    try {
      read();
    } catch (const InputError& e) {
      EXPECT_NE(e.problem().find("missing required key"), std::string::npos) << e.what();
      return e.valid();
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(valid_of([&] { r.Int("seq_len", 1, 1024); }), "1 to 1024");
  EXPECT_EQ(valid_of([&] { r.Enum("dtype", {"bf16", "fp8"}); }), "bf16, fp8");
  EXPECT_EQ(valid_of([&] { r.Bool("flag"); }), "true, false");
  EXPECT_EQ(valid_of([&] { r.Number("x", 0, 1); }), "0 to 1");
}

// An unknown enum value: a near spelling is its hint; a value near none points to the docs.
TEST(JsonReaderTest, UnknownEnumValueCarriesAHint) {
  const json j = {{"near", "bf61"}, {"far", "zzzz"}};
  JsonReader r(j, "p.json");
  r.SetFieldDocs("docs/cli.md, Plan JSON");
  auto error_of = [](const std::function<void()>& read) {
    try {
      read();
    } catch (const InputError& e) {
      return std::make_pair(e.problem(), e.hint());
    }
    return std::make_pair(std::string("(no error)"), std::string());
  };
  const auto [near_problem, near_hint] = error_of([&] { r.Enum("near", {"bf16", "fp8"}); });
  EXPECT_NE(near_problem.find("did you mean 'bf16'"), std::string::npos) << near_problem;
  EXPECT_TRUE(near_hint.empty()) << near_hint;
  const auto [far_problem, far_hint] = error_of([&] { r.Enum("far", {"bf16", "fp8"}); });
  EXPECT_EQ(far_problem.find("did you mean"), std::string::npos) << far_problem;
  EXPECT_NE(far_hint.find("docs/cli.md"), std::string::npos) << far_hint;
}

TEST(JsonReaderTest, NotAnObject) { EXPECT_THROW(JsonReader(json::array(), "x.json"), InputError); }

}  // namespace
}  // namespace shardsim
