// Chat templates: byte-exact renders against the tokenizer oracle and Python Jinja2 (goldens in
// tests/data/chat, made by tools/chat-goldens/make-goldens.sh; the oracle's public samples are in
// tests/tokenizer/oracle-samples), Jinja2 semantics, error positions, limits for hostile templates, provenance of
// message content, the fallback template, the CLI and Model::apply_chat_template.
#define LLMINFER_IMPLEMENTATION
#include <pthread.h>  // a thread with a 512 KB stack (POSIX; the test is skipped on Windows)

#include <atomic>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "common.hpp"

namespace {
using namespace llminfer::detail;
using llminfer::Result;

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<Json> read_jsonl(const std::string& path) {
  std::vector<Json> rows;
  std::string all = slurp(path), line;
  std::istringstream in(all);
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = json_parse(line, path);
    if (j) rows.push_back(std::move(*j));
  }
  return rows;
}

const std::string kData = "tests/data/chat/";

// 2024-07-26 14:05:09, a Friday: the clock of the goldens (tools/chat-goldens/render_fixed.py)
std::tm fixed_clock() {
  std::tm t{};
  t.tm_year = 124;
  t.tm_mon = 6;
  t.tm_mday = 26;
  t.tm_hour = 14;
  t.tm_min = 5;
  t.tm_sec = 9;
  t.tm_wday = 5;
  t.tm_yday = 207;
  return t;
}

// A template and the special tokens for one oracle variant.
struct Variant {
  std::string name;
  ChatTemplate tpl;
  ChatInput base;
  bool ok = false;
};

Variant load_variant(const std::string& name) {
  Variant v;
  v.name = name;
  std::string src;
  if (name == "llama3_1") {
    // the oracle's llama3_1 tokenizer_config (tok.mjs export): the template and its two special tokens
    src = slurp(kData + "llama3_1.jinja");
    v.base.special_tokens = {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}};
  } else {
    std::string model = name == "qwen3" || name == "qwen3-nothink" ? test::model_path("synth-qwen3-tiny-q8_0.gguf")
                        : name == "llama3"                         ? test::model_path("synth-llama-tiny-q8_0.gguf")
                        : name == "gemma3"                         ? test::model_path("synth-gemma3-tiny-q8_0.gguf")
                                                                   : test::model_path("hf/smollm2-tiny/hf-bf16");
    auto desc = load_description(model);
    if (!desc) {
      FAIL_CHECK("cannot load " << model << ": " << desc.error().message);
      return v;
    }
    auto t = chat_template_for(**desc);
    CHECK_FALSE(t.fallback);
    src = t.source;
    chat_special_tokens(**desc, v.base);
  }
  v.base.extra.type = Json::Type::object;
  if (name == "qwen3-nothink") {
    Json f;
    f.type = Json::Type::boolean;
    f.boolean = false;
    v.base.extra.members.emplace_back("enable_thinking", f);
  }
  v.base.clock = fixed_clock;
  auto t = ChatTemplate::parse(src);
  if (!t) {
    FAIL_CHECK(name << ": " << t.error().message);
    return v;
  }
  v.tpl = std::move(*t);
  v.ok = true;
  return v;
}

// Renders every row of an expected-chat file; returns the number of renders that differ.
int check_variant(const std::string& name, const std::string& chats_path, const std::string& expected_path,
                  int& total) {
  Variant v = load_variant(name);
  if (!v.ok) return 1;
  std::map<std::string, Json> chats;
  for (auto& c : read_jsonl(chats_path)) chats[std::string(c["id"].as_string())] = c;
  int bad = 0;
  for (const auto& row : read_jsonl(expected_path)) {
    total++;
    const Json& conv = chats[std::string(row["id"].as_string())];
    ChatInput in = v.base;
    in.messages = conv["messages"];
    if (conv.find("tools")) in.tools = conv["tools"];
    in.add_generation_prompt = row["add_generation_prompt"].as_bool();
    auto r = v.tpl.render(in);
    bool want_error = row.find("error") != nullptr;
    bool same = want_error ? !r : (r && r->text == row["text"].str);
    if (!same) {
      bad++;
      MESSAGE(name << " " << row["id"].as_string() << " agp=" << in.add_generation_prompt << ": "
                   << (r ? "got\n" + r->text : "error " + r.error().message) << "\nwanted\n"
                   << (want_error ? "an error: " + row["error"].str : row["text"].str));
    }
  }
  return bad;
}

}  // namespace

TEST_CASE("chat template: the oracle's public samples, byte-exact") {
  const std::string s = test::oracle_samples_dir() + "/";
  int total = 0, bad = 0;
  for (const char* v : {"qwen3", "qwen3-nothink", "llama3", "llama3_1", "gemma3", "smollm2"})
    bad += check_variant(v, s + "chats.jsonl", s + "expected-chat-" + v + ".jsonl", total);
  CHECK(total == 36);
  CHECK(bad == 0);
}

TEST_CASE("chat template: extended corpus (tools, reasoning, unicode, parts, role errors), byte-exact") {
  int total = 0, bad = 0;
  for (const char* v : {"qwen3", "qwen3-nothink", "llama3", "llama3_1", "gemma3", "smollm2"})
    bad += check_variant(v, kData + "chats.jsonl", kData + std::string("expected-chat-") + v + ".jsonl", total);
  CHECK(total == 6 * 56);
  CHECK(bad == 0);
}

