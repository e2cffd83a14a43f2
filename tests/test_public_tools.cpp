// The public functions the CLI's subcommands are built on (issue 15: the CLI uses only the public
// API): Model::logits, Model::batch_stats, Model::render_chat_template and
// llminfer::render_chat_template; inspect_model_file, Tokenizer, load_archdefs, kernel_info,
// compare_logits, top_k_ids and logsumexp. Each is checked against another path through the
// library (Session::eval, Model::apply_chat_template, Model::tokenize, Model::info), against the
// oracle's goldens of the model files (tests/goldens/info), against llama2.c's own figures for
// stories260K, or against values worked out here by hand.
#define LLMINFER_IMPLEMENTATION
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "common.hpp"

using llminfer::ChatTemplateOptions;
using llminfer::Errc;
using llminfer::LoadOptions;
using llminfer::Model;

namespace {

Model load_tools_model(const std::string& file, LoadOptions o = {}) {
  if (o.threads == 0) o.threads = 1;
  auto m = Model::load(test::model_path(file), o);
  REQUIRE_MESSAGE(m, (m ? "" : m.error().message));
  return *m;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("public tools: Model::logits equals Session::eval's logits bit for bit, every position or the last") {
  for (const char* file : {"synth-qwen3-tiny-q8_0.gguf", "synth-gemma3-tiny-q8_0.gguf"}) {
    CAPTURE(file);
    LoadOptions lo;
    lo.kv_type = llminfer::KvType::f32;
    Model m = load_tools_model(file, lo);
    const int nv = m.info().n_vocab;
    REQUIRE(nv > 0);
    const std::vector<int32_t> ids = {1, 5, 9, 2, 7, 3};
    auto all = m.logits(ids, true);
    REQUIRE_MESSAGE(all, (all ? "" : all.error().message));
    REQUIRE(all->size() == ids.size() * size_t(nv));
    auto s = m.session();
    REQUIRE(s.eval(ids, true));
    REQUIRE(s.logits().size() == all->size());
    CHECK(std::memcmp(s.logits().data(), all->data(), all->size() * 4) == 0);
    auto last = m.logits(ids);
    REQUIRE(last);
    REQUIRE(last->size() == size_t(nv));
    CHECK(std::memcmp(last->data(), all->data() + (ids.size() - 1) * size_t(nv), size_t(nv) * 4) == 0);
    // rows differ from one another (a copy of one row everywhere would pass the checks above only
    // if Session::eval had the same bug; this catches it anyway)
    CHECK(std::memcmp(all->data(), all->data() + size_t(nv), size_t(nv) * 4) != 0);

    auto none = m.logits(std::vector<int32_t>{});
    REQUIRE_FALSE(none);
    CHECK(none.error().code == Errc::invalid_argument);
    auto outside = m.logits(std::vector<int32_t>{1, nv});
    REQUIRE_FALSE(outside);
    CHECK(contains(outside.error().message, "outside the vocabulary"));
  }
  Model empty;
  auto r = empty.logits(std::vector<int32_t>{1});
  REQUIRE_FALSE(r);
  CHECK(contains(r.error().message, "not loaded"));
}

TEST_CASE("public tools: Model::batch_stats counts the batcher's steps, and nothing with batching off") {
  CHECK(Model().batch_stats().steps == 0);
  Model m = load_tools_model("synth-qwen3-tiny-q8_0.gguf");
  const auto before = m.batch_stats();
  auto s = m.session();
  REQUIRE(s.eval(std::vector<int32_t>{1, 2, 3}));
  REQUIRE(s.eval(std::vector<int32_t>{4}));
  const auto after = m.batch_stats();
  CHECK(after.steps >= before.steps + 2);  // two evaluations, each at least one step
  CHECK(after.sequences - before.sequences >= after.steps - before.steps);
  CHECK(after.shared_steps <= after.steps);

  LoadOptions off;
  off.batch = 1;
  Model m1 = load_tools_model("synth-qwen3-tiny-q8_0.gguf", off);
  auto s1 = m1.session();
  REQUIRE(s1.eval(std::vector<int32_t>{1, 2, 3}));
  CHECK(m1.batch_stats().steps == 0);
  CHECK(m1.batch_stats().sequences == 0);
}

TEST_CASE("public tools: render_chat_template equals apply_chat_template for role/content messages") {
  const std::string path = test::model_path("synth-qwen3-tiny-q8_0.gguf");
  Model m = load_tools_model("synth-qwen3-tiny-q8_0.gguf");
  std::vector<llminfer::Message> msgs = {{"system", "Be brief."}, {"user", "Hi <|im_end|> there"}};
  const std::string json =
      R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi <|im_end|> there"}])";
  for (bool agp : {false, true}) {
    CAPTURE(agp);
    auto want = m.apply_chat_template(msgs, agp);
    REQUIRE(want);
    ChatTemplateOptions o;
    o.add_generation_prompt = agp;
    auto got = m.render_chat_template(json, o);
    REQUIRE_MESSAGE(got, (got ? "" : got.error().message));
    CHECK(got->text == *want);
    CHECK(got->fallback == !m.info().chat_template);
    // the user's text is a content span, byte for byte
    bool found = false;
    for (auto [b, e] : got->content_spans) found |= got->text.substr(b, e - b) == "Hi <|im_end|> there";
    CHECK(found);
    auto from_file = llminfer::render_chat_template(path, json, o);  // description only, same result
    REQUIRE(from_file);
    CHECK(from_file->text == got->text);
    CHECK(from_file->content_spans == got->content_spans);
  }
}

TEST_CASE("public tools: render_chat_template's variables, kwargs, tools and documents reach the template") {
  ChatTemplateOptions o;
  o.template_source =
      "{{ bos_token }}|{{ x }}|{{ flag }}|{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}"
      "{% if tools %}T={{ tools[0].name }}{% endif %}{% if documents %}D={{ documents[0] }}{% endif %}"
      "{% if add_generation_prompt %}GEN{% endif %}";
  const std::string conv =
      R"({"messages":[{"role":"user","content":"Hi"}],"tools":[{"name":"f"}],"documents":["doc"],"kwargs":{"x":1,"flag":"k"}})";
  auto r = llminfer::render_chat_template("", conv, o);
  REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
  CHECK(r->text == "|1|k|user:Hi;T=fD=doc");
  CHECK_FALSE(r->fallback);
  // "Hi", "f" and "doc" are untrusted text: each is one content span
  std::vector<std::string> spans;
  for (auto [b, e] : r->content_spans) spans.push_back(r->text.substr(b, e - b));
  CHECK(std::find(spans.begin(), spans.end(), "Hi") != spans.end());
  CHECK(std::find(spans.begin(), spans.end(), "f") != spans.end());
  CHECK(std::find(spans.begin(), spans.end(), "doc") != spans.end());

  // variables override kwargs; JSON values are JSON, other text a string; tools replace the tools
  o.add_generation_prompt = true;
  o.variables = {{"x", "2"}, {"flag", "not json"}, {"bos_token", "\"<s>\""}, {"tools", R"([{"name":"g"}])"}};
  r = llminfer::render_chat_template("", conv, o);
  REQUIRE(r);
  CHECK(r->text == "<s>|2|not json|user:Hi;T=gD=docGEN");

  // errors name the input
  o.messages_name = "conv.json";
  auto bad = llminfer::render_chat_template("", "[{\"role\":", o);
  REQUIRE_FALSE(bad);
  CHECK(contains(bad.error().message, "conv.json"));
  bad = llminfer::render_chat_template("", R"({"role":"user"})", o);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == Errc::invalid_argument);
  CHECK(contains(bad.error().message, "conv.json: expected a JSON array"));
  bad = llminfer::render_chat_template("", R"([1])", o);
  REQUIRE_FALSE(bad);
  CHECK(contains(bad.error().message, "conv.json: every message must be a JSON object"));
  ChatTemplateOptions empty_name = o;
  empty_name.variables = {{"", "1"}};
  bad = llminfer::render_chat_template("", "[]", empty_name);
  REQUIRE_FALSE(bad);
  CHECK(contains(bad.error().message, "empty name"));
  ChatTemplateOptions no_template;
  bad = llminfer::render_chat_template("", "[]", no_template);
  REQUIRE_FALSE(bad);
  CHECK(contains(bad.error().message, "no model and no template_source"));
  bad = llminfer::render_chat_template(test::model_path("no-such-model.gguf"), "[]", no_template);
  REQUIRE_FALSE(bad);
  CHECK(contains(bad.error().message, "no-such-model.gguf"));
  ChatTemplateOptions broken;
  broken.template_source = "{% if %}";
  bad = llminfer::render_chat_template("", "[]", broken);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == Errc::template_error);
  ChatTemplateOptions raises;
  raises.template_source = "{{ raise_exception('no system messages') }}";
  bad = llminfer::render_chat_template("", "[]", raises);
  REQUIRE_FALSE(bad);
  CHECK(contains(bad.error().message, "no system messages"));
  CHECK_FALSE(Model().render_chat_template("[]"));
}

