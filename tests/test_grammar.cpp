// Structured output: the GBNF parser and matcher against llama.cpp's verdicts (goldens), malformed
// and hostile grammars, the JSON Schema converter, the token masks against a brute-force check,
// and constrained generation with temperature sampling on random-weight models, whose outputs are
// checked by validators written here (a recognizer over the grammar's syntax tree, our JSON parser
// plus a schema check), never by the matcher that produced them.
#define LLMINFER_IMPLEMENTATION
#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "common.hpp"

using llminfer::GenerateOptions;
using llminfer::GenerateResult;
using llminfer::Model;
using llminfer::StopReason;
using llminfer::detail::GbnfExpr;
using llminfer::detail::GbnfGrammar;
using llminfer::detail::GrammarMatcher;
using llminfer::detail::GrammarVerdict;
using llminfer::detail::Json;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
std::string data_path(const std::string& rel) {
  return test::source_dir() + "/tests/data/grammar/" + rel;
}

std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

// ---- an independent recognizer: sets of end positions over the syntax tree, on code points ----
class Recognizer {
 public:
  explicit Recognizer(const GbnfGrammar& g) : g_(g) {}

  bool matches(const std::string& text) {
    cps_.clear();
    memo_.clear();
    for (size_t i = 0; i < text.size();) {
      const auto* p = reinterpret_cast<const unsigned char*>(text.data());
      if (llminfer::detail::utf8_valid_len(p + i, text.size() - i) == 0) return false;
      cps_.push_back(llminfer::detail::utf8_next(text, i));
    }
    auto ends = rule(g_.root, 0);
    return ends.count(cps_.size()) > 0;
  }

 private:
  using Ends = std::set<size_t>;

  const Ends& rule(int32_t r, size_t at) {
    auto key = std::make_pair(r, at);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    Ends out;
    for (const auto& seq : g_.rules[static_cast<size_t>(r)].alts) {
      Ends e = sequence(seq, Ends{at});
      out.insert(e.begin(), e.end());
    }
    return memo_[key] = out;
  }
  Ends sequence(const std::vector<GbnfExpr>& seq, Ends from) {
    for (const auto& e : seq) {
      Ends next;
      for (size_t p : from) {
        Ends x = expr(e, p);
        next.insert(x.begin(), x.end());
      }
      from = std::move(next);
      if (from.empty()) break;
    }
    return from;
  }
  bool in_class(const GbnfExpr& e, uint32_t c) const {
    bool in = false;
    for (auto [lo, hi] : e.ranges) in = in || (c >= lo && c <= hi);
    return in != e.negated;
  }
  Ends expr(const GbnfExpr& e, size_t at) {
    using K = GbnfExpr::Kind;
    switch (e.kind) {
      case K::literal: {
        if (at + e.chars.size() > cps_.size()) return {};
        for (size_t k = 0; k < e.chars.size(); k++)
          if (cps_[at + k] != e.chars[k]) return {};
        return {at + e.chars.size()};
      }
      case K::char_class:
        if (at < cps_.size() && in_class(e, cps_[at])) return {at + 1};
        return {};
      case K::any: return at < cps_.size() ? Ends{at + 1} : Ends{};
      case K::rule: return rule(e.rule, at);
      case K::group: {
        Ends out;
        for (const auto& seq : e.alts) {
          Ends x = sequence(seq, Ends{at});
          out.insert(x.begin(), x.end());
        }
        return out;
      }
      case K::repeat: {
        Ends cur{at}, all;
        const auto& child = e.alts[0];
        for (uint32_t k = 0; k < e.min && !cur.empty(); k++) cur = sequence(child, cur);
        all = cur;
        for (uint32_t k = e.min; k < e.max && !cur.empty(); k++) {
          Ends next = sequence(child, cur), fresh;
          for (size_t p : next)
            if (all.insert(p).second) fresh.insert(p);
          cur = e.max == GbnfExpr::kUnbounded ? fresh : next;  // unbounded: until nothing new
        }
        return all;
      }
    }
    return {};
  }

  const GbnfGrammar& g_;
  std::vector<uint32_t> cps_;
  std::map<std::pair<int32_t, size_t>, Ends> memo_;
};

