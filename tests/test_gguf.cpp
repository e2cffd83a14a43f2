// The GGUF reader on synthetic files: every metadata value type, nested arrays, v2 and v3,
// general.alignment, the tensor table, type traits, and the model description built from it.
#define LLMINFER_IMPLEMENTATION
#include "common.hpp"

using namespace llminfer::detail;

namespace {

llminfer::Result<GgufFile> parse(const std::vector<uint8_t>& b, const std::string& name = "t.gguf") {
  return gguf_parse(b.data(), b.size(), name);
}

std::vector<uint8_t> le64(uint64_t v) {
  std::vector<uint8_t> b(8);
  std::memcpy(b.data(), &v, 8);
  return b;
}
std::vector<uint8_t> cat(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
std::vector<uint8_t> gstr(const std::string& s) {
  auto b = le64(s.size());
  b.insert(b.end(), s.begin(), s.end());
  return b;
}

}  // namespace

TEST_CASE("gguf: every metadata value type, in versions 2 and 3") {
  for (uint32_t version : {2u, 3u}) {
    test::GgufWriter w;
    uint8_t u8v = 250;
    int8_t i8v = -100;
    uint16_t u16v = 65000;
    int16_t i16v = -30000;
    w.kv_scalar("t.u8", 0, &u8v, 1).kv_scalar("t.i8", 1, &i8v, 1).kv_scalar("t.u16", 2, &u16v, 2);
    w.kv_scalar("t.i16", 3, &i16v, 2).kv_u32("t.u32", 4000000000u).kv_i32("t.i32", -2000000000);
    w.kv_f32("t.f32", 1.5f).kv_bool("t.bool", true).kv_str("t.string", "h\xC3\xA9llo");
    w.kv_u64("t.u64", 18000000000000000000ull).kv_i64("t.i64", -9000000000000000000ll).kv_f64("t.f64", 0.1);
    w.kv_i32s("t.arr_i32", {1, -2, 3}).kv_strs("t.arr_str", {"a", "", "ccc"}).kv_f32s("t.arr_f32", {});
    // [[1, 2], [3]] of u8, and [["x"], ["y", "z"]]
    auto inner_u8 = cat({test::GgufWriter::array_body(0, 2, {1, 2}), test::GgufWriter::array_body(0, 1, {3})});
    w.kv_array("t.nested", test::GgufWriter::array_body(9, 2, inner_u8));
    auto inner_s = cat({test::GgufWriter::array_body(8, 1, gstr("x")),
                        test::GgufWriter::array_body(8, 2, cat({gstr("y"), gstr("z")}))});
    w.kv_array("t.nested_str", test::GgufWriter::array_body(9, 2, inner_s));
    auto img = w.build(version);  // the parsed file is a view into these bytes
    auto g = parse(img);
    REQUIRE(g);
    CHECK(g->version == version);
    CHECK(g->kv.size() == 17);
    CHECK(g->find("t.u8")->as_int() == 250);
    CHECK(g->find("t.i8")->as_int() == -100);
    CHECK(g->find("t.u16")->as_int() == 65000);
    CHECK(g->find("t.i16")->as_int() == -30000);
    CHECK(g->find("t.u32")->as_int() == 4000000000ll);
    CHECK(g->find("t.i32")->as_int() == -2000000000);
    CHECK(g->find("t.f32")->as_number() == 1.5);
    CHECK(g->find("t.bool")->type == GgufType::boolean);
    CHECK(g->find("t.bool")->as_bool());
    CHECK(g->find("t.string")->as_string() == "h\xC3\xA9llo");
    CHECK(g->find("t.u64")->as_number() == 18000000000000000000.0);
    CHECK(g->find("t.i64")->as_int() == -9000000000000000000ll);
    CHECK(g->find("t.f64")->as_number() == 0.1);
    const GgufValue* a = g->find("t.arr_i32");
    REQUIRE(a);
    CHECK(a->elem == GgufType::i32);
    CHECK(a->len == 3);
    CHECK(a->integer(1) == -2);
    const GgufValue* s = g->find("t.arr_str");
    REQUIRE(s);
    CHECK(s->strings.size() == 3);
    CHECK(s->strings[2] == "ccc");
    CHECK(g->find("t.arr_f32")->len == 0);
    const GgufValue* n = g->find("t.nested");
    REQUIRE(n);
    CHECK(n->elem == GgufType::array);
    REQUIRE(n->arrays.size() == 2);
    CHECK(n->arrays[0].len == 2);
    CHECK(n->arrays[0].integer(1) == 2);
    CHECK(n->arrays[1].integer(0) == 3);
    const GgufValue* ns = g->find("t.nested_str");
    REQUIRE(ns);
    REQUIRE(ns->arrays.size() == 2);
    CHECK(ns->arrays[1].strings.size() == 2);
    CHECK(ns->arrays[1].strings[1] == "z");
    CHECK(g->find("absent") == nullptr);
  }
}

TEST_CASE("gguf: the tensor table, data pointers and general.alignment") {
  for (uint32_t align : {1u, 8u, 32u, 64u, 4096u}) {
    test::GgufWriter w;
    if (align != 32) w.kv_u32("general.alignment", align);
    std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {7, 8, 9};
    w.tensor_f32("a", {3, 2}, a).tensor_f32("b", {3}, b);
    std::vector<uint8_t> q(34 * 2, 0);
    q[0] = 0x00;
    q[1] = 0x3C;  // fp16 1.0 scale
    q[2] = 5;
    w.tensor("q", {32, 2}, 8, q);
    auto img = w.build(3, align);
    auto g = parse(img);
    REQUIRE(g);
    CHECK(g->alignment == align);
    CHECK(g->data_offset % align == 0);
    REQUIRE(g->tensors.size() == 3);
    CHECK(g->tensors[0].n_dims == 2);
    CHECK(g->tensors[0].ne[0] == 3);
    CHECK(g->tensors[0].ne[1] == 2);
    CHECK(g->tensors[0].nbytes == 24);
    CHECK(g->tensors[2].type == DType::q8_0);
    CHECK(g->tensors[2].nbytes == 68);
    float back[6];
    std::memcpy(back, img.data() + g->data_offset + g->tensors[0].offset, 24);
    CHECK(back[5] == 6.0f);
    CHECK(img[g->data_offset + g->tensors[2].offset + 2] == 5);
  }
}

TEST_CASE("gguf: tensors may sit anywhere aligned; a 0-dimensional tensor is a scalar") {
  test::GgufWriter w;
  w.tensor_info("late", {8}, 0, 64).tensor_info("early", {8}, 0, 0).tensor_info("scalar", {}, 0, 32);
  auto img = w.build();
  img.resize(img.size() + 96, 0);  // data section: [early 32 B][scalar 4 B, pad][late 32 B]
  auto g = parse(img);
  REQUIRE(g);
  CHECK(g->tensors[2].n_dims == 0);
  CHECK(g->tensors[2].nbytes == 4);
  auto m = gguf_description(img.data(), img.size(), "s.gguf");
  REQUIRE(m);
  CHECK((*m)->find("scalar")->nelements() == 1);
  CHECK((*m)->find("late")->data == img.data() + g->data_offset + 64);
}

TEST_CASE("gguf: every ggml type id is known by name with ggml's block layout") {
  // Block sizes and bytes as ggml defines them (ggml/src/ggml-common.h at the oracle's llama.cpp
  // version: printed by compiling `printf("%zu", sizeof(block_X))` against that header).
  struct E {
    uint32_t id;
    const char* name;
    uint32_t block, bytes;
  };
  const E expect[] = {
      {0, "f32", 1, 4},         {1, "f16", 1, 2},         {2, "q4_0", 32, 18},      {3, "q4_1", 32, 20},
      {6, "q5_0", 32, 22},      {7, "q5_1", 32, 24},      {8, "q8_0", 32, 34},      {9, "q8_1", 32, 36},
      {10, "q2_K", 256, 84},    {11, "q3_K", 256, 110},   {12, "q4_K", 256, 144},   {13, "q5_K", 256, 176},
      {14, "q6_K", 256, 210},   {15, "q8_K", 256, 292},   {16, "iq2_xxs", 256, 66}, {17, "iq2_xs", 256, 74},
      {18, "iq3_xxs", 256, 98}, {19, "iq1_s", 256, 50},   {20, "iq4_nl", 32, 18},   {21, "iq3_s", 256, 110},
      {22, "iq2_s", 256, 82},   {23, "iq4_xs", 256, 136}, {24, "i8", 1, 1},         {25, "i16", 1, 2},
      {26, "i32", 1, 4},        {27, "i64", 1, 8},        {28, "f64", 1, 8},        {29, "iq1_m", 256, 56},
      {30, "bf16", 1, 2},       {34, "tq1_0", 256, 54},   {35, "tq2_0", 256, 66},   {39, "mxfp4", 32, 17},
      {40, "nvfp4", 64, 36},    {41, "q1_0", 128, 18},    {42, "q2_0", 64, 18},
  };
  size_t known = 0;
  for (uint32_t id = 0; id < 64; id++)
    if (dtype_traits(static_cast<DType>(id))) known++;
  CHECK(known == sizeof expect / sizeof expect[0]);
  for (const auto& e : expect) {
    const DTypeTraits* t = dtype_traits(static_cast<DType>(e.id));
    REQUIRE_MESSAGE(t, e.name);
    CHECK(std::string(t->name) == e.name);
    CHECK(t->block == e.block);
    CHECK(t->bytes == e.bytes);
  }
  for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u})
    CHECK(!dtype_traits(static_cast<DType>(removed)));
}