TEST_CASE("public tools: llminfer template -m MODEL --template FILE renders FILE alone, with the model's tokens") {
  // (before the template subcommand used render_chat_template, the file was appended to the
  // model's own template and both were rendered)
  test::TempDir dir;
  const std::string msgs = dir.file("m.json"), tpl = dir.file("t.jinja");
  REQUIRE(test::write_file(msgs, R"([{"role":"user","content":"a"},{"role":"assistant","content":"b"}])"));
  REQUIRE(test::write_file(tpl, "[{{ eos_token }}]{{ x }}{% for m in messages %}{{ m.content }}{% endfor %}"));
  const std::string model = test::model_path("synth-qwen3-tiny-q8_0.gguf");
  Model m = load_tools_model("synth-qwen3-tiny-q8_0.gguf");
  const int32_t eos = m.info().eos;
  REQUIRE(eos >= 0);
  const std::string eos_text = m.detokenize(std::vector<int32_t>{eos});
  auto r = test::run_cli("template -m " + test::quote(model) + " --template " + test::quote(tpl) + " --messages " +
                         test::quote(msgs) + " --var x");
  CHECK(r.status == 0);
  CHECK(r.out == "[" + eos_text + "]Trueab");
}

// ---- inspect_model_file ----

TEST_CASE("public tools: inspect_model_file gives every model file's figures as the oracle's goldens say") {
  std::vector<uint8_t> bytes;
  const std::string path = test::source_dir() + "/tests/goldens/info/info.json";
  REQUIRE_MESSAGE(test::read_file(path, bytes), path);
  auto goldens =
      llminfer::detail::json_parse(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path);
  REQUIRE(goldens);
  int gguf_files = 0;
  for (const auto& [rel, g] : (*goldens)["models"].members) {
    const std::string model = rel;  // (clang 14 cannot capture a structured binding)
    CAPTURE(model);
    const bool gguf = g["format"].as_string() == "gguf";
    llminfer::InspectOptions o;
    o.metadata = o.tensors = gguf;  // the goldens list a GGUF file's tensors and count its keys
    auto f = llminfer::inspect_model_file(test::model_path(rel), o);
    REQUIRE_MESSAGE(f, (f ? "" : f.error().message));
    CHECK(f->path == test::model_path(rel));
    CHECK(f->format == g["format"].as_string());
    CHECK(f->architecture == g["architecture"].as_string());
    CHECK(f->name == g["name"].as_string());
    CHECK(f->file_bytes == uint64_t(g["file_bytes"].i));
    CHECK(f->n_params == uint64_t(g["n_params"].i));
    CHECK(f->n_tensors == uint64_t(g["n_tensors"].i));
    CHECK(f->tensor_bytes == uint64_t(g["tensor_bytes"].i));
    std::map<std::string, uint64_t> want_types, got_types(f->tensor_types.begin(), f->tensor_types.end());
    for (const auto& [type, n] : g["tensor_types"].members) want_types[type] = uint64_t(n.i);
    CHECK(got_types == want_types);
    CHECK(std::is_sorted(f->tensor_types.begin(), f->tensor_types.end()));
    const auto& h = g["hparams"];
    CHECK(f->n_layer == h["n_layer"].i);
    CHECK(f->n_embd == h["n_embd"].i);
    CHECK(f->n_head == h["n_head"].i);
    CHECK(f->n_head_kv == h["n_head_kv"].i);
    CHECK(f->n_ff == h["n_ff"].i);
    CHECK(f->n_ctx_train == h["n_ctx_train"].i);
    CHECK(f->head_dim == h["head_dim"].i);
    CHECK(f->rope_freq_base == h["rope_freq_base"].as_number());
    const auto& t = g["tokenizer"];
    CHECK(f->tokenizer == t["model"].as_string());
    if (t.find("pre")) CHECK(f->tokenizer_pre == t["pre"].as_string());
    CHECK(f->n_vocab == t["n_vocab"].i);
    CHECK(f->bos == t["bos"].i);
    CHECK(f->eos == t["eos"].i);
    CHECK(!f->eos_ids.empty());
    for (int32_t id : f->eos_ids) {  // among the ids llama.cpp ends a generation at
      bool found = false;
      for (const auto& e : g["eog_ids"].items) found |= e.i == id;
      CHECK_MESSAGE(found, id);
    }
    CHECK(f->chat_template == g["chat_template"].as_bool());
    if (!gguf) {
      CHECK(f->metadata.empty());
      CHECK(f->tensors.empty());
      continue;
    }
    gguf_files++;
    CHECK(f->metadata.size() == size_t(g["n_metadata"].i));
    REQUIRE(f->tensors.size() == g["tensors"].items.size());
    for (size_t k = 0; k < f->tensors.size(); k++) {
      const llminfer::TensorInfo& a = f->tensors[k];
      const auto& b = g["tensors"].items[k];  // [name, type, ne, offset, bytes]
      CHECK(a.name == b[0].as_string());
      CHECK(a.type == b[1].as_string());
      REQUIRE(a.shape.size() == b[2].items.size());
      for (size_t d = 0; d < a.shape.size(); d++) CHECK(a.shape[d] == b[2][d].i);
      CHECK(a.offset == uint64_t(b[3].i));
      CHECK(a.bytes == uint64_t(b[4].i));
    }
  }
  CHECK(gguf_files >= 14);
}