// ---- a JSON Schema check (the subset the converter supports; objects: declared keys only) ----
bool json_equal(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) return a.num == b.num;
  if (a.type != b.type) return false;
  switch (a.type) {
    case Json::Type::null: return true;
    case Json::Type::boolean: return a.boolean == b.boolean;
    case Json::Type::string: return a.str == b.str;
    case Json::Type::array:
      if (a.items.size() != b.items.size()) return false;
      for (size_t i = 0; i < a.items.size(); i++)
        if (!json_equal(a.items[i], b.items[i])) return false;
      return true;
    case Json::Type::object:
      if (a.members.size() != b.members.size()) return false;
      for (const auto& m : a.members)
        if (!b.find(m.first) || !json_equal(m.second, *b.find(m.first))) return false;
      return true;
    default: return false;
  }
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool validate(const Json& v, const Json& s, const Json& root, std::string& why) {
  if (s.is_bool()) return s.boolean || (why = "schema false", false);
  if (const Json* ref = s.find("$ref")) {
    std::string p = ref->str;
    const Json* cur = &root;
    size_t i = 2;  // "#/"
    while (p.size() > 1 && i < p.size()) {
      size_t e = p.find('/', i);
      cur = cur->find(p.substr(i, e == std::string::npos ? std::string::npos : e - i));
      if (!cur) return why = "bad ref", false;
      if (e == std::string::npos) break;
      i = e + 1;
    }
    return validate(v, *cur, root, why);
  }
  if (const Json* any = s.find("anyOf")) {
    for (const auto& b : any->items)
      if (validate(v, b, root, why)) return true;
    return why = "no anyOf branch", false;
  }
  if (const Json* c = s.find("const"))
    if (!json_equal(v, *c)) return why = "const", false;
  if (const Json* en = s.find("enum")) {
    bool found = false;
    for (const auto& x : en->items) found = found || json_equal(v, x);
    if (!found) return why = "not in enum", false;
  }
  if (const Json* t = s.find("type")) {
    std::vector<std::string> types;
    if (t->is_string()) types.push_back(t->str);
    for (const auto& x : t->items) types.push_back(x.str);
    bool ok = false;
    for (const auto& ty : types) {
      ok = ok || (ty == "null" && v.is_null()) || (ty == "boolean" && v.is_bool()) ||
           (ty == "string" && v.is_string()) || (ty == "number" && v.is_number()) || (ty == "array" && v.is_array()) ||
           (ty == "object" && v.is_object()) || (ty == "integer" && v.is_number() && v.num == std::floor(v.num));
    }
    if (!ok) return why = "type", false;
  }
  if (v.is_string()) {
    size_t n = code_points(v.str);
    if (s.find("minLength") && n < static_cast<size_t>(s["minLength"].as_int())) return why = "minLength", false;
    if (s.find("maxLength") && n > static_cast<size_t>(s["maxLength"].as_int())) return why = "maxLength", false;
  }
  if (v.is_array()) {
    if (s.find("minItems") && v.items.size() < static_cast<size_t>(s["minItems"].as_int()))
      return why = "minItems", false;
    if (s.find("maxItems") && v.items.size() > static_cast<size_t>(s["maxItems"].as_int()))
      return why = "maxItems", false;
    if (const Json* it = s.find("items"))
      for (const auto& x : v.items)
        if (!validate(x, *it, root, why)) return false;
  }
  if (v.is_object()) {
    const Json* props = s.find("properties");
    const Json* add = s.find("additionalProperties");
    std::set<std::string> seen;
    for (const auto& m : v.members) {
      if (!seen.insert(m.first).second) return why = "duplicate key " + m.first, false;
      const Json* ps = props ? props->find(m.first) : nullptr;
      if (ps) {
        if (!validate(m.second, *ps, root, why)) return false;
      } else if (add && add->is_object()) {
        if (!validate(m.second, *add, root, why)) return false;
      } else if ((add && add->is_bool() && !add->boolean) || props) {
        return why = "undeclared key " + m.first, false;
      }
    }
    if (const Json* req = s.find("required"))
      for (const auto& r : req->items)
        if (!v.find(r.str)) return why = "missing " + r.str, false;
    if (props) {  // declared order (what the converter promises)
      size_t last = 0;
      for (const auto& m : v.members) {
        size_t k = 0;
        while (k < props->members.size() && props->members[k].first != m.first) k++;
        if (k < last) return why = "order", false;
        last = k;
      }
    }
  }
  return true;
}

std::vector<std::string> golden_files() {
  std::vector<std::string> names = {"features.gbnf", "unicode.gbnf", "repeat.gbnf"};
  for (const char* g : {"arithmetic", "c", "chess", "english", "japanese", "json", "json_arr", "list"})
    names.push_back(std::string("llama.cpp/") + g + ".gbnf");
  for (const char* s : {"inventory", "map", "npc_action", "optional", "strings", "ten_fields", "tree", "unions"})
    names.push_back(std::string("schemas/") + s + ".json");
  return names;
}

std::string grammar_of(const std::string& rel) {
  std::string text = slurp(data_path(rel));
  if (rel.size() > 5 && rel.substr(rel.size() - 5) == ".json") {
    auto g = llminfer::json_schema_to_grammar(text);
    return g ? *g : std::string();
  }
  return text;
}

std::string error_of(std::string_view gbnf) {
  auto r = llminfer::check_grammar(gbnf);
  return r ? std::string() : r.error().message;
}

bool have_fixture(const std::string& name) {
  return std::ifstream(test::model_path(name)).good();
}

}  // namespace

TEST_CASE("grammar: llama.cpp's verdicts on 3,700 inputs over 19 grammars and schemas (goldens)") {
  size_t total = 0;
  for (const auto& rel : golden_files()) {
    CAPTURE(rel);
    std::string gbnf = grammar_of(rel);
    auto core = llminfer::detail::compile_grammar(gbnf);
    REQUIRE_MESSAGE(core, (core ? "" : core.error().message));
    GrammarMatcher m(*core);
    std::string golden = rel;
    for (size_t p; (p = golden.find('/')) != std::string::npos;) golden.replace(p, 1, "__");
    std::ifstream f(test::source_dir() + "/tests/goldens/grammar/" + golden + ".txt");
    REQUIRE(f.good());
    std::string line;
    size_t n = 0, kinds[3] = {0, 0, 0};
    while (std::getline(f, line)) {
      if (line.empty() || line[0] == '#') continue;
      size_t sp = line.find(' ');
      std::string expect = line.substr(0, sp), text = unhex(sp == std::string::npos ? "" : line.substr(sp + 1));
      auto v = llminfer::detail::grammar_match(m, text);
      REQUIRE(v);
      const char* got = *v == GrammarVerdict::complete ? "complete"
                        : *v == GrammarVerdict::prefix ? "prefix"
                                                       : "reject";
      CAPTURE(text);
      CHECK(expect == got);
      kinds[*v == GrammarVerdict::complete ? 0 : *v == GrammarVerdict::prefix ? 1 : 2]++;
      n++;
    }
    CHECK(n >= 150);
    CHECK(kinds[0] > 0);  // each verdict occurs (the goldens test something)
    CHECK(kinds[2] > 0);
    total += n;
  }
  CHECK(total > 3500);
}