// llama.cpp's collection of real templates (copied from its source tree into tests/data/chat/templates).
// Templates we cannot render must fail with an error naming the unsupported construct; they are
// listed here so that any change (a regression, or a newly supported one) is visible.
TEST_CASE("chat template: llama.cpp's template collection") {
  const std::set<std::string> unsupported = {};  // every template of the collection renders
  std::map<std::string, Json> chats;
  for (auto& c : read_jsonl(kData + "template-chats.jsonl")) chats[std::string(c["id"].as_string())] = c;
  std::map<std::string, ChatTemplate> parsed;
  std::set<std::string> names, failed;
  int total = 0, bad = 0;
  for (const auto& row : read_jsonl(kData + "expected-templates.jsonl")) {
    std::string name(row["template"].as_string());
    names.insert(name);
    if (!parsed.count(name)) {
      auto t = ChatTemplate::parse(slurp(kData + "templates/" + name));
      if (!t) {
        failed.insert(name);
        CHECK_MESSAGE(unsupported.count(name), name << ": " << t.error().message);
        CHECK_MESSAGE(t.error().message.find("unsupported construct") != std::string::npos, t.error().message);
        parsed[name] = ChatTemplate();
        continue;
      }
      parsed[name] = std::move(*t);
    }
    if (failed.count(name)) continue;
    total++;
    const Json& conv = chats[std::string(row["id"].as_string())];
    ChatInput in;
    in.special_tokens = {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}};
    in.messages = conv["messages"];
    if (conv.find("tools")) in.tools = conv["tools"];
    in.add_generation_prompt = row["add_generation_prompt"].as_bool();
    in.clock = fixed_clock;
    auto r = parsed[name].render(in);
    bool want_error = row.find("error") != nullptr;
    bool same = want_error ? !r : (r && r->text == row["text"].str);
    if (!same) {
      bad++;
      if (unsupported.count(name)) {
        CHECK_MESSAGE(!r, name);
        if (!r) CHECK_MESSAGE(r.error().message.find("unsupported construct") != std::string::npos, r.error().message);
      } else {
        MESSAGE(name << " " << row["id"].as_string() << " agp=" << in.add_generation_prompt << ": "
                     << (r ? "got\n" + r->text : "error " + r.error().message) << "\nwanted\n"
                     << (want_error ? "an error: " + row["error"].str : row["text"].str));
      }
    }
  }
  CHECK(names.size() == 68);
  CHECK(total == 68 * 8);
  CHECK(bad == 0);
}