TEST_CASE("gguf: a tensor of a type without kernels loads as metadata") {
  test::GgufWriter w;
  w.kv_str("general.architecture", "llama");
  w.tensor("odd", {256, 2}, 16, std::vector<uint8_t>(66 * 2, 0));  // iq2_xxs
  auto img = w.build();
  auto m = gguf_description(img.data(), img.size(), "odd.gguf");
  REQUIRE(m);
  const TensorView* t = (*m)->find("odd");
  REQUIRE(t);
  CHECK(t->type == DType::iq2_xxs);
  CHECK(t->nbytes == 132);
  CHECK(std::string(dtype_name(t->type)) == "iq2_xxs");
  CHECK(!dtype_computable(t->type));
}

TEST_CASE("gguf: the model description reads hyperparameters and the vocabulary") {
  test::GgufWriter w;
  w.kv_str("general.architecture", "llama").kv_str("general.name", "tiny");
  w.kv_u32("llama.block_count", 3).kv_u32("llama.embedding_length", 64).kv_u32("llama.attention.head_count", 4);
  w.kv_u32("llama.attention.head_count_kv", 2)
      .kv_u32("llama.context_length", 2048)
      .kv_u32("llama.feed_forward_length", 96);
  w.kv_f32("llama.rope.freq_base", 500000.0f).kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-6f);
  w.kv_str("tokenizer.ggml.model", "gpt2").kv_str("tokenizer.ggml.pre", "llama-bpe");
  w.kv_strs("tokenizer.ggml.tokens", {"a", "b", "<s>", "</s>", "<eot>"});
  w.kv_f32s("tokenizer.ggml.scores", {0, -1, -2, -3, -4}).kv_i32s("tokenizer.ggml.token_type", {1, 1, 3, 3, 3});
  w.kv_strs("tokenizer.ggml.merges", {"a b"});
  w.kv_u32("tokenizer.ggml.bos_token_id", 2).kv_u32("tokenizer.ggml.eos_token_id", 3);
  w.kv_u32("tokenizer.ggml.eot_token_id", 4).kv_u32("tokenizer.ggml.padding_token_id", 99);  // out of range
  w.kv_bool("tokenizer.ggml.add_bos_token", true).kv_str("tokenizer.chat_template", "{{ x }}");
  w.tensor_f32("token_embd.weight", {64, 5}, std::vector<float>(320, 0.5f));
  auto img = w.build(2);
  auto r = gguf_description(img.data(), img.size(), "tiny.gguf");
  REQUIRE(r);
  const ModelDesc& m = **r;
  CHECK(m.arch == "llama");
  CHECK(m.name == "tiny");
  CHECK(m.hp.n_layer == 3);
  CHECK(m.hp.n_embd == 64);
  CHECK(m.hp.n_head == 4);
  CHECK(m.hp.n_head_kv == 2);
  CHECK(m.hp.head_dim == 16);
  CHECK(m.hp.n_ff == 96);
  CHECK(m.hp.n_ctx_train == 2048);
  CHECK(m.hp.rope_freq_base == 500000.0f);
  CHECK(m.hp.rms_eps == doctest::Approx(1e-6));
  CHECK(m.hp.n_vocab == 5);
  CHECK(m.hp.tied_embeddings);
  CHECK(m.vocab.model == "gpt2");
  CHECK(m.vocab.pre == "llama-bpe");
  CHECK(m.vocab.tokens.size() == 5);
  CHECK(m.vocab.scores[3] == -3.0f);
  CHECK(m.vocab.types[2] == 3);
  CHECK(m.vocab.merges.size() == 1);
  CHECK(m.vocab.bos == 2);
  CHECK(m.vocab.eos == 3);
  CHECK(m.vocab.eot == 4);
  CHECK(m.vocab.pad == -1);
  CHECK(m.vocab.eos_ids == std::vector<int32_t>{3, 4});
  CHECK(m.vocab.add_bos == true);
  CHECK(!m.vocab.add_eos.has_value());
  CHECK(m.has_chat_template);
  CHECK(m.chat_template == "{{ x }}");
  CHECK(m.meta_number("llama.block_count") == 3.0);
  CHECK(m.n_params() == 320);
}