TEST_CASE("grammar: the test's recognizer agrees with llama.cpp's complete matches (it is a valid judge)") {
  for (const auto& rel : golden_files()) {
    CAPTURE(rel);
    auto g = llminfer::detail::gbnf_parse(grammar_of(rel));
    REQUIRE(g);
    Recognizer rec(*g);
    std::string golden = rel;
    for (size_t p; (p = golden.find('/')) != std::string::npos;) golden.replace(p, 1, "__");
    std::ifstream f(test::source_dir() + "/tests/goldens/grammar/" + golden + ".txt");
    std::string line;
    int checked = 0;
    while (std::getline(f, line) && checked < 60) {
      if (line.empty() || line[0] == '#') continue;
      size_t sp = line.find(' ');
      std::string text = unhex(line.substr(sp + 1));
      if (text.size() > 400) continue;  // keep the set-based recognizer quick
      CAPTURE(text);
      CHECK(rec.matches(text) == (line.substr(0, sp) == "complete"));
      checked++;
    }
    CHECK(checked > 20);
  }
}

TEST_CASE("grammar: malformed grammars are refused with line, column and what is wrong") {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"root ::= \"a", "line 1, column 10: unterminated string"},
      {"root ::= [a-", "line 1, column 10: unterminated character class"},
      {"root ::= []", "line 1, column 11: empty character class"},
      {"root ::= [z-a]", "line 1, column 11: empty range"},
      {"root ::= \"\\q\"", "line 1, column 11: unknown escape '\\q'"},
      {"root ::= \"\\xZZ\"", "expected 2 hexadecimal digits"},
      {"root ::= \"\\uD800\"", "not a Unicode scalar value"},
      {"root ::= \"\\U00110000\"", "not a Unicode scalar value"},
      {"root ::= x\n", "line 1, column 10: rule 'x' is used but never defined"},
      {"root ::= \"a\"\n\nroot ::= \"b\"", "line 3, column 1: rule 'root' is defined twice (first on line 1)"},
      {"start ::= \"a\"", "there is no rule 'root'"},
      {"root := \"a\"", "line 1, column 6: expected '::='"},
      {"root ::= (\"a\" | \"b\"", "line 1, column 20: expected ')'"},
      {"root ::= \"a\" )", "line 1, column 14: expected the end of the line"},
      {"root ::= * \"a\"", "'*' follows nothing it could repeat"},
      {"root ::= \"a\"{3,1}", "the maximum is below the minimum"},
      {"root ::= \"a\"{2", "expected ',' or '}'"},
      {"root ::= \"a\"{99999999999}", "above the limit of 10000"},
      {"root ::= <think>", "token references"},
      {"root ::= \"a\"\n  | \"b\"", "line 2, column 3: expected a rule name, found '|'"},
      {"root ::= \"\xC3\"", "not valid UTF-8"},
      {"root ::= \"a\"\n\xE2\x82\xAC ::= \"b\"", "line 2, column 1: expected a rule name, found '\xE2\x82\xAC'"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    std::string e = error_of(c.text);
    CHECK_MESSAGE(e.find(c.message) != std::string::npos, e);
  }
  // nested too deep, text too large
  std::string deep = "root ::= " + std::string(150, '(') + "\"a\"" + std::string(150, ')');
  CHECK(error_of(deep).find("nested deeper than") != std::string::npos);
  std::string big = "root ::= \"" + std::string(2u << 20, 'a') + "\"";
  CHECK(error_of(big).find("LLMINFER_GRAMMAR_MAX_BYTES") != std::string::npos);
  // a grammar that expands past the element limit is refused while compiling, not allocated
  std::string wide = "root ::=";
  for (int i = 0; i < 30; i++) wide += " \"x\"{0,10000}";  // 30 x 10000 optional copies
  CHECK(error_of(wide).find("LLMINFER_GRAMMAR_MAX_ELEMENTS") != std::string::npos);
  // nested counts are fine: each level is one rule of references (the string is 8 * 10^16 bytes)
  CHECK(error_of("root ::= ((((\"abcdefgh\"{10000}){10000}){10000}){10000})") == "");
  // llama.cpp's syntax details that are accepted: CRLF line ends, a newline after '|', comments
  CHECK(error_of("root ::= \"a\" |\r\n  \"b\" # c\r\nx ::= \"y\"\r\n") == "");
}

TEST_CASE("grammar: left recursion is refused, naming the rules of the cycle") {
  std::string e = error_of("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]");
  CHECK(e.find("left recursion: 'expr' -> 'expr'") != std::string::npos);
  e = error_of("root ::= a\na ::= b \"x\"\nb ::= \"y\"? a");  // through a nullable prefix
  CHECK(e.find("left recursion") != std::string::npos);
  CHECK(e.find("'a'") != std::string::npos);
  CHECK(e.find("'b'") != std::string::npos);
  // a repetition of something that may be empty recurses without input too
  e = error_of("root ::= (\"a\"?)*");
  CHECK(e.find("left recursion") != std::string::npos);
  CHECK(e.find("repetition at 1:10") != std::string::npos);
  // right recursion is fine (and runs in constant stack depth)
  auto core = llminfer::detail::compile_grammar("root ::= \"a\" root | \"b\"");
  REQUIRE(core);
  GrammarMatcher m(*core);
  auto v = llminfer::detail::grammar_match(m, std::string(100000, 'a') + "b");
  REQUIRE(v);
  CHECK(*v == GrammarVerdict::complete);
}