TEST_CASE("public tools: inspect_model_file's metadata values (stories260K: llama2.c's tok512 and config)") {
  const std::string model = test::model_path("stories260K.gguf");
  auto plain = llminfer::inspect_model_file(model);
  REQUIRE(plain);
  CHECK(plain->metadata.empty());  // only when asked
  CHECK(plain->tensors.empty());
  CHECK(plain->n_tensors == 48);

  llminfer::InspectOptions o;
  o.metadata = true;
  auto f = llminfer::inspect_model_file(model, o);
  REQUIRE(f);
  CHECK(f->tensors.empty());
  std::map<std::string, llminfer::MetadataEntry> by_key;
  for (const auto& e : f->metadata) {
    CHECK(e.source.empty());  // a GGUF file's own pairs
    by_key[e.key] = e;
  }
  CHECK(f->metadata.front().key == "general.architecture");  // file order
  const auto& name = by_key["general.name"];
  CHECK(name.type == "string");
  CHECK(name.value == "stories260K");  // a string as itself, not JSON
  CHECK(by_key["llama.block_count"].type == "u32");
  CHECK(by_key["llama.block_count"].value == "5");
  CHECK(by_key["llama.feed_forward_length"].value == "172");
  CHECK(by_key["llama.attention.layer_norm_rms_epsilon"].type == "f32");
  CHECK(by_key["llama.attention.layer_norm_rms_epsilon"].value == "9.999999747378752e-06");  // 1e-5 as f32
  CHECK(by_key["tokenizer.ggml.add_bos_token"].value == "true");
  // tok512: ids 0, 1, 2 are <unk>, <s>, </s>; 3.. the byte pieces
  const auto& tokens = by_key["tokenizer.ggml.tokens"];
  CHECK(tokens.type == "array");
  CHECK(tokens.element_type == "string");
  CHECK(tokens.length == 512);
  CHECK(
      tokens.value ==
      R"({"type":"string","length":512,"first":["<unk>","<s>","</s>","<0x00>","<0x01>","<0x02>","<0x03>","<0x04>"]})");
  CHECK(by_key["tokenizer.ggml.token_type"].value == R"({"type":"i32","length":512,"first":[2,3,3,6,6,6,6,6]})");

  o.max_array_items = 0;  // whole arrays
  auto whole = llminfer::inspect_model_file(model, o);
  REQUIRE(whole);
  for (const auto& e : whole->metadata) {
    if (e.key != "tokenizer.ggml.tokens") continue;
    CHECK(e.value.rfind(R"(["<unk>","<s>","</s>","<0x00>",)", 0) == 0);
    CHECK(e.value.back() == ']');
    CHECK(std::count(e.value.begin(), e.value.end(), '"') >= 2 * 512);
  }
  o.max_array_items = 2;
  auto two = llminfer::inspect_model_file(model, o);
  REQUIRE(two);
  for (const auto& e : two->metadata)
    if (e.key == "tokenizer.ggml.scores") CHECK(e.value == R"({"type":"f32","length":512,"first":[0,0]})");
}