TEST_CASE("chat template: Jinja2 and Python semantics (snippets rendered by Python Jinja2)") {
  auto rows = read_jsonl(kData + "snippets.jsonl");
  REQUIRE(rows.size() > 100);
  const Json defaults = rows[0]["default_vars"];
  int bad = 0;
  for (size_t k = 1; k < rows.size(); k++) {
    const Json& row = rows[k];
    const Json& vars = row.find("vars") ? row["vars"] : defaults;
    auto t = ChatTemplate::parse(row["template"].str);
    Result<RenderedPrompt> r = t ? t->render_vars(vars, fixed_clock) : Result<RenderedPrompt>(t.error());
    bool want_error = row.find("error") != nullptr;
    bool same = want_error ? !r : (r && r->text == row["text"].str);
    if (!same) {
      bad++;
      MESSAGE(row["template"].str << "\n  got:    " << (r ? r->text : "error " + r.error().message)
                                  << "\n  wanted: " << (want_error ? "error " + row["error"].str : row["text"].str));
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("chat template: errors name the construct and line:column") {
  struct Case {
    const char* tpl;
    const char* where;
    const char* what;
  };
  const Case cases[] = {
      {"ok\n{% if x %}\nno end", "3:7", "expected 'elif' or 'else' or 'endif'"},
      {"{% for x in y %}{% endif %}", "1:20", "unknown tag 'endif'"},
      {"line1\n  {% extends 'base.html' %}", "2:6", "unsupported construct: the 'extends' tag"},
      {"{% include 'x' %}", "1:4", "unsupported construct: the 'include' tag"},
      {"{{ x | nosuchfilter }}", "1:8", "no filter named 'nosuchfilter'"},
      {"{{ x is nosuchtest }}", "1:6", "no test named 'nosuchtest'"},
      {"\n\n   {{ 1 + }}", "3:11", "unexpected '}}'"},
      {"{{ 'unterminated }}", "1:4", "unterminated string literal"},
      {"{# never closed", "1:1", "missing end of comment tag"},
      {"{% raw %} no end", "1:10", "missing end of raw directive"},
      {"{{ x ]] }}", "1:6", "unexpected ']'"},
      {"{% break %}", "1:4", "'break' outside of a for loop"},
      {"{{ 'a' \\ 'b' }}", "1:8", "unexpected character '\\'"},
      {"{% set 1 = 2 %}", "1:8", "cannot assign to this expression"},
      {"{% macro m(a=1, b) %}{% endmacro %}", "1:18", "non-default argument follows default argument"},
      {"{{ 99999999999999999999 }}", "1:4", "integer literal too large"},
      {"{{ 'x' '\\N{DASH}' }}", "1:9", "unsupported construct: \\N{...}"},
  };
  for (const auto& c : cases) {
    auto t = ChatTemplate::parse(c.tpl);
    CHECK_MESSAGE(!t, c.tpl);
    if (t) continue;
    const std::string& m = t.error().message;
    CHECK_MESSAGE(m.find(std::string("chat template ") + c.where + ":") != std::string::npos, c.tpl << " -> " << m);
    CHECK_MESSAGE(m.find(c.what) != std::string::npos, c.tpl << " -> " << m);
    CHECK(t.error().code == llminfer::Errc::template_error);
  }
  // errors while rendering carry the position too
  const Case runtime[] = {
      {"a\n  {{ 1 / 0 }}", "2:8", "division by zero"},
      {"{{ raise_exception('Roles must alternate') }}", "1:4", "Roles must alternate"},
      {"{% for m in messages %}\n{{ m.content.x.y }}{% endfor %}", "2:15", "has no attribute 'x'"},
      {"{{ messages.pop() }}", "1:12", "security error: access to attribute 'pop' of 'list' object is unsafe."},
      {"{{ 'a' + 1 }}", "1:8", "can only concatenate str (not \"int\") to str"},
      {"{{ undefined_thing.x }}", "1:19", "'undefined_thing' is undefined"},
      {"{{ x | groupby('a') }}", "1:8", "unsupported construct: the 'groupby' filter"},
      {"{% if false %}{{ x | nosuch }}{% endif %}{{ 1 | nosuch2 if false }}", "", ""},
  };
  for (const auto& c : runtime) {
    auto t = ChatTemplate::parse(c.tpl);
    REQUIRE_MESSAGE(t, c.tpl << ": " << t.error().message);
    ChatInput in;
    in.messages = json_parse(R"([{"role":"user","content":"hi"}])", "t").value();
    auto r = t->render(in);
    if (!*c.what) {
      CHECK_MESSAGE(r, c.tpl);  // unknown filters in an if (Jinja2's "soft" frames) only fail when run
      continue;
    }
    CHECK_MESSAGE(!r, c.tpl);
    if (r) continue;
    CHECK_MESSAGE(r.error().message.find(std::string("chat template ") + c.where + ":") != std::string::npos,
                  c.tpl << " -> " << r.error().message);
    CHECK_MESSAGE(r.error().message.find(c.what) != std::string::npos, c.tpl << " -> " << r.error().message);
  }
}

// The builtins are found by name in sorted tables (38_jinja_builtins.hpp): each name Jinja2 (or
// Python's str) has must reach its handler, and each one this interpreter leaves out must give an
// error that names it.
TEST_CASE("chat template: every builtin is dispatched; the ones left out are errors that name them") {
  auto run = [](const std::string& src) {
    auto t = ChatTemplate::parse(src);
    if (!t) FAIL_CHECK(src << ": " << t.error().message);
    return t ? t->render_vars(Json()) : Result<RenderedPrompt>(t.error());
  };
  const char* filters[] = {
      "abs",        "attr",    "batch",   "capitalize", "center",      "count",  "d",          "default",  "dictsort",
      "e",          "escape",  "first",   "float",      "forceescape", "format", "indent",     "int",      "items",
      "join",       "last",    "length",  "list",       "lower",       "map",    "max",        "min",      "reject",
      "rejectattr", "replace", "reverse", "round",      "safe",        "select", "selectattr", "sort",     "string",
      "sum",        "title",   "tojson",  "trim",       "truncate",    "unique", "upper",      "wordcount"};
  for (const char* f : filters) {
    // applied directly and through map(); any outcome but "unsupported" (some need arguments)
    std::string unsupported = std::string("unsupported construct: the '") + f + "' filter";
    for (std::string src :
         {std::string("{{ 'ab' | ") + f + " }}", std::string("{{ ['ab'] | map('") + f + "') | list }}"}) {
      auto r = run(src);
      CHECK_MESSAGE((r || r.error().message.find(unsupported) == std::string::npos),
                    src << " -> " << r.error().message);
    }
  }
  const char* left_out[] = {"filesizeformat", "groupby",   "pprint", "random",   "slice",
                            "striptags",      "urlencode", "urlize", "wordwrap", "xmlattr"};
  for (const char* f : left_out) {
    std::string want = std::string("unsupported construct: the '") + f + "' filter";
    for (std::string src :
         {std::string("{{ 'ab' | ") + f + " }}", std::string("{{ ['ab'] | map('") + f + "') | list }}"}) {
      auto r = run(src);
      CHECK_MESSAGE(!r, src);
      if (!r) CHECK_MESSAGE(r.error().message.find(want) != std::string::npos, src << " -> " << r.error().message);
    }
  }
  auto r = run("{{ ['ab'] | map('nosuch') | list }}");
  CHECK(!r);
  if (!r) CHECK_MESSAGE(r.error().message.find("no filter named 'nosuch'") != std::string::npos, r.error().message);
  r = run("{{ ['ab'] | select('nosuch') | list }}");
  CHECK(!r);
  if (!r) CHECK_MESSAGE(r.error().message.find("no test named 'nosuch'") != std::string::npos, r.error().message);

  const char* tests[] = {"!=",       "<",        "<=",          "==",       ">",           ">=",       "boolean",
                         "callable", "defined",  "divisibleby", "eq",       "equalto",     "escaped",  "even",
                         "false",    "filter",   "float",       "ge",       "greaterthan", "gt",       "in",
                         "integer",  "iterable", "le",          "lessthan", "lower",       "lt",       "mapping",
                         "ne",       "none",     "number",      "odd",      "sameas",      "sequence", "string",
                         "test",     "true",     "undefined",   "upper"};
  const std::set<std::string> one_arg = {
      "!=", "<",           "<=", "==", ">",  ">=",       "divisibleby", "eq", "equalto",
      "ge", "greaterthan", "gt", "in", "le", "lessthan", "lt",          "ne", "sameas"};
  for (const char* t : tests) {
    // through select() with an argument where the test takes one: every test gives a boolean
    std::string src =
        std::string("{{ [3, 'ab'] | select('") + t + "'" + (one_arg.count(t) ? ", 3" : "") + ") | list }}";
    auto rt = run(src);
    CHECK_MESSAGE((rt || rt.error().message.find("no test named") == std::string::npos),
                  src << " -> " << rt.error().message);
  }

  const char* methods[] = {
      "capitalize",   "casefold",   "center",     "count",     "endswith", "find",       "format",    "index",
      "isalnum",      "isalpha",    "isascii",    "isdecimal", "isdigit",  "islower",    "isnumeric", "isspace",
      "istitle",      "isupper",    "join",       "ljust",     "lower",    "lstrip",     "partition", "removeprefix",
      "removesuffix", "replace",    "rfind",      "rindex",    "rjust",    "rpartition", "rsplit",    "rstrip",
      "split",        "splitlines", "startswith", "strip",     "swapcase", "title",      "upper",     "zfill"};
  for (const char* m : methods) {
    std::string src = std::string("{{ 'ab'.") + m + "() }}";
    auto rm = run(src);
    CHECK_MESSAGE((rm || rm.error().message.find("unsupported construct: the string method") == std::string::npos),
                  src << " -> " << rm.error().message);
  }
  const char* methods_left_out[] = {"encode",      "expandtabs", "format_map", "isidentifier",
                                    "isprintable", "maketrans",  "translate"};
  for (const char* m : methods_left_out) {
    std::string src = std::string("{{ 'ab'.") + m + "() }}";
    auto rm = run(src);
    CHECK_MESSAGE(!rm, src);
    std::string want = std::string("unsupported construct: the string method '") + m + "'";
    if (!rm) CHECK_MESSAGE(rm.error().message.find(want) != std::string::npos, src << " -> " << rm.error().message);
  }

  const char* globals[] = {"cycler(1)", "dict()", "joiner()", "namespace()", "range(1)", "strftime_now('%Y')"};
  for (const char* g : globals) {
    std::string src = std::string("{{ ") + g + " is defined }}";
    auto rg = run(src);
    CHECK_MESSAGE(rg, src << " -> " << rg.error().message);
    if (rg) CHECK(rg->text == "True");
  }
  r = run("{{ raise_exception('stop here') }}");
  CHECK(!r);
  if (!r) CHECK_MESSAGE(r.error().message.find("stop here") != std::string::npos, r.error().message);
  r = run("{{ lipsum() }}");
  CHECK(!r);
  if (!r)
    CHECK_MESSAGE(r.error().message.find("unsupported construct: the global function 'lipsum'") != std::string::npos,
                  r.error().message);
}

TEST_CASE("chat template: hostile templates end with an error, quickly") {
  struct Case {
    std::string tpl;
    const char* what;
    uint64_t budget = 1000000;  // smaller than the default keeps this test fast; the mechanism is the same
  };
  std::string deep_parens = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  std::string deep_ifs;
  for (int k = 0; k < 3000; k++) deep_ifs += "{% if true %}";
  std::string long_chain = "{{ 1";
  for (int k = 0; k < 5000; k++) long_chain += " + 1";
  long_chain += " }}";
  std::string deep_lists = "{{ " + std::string(3000, '[') + std::string(3000, ']') + " }}";
  std::string not_chain = "{{ " + std::string(0, ' ');
  for (int k = 0; k < 3000; k++) not_chain += "not ";
  not_chain += "x }}";
  const Case cases[] = {
      {"{% for i in range(10**9) %}x{% endfor %}", "range too big"},
      {"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "steps"},
      {"{{ 'a' * 10**9 }}", "longer than the limit"},
      {"{{ 'ab' * 9223372036854775807 }}", "longer than the limit"},
      {"{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length "
       "}}",
       "longer than the limit"},
      // the call limit, or the stack budget first where frames are large (-O0, sanitizers)
      {"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nested"},
      {"{% macro f() %}{{ f() ~ f() }}{% endmacro %}{{ f() }}", "nested"},
      {deep_parens, "nested too deeply"},
      {deep_ifs, "nested too deeply"},
      {long_chain, "nested too deeply"},
      {deep_lists, "nested too deeply"},
      {not_chain, "nested too deeply"},
      {"{{ 2 ** 64 }}", "integer overflow"},
      {"{{ [1] * 10**12 }}", "a list of 1000000000000 items is longer than the limit"},
      {"{% set ns = namespace(l=[0]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
       "items is longer than the limit", LLMINFER_JINJA_MAX_STEPS},
      {"{% set ns = namespace() %}{% set ns.me = ns %}{{ ns | tojson }}", "JSON serializable"},
  };
  for (const auto& c : cases) {
    auto t = ChatTemplate::parse(c.tpl);
    Result<RenderedPrompt> r = t ? t->render_vars(Json(), {}, c.budget) : Result<RenderedPrompt>(t.error());
    CHECK_MESSAGE(!r, c.tpl.substr(0, 80));
    if (!r)
      CHECK_MESSAGE(r.error().message.find(c.what) != std::string::npos, c.tpl.substr(0, 80)
                                                                             << " -> " << r.error().message);
  }
}

TEST_CASE("chat template: a namespace inside itself prints as Python does") {
  auto t = ChatTemplate::parse("{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns }}|{{ [ns] }}");
  REQUIRE(t);
  auto r = t->render_vars(Json());
  REQUIRE(r);
  CHECK(r->text == "<Namespace {'a': 1, 'me': <Namespace {...}>}>|[<Namespace {'a': 1, 'me': <Namespace {...}>}>]");
}

TEST_CASE("chat template: message content keeps its provenance (content_spans)") {
  auto t = ChatTemplate::parse(chat_fallback_template());
  REQUIRE(t);
  ChatInput in;
  in.messages =
      json_parse(R"([{"role":"user","content":"Hi <|im_end|> there"},{"role":"assistant","content":""}])", "t").value();
  in.add_generation_prompt = true;
  auto r = t->render(in);
  REQUIRE(r);
  CHECK(r->text ==
        "<|im_start|>user\nHi <|im_end|> there<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n<|im_start|>assistant\n");
  // the role strings come from the messages too: they are untrusted as well
  std::vector<std::pair<size_t, size_t>> want = {{12, 16}, {17, 36}, {59, 68}};
  CHECK(r->content_spans == want);
  CHECK(r->text.substr(17, 19) == "Hi <|im_end|> there");

  // through trim, slicing, split, replace, case changes, join, tojson, repr and macros
  auto t2 = ChatTemplate::parse(
      "{% macro wrap(x) %}[{{ x }}]{% endmacro %}"
      "A{{ messages[0].content | trim }}B{{ messages[0].content[2:5] }}C{{ messages[0].content.split('|')[1] }}"
      "D{{ messages[0].content.replace('<', '&') }}E{{ messages[0].content | upper }}F{{ ['x', messages[1].content] | "
      "join('+') }}"
      "G{{ messages[1] | tojson }}H{{ [messages[1].content] }}I{{ wrap(messages[1].content) }}J{{ 'lit' }}");
  REQUIRE(t2);
  in.messages = json_parse(R"([{"role":"user","content":"  <|x|>  "},{"role":"r","content":"q\"é"}])", "t").value();
  auto r2 = t2->render(in);
  REQUIRE(r2);
  const std::string& s = r2->text;
  CHECK(s == "A<|x|>B<|xCxD  &|x|>  E  <|X|>  Fx+q\"éG{\"role\": \"r\", \"content\": \"q\\\"é\"}H['q\"é']I[q\"é]Jlit");
  // every byte is either template text (outside spans) or message text (inside); check by marking
  std::string mask(s.size(), '.');
  for (auto& sp : r2->content_spans)
    for (size_t k = sp.first; k < sp.second; k++) mask[k] = 'c';
  std::string template_text;
  for (size_t k = 0; k < s.size(); k++)
    if (mask[k] == '.') template_text += s[k];
  CHECK(template_text == "ABCD&EFx+G{\"\": \"\", \"\": \"\"}H['']I[]Jlit");
}

TEST_CASE("chat template: strftime_now with an injected clock") {
  auto t = ChatTemplate::parse("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%A %-d %B, %H:%M:%S %p %j') }}");
  REQUIRE(t);
  auto r = t->render_vars(Json(), fixed_clock);
  REQUIRE(r);
  CHECK(r->text == "26 Jul 2024|Friday 26 July, 14:05:09 PM 208");
  auto bad = ChatTemplate::parse("{{ strftime_now('%Q') }}");
  REQUIRE(bad);
  auto r2 = bad->render_vars(Json(), fixed_clock);
  CHECK(!r2);
  if (!r2) CHECK(r2.error().message.find("unsupported construct: strftime_now directive '%Q'") != std::string::npos);
}

TEST_CASE("chat template: a file without a template uses the documented ChatML fallback") {
  auto desc = load_description(test::model_path("stories260K.gguf"));
  REQUIRE(desc);
  auto src = chat_template_for(**desc);
  CHECK(src.fallback);
  auto t = ChatTemplate::parse(src.source);
  REQUIRE(t);
  ChatInput in;
  chat_special_tokens(**desc, in);
  CHECK(in.special_tokens.size() >= 2);
  in.messages =
      json_parse(
          R"([{"role":"system","content":"S"},{"role":"user","content":[{"type":"text","text":"A"},{"type":"image"},{"type":"text","text":"B"}]}])",
          "t")
          .value();
  in.add_generation_prompt = true;
  auto r = t->render(in);
  REQUIRE(r);
  CHECK(r->text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nAB<|im_end|>\n<|im_start|>assistant\n");
  // a model with a template is not the fallback
  auto q = load_description(test::model_path("synth-qwen3-tiny-q8_0.gguf"));
  REQUIRE(q);
  CHECK_FALSE(chat_template_for(**q).fallback);
}

TEST_CASE("chat template: Model::apply_chat_template") {
  auto m = llminfer::Model::load(test::model_path("synth-smollm2-tiny-q8_0.gguf"));
  REQUIRE(m);
  std::vector<llminfer::Message> msgs = {{"system", "You are a poet."}, {"user", "Hi"}};
  auto r = m->apply_chat_template(msgs, true);
  REQUIRE(r);
  CHECK(*r == "<|im_start|>system\nYou are a poet.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  auto g = llminfer::Model::load(test::model_path("synth-gemma3-tiny-q8_0.gguf"));
  REQUIRE(g);
  std::vector<llminfer::Message> bad = {{"user", "a"}, {"user", "b"}};
  auto e = g->apply_chat_template(bad, true);
  CHECK(!e);  // the template raises: roles must alternate
  if (!e) CHECK(e.error().message.find("Conversation roles must alternate") != std::string::npos);
}

TEST_CASE("chat template: llminfer template (CLI)") {
  test::TempDir dir;
  const std::string msgs = dir.file("m.json");
  REQUIRE(test::write_file(msgs, R"([{"role":"user","content":"Is 17 prime?"}])"));
  const std::string qwen = test::model_path("synth-qwen3-tiny-q8_0.gguf");
  auto r = test::run_cli("template -m " + test::quote(qwen) + " --messages " + test::quote(msgs) +
                         " --add-generation-prompt");
  CHECK(r.status == 0);
  CHECK(r.out == "<|im_start|>user\nIs 17 prime?<|im_end|>\n<|im_start|>assistant\n");  // no newline added
  r = test::run_cli("template -m " + test::quote(qwen) + " --messages " + test::quote(msgs) +
                    " --add-generation-prompt --var enable_thinking=false");
  CHECK(r.status == 0);
  CHECK(r.out == "<|im_start|>user\nIs 17 prime?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  r = test::run_cli("template -m " + test::quote(qwen) + " --messages " + test::quote(msgs) + " --json");
  CHECK(r.status == 0);
  CHECK(r.out ==
        "{\"text\":\"<|im_start|>user\\nIs 17 "
        "prime?<|im_end|>\\n\",\"content_spans\":[[12,16],[17,29]],\"fallback\":false}\n");
  // {"messages": [...], "tools": [...]} form
  const std::string withtools = dir.file("t.json");
  REQUIRE(test::write_file(
      withtools,
      R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}]})"));
  r = test::run_cli("template -m " + test::quote(qwen) + " --messages " + test::quote(withtools));
  CHECK(r.status == 0);
  CHECK(r.out.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"f\"}}\n</tools>") !=
        std::string::npos);
  // errors: raise_exception -> 2 with the message on stderr; usage -> 1; a bad messages file -> 2
  const std::string gemma = test::model_path("synth-gemma3-tiny-q8_0.gguf");
  const std::string twice = dir.file("u.json");
  REQUIRE(test::write_file(twice, R"([{"role":"user","content":"a"},{"role":"user","content":"b"}])"));
  r = test::run_cli("template -m " + test::quote(gemma) + " --messages " + test::quote(twice), true);
  CHECK(r.status == 2);
  CHECK(r.out.find("Conversation roles must alternate") != std::string::npos);
  CHECK(test::run_cli("template --messages " + test::quote(msgs)).status == 1);
  CHECK(test::run_cli("template -m " + test::quote(qwen)).status == 1);
  CHECK(test::run_cli("template -m " + test::quote(qwen) + " --messages " + test::quote(msgs) + " --bogus").status ==
        1);
  const std::string broken = dir.file("b.json");
  REQUIRE(test::write_file(broken, "[{\"role\": "));
  CHECK(test::run_cli("template -m " + test::quote(qwen) + " --messages " + test::quote(broken)).status == 2);
  CHECK(test::run_cli("template -m /nonexistent.gguf --messages " + test::quote(msgs)).status == 2);
  // --template with a syntax error: exit 2, message with line:column
  const std::string tpl = dir.file("x.jinja");
  REQUIRE(test::write_file(tpl, "{% for m in messages %}\n{{ m.content }"));
  r = test::run_cli("template --template " + test::quote(tpl) + " --messages " + test::quote(msgs), true);
  CHECK(r.status == 2);
  CHECK(r.out.find("chat template 2:") != std::string::npos);
}

// ---- issue 16: hostile templates end in errors, in bounded time, memory and stack ----

namespace {
Result<RenderedPrompt> render_src(const std::string& src, uint64_t budget = LLMINFER_JINJA_MAX_STEPS) {
  auto t = ChatTemplate::parse(src);
  if (!t) return t.error();
  return t->render_vars(Json(), {}, budget);
}
std::string repeat(const std::string& s, int n) {
  std::string o;
  for (int k = 0; k < n; k++) o += s;
  return o;
}
}  // namespace

TEST_CASE("chat template: a chain of 20,000 elifs is nesting (was SIGSEGV)") {
  std::string src = "{% if x == 0 %}a";
  for (int k = 1; k < 20000; k++) src += "{% elif x == " + std::to_string(k) + " %}b";
  src += "{% endif %}";
  auto t = ChatTemplate::parse(src);
  REQUIRE(!t);
  CHECK(t.error().message.find("nested too deeply") != std::string::npos);
  CHECK(t.error().message.find("chat template 1:") != std::string::npos);
  // a chain within the limit still renders, and picks the right branch
  std::string ok = "{% if x == 0 %}a";
  for (int k = 1; k < 150; k++) ok += "{% elif x == " + std::to_string(k) + " %}" + std::to_string(k);
  ok += "{% endif %}";
  auto t2 = ChatTemplate::parse(ok);
  REQUIRE(t2);
  auto vars = json_parse(R"({"x": 149})", "vars");
  REQUIRE(vars);
  auto r = t2->render_vars(*vars);
  REQUIRE(r);
  CHECK(r->text == "149");
}

TEST_CASE("chat template: parsing is linear (20,000 macros and sets, 2,000 loops)") {
  // the frame scan copied the set of outer names per frame and scopes were searched linearly:
  // this took about 20 s; it takes well under a second now (the bound has a 10x margin)
  std::string src;
  for (int k = 0; k < 20000; k++) src += "{% macro m" + std::to_string(k) + "(a) %}{{ a }}{% endmacro %}";
  for (int k = 0; k < 20000; k++) src += "{% set v" + std::to_string(k) + " = " + std::to_string(k) + " %}";
  src += repeat("{% for x in [1] %}{{ x }}{% endfor %}", 2000);
  src += "{{ m19999(v19999) }}";
  double t0 = now_ms();
  auto r = render_src(src);
  double ms = now_ms() - t0;
  REQUIRE(r);
  CHECK(r->text == repeat("1", 2000) + "19999");
  CHECK(ms < 8000);
  MESSAGE("20,000 macros + 20,000 sets + 2,000 loops (" << src.size() << " bytes): " << ms << " ms");
}

TEST_CASE("chat template: operations on long strings cost steps by the bytes they scan") {
  // one step per test/filter/method used to be charged whatever the operand's size: 500,000
  // 'is lower' on a 16 MB string ran for days. With a 1 MB string and a 2M-step budget, each of
  // these loops fails after a few dozen iterations.
  const char* ops[] = {"s is lower", "s|lower", "s|length", "s.startswith('b')", "s.find('b')",         "s|trim",
                       "'b' in s",   "s == t",  "s < t",    "s[700000]",         "s.split('b')|length", "s.count('a')"};
  for (const char* op : ops) {
    std::string src = std::string("{% set s = 'a' * 1000000 %}{% set t = 'a' * 1000000 %}") +
                      "{% for i in range(100000) %}{% if " + op + " %}{% endif %}{% endfor %}";
    auto r = render_src(src, 2000000);
    REQUIRE_MESSAGE(!r, op);
    CHECK_MESSAGE(r.error().message.find("steps") != std::string::npos, op << ": " << r.error().message);
  }
  // a conversation's own text raises the budget (real templates scan each message a few times)
  auto t = ChatTemplate::parse(
      "{% for m in messages %}{% for i in range(10) %}{{ m.content|trim|length }}{% endfor %}{% endfor %}");
  REQUIRE(t);
  ChatInput in;
  in.messages.type = Json::Type::array;
  Json m;
  m.type = Json::Type::object;
  Json role, content;
  role.type = content.type = Json::Type::string;
  role.str = "user";
  // 10 x 2 filters x 4 MB / 8 = 10.5M steps: over the base budget (10M), under the budget the
  // conversation's 4 MB of text add
  content.str = std::string(4 << 20, 'x');
  m.members.emplace_back("role", role);
  m.members.emplace_back("content", content);
  in.messages.items.push_back(m);
  auto r = t->render(in);
  REQUIRE_MESSAGE(r, r.error().message);
  CHECK(r->text == repeat(std::to_string(4 << 20), 10));
}

TEST_CASE("chat template: values nested more than the limit are refused (was SIGSEGV)") {
  const char* srcs[] = {
      "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}ok",
      "{% set ns = namespace(x={}) %}{% for i in range(100000) %}{% set ns.x = {'a': ns.x} %}{% endfor %}ok",
      ("{% set ns = namespace(g=[1]) %}{% for i in range(100000) %}{% set ns.g = ns.g|map('string') %}{% endfor %}"
       "{{ ns.g|list }}"),
  };
  for (const char* src : srcs) {
    auto r = render_src(src);
    REQUIRE_MESSAGE(!r, src);
    CHECK_MESSAGE(r.error().message.find("nested more than 200 levels") != std::string::npos, r.error().message);
  }
  // 199 levels are fine: printed, compared, serialized
  auto r = render_src(
      "{% set ns = namespace(x=[]) %}{% for i in range(199) %}{% set ns.x = [ns.x] %}{% endfor %}"
      "{{ (ns.x|string)|length }} {{ ns.x == ns.x }}");
  REQUIRE_MESSAGE(r, r.error().message);
  CHECK(r->text == "400 True");
}

TEST_CASE("chat template: a JSON object of 100,000 keys converts in linear time") {
  std::string j = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\", \"meta\": {";
  for (int k = 0; k < 100000; k++) j += (k ? ",\"k" : "\"k") + std::to_string(k) + "\": " + std::to_string(k);
  j += ", \"k5\": \"last\"}}]}";
  auto vars = json_parse(j, "vars");
  REQUIRE(vars);
  auto t = ChatTemplate::parse("{{ messages[0].meta|length }} {{ messages[0].meta.k5 }}");
  REQUIRE(t);
  double t0 = now_ms();
  auto r = t->render_vars(*vars);
  double ms = now_ms() - t0;
  REQUIRE(r);
  CHECK(r->text == "100000 last");  // a repeated key: the last value, in the first one's place
  CHECK(ms < 5000);                 // was quadratic: ~5e9 key comparisons
}

TEST_CASE("chat template: rendering polls the cancel flag") {
  auto t = ChatTemplate::parse("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  REQUIRE(t);
  ChatInput in;
  in.messages.type = Json::Type::array;
  in.max_steps = uint64_t(1) << 50;  // days of work: only the flag stops it
  std::atomic<bool> cancel{true};
  in.cancel = &cancel;
  auto r = t->render(in);
  REQUIRE(!r);
  CHECK(r.error().message.find("rendering cancelled") != std::string::npos);
  // set from another thread while it renders
  cancel.store(false);
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cancel.store(true);
  });
  double t0 = now_ms();
  r = t->render(in);
  double ms = now_ms() - t0;
  stopper.join();
  REQUIRE(!r);
  CHECK(r.error().message.find("rendering cancelled") != std::string::npos);
  CHECK(ms < 10000);
}

#if !defined(_WIN32)
TEST_CASE("chat template: the worst templates within the limits fit a 512 KB thread stack") {
  // macOS gives secondary threads 512 KB: every shape below recurses as deep as the limits allow
  // (macro recursion, nested blocks, expressions, filters, values, JSON), and must end in a
  // result or an error, not overflow (LLMINFER_JINJA_MAX_STACK bounds what the render uses).
  std::vector<std::string> srcs;
  for (int k : {0, 1, 4, 16}) {
    std::string body = repeat("{% for x in [1] %}", k) + "{{ f(n - 1)|string|trim }}" + repeat("{% endfor %}", k);
    srcs.push_back("{% macro f(n) %}{% if n > 0 %}" + body + "{% endif %}{% endmacro %}{{ f(1000) }}");
  }
  srcs.push_back("{% macro f(n) %}{% if n > 0 %}{{ " + std::string(60, '(') + "f(n - 1)" + std::string(60, ')') +
                 "|map('string')|join|indent(2) }}{% endif %}{% endmacro %}{{ f(1000) }}");
  srcs.push_back(
      "{% macro f(n) %}{% if n > 0 %}{% call f(n - 1) %}{{ caller() if caller is defined }}{% endcall %}"
      "{% endif %}{% endmacro %}{{ f(1000) }}");
  srcs.push_back(repeat("{% if true %}", 195) + "x" + repeat("{% endif %}", 195));
  srcs.push_back(repeat("{% for a in [1] %}", 95) + "x" + repeat("{% endfor %}", 95));
  srcs.push_back("{{ 1" + repeat("|string", 190) + " }}");
  srcs.push_back("{{ " + repeat("not ", 195) + "1 }}");
  srcs.push_back("{{ " + std::string(64, '(') + "1" + std::string(64, ')') + " }}");
  srcs.push_back(
      "{% set ns = namespace(x=[]) %}{% for i in range(199) %}{% set ns.x = [ns.x] %}{% endfor %}"
      "{{ ns.x }}{{ ns.x|tojson }}{{ ns.x == ns.x }}{{ [ns.x] < [ns.x] }}");
  srcs.push_back(
      "{% set ns = namespace(g=[1,2,3]) %}{% for i in range(199) %}{% set ns.g = ns.g|map('string') %}"
      "{% endfor %}{{ ns.g|list }}");
  srcs.push_back("{{ deep|tojson }}{{ deep|string }}{{ deep == deep }}");
  std::string deep = std::string(500, '[') + std::string(500, ']');
  auto vars = json_parse("{\"deep\": " + deep + "}", "vars");
  REQUIRE(vars);
  struct Job {
    const std::vector<std::string>* srcs;
    const Json* vars;
    std::vector<std::string> results;
  } job{&srcs, &*vars, {}};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  // (an AddressSanitizer build allows the template 4x the stack, LLMINFER_JINJA_MAX_STACK: its thread
  // gets 4x too)
  const size_t thread_stack = size_t(512 * 1024) * (LLMINFER_JINJA_MAX_STACK / (256u << 10));
  REQUIRE(pthread_attr_setstacksize(&attr, thread_stack) == 0);
  pthread_t th;
  auto fn = [](void* p) -> void* {
    auto* j = static_cast<Job*>(p);
    for (const auto& src : *j->srcs) {
      auto t = ChatTemplate::parse(src);
      if (!t) {
        j->results.push_back("parse: " + t.error().message);
        continue;
      }
      auto r = t->render_vars(*j->vars);
      j->results.push_back(r ? "ok" : "render: " + r.error().message);
    }
    return nullptr;
  };
  REQUIRE(pthread_create(&th, &attr, fn, &job) == 0);
  pthread_join(th, nullptr);
  pthread_attr_destroy(&attr);
  REQUIRE(job.results.size() == srcs.size());
  for (size_t k = 0; k < srcs.size(); k++) {
    const std::string& res = job.results[k];
    MESSAGE(srcs[k].substr(0, 60) << " -> " << res.substr(0, 140));
    CHECK_MESSAGE((res == "ok" || res.find("nested") != std::string::npos || res.find("deep") != std::string::npos),
                  res);
  }
  // the shallow ones render
  CHECK(job.results[6] == "ok");   // 195 nested ifs
  CHECK(job.results[11] == "ok");  // a list 199 deep
}
#endif