TEST_CASE("grammar: a grammar no string matches is an error; alternatives that never finish are dropped") {
  CHECK(error_of("root ::= a\na ::= \"x\" a").find("no string matches") != std::string::npos);
  CHECK(error_of("root ::= [^\\x00-\\U0010FFFF]").find("no string matches") != std::string::npos);
  CHECK(error_of("root ::= [\\uE000-\\uE000] & ").find("expected the end of the line") != std::string::npos);
  auto core = llminfer::detail::compile_grammar("root ::= \"ok\" | loop\nloop ::= \"x\" loop");
  REQUIRE(core);
  GrammarMatcher m(*core);
  CHECK(*llminfer::detail::grammar_match(m, "x") == GrammarVerdict::reject);  // 'x' could never finish
  CHECK(*llminfer::detail::grammar_match(m, "ok") == GrammarVerdict::complete);
}

TEST_CASE("grammar: hostile grammars are bounded: ambiguity and cache limits give errors, not hangs") {
  // every 'a' may end any of thousands of nested optional frames: more stacks than the limit
  auto core = llminfer::detail::compile_grammar("root ::= x{9000} x{9000}\nx ::= \"a\"?");
  REQUIRE(core);
  GrammarMatcher m(*core);
  auto s = m.start();
  CHECK(!s);
  if (!s) CHECK(s.error().message.find("LLMINFER_GRAMMAR_MAX_STACKS") != std::string::npos);
  // a long input through a big grammar keeps the matcher's memory bounded by compaction
  auto json = llminfer::detail::compile_grammar(slurp(data_path("llama.cpp/json.gbnf")));
  REQUIRE(json);
  GrammarMatcher j(*json);
  auto st = j.start();
  REQUIRE(st);
  int32_t state = *st;
  std::string text = "{\"k\": [";
  for (int i = 0; i < 3000; i++)
    text += (i ? "," : "") + std::string("{\"a\":[1,2,{\"b\":\"") + std::to_string(i) + "\"}]}";
  size_t peak = 0;
  for (unsigned char c : text) {
    auto n = j.next(state, c);
    REQUIRE(n);
    state = *n;
    REQUIRE(state >= 0);
    peak = std::max(peak, j.cache_bytes());
    if (j.cache_bytes() > (4u << 20)) {  // what TokenConstraint does past its budget
      auto c2 = j.compact(state);
      REQUIRE(c2);
      state = *c2;
    }
  }
  CHECK(j.can_continue(state));
  CHECK(peak < (8u << 20));
}