TEST_CASE("gguf: the real model files (stories260K, fixtures) parse and their tensors lie inside the file") {
  for (const char* name : {"stories260K.gguf", "stories260K-q8_0.gguf", "synth-qwen3-tiny-q4_k_m.gguf",
                           "synth-gemma3-tiny-q4_k_m.gguf", "synth-smollm2-tiny-bf16.gguf"}) {
    auto m = load_description(test::model_path(name));
    REQUIRE_MESSAGE(m.ok(), (m.ok() ? std::string() : m.error().message));
    const ModelDesc& d = **m;
    CHECK(d.format == FileFormat::gguf);
    CHECK(std::string(file_format_name(d.format)) == "gguf");
    CHECK(!d.tensors.empty());
    for (const auto& t : d.tensors) {
      CHECK(t.data >= d.files[0]->data());
      CHECK(t.data + t.nbytes <= d.files[0]->data() + d.files[0]->size());
    }
  }
}

TEST_CASE("cli: info escapes the terminal control characters a file's strings hold (text output and JSON)") {
  test::TempDir dir;
  test::GgufWriter w;
  // ESC sequences (colour, window title), BEL, and a C1 CSI (U+009B) in the name and a key
  w.kv_str("general.architecture", "llama")
      .kv_str("general.name",
              "\x1b[31mRED\x1b]0;pwned\x07\x1b[0m \xC2\x9B"
              "2J");
  w.kv_u32("x.\x1b[1mkey", 1);
  std::string path = dir.file("escape.gguf");
  REQUIRE(test::write_file(path, w.build()));
  for (const char* mode : {"", " --all", " --json", " --json --all"}) {
    auto r = test::run_cli("info " + test::quote(path) + mode);
    CHECK(r.status == 0);
    CHECK_MESSAGE(r.out.find('\x1b') == std::string::npos, mode);
    CHECK_MESSAGE(r.out.find('\x07') == std::string::npos, mode);
    CHECK_MESSAGE(r.out.find("\xC2\x9B") == std::string::npos, mode);
    CHECK_MESSAGE(r.out.find("RED") != std::string::npos, mode);
  }
  auto text = test::run_cli("info " + test::quote(path));
  CHECK_MESSAGE(text.out.find("name: \\x1B[31mRED\\x1B]0;pwned\\x07\\x1B[0m \\u009b2J") != std::string::npos, text.out);
}