TEST_CASE("public tools: inspect_model_file reads a directory's config files, safetensors header and tensors") {
  llminfer::InspectOptions o;
  o.metadata = o.tensors = true;
  auto f = llminfer::inspect_model_file(test::model_path("hf/smollm2-tiny/mlx-4bit"), o);
  REQUIRE_MESSAGE(f, (f ? "" : f.error().message));
  CHECK(f->format == "safetensors");
  CHECK(f->name == "mlx-4bit");
  std::map<std::string, const llminfer::MetadataEntry*> by_key;
  std::vector<std::string> sources;
  for (const auto& e : f->metadata) {
    by_key[e.source + ":" + e.key] = &e;
    if (sources.empty() || sources.back() != e.source) sources.push_back(e.source);
  }
  CHECK(sources == std::vector<std::string>{"config.json", "generation_config.json", "__metadata__"});
  REQUIRE(by_key.count("config.json:quantization"));
  CHECK(by_key["config.json:quantization"]->type == "json");
  CHECK(by_key["config.json:quantization"]->value.find(R"("bits":4)") != std::string::npos);
  REQUIRE(by_key.count("generation_config.json:eos_token_id"));
  CHECK(by_key["generation_config.json:eos_token_id"]->value == "2");
  REQUIRE(by_key.count("__metadata__:format"));
  CHECK(by_key["__metadata__:format"]->type == "string");
  CHECK(by_key["__metadata__:format"]->value == "mlx");
  REQUIRE(f->tensors.size() == 20);
  CHECK(f->tensors[0].type == "mlx_q4");
  uint64_t bytes = 0;
  for (const auto& t : f->tensors) bytes += t.bytes;
  CHECK(bytes == f->tensor_bytes);

  auto missing = llminfer::inspect_model_file("/nonexistent/model.gguf");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == Errc::io);
  CHECK(contains(missing.error().message, "/nonexistent/model.gguf"));
  test::TempDir dir;
  REQUIRE(test::write_file(dir.file("x.gguf"), std::string("not a model at all")));
  auto bad = llminfer::inspect_model_file(dir.file("x.gguf"));
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == Errc::bad_format);
}