TEST_CASE("json_schema: unsupported or malformed schemas are refused, naming the keyword and where") {
  struct Case {
    const char* schema;
    const char* message;
  };
  const Case cases[] = {
      {R"({"type":"string","pattern":"^a$"})", "at the root: unsupported keyword 'pattern'"},
      {R"({"type":"string","format":"date"})", "unsupported keyword 'format'"},
      {R"({"type":"object","properties":{"n":{"type":"number","minimum":0}}})",
       "at /properties/n: unsupported keyword 'minimum'"},
      {R"({"oneOf":[{"type":"string"}]})", "unsupported keyword 'oneOf'"},
      {R"({"allOf":[{"type":"string"}]})", "unsupported keyword 'allOf'"},
      {R"({"not":{"type":"string"}})", "unsupported keyword 'not'"},
      {R"({"type":"array","prefixItems":[{"type":"string"}]})", "unsupported keyword 'prefixItems'"},
      {R"({"type":"array","uniqueItems":true})", "unsupported keyword 'uniqueItems'"},
      {R"({"type":"array","items":[{"type":"string"}]})", "at /items: a list of item schemas"},
      {R"({"type":"object","properties":{"a":{}},"additionalProperties":true})",
       "at /additionalProperties: only false"},
      {R"({"type":"object","properties":{"a":{}},"required":["b"]})", "required property 'b' is not in 'properties'"},
      {R"({"type":"strin"})", "at /type: unknown type 'strin'"},
      {R"({"type":"string","maxLength":-1})", "at /maxLength: must be a non-negative integer"},
      {R"({"type":"string","minLength":5,"maxLength":2})", "maxLength is below minLength"},
      {R"({"type":"array","maxItems":100000})", "above the limit of 10000"},
      {R"({"$ref":"#/$defs/missing"})", "at /$ref: '#/$defs/missing' does not lead to a schema"},
      {R"({"$ref":"https://example.com/s.json"})", "only local references"},
      {R"({"type":"string","enum":[1,2]})", "no value of 'enum' has the type"},
      {R"(false)", "the schema false matches nothing"},
      {R"({"type":"string",)", "invalid JSON at line 1, column 18"},
      {R"([1])", "a schema must be an object or a boolean"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.schema);
    auto g = llminfer::json_schema_to_grammar(c.schema);
    REQUIRE(!g);
    CHECK_MESSAGE(g.error().message.find(c.message) != std::string::npos, g.error().message);
    CHECK(g.error().code == llminfer::Errc::invalid_argument);
  }
  // annotations are ignored, the subset is accepted
  CHECK(llminfer::json_schema_to_grammar(
      R"({"title":"t","description":"d","$schema":"x","$id":"y","default":1,"examples":[1],"type":"integer"})"));
  // a reference cycle that consumes nothing is a grammar error, not a hang
  auto g = llminfer::json_schema_to_grammar(R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})");
  REQUIRE(g);
  CHECK(error_of(*g).find("left recursion") != std::string::npos);
}

TEST_CASE("grammar masks: exactly the tokens whose bytes keep a valid prefix; end of generation only where complete") {
  const std::string model_name = "synth-smollm2-tiny-q8_0.gguf";
  if (!have_fixture(model_name)) return;
  auto model = Model::load(test::model_path(model_name));
  REQUIRE(model);
  const auto& mi = llminfer::detail::model_impl(*model);
  const auto& tok = *mi.tokenizer;
  auto trie = llminfer::detail::VocabTrie::build(tok);
  for (const char* rel : {"llama.cpp/json.gbnf", "unicode.gbnf", "schemas/npc_action.json"}) {
    CAPTURE(rel);
    GenerateOptions o;
    o.grammar = grammar_of(rel);
    auto c = llminfer::detail::TokenConstraint::create(
        &tok, [&] { return trie; }, o, 0, static_cast<size_t>(mi.engine->n_vocab()));
    REQUIRE(c);
    auto core = llminfer::detail::compile_grammar(o.grammar);
    REQUIRE(core);
    GrammarMatcher brute(*core);  // a second matcher, fed each token's bytes from scratch
    std::string text;
    llminfer::detail::Rng rng(11);
    for (int step = 0; step < 12; step++) {
      std::vector<float> zeros(static_cast<size_t>(mi.engine->n_vocab()), 0.0f);
      auto masked = (*c)->apply(zeros);
      REQUIRE(masked);
      auto s0 = brute.start();
      REQUIRE(s0);
      auto prefix_state = brute.feed(*s0, text);
      REQUIRE(prefix_state);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < tok.n_vocab(); id++) {
        bool ok;
        if (tok.is_eog(id)) {
          ok = brute.accepting(*prefix_state);
        } else if (tok.is_control(id) || tok.token_bytes(id).empty()) {
          ok = false;
        } else {
          auto s = brute.feed(*prefix_state, tok.token_bytes(id));
          REQUIRE(s);
          ok = *s != GrammarMatcher::kDead;
        }
        const bool got = (*masked)[static_cast<size_t>(id)] == 0.0f;
        if (ok != got) {
          CAPTURE(id);
          CAPTURE(text);
          CHECK(ok == got);
          break;
        }
        if (ok && !tok.is_eog(id)) allowed.push_back(id);
      }
      if (allowed.empty()) break;
      int32_t id = allowed[static_cast<size_t>(rng.uniform() * static_cast<double>(allowed.size()))];
      REQUIRE((*c)->accept(id));
      text += tok.token_bytes(id);
    }
  }
}

TEST_CASE("structured output: temperature sampling on random weights gives valid JSON for every schema and seed") {
  struct M {
    const char* file;
    bool chat;
  };
  int checked = 0, complete = 0;
  for (M mm : {M{"synth-qwen3-tiny-q8_0.gguf", false}, M{"synth-smollm2-tiny-q8_0.gguf", true}}) {
    if (!have_fixture(mm.file)) continue;
    auto model = Model::load(test::model_path(mm.file));
    REQUIRE(model);
    for (const char* s : {"npc_action", "ten_fields", "inventory", "tree", "unions", "strings", "map", "optional"}) {
      const std::string schema_text = slurp(data_path(std::string("schemas/") + s + ".json"));
      auto schema = llminfer::detail::json_parse(schema_text, s);
      REQUIRE(schema);
      for (uint64_t seed : {1, 2, 3}) {
        CAPTURE(mm.file);
        CAPTURE(s);
        CAPTURE(seed);
        GenerateOptions o;
        o.json_schema = schema_text;
        o.temperature = 1.0f;
        o.seed = seed;
        o.max_tokens = 400;
        o.chat = mm.chat;
        std::string streamed;
        o.on_token = [&](std::string_view piece) {
          streamed += piece;
          return true;
        };
        auto r = model->generate("Answer in JSON.", o);
        REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
        CHECK(r->stop != StopReason::error);
        CHECK(streamed == r->text);
        checked++;
        if (r->stop != StopReason::eos) continue;  // cut by max_tokens: a prefix (checked below)
        complete++;
        CAPTURE(r->text);
        auto v = llminfer::detail::json_parse(r->text, "output");
        REQUIRE_MESSAGE(v, (v ? "" : v.error().message));
        std::string why;
        CHECK_MESSAGE(validate(*v, *schema, *schema, why), why);
      }
    }
  }
  if (checked > 0) CHECK(complete * 10 >= checked * 8);  // most finish well within 400 tokens
}

