#include "data/json/json.h"

#include <gtest/gtest.h>

#include "kernels/core/error.h"

namespace amor::json {
namespace {

TEST(Json, ParsesAndKeepsObjectOrder) {
  Value v = parse(R"({"b": [1, -2.5e1, true, null], "a": {"x": "y\n\u00e9\ud83d\ude00"}})");
  const Object& o = v.as_object();
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(o[0].first, "b");
  EXPECT_EQ(o[1].first, "a");
  const Array& b = v.at("b").as_array();
  EXPECT_EQ(b[0].as_int(), 1);
  EXPECT_DOUBLE_EQ(b[1].as_double(), -25.0);
  EXPECT_TRUE(b[2].as_bool());
  EXPECT_TRUE(b[3].is_null());
  EXPECT_EQ(v.at("a").at("x").as_string(), "y\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(v.find("zz"), nullptr);
}

TEST(Json, DumpRoundTrips) {
  std::string text = R"({"k":[1,2.5,"a\"b",false,null,{"n":-3}]})";
  EXPECT_EQ(parse(text).dump(), text);
  EXPECT_EQ(parse(parse(text).dump()).dump(), text);
}

TEST(Json, LargeIntegersStayExact) {
  EXPECT_EQ(parse("1524025472").as_int(), 1524025472);
  EXPECT_EQ(parse("281474976710656").as_int(), 281474976710656);
  EXPECT_THROW(parse("1.5").as_int(), Error);
}

TEST(Json, ErrorsNameSourceLineAndColumn) {
  try {
    parse("{\n  \"a\" 1\n}", "cfg.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cfg.json:2:7: expected ':' after an object key");
  }
  EXPECT_THROW(parse("[1, 2"), Error);
  EXPECT_THROW(parse("\"abc"), Error);
  EXPECT_THROW(parse("{} x"), Error);
  EXPECT_THROW(parse("\"\\ud800\""), Error);
  EXPECT_THROW(parse_file("/nonexistent/file.json"), Error);
  try {
    parse("{\"a\": 1}").at("a").as_string("key 'a'");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "json: key 'a' should be a string, found a number");
  }
}

}  // namespace
}  // namespace amor::json