// ---- Tokenizer ----

TEST_CASE("public tools: Tokenizer::load tokenizes as the model does, without its weights") {
  // llama2.c's reference: "Once upon a time" is BOS + 403 407 261 378 with tok512
  auto t = llminfer::Tokenizer::load(test::model_path("stories260K.gguf"));
  REQUIRE_MESSAGE(t, (t ? "" : t.error().message));
  CHECK(t->loaded());
  CHECK(t->n_vocab() == 512);
  auto ids = t->tokenize("Once upon a time");
  REQUIRE(ids);
  CHECK(*ids == std::vector<int32_t>{1, 403, 407, 261, 378});
  auto bare = t->tokenize("Once upon a time", /*add_special=*/false);
  REQUIRE(bare);
  CHECK(*bare == std::vector<int32_t>{403, 407, 261, 378});
  CHECK(t->detokenize(*bare) == "Once upon a time");
  // llama2.c's greedy continuation (the reference file's first tokens after the prompt)
  const std::vector<int32_t> story = {403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426};
  CHECK(t->detokenize(story).rfind("Once upon a time, there was a little girl named Lily.", 0) == 0);
  // ids outside the vocabulary add nothing
  CHECK(t->detokenize(std::vector<int32_t>{403, 512, -1, 407}) == t->detokenize(std::vector<int32_t>{403, 407}));
  // the same as a loaded model's
  Model m = load_tools_model("stories260K.gguf");
  for (const char* text : {"Once upon a time", "Lily's mom said, \"Lily, let's go!\"", "", "\xff x \xe2\x82"}) {
    CAPTURE(text);
    auto a = t->tokenize(text), b = m.tokenize(text);
    REQUIRE(a);
    REQUIRE(b);
    CHECK(*a == *b);
    CHECK(t->detokenize(*a) == m.detokenize(*b));
  }
  // copies share it
  llminfer::Tokenizer copy = *t;
  CHECK(copy.n_vocab() == 512);

  llminfer::Tokenizer none;
  CHECK_FALSE(none.loaded());
  CHECK(none.n_vocab() == 0);
  auto e = none.tokenize("x");
  REQUIRE_FALSE(e);
  CHECK(e.error().code == Errc::invalid_argument);
  CHECK(none.detokenize(std::vector<int32_t>{1}).empty());
}