TEST_CASE("structured output: GBNF grammars with temperature sampling; outputs judged by the recognizer") {
  if (!have_fixture("synth-qwen3-tiny-q8_0.gguf")) return;
  auto model = Model::load(test::model_path("synth-qwen3-tiny-q8_0.gguf"));
  REQUIRE(model);
  int complete = 0, runs = 0;
  for (const char* rel : {"llama.cpp/arithmetic.gbnf", "llama.cpp/list.gbnf", "llama.cpp/chess.gbnf",
                          "llama.cpp/json.gbnf", "features.gbnf", "unicode.gbnf", "repeat.gbnf"}) {
    const std::string text = slurp(data_path(rel));
    auto g = llminfer::detail::gbnf_parse(text);
    REQUIRE(g);
    Recognizer rec(*g);
    auto core = llminfer::detail::compile_grammar(text);
    REQUIRE(core);
    GrammarMatcher m(*core);
    for (uint64_t seed : {5, 6, 7, 8}) {
      CAPTURE(rel);
      CAPTURE(seed);
      GenerateOptions o;
      o.grammar = text;
      o.temperature = 1.5f;
      o.top_k = 0;
      o.seed = seed;
      o.max_tokens = 120;
      auto r = model->generate("Go:", o);
      REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
      CAPTURE(r->text);
      runs++;
      if (r->stop == StopReason::eos) {
        complete++;
        CHECK(rec.matches(r->text));
      } else {
        CHECK(r->stop == StopReason::max_tokens);
        auto v = llminfer::detail::grammar_match(m, r->text);
        REQUIRE(v);
        CHECK(*v != GrammarVerdict::reject);
      }
    }
  }
  CHECK(complete >= runs / 3);
}

TEST_CASE("structured output: Session::reply follows the schema, also where a SentencePiece reply drops its space") {
  const std::string schema =
      R"({"type":"object","properties":{"say":{"enum":["yes","no"]},"n":{"type":"integer"}},"required":["say","n"]})";
  for (const char* file : {"stories260K.gguf", "synth-qwen3-tiny-q8_0.gguf"}) {
    if (!have_fixture(file) && std::string(file) != "stories260K.gguf") continue;
    CAPTURE(file);
    auto model = Model::load(test::model_path(file));
    REQUIRE(model);
    auto chat = model->session();
    for (int turn = 0; turn < 3; turn++) {
      chat.add("user", "Reply in JSON.");
      GenerateOptions o;
      o.json_schema = schema;
      o.temperature = 1.0f;
      o.seed = static_cast<uint64_t>(turn + 1);
      o.max_tokens = 200;
      auto r = chat.reply(o);
      REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
      CAPTURE(r->text);
      if (r->stop != StopReason::eos) continue;
      auto v = llminfer::detail::json_parse(r->text, "reply");
      REQUIRE(v);
      auto s = llminfer::detail::json_parse(schema, "schema");
      std::string why;
      CHECK_MESSAGE(validate(*v, *s, *s, why), why);
    }
  }
}

TEST_CASE(
    "structured output: end of generation only where the grammar is complete; impossible constraints fail first") {
  auto model = Model::load(test::model_path("stories260K.gguf"));
  REQUIRE(model);
  GenerateOptions o;
  o.temperature = 1.0f;
  o.max_tokens = 50;
  o.grammar = "root ::= \"once\" \" upon\"{2}";  // the text is forced, then only the end may follow
  for (uint64_t seed : {1, 2, 3}) {
    o.seed = seed;
    auto r = model->generate("Hi", o);
    REQUIRE(r);
    CHECK(r->text == "once upon upon");
    CHECK(r->stop == StopReason::eos);
  }
  // every token the grammar allows is banned: an error before generation
  o.grammar = "root ::= \"a\"";
  const auto& tok = *llminfer::detail::model_impl(*model).tokenizer;
  for (int32_t id = 0; id < 512; id++)
    if (!tok.is_eog(id) && tok.token_bytes(id).substr(0, 1) == "a") o.banned_tokens.push_back(id);
  auto r = model->generate("Hi", o);
  CHECK(!r);
  if (!r) CHECK(r.error().message.find("every token the grammar allows here is banned") != std::string::npos);
  // banning the end of generation where the grammar must end
  o.grammar = "root ::= \"\"";
  o.banned_tokens = {tok.eos()};
  r = model->generate("Hi", o);
  CHECK(!r);
  if (!r) CHECK(r.error().message.find("every end-of-generation token is banned") != std::string::npos);
  // grammar and schema together; a malformed grammar names line and column
  o = GenerateOptions{};
  o.grammar = "root ::= \"a\"";
  o.json_schema = "{}";
  r = model->generate("Hi", o);
  CHECK(!r);
  o.json_schema.clear();
  o.grammar = "root ::= \"a\"\nb ::= (";
  r = model->generate("Hi", o);
  CHECK(!r);
  if (!r) CHECK(r.error().message.find("grammar line 2, column 8") != std::string::npos);
}

TEST_CASE("logit bias and banned tokens") {
  auto model = Model::load(test::model_path("stories260K.gguf"));
  REQUIRE(model);
  GenerateOptions o;
  o.max_tokens = 16;
  auto base = model->generate("Once upon a time", o);
  REQUIRE(base);
  REQUIRE(base->tokens.size() >= 2);
  // banning the first greedy token changes the first token, and it never appears anywhere
  o.banned_tokens = {base->tokens[0]};
  auto r = model->generate("Once upon a time", o);
  REQUIRE(r);
  REQUIRE(!r->tokens.empty());
  CHECK(std::find(r->tokens.begin(), r->tokens.end(), base->tokens[0]) == r->tokens.end());
  // the same with temperature, many seeds
  o.temperature = 1.0f;
  o.banned_tokens.clear();
  for (int id = 0; id < 512; id += 3) o.banned_tokens.push_back(id);  // a third of the vocabulary
  for (uint64_t seed = 0; seed < 5; seed++) {
    o.seed = seed;
    r = model->generate("Once upon a time", o);
    REQUIRE(r);
    for (int32_t id : r->tokens) CHECK(id % 3 != 0);
  }
  // a large bias forces a token; -inf bans like banned_tokens
  o = GenerateOptions{};
  o.max_tokens = 5;
  o.logit_bias = {{300, 1000.0f}};
  r = model->generate("Once upon a time", o);
  REQUIRE(r);
  CHECK(r->tokens == std::vector<int32_t>(5, 300));
  o.logit_bias = {{base->tokens[0], -std::numeric_limits<float>::infinity()}};
  r = model->generate("Once upon a time", o);
  REQUIRE(r);
  CHECK(r->tokens[0] != base->tokens[0]);
  // bad ids and values are errors naming them
  o.logit_bias = {{512, 1.0f}};
  r = model->generate("Once upon a time", o);
  CHECK(!r);
  if (!r) CHECK(r.error().message.find("token id 512 is outside the vocabulary") != std::string::npos);
  o.logit_bias = {{3, std::nanf("")}};
  CHECK(!model->generate("Once upon a time", o));
  o.logit_bias.clear();
  o.banned_tokens = {-1};
  CHECK(!model->generate("Once upon a time", o));
  o.banned_tokens.clear();
  for (int id = 0; id < 512; id++) o.banned_tokens.push_back(id);
  r = model->generate("Once upon a time", o);
  CHECK(!r);
  if (!r) CHECK(r.error().message.find("ban every token") != std::string::npos);
}

