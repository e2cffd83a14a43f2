// The JSON reader: escapes, surrogate pairs, exact integers, member order, depth limit, errors.
#define LLMINFER_IMPLEMENTATION
#include "common.hpp"

using llminfer::detail::Json;
using llminfer::detail::json_parse;
using llminfer::detail::json_quote;

TEST_CASE("json: values, escapes and surrogate pairs") {
  auto j = json_parse(
      R"({"a": [1, -2.5e3, true, false, null], "s": "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00", "big": 9007199254740993})",
      "t");
  REQUIRE(j);
  CHECK(j->members.size() == 3);
  CHECK(j->members[0].first == "a");
  CHECK((*j)["a"][0].is_int);
  CHECK((*j)["a"][0].i == 1);
  CHECK((*j)["a"][1].num == -2500.0);
  CHECK((*j)["a"][2].as_bool() == true);
  CHECK((*j)["a"][4].is_null());
  CHECK((*j)["s"].str == "x\"\\/\b\f\n\r\t\xC3\xA9\xF0\x9F\x98\x80");
  CHECK((*j)["big"].i == 9007199254740993LL);  // exact, not rounded through a double
  CHECK((*j)["missing"].is_null());
}

TEST_CASE("json: lone surrogates become U+FFFD") {
  auto j = json_parse(R"(["\ud800x", "\udc00"])", "t");
  REQUIRE(j);
  CHECK((*j)[0].str == "\xEF\xBF\xBDx");
  CHECK((*j)[1].str == "\xEF\xBF\xBD");
}

TEST_CASE("json: malformed input is an error naming the place") {
  const char* bad[] = {"",        "{",         "[1,]",         "{\"a\" 1}",       "\"abc",      "01",
                       "1.",      "-",         "tru",          "[1] x",           "{\"a\":1,}", "\"\x01\"",
                       "\"\\x\"", "\"\\u12\"", "\"\xC3\x28\"", "\"\xED\xA0\x80\""};
  for (const char* s : bad) {
    auto j = json_parse(s, "bad.json");
    CHECK_MESSAGE(!j, s);
    if (!j) CHECK(j.error().message.find("bad.json: invalid JSON at line 1") == 0);
  }
  auto j = json_parse("{\n  \"a\": [1,\n  2,,]\n}", "x.json");
  REQUIRE(!j);
  CHECK(j.error().message.find("line 3, column 5") != std::string::npos);
}

TEST_CASE("json: nesting is limited, not a stack overflow") {
  std::string deep(100000, '[');
  auto j = json_parse(deep, "deep.json");
  REQUIRE(!j);
  CHECK(j.error().message.find("nested too deeply") != std::string::npos);
  std::string ok = std::string(100, '[') + std::string(100, ']');
  CHECK(json_parse(ok, "ok.json"));
}

TEST_CASE("json: quoting keeps non-ASCII raw and escapes controls") {
  CHECK(json_quote("a\"b\\c\n\x01\xC3\xA9") == "\"a\\\"b\\\\c\\n\\u0001\xC3\xA9\"");
  CHECK(json_quote("\xFF") == "\"\xEF\xBF\xBD\"");  // invalid UTF-8 never reaches the output
}
