#include "core/json_input.h"

#include <gtest/gtest.h>

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

TEST(JsonReaderTest, NotAnObject) { EXPECT_THROW(JsonReader(json::array(), "x.json"), InputError); }

}  // namespace
}  // namespace shardsim