TEST_CASE("structured output: begin_reply/step follow the schema as reply() does; constraint_ms counts it") {
  auto model = Model::load(test::model_path("stories260K.gguf"));
  REQUIRE(model);
  const std::string schema =
      R"({"type":"object","properties":{"say":{"enum":["yes","no"]},"ok":{"type":"boolean"}},"required":["say","ok"]})";
  auto s = llminfer::detail::json_parse(schema, "schema");
  REQUIRE(s);
  int complete = 0;
  for (uint64_t seed : {1, 2, 3, 4}) {
    CAPTURE(seed);
    GenerateOptions o;
    o.json_schema = schema;
    o.temperature = 1.0f;
    o.seed = seed;
    o.max_tokens = 120;
    auto whole = model->session();
    whole.add("user", "Reply in JSON.");
    auto r = whole.reply(o);
    REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
    auto stepped = model->session();
    stepped.add("user", "Reply in JSON.");
    REQUIRE(stepped.begin_reply(o));
    std::string pieces;
    for (int i = 0; i < 1000; i++) {
      auto st = stepped.step();
      REQUIRE(st);
      pieces += st->text;
      if (st->done) break;
    }
    REQUIRE(!stepped.replying());
    const GenerateResult& g = stepped.result();
    CHECK(pieces == g.text);
    CHECK(g.text == r->text);
    CHECK(g.tokens == r->tokens);
    CHECK(g.stop == r->stop);
    CHECK(g.timings.constraint_ms > 0);
    CHECK(r->timings.constraint_ms > 0);
    if (g.stop != StopReason::eos) continue;
    complete++;
    auto v = llminfer::detail::json_parse(g.text, "reply");
    REQUIRE(v);
    std::string why;
    CHECK_MESSAGE(validate(*v, *s, *s, why), why);
  }
  CHECK(complete >= 2);
}

TEST_CASE("structured output: Session::sample applies logit_bias and banned_tokens; a grammar there is an error") {
  auto model = Model::load(test::model_path("stories260K.gguf"));
  REQUIRE(model);
  auto ids = model->tokenize("Once upon a time");
  REQUIRE(ids);
  auto s = model->session();
  REQUIRE(s.eval(*ids));
  auto greedy = s.sample();
  REQUIRE(greedy);
  auto banned = s.sample({.banned_tokens = {*greedy}});
  REQUIRE(banned);
  CHECK(*banned != *greedy);
  auto biased = s.sample({.logit_bias = {{300, 1000.0f}}});
  REQUIRE(biased);
  CHECK(*biased == 300);
  // with temperature: a third of the vocabulary banned is never drawn
  for (uint64_t seed = 0; seed < 20; seed++) {
    s.set_seed(seed);
    GenerateOptions o{.temperature = 1.5f};
    for (int id = 0; id < 512; id += 3) o.banned_tokens.push_back(id);
    auto id = s.sample(o);
    REQUIRE(id);
    CHECK(*id % 3 != 0);
  }
  auto bad = s.sample({.logit_bias = {{512, 1.0f}}});
  CHECK(!bad);
  if (!bad) CHECK(bad.error().message.find("token id 512 is outside the vocabulary") != std::string::npos);
  GenerateOptions g;
  g.grammar = "root ::= \"a\"";
  auto refused = s.sample(g);
  CHECK(!refused);
  if (!refused) CHECK(refused.error().message.find("use begin_reply/step") != std::string::npos);
  g.grammar.clear();
  g.json_schema = "{}";
  CHECK(!s.sample(g));
}

