// Architecture definitions: the malformed set (each rejected with its file:line message), the
// forbidden words, the built-ins, user-directory overrides, sha256, status, and compile-time errors.
#define LLMINFER_IMPLEMENTATION
#include <charconv>
#include <fstream>
#include <sstream>

#include "common.hpp"

using namespace llminfer;
using namespace llminfer::detail;

namespace {

std::string tests_dir() {
  std::string f = __FILE__;
  size_t p = f.find_last_of('/');
  return p == std::string::npos ? std::string(".") : f.substr(0, p);
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string builtin_text(const char* name) {
  for (const auto& b : builtin_archdefs())
    if (std::string(b.name) == name) return b.text;
  return {};
}

// Replaces the first `from` in `s` by `to` (CHECKs that it is there).
std::string replace1(std::string s, const std::string& from, const std::string& to) {
  size_t p = s.find(from);
  CHECK_MESSAGE(p != std::string::npos, from);
  if (p != std::string::npos) s.replace(p, from.size(), to);
  return s;
}

}  // namespace

TEST_CASE("archdef: sha256 of known texts") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1000000, 'a');
  CHECK(sha256_hex(million) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("archdef: the built-in definitions parse, and their steps per layer") {
  const char* names[] = {"llama",      "qwen2",    "qwen3",   "gemma3", "phi3",
                         "starcoder2", "stablelm", "smollm3", "gemma2", "olmo2"};
  int steps[] = {20, 19, 18, 21, 20, 20, 21, 20, 19, 18};
  for (int k = 0; k < 10; k++) {
    std::string text = builtin_text(names[k]);
    REQUIRE(!text.empty());
    auto d = archdef_parse(text, std::string("<builtin>/") + names[k] + ".archdef", names[k], "builtin");
    REQUIRE_MESSAGE(d, (d ? "" : d.error().message));
    CHECK(d->name == names[k]);
    CHECK(d->steps_per_layer() == steps[k]);
    CHECK(d->sha256 == sha256_hex(text));
    // every built-in states the format conventions it runs with (nothing runs that the text hides)
    for (const auto& c : archdef_conventions()) CHECK_MESSAGE(d->convention(c.name), names[k] << ": " << c.name);
    CHECK(d->default_conventions_text().empty());
  }
  auto reg = load_arch_registry("");
  REQUIRE(reg);
  CHECK(reg->defs.size() == 11);
  CHECK(reg->failed.empty());
}

TEST_CASE("archdef: every malformed definition is rejected with its file:line message") {
  std::string dir = tests_dir() + "/archdef/bad";
  auto files = list_directory(dir);
  int n = 0;
  for (const auto& file : files) {
    if (!ends_with(file, ".archdef")) continue;
    n++;
    std::string path = dir + "/" + file, stem = file.substr(0, file.size() - 8);
    std::string text = read_text(path);
    // first line: "# expect: LINE: message" (LINE 0: a message about the whole file)
    REQUIRE_MESSAGE(text.rfind("# expect: ", 0) == 0, file);
    size_t c = text.find(':', 10), eol = text.find('\n');
    int line = -1;
    REQUIRE_MESSAGE(c != std::string::npos, file);
    std::from_chars(text.data() + 10, text.data() + c, line);
    REQUIRE_MESSAGE(line >= 0, file);
    std::string msg = text.substr(c + 2, eol - c - 2);
    auto d = archdef_parse(text, path, stem, path);
    REQUIRE_MESSAGE(!d, file << " was accepted");
    CHECK(d.error().code == Errc::archdef);
    std::string prefix = line > 0 ? path + ":" + std::to_string(line) + ": " : path + ": ";
    INFO(file << ": " << d.error().message);
    CHECK(d.error().message.rfind(prefix, 0) == 0);
    CHECK(d.error().message.find(msg) != std::string::npos);
  }
  CHECK(n >= 20);
}

TEST_CASE("archdef: forbidden words are unknown operations, wherever an operation belongs") {
  const char* words[] = {"if",   "else",  "elif", "while",  "for",    "loop",    "goto",
                         "call", "exec",  "eval", "system", "import", "include", "open",
                         "read", "write", "file", "socket", "http",   "env",     "getenv"};
  std::string base = builtin_text("llama");
  for (const char* w : words) {
    // as a statement of its own, as an assignment, and with arbitrary syntax after it
    for (std::string stmt : {std::string(w) + "(x)", "y = " + std::string(w) + "(x)",
                             std::string(w) + " x > 0:", std::string(w) + " \"/etc/passwd\""}) {
      std::string text = replace1(base, "  add(x, o)\n", "  " + stmt + "\n  add(x, o)\n");
      auto d = archdef_parse(text, "t.archdef", "llama", "t.archdef");
      REQUIRE(!d);
      CHECK_MESSAGE(d.error().message.find(std::string("no operation '") + w + "'") != std::string::npos,
                    d.error().message);
    }
    // nor can they sneak in as a section, a header or a param value
    auto d2 = archdef_parse(std::string(w) + "\n" + base, "t.archdef", "llama", "t.archdef");
    REQUIRE(!d2);
    CHECK(d2.error().message.find(std::string("no operation '") + w + "'") != std::string::npos);
  }
  for (const auto& s : op_specs())
    for (const char* w : words) CHECK(std::string(s.name) != w);
}

TEST_CASE("archdef: a user directory overrides a built-in, visibly; a broken file makes the architecture unavailable") {
  test::TempDir dir;
  std::string custom = builtin_text("qwen3") + "# my copy\n";
  REQUIRE(test::write_file(dir.file("qwen3.archdef"), custom));
  std::string broken = replace1(builtin_text("llama"), "  silu(g)\n", "  siluu(g)\n");
  REQUIRE(test::write_file(dir.file("llama.archdef"), broken));
  REQUIRE(test::write_file(dir.file("notes.txt"), "not a definition"));
  auto reg = load_arch_registry(dir.path);
  REQUIRE(reg);
  const ArchDef* q = reg->find("qwen3");
  REQUIRE(q);
  CHECK(q->origin == dir.file("qwen3.archdef"));
  CHECK(q->sha256 == sha256_hex(custom));
  CHECK(reg->find("gemma3")->origin == "builtin");
  CHECK(reg->find("llama") == nullptr);  // no fallback to the built-in
  REQUIRE(reg->failed.size() == 1);
  CHECK(reg->failed[0].name == "llama");
  CHECK(reg->failed[0].error.find(dir.file("llama.archdef") + ":30: no operation 'siluu'") != std::string::npos);

  // loading a llama model now fails and names the broken file; other architectures load
  LoadOptions o;
  o.archdef_dir = dir.path;
  auto m = Model::load(test::model_path("stories260K.gguf"), o);
  REQUIRE(!m);
  CHECK(m.error().code == Errc::archdef);
  CHECK(m.error().message.find("architecture 'llama' is unavailable") != std::string::npos);
  CHECK(m.error().message.find("llama.archdef:30: no operation 'siluu' \xE2\x80\x94 did you mean 'silu'?") !=
        std::string::npos);
  auto m2 = Model::load(test::model_path("synth-qwen3-tiny-q8_0.gguf"), o);
  REQUIRE_MESSAGE(m2, (m2 ? "" : m2.error().message));
  CHECK(llminfer::detail::model_impl(*m2).engine->arch().origin == dir.file("qwen3.archdef"));
  CHECK(llminfer::detail::model_impl(*m2).engine->arch().sha256 == sha256_hex(custom));

  LoadOptions bad;
  bad.archdef_dir = dir.file("missing");
  auto m3 = Model::load(test::model_path("stories260K.gguf"), bad);
  REQUIRE(!m3);
  CHECK(m3.error().message.find("is not a directory") != std::string::npos);
}

TEST_CASE("archdef: a definition for a new architecture name is used for models of that name") {
  // A user can describe an architecture the library does not know: here "llama" under another name
  // is not possible for a GGUF llama file, so check the lookup by a missing name instead.
  auto reg = load_arch_registry("");
  REQUIRE(reg);
  CHECK(reg->find("mistral") == nullptr);
  auto desc = load_description(test::model_path("stories260K.gguf"));
  REQUIRE(desc);
  auto d = std::make_shared<ModelDesc>();
  // a copy of the description under an unknown architecture name
  *d = ModelDesc();
  (*desc)->arch = "mistral";
  auto e = Engine::create(*desc, {});
  REQUIRE(!e);
  CHECK(e.error().code == Errc::unsupported);
  CHECK(e.error().message.find(
            "no architecture definition for 'mistral' (known: gemma2, gemma3, gemma3n, llama, olmo2, phi3, "
            "qwen2, qwen3, smollm3, stablelm, starcoder2)") != std::string::npos);
  test::TempDir dir;
  std::string text = replace1(builtin_text("llama"), "arch llama", "arch mistral");
  REQUIRE(test::write_file(dir.file("mistral.archdef"), text));
  LoadOptions o;
  o.archdef_dir = dir.path;
  auto e2 = Engine::create(*desc, o);
  REQUIRE_MESSAGE(e2, (e2 ? "" : e2.error().message));
  CHECK((*e2)->arch().name == "mistral");
  CHECK((*e2)->arch().origin == dir.file("mistral.archdef"));
}

TEST_CASE("archdef: compile-time errors name the model, the definition line and the tensor") {
  auto desc = load_description(test::model_path("stories260K.gguf"));
  REQUIRE(desc);
  auto compile = [&](const std::string& text) -> Result<std::shared_ptr<const Engine>> {
    test::TempDir dir;
    if (!test::write_file(dir.file("llama.archdef"), text)) return make_error(Errc::io, "write");
    LoadOptions o;
    o.archdef_dir = dir.path;
    return Engine::create(*desc, o);
  };
  std::string base = builtin_text("llama");
  {  // a missing tensor, with the nearest name the model has
    auto e = compile(replace1(base, "blk.{i}.ffn_up.weight", "blk.{i}.ffn_upp.weight"));
    REQUIRE(!e);
    CHECK(e.error().code == Errc::tensor_missing);
    CHECK(e.error().message.find("llama.archdef:29: tensor 'blk.0.ffn_upp.weight' not found in the model") !=
          std::string::npos);
    CHECK(e.error().message.find("did you mean 'blk.0.ffn_up.weight'?") != std::string::npos);
  }
  {  // a shape that does not fit
    auto e =
        compile(replace1(base, "o = matmul(g, blk.{i}.ffn_down.weight)", "o = matmul(h, blk.{i}.ffn_down.weight)"));
    REQUIRE(!e);
    CHECK(e.error().code == Errc::shape_mismatch);
    CHECK(e.error().message.find(
              "llama.archdef:32: matmul: 'blk.0.ffn_down.weight' rows have 172 elements but 'h' is 64 wide") !=
          std::string::npos);
  }
  {  // widths of an elementwise op
    auto e = compile(replace1(base, "  mul(g, u)\n", "  mul(g, h)\n"));
    REQUIRE(!e);
    CHECK(e.error().message.find("llama.archdef:31: mul: 'g' is 172 wide but 'h' is 64 wide") != std::string::npos);
  }
  {  // a param without metadata or default
    auto e = compile(replace1(base, "kind decoder\n", "kind decoder\nparam w = {arch}.no.such.key\n"));
    REQUIRE(!e);
    CHECK(e.error().message.find("llama.archdef:6: param 'w': the model has no metadata llama.no.such.key") !=
          std::string::npos);
  }
  {  // '| none' makes a missing tensor fine; without it, not
    auto ok = compile(base);
    REQUIRE(ok);
    auto e = compile(replace1(base, "blk.{i}.attn_q.bias | none", "blk.{i}.attn_q.bias"));
    REQUIRE(!e);
    CHECK(e.error().message.find("tensor 'blk.0.attn_q.bias' not found") != std::string::npos);
  }
}

TEST_CASE("archdef: a weight type the kernels cannot compute fails the load, naming tensor and type") {
  // Q4_K / Q6_K are computed once the quantized kernels land; until then the load says so.
  auto desc = load_description(test::model_path("synth-qwen3-tiny-q4_k_m.gguf"));
  REQUIRE(desc);
  bool all = true;
  for (const auto& t : (*desc)->tensors) all = all && dtype_computable(t.type);
  auto e = Engine::create(*desc, {});
  if (all) {
    CHECK(e);
  } else {
    REQUIRE(!e);
    CHECK(e.error().code == Errc::unsupported);
    CHECK(e.error().message.find("which this build cannot compute yet") != std::string::npos);
    // the tensor it names really has a type that is not computable
    const std::string& msg = e.error().message;
    size_t a = msg.find("tensor '"), b = msg.find("' has type ");
    REQUIRE(a != std::string::npos);
    REQUIRE(b != std::string::npos);
    const TensorView* t = (*desc)->find(msg.substr(a + 8, b - a - 8));
    REQUIRE(t);
    CHECK(!dtype_computable(t->type));
    CHECK(msg.find(std::string("has type ") + dtype_name(t->type) + ", which") != std::string::npos);
  }
}

TEST_CASE("status: lists the definitions in effect, the failures, and dumps a text") {
  auto r = test::run_cli("status --json");
  CHECK(r.status == 0);
  auto j = json_parse(r.out, "status");
  REQUIRE(j);
  CHECK((*j)["architectures"].size() == 11);
  CHECK((*j)["architectures"][1]["name"].as_string() == "gemma3");
  CHECK((*j)["architectures"][1]["origin"].as_string() == "builtin");
  CHECK((*j)["architectures"][1]["steps_per_layer"].as_int() == 21);
  CHECK((*j)["architectures"][1]["sha256"].as_string() == sha256_hex(builtin_text("gemma3")));
  CHECK((*j)["failed"].size() == 0);
  CHECK((*j)["simd"].as_string() == simd_compiled());

  test::TempDir dir;
  REQUIRE(test::write_file(dir.file("qwen2.archdef"), replace1(builtin_text("qwen2"), "rope(q, neox)", "rope(q, nx)")));
  REQUIRE(test::write_file(dir.file("gemma3.archdef"), builtin_text("gemma3")));
  auto r2 = test::run_cli("status --json --archdef " + test::quote(dir.path));
  CHECK(r2.status == 0);
  auto j2 = json_parse(r2.out, "status");
  REQUIRE(j2);
  CHECK((*j2)["architectures"].size() == 10);
  CHECK((*j2)["architectures"][1]["origin"].as_string() == dir.file("gemma3.archdef"));
  REQUIRE((*j2)["failed"].size() == 1);
  CHECK((*j2)["failed"][0]["path"].as_string() == dir.file("qwen2.archdef"));
  CHECK((*j2)["failed"][0]["error"].as_string().find("qwen2.archdef:19: expected a rope layout") != std::string::npos);

  auto t = test::run_cli("status --archdef " + test::quote(dir.path));
  CHECK(t.status == 0);
  CHECK(t.out.find("gemma3") != std::string::npos);
  CHECK(t.out.find(sha256_hex(builtin_text("llama")).substr(0, 12)) != std::string::npos);
  CHECK(t.out.find("did not load") != std::string::npos);

  auto dump = test::run_cli("status --dump llama");
  CHECK(dump.status == 0);
  CHECK(dump.out == builtin_text("llama"));  // it declares every convention: the text is all that runs
  // a definition that leaves conventions undeclared: the dump adds the defaults in effect
  test::TempDir old;
  std::string bare = builtin_text("qwen2");
  for (const auto& c : archdef_conventions()) {
    size_t a = bare.find("convention " + std::string(c.name));
    REQUIRE(a != std::string::npos);
    bare.erase(a, bare.find('\n', a) + 1 - a);
  }
  REQUIRE(test::write_file(old.file("qwen2.archdef"), bare));
  auto dump2 = test::run_cli("status --dump qwen2 --archdef " + test::quote(old.path));
  CHECK(dump2.status == 0);
  CHECK(dump2.out == bare +
                         "# not declared above, in effect by default:\n# convention matmul_input = gguf_rounded\n"
                         "# convention hf_rope = neox\n# convention hf_norm_offset = table\n");
  CHECK(test::run_cli("status --dump nosuch").status == 2);
  CHECK(test::run_cli("status --dump qwen2 --archdef " + test::quote(dir.path)).status == 2);
  CHECK(test::run_cli("status --archdef /nonexistent/dir").status == 2);
  CHECK(test::run_cli("status --bogus").status == 1);
}