TEST_CASE("public tools: Tokenizer::load on a folder of tokenizer files alone; skip_special; errors") {
  test::TempDir dir;
  const std::string src = test::model_path("hf/qwen3-tiny/hf-bf16");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    std::vector<uint8_t> b;
    REQUIRE(test::read_file(src + "/" + f, b));
    REQUIRE(test::write_file(dir.file(f), b));
  }
  auto t = llminfer::Tokenizer::load(dir.path);
  REQUIRE_MESSAGE(t, (t ? "" : t.error().message));
  auto full = llminfer::Tokenizer::load(src);  // the model directory
  REQUIRE(full);
  CHECK(t->n_vocab() == full->n_vocab());
  auto ids = t->tokenize("Hello world", false);
  REQUIRE(ids);
  CHECK(*ids == std::vector<int32_t>{9707, 1879});  // Qwen's vocabulary (as tests/test_tokenizer.cpp's CLI case)
  auto special = t->tokenize("<|im_start|>Hello", false, /*parse_special=*/true);
  REQUIRE(special);
  CHECK(*special == std::vector<int32_t>{151644, 9707});
  CHECK(t->detokenize(*special) == "<|im_start|>Hello");
  CHECK(t->detokenize(*special, /*skip_special=*/true) == "Hello");
  auto as_text = t->tokenize("<|im_start|>", false, false);  // not parsed: plain text
  REQUIRE(as_text);
  CHECK(as_text->size() > 1);

  test::TempDir empty;
  auto e = llminfer::Tokenizer::load(empty.path);
  REQUIRE_FALSE(e);
  auto missing = llminfer::Tokenizer::load("/nonexistent/model.gguf");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == Errc::io);
}

// ---- load_archdefs, kernel_info ----