TEST_CASE("structured output: concurrency: constrained generations from 4 threads equal the same one after another") {
  if (!have_fixture("synth-qwen3-tiny-q4_k_m.gguf")) return;
  auto model = Model::load(test::model_path("synth-qwen3-tiny-q4_k_m.gguf"), {.threads = 2});
  REQUIRE(model);
  const std::string schema =
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"hp":{"type":"integer"}},"required":["name","hp"]})";
  auto options = [&](int i) {
    GenerateOptions o{.max_tokens = 80, .temperature = 1.0f, .seed = uint64_t(11 + i)};
    if (i % 2 == 0)
      o.json_schema = schema;
    else
      o.grammar = "root ::= [a-z]+ (\" \" [a-z]+)* \".\"";
    if (i == 3) o.logit_bias = {{1000, 5.0f}};
    return o;
  };
  std::vector<std::string> prompts = {"Character:", "Name a monster", "JSON please", "Once"};
  std::vector<GenerateResult> serial(4), parallel(4);
  for (int i = 0; i < 4; i++) {
    auto r = model->generate(prompts[size_t(i)], options(i));
    REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
    serial[size_t(i)] = *r;
  }
  auto& batcher = llminfer::detail::Batcher::of(*llminfer::detail::model_impl(*model).engine);
  auto before = batcher.stats();
  std::atomic<int> failures{0};
  std::vector<std::thread> th;
  for (int i = 0; i < 4; i++)
    th.emplace_back([&, i] {  // (no doctest assertions on other threads)
      auto r = model->generate(prompts[size_t(i)], options(i));
      if (!r)
        failures++;
      else
        parallel[size_t(i)] = *r;
    });
  for (auto& t : th) t.join();
  CHECK(failures.load() == 0);
  CHECK(batcher.stats().shared_steps > before.shared_steps);
  for (int i = 0; i < 4; i++) {
    CAPTURE(i);
    CAPTURE(serial[size_t(i)].text);
    CHECK(!serial[size_t(i)].tokens.empty());
    CHECK(parallel[size_t(i)].tokens == serial[size_t(i)].tokens);
    CHECK(parallel[size_t(i)].text == serial[size_t(i)].text);
    CHECK(parallel[size_t(i)].timings.constraint_ms > 0);
  }
}

TEST_CASE("structured output: a session restored from save() replies under a schema as the saved one would") {
  auto model = Model::load(test::model_path("stories260K.gguf"));
  REQUIRE(model);
  auto a = model->session();
  a.add("user", "Hello.");
  REQUIRE(a.reply({.max_tokens = 8, .seed = 3}));
  auto bytes = a.save();
  REQUIRE(bytes);
  auto b = model->session();
  REQUIRE(b.load(*bytes));
  GenerateOptions o{.max_tokens = 100, .temperature = 1.0f, .seed = 9};
  o.json_schema = R"({"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]})";
  a.add("user", "JSON now.");
  b.add("user", "JSON now.");
  // the grammar's state lives for one reply: saving during one is refused
  REQUIRE(a.begin_reply(o));
  auto mid = a.save();
  CHECK(!mid);
  GenerateResult ra;
  for (;;) {
    auto st = a.step();
    REQUIRE(st);
    if (st->done) break;
  }
  ra = a.result();
  auto rb = b.reply(o);
  REQUIRE(rb);
  CHECK(rb->text == ra.text);
  CHECK(rb->tokens == ra.tokens);
  CHECK(rb->prompt_tokens_reused == ra.prompt_tokens_reused);
  CHECK(rb->prompt_tokens_reused > 0);
  if (ra.stop == StopReason::eos) CHECK(llminfer::detail::json_parse(ra.text, "reply"));
}

#if !defined(_WIN32)
TEST_CASE("cli: run --grammar / --json-schema; errors name the file, line and column (exit 2)") {
  test::TempDir dir;
  const std::string model = test::quote(test::model_path("stories260K.gguf"));
  test::write_file(dir.path + "/g.gbnf", "root ::= (\"yes\" | \"no\") \"!\"\n");
  auto r = test::run_cli("run -m " + model + " -p Hi --grammar " + dir.path + "/g.gbnf --temp 1 --seed 3 --json");
  CHECK(r.status == 0);
  CHECK((r.out.find("\"text\":\"yes!\"") != std::string::npos || r.out.find("\"text\":\"no!\"") != std::string::npos));
  CHECK(r.out.find("\"stop\":\"eos\"") != std::string::npos);
  test::write_file(dir.path + "/s.json",
                   R"({"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]})");
  r = test::run_cli("run -m " + model + " -p Hi --json-schema " + dir.path + "/s.json --temp 0.8 --seed 1 -n 200");
  CHECK(r.status == 0);
  auto v = llminfer::detail::json_parse(r.out, "stdout");
  CHECK(v);
  if (v) CHECK(v->find("ok"));
  test::write_file(dir.path + "/bad.gbnf", "root ::= \"a\"\nx ::= [b-a]\n");
  r = test::run_cli("run -m " + model + " -p Hi --grammar " + dir.path + "/bad.gbnf", true);
  CHECK(r.status == 2);
  CHECK(r.out.find("bad.gbnf: grammar line 2, column 8: empty range") != std::string::npos);
  test::write_file(dir.path + "/bad.json", R"({"type":"integer","minimum":1})");
  r = test::run_cli("run -m " + model + " -p Hi --json-schema " + dir.path + "/bad.json", true);
  CHECK(r.status == 2);
  CHECK(r.out.find("bad.json: json_schema at the root: unsupported keyword 'minimum'") != std::string::npos);
  r = test::run_cli(
      "run -m " + model + " -p Hi --grammar " + dir.path + "/g.gbnf --json-schema " + dir.path + "/s.json", true);
  CHECK(r.status == 1);
  r = test::run_cli("run -m " + model + " -p Hi --logit-bias 300=1000 -n 3 --json");
  CHECK(r.out.find("\"tokens\":[300,300,300]") != std::string::npos);
  r = test::run_cli("run -m " + model + " -p Hi --logit-bias x=1", true);
  CHECK(r.status == 1);
  r = test::run_cli("run -m " + model + " -p Hi --ban 1,2 --ban 3 -n 4 --json");
  CHECK(r.status == 0);
}
#endif