TEST_CASE("public tools: load_archdefs lists the built-ins, a directory's overrides and its broken files") {
  auto a = llminfer::load_archdefs();
  REQUIRE(a);
  std::vector<std::string> names;
  for (const auto& d : a->defs) {
    names.push_back(d.name);
    CAPTURE(d.name);
    CHECK(d.origin == "builtin");
    CHECK(d.sha256 == llminfer::detail::sha256_hex(d.text));
    CHECK(("\n" + d.text).find("\narch " + d.name + "\n") != std::string::npos);  // its `arch` line
    CHECK(d.steps_per_layer > 0);
    CHECK((d.default_conventions.empty() ||
           d.default_conventions.rfind("# not declared above, in effect by default:\n# convention ", 0) == 0));
  }
  // the manual's list of built-in architectures, sorted
  CHECK(names == std::vector<std::string>{"gemma2", "gemma3", "gemma3n", "llama", "olmo2", "phi3", "qwen2", "qwen3",
                                          "smollm3", "stablelm", "starcoder2"});
  CHECK(a->failed.empty());

  // a directory: llama replaced (by its own text and a comment), one broken file
  const llminfer::ArchdefInfo* llama = nullptr;
  for (const auto& d : a->defs)
    if (d.name == "llama") llama = &d;
  REQUIRE(llama);
  test::TempDir dir;
  REQUIRE(test::write_file(dir.file("llama.archdef"), llama->text + "# mine\n"));
  REQUIRE(
      test::write_file(dir.file("qwen2.archdef"), std::string("arch qwen2\nkind decoder\nprologue\n  x = embd(\n")));
  auto b = llminfer::load_archdefs(dir.path);
  REQUIRE(b);
  CHECK(b->defs.size() == a->defs.size() - 1);  // qwen2 is unavailable, not the built-in
  for (const auto& d : b->defs) {
    CHECK(d.name != "qwen2");
    if (d.name != "llama") continue;
    CHECK(d.origin == dir.file("llama.archdef"));
    CHECK(d.text == llama->text + "# mine\n");
    CHECK(d.sha256 != llama->sha256);
    CHECK(d.steps_per_layer == llama->steps_per_layer);
  }
  REQUIRE(b->failed.size() == 1);
  CHECK(b->failed[0].name == "qwen2");
  CHECK(b->failed[0].path == dir.file("qwen2.archdef"));
  CHECK(b->failed[0].error.rfind(dir.file("qwen2.archdef") + ":", 0) == 0);

  auto none = llminfer::load_archdefs("/nonexistent/archdefs");
  REQUIRE_FALSE(none);
  CHECK(none.error().code == Errc::io);
}

TEST_CASE("public tools: kernel_info names the kernels a loaded model runs") {
  const llminfer::KernelInfo k = llminfer::kernel_info();
  CHECK((k.simd == "avx512" || k.simd == "avx512+amx" || k.simd == "avx2" || k.simd == "neon" || k.simd == "scalar" ||
         k.simd == "dispatch"));
  REQUIRE(!k.levels.empty());
  if (k.simd == "avx512+amx")  // the same kernels without the tiles too
    CHECK(k.levels == std::vector<std::string>{"avx512", "avx512+amx"});
  else if (k.simd == "avx2")  // with and without the block-sum order for prompts
    CHECK(k.levels == std::vector<std::string>{"avx2", "avx2+sums"});
  else if (k.simd != "dispatch")
    CHECK(k.levels == std::vector<std::string>{k.simd});
  REQUIRE_MESSAGE(!k.selected.empty(), k.error.message);
  CHECK(k.error.code == Errc::ok);
  CHECK(std::find(k.levels.begin(), k.levels.end(), k.selected) != k.levels.end());
  CHECK(load_tools_model("stories260K.gguf").info().kernels == k.selected);
}

// ---- compare_logits, top_k_ids, logsumexp ----

TEST_CASE("public tools: compare_logits, worked out by hand") {
  // position 0 equal; position 1 reversed: top-1 2 vs 0, Pearson -1; both top-10 sets are {0, 1, 2}
  const std::vector<float> ours = {1, 2, 3, 3, 2, 1}, ref = {1, 2, 3, 1, 2, 3};
  auto r = llminfer::compare_logits(ours, ref, 3);
  REQUIRE(r);
  CHECK(r->positions == 2);
  CHECK(r->top1_matches == 1);
  CHECK_FALSE(r->top1_match_all);
  CHECK(r->first_divergence == 1);
  CHECK(r->pearson_mean == doctest::Approx(0.0));
  CHECK(r->pearson_min == doctest::Approx(-1.0));
  CHECK(r->top10_overlap_mean == 3.0);
  CHECK(r->max_abs_diff == 2.0);
  CHECK(r->ref_max_abs == 3.0);
  CHECK(r->max_rel_diff == doctest::Approx(2.0 / 3.0));
  CHECK(r->nonfinite_ours == 0);
  CHECK(r->first_nonfinite_pos == -1);

  auto same = llminfer::compare_logits(ref, ref, 3);
  REQUIRE(same);
  CHECK(same->top1_match_all);
  CHECK(same->first_divergence == -1);
  CHECK(same->pearson_min == doctest::Approx(1.0));
  CHECK(same->max_abs_diff == 0.0);

  std::vector<float> nan = ref;
  nan[4] = NAN;
  auto n = llminfer::compare_logits(nan, ref, 3);
  REQUIRE(n);
  CHECK(n->nonfinite_ours == 1);
  CHECK(n->nonfinite_ref == 0);
  CHECK(n->first_nonfinite_pos == 1);
  CHECK(n->first_nonfinite_id == 1);
  CHECK(n->top1_matches == 1);  // a position with a NaN never matches

  CHECK(llminfer::compare_logits(ours, std::span<const float>(ref).first(3), 3).error().code == Errc::invalid_argument);
  CHECK(llminfer::compare_logits(std::span<const float>(ours).first(5), std::span<const float>(ref).first(5), 3)
            .error()
            .code == Errc::invalid_argument);
  CHECK(llminfer::compare_logits(ours, ref, 0).error().code == Errc::invalid_argument);
}

TEST_CASE("public tools: compare_logits of stories260K against llama2.c's own logits") {
  // the first 16 positions of llama2.c's greedy sequence (stories260K.llama2c-reference.txt) and its
  // float32 logits for them
  const std::vector<int32_t> ids = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426};
  std::vector<uint8_t> bytes;
  REQUIRE(test::read_file(test::model_path("stories260K.llama2c-logits16.f32"), bytes));
  REQUIRE(bytes.size() == 16 * 512 * 4);
  std::vector<float> ref(16 * 512);
  std::memcpy(ref.data(), bytes.data(), bytes.size());
  LoadOptions lo;
  lo.kv_type = llminfer::KvType::f32;
  Model m = load_tools_model("stories260K.gguf", lo);
  auto ours = m.logits(ids, true);
  REQUIRE(ours);
  auto r = llminfer::compare_logits(*ours, ref, 512);
  REQUIRE(r);
  CHECK(r->positions == 16);
  CHECK(r->top1_match_all);
  CHECK(r->pearson_min > 0.999999);
  CHECK(r->top10_overlap_mean >= 9.5);
  CHECK(r->max_abs_diff < 1e-4);  // as tests/test_stories.cpp holds the engine to
  CHECK(r->nonfinite_ours + r->nonfinite_ref == 0);
  // each position's argmax is the next token of the greedy sequence
  for (size_t p = 0; p + 1 < ids.size(); p++) {
    auto top = llminfer::top_k_ids(std::span<const float>(*ours).subspan(p * 512, 512), 1);
    REQUIRE(top.size() == 1);
    CHECK(top[0] == ids[p + 1]);
  }
  // shifted by one position, the reference disagrees from the start
  std::vector<float> shifted(ref.begin() + 512, ref.end());
  auto s = llminfer::compare_logits(std::span<const float>(*ours).first(15 * 512), shifted, 512);
  REQUIRE(s);
  CHECK(s->first_divergence == 0);
}

TEST_CASE("public tools: top_k_ids and logsumexp") {
  const std::vector<float> x = {0.5f, 2, 2, -1, 3};
  CHECK(llminfer::top_k_ids(x, 3) == std::vector<int32_t>{4, 1, 2});  // ties: the lower id first
  CHECK(llminfer::top_k_ids(x, 10) == std::vector<int32_t>{4, 1, 2, 0, 3});
  CHECK(llminfer::top_k_ids(x, 0).empty());
  CHECK(llminfer::top_k_ids(std::vector<float>{}, 3).empty());
  CHECK(llminfer::logsumexp(std::vector<float>{0, 0}) == doctest::Approx(std::log(2.0)));
  CHECK(llminfer::logsumexp(std::vector<float>{1000, 1000}) == doctest::Approx(1000 + std::log(2.0)));  // no overflow
  CHECK(llminfer::logsumexp(std::vector<float>{-INFINITY, 0}) == 0.0);
  CHECK(llminfer::logsumexp(std::vector<float>{std::log(1.0f), std::log(2.0f), std::log(3.0f)}) ==
        doctest::Approx(std::log(6.0)));
  CHECK(std::isinf(llminfer::logsumexp(std::vector<float>{})));
}
