// The safetensors reader and Hugging Face / MLX model directories: dtypes, __metadata__, name
// mapping to GGUF, sharded models, MLX affine checkpoints (per-module overrides), the gemma norm
// offset, side files (generation_config.json, chat templates), and the real directories of the fixtures.
#define LLMINFER_IMPLEMENTATION
#include "corpus.hpp"

using namespace llminfer::detail;
using corpus::Bytes;

namespace {

// Writes `files` into a fresh directory and loads it.
struct Dir {
  test::TempDir tmp;
  std::string path;
  explicit Dir(const std::vector<std::pair<std::string, Bytes>>& files) {
    path = tmp.file("model");
    mkdir(path.c_str(), 0755);
    for (const auto& [name, bytes] : files) test::write_file(path + "/" + name, bytes);
  }
};
Bytes text(const std::string& s) {
  return Bytes(s.begin(), s.end());
}

}  // namespace

TEST_CASE("safetensors: every dtype, shapes in both orders, __metadata__ and data pointers") {
  test::SafetensorsWriter w;
  w.metadata("format", "pt").metadata("note", "h\xC3\xA9");
  const std::pair<const char*, DType> types[] = {
      {"F32", DType::f32},      {"F16", DType::f16},         {"BF16", DType::bf16},      {"F64", DType::f64},
      {"I8", DType::i8},        {"I16", DType::i16},         {"I32", DType::i32},        {"I64", DType::i64},
      {"U8", DType::u8},        {"U16", DType::u16},         {"U32", DType::u32},        {"U64", DType::u64},
      {"BOOL", DType::boolean}, {"F8_E4M3", DType::f8_e4m3}, {"F8_E5M2", DType::f8_e5m2}};
  for (const auto& [name, type] : types) {
    uint32_t bytes = dtype_traits(type)->bytes;
    Bytes data(2 * 3 * bytes);
    for (size_t k = 0; k < data.size(); k++) data[k] = static_cast<uint8_t>(k);
    w.tensor(std::string("t.") + name, name, {2, 3}, data);
  }
  w.tensor("scalar", "F32", {}, Bytes(4, 0)).tensor("empty", "F32", {0, 5}, {});
  Bytes img = w.build();
  auto st = safetensors_parse(img.data(), img.size(), "x.safetensors");
  REQUIRE_MESSAGE(st.ok(), (st ? std::string() : st.error().message));
  CHECK(st->metadata.size() == 2);
  CHECK(st->metadata[1].second == "h\xC3\xA9");
  REQUIRE(st->tensors.size() == 17);
  for (size_t k = 0; k < 15; k++) {
    const StTensor& t = st->tensors[k];
    CHECK(t.type == types[k].second);
    CHECK(t.shape == std::vector<int64_t>{2, 3});
    CHECK(t.nbytes == 6u * dtype_traits(t.type)->bytes);
    CHECK(t.data[1] == 1);
    CHECK(t.data == img.data() + t.file_offset);
  }
  CHECK(st->tensors[15].shape.empty());
  CHECK(st->tensors[16].nbytes == 0);
}

TEST_CASE("safetensors: a Hugging Face directory maps names, reads side files and special ids") {
  test::SafetensorsWriter w;
  w.tensor_f32("model.embed_tokens.weight", {4, 32}, corpus::ramp(128));
  w.tensor_f32("model.norm.weight", {32}, std::vector<float>(32, 1.0f));
  w.tensor_f32("model.layers.0.self_attn.q_proj.weight", {32, 32}, corpus::ramp(1024));
  w.tensor_f32("model.layers.0.post_attention_layernorm.weight", {32}, std::vector<float>(32, 2.0f));
  w.tensor_f32("lm_head.weight", {4, 32}, corpus::ramp(128));
  w.tensor_f32("model.rotary_emb.inv_freq", {4}, {1, 2, 3, 4});  // unknown: listed under its own name
  std::string tok =
      "{\"added_tokens\": [{\"id\": 3, \"content\": \"<|end|>\", \"special\": true}], \"model\": {\"type\": \"BPE\", "
      "\"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a b\"]}}";
  Dir d({{"config.json", text(corpus::llama_config(", \"tie_word_embeddings\": false"))},
         {"model.safetensors", w.build()},
         {"tokenizer.json", text(tok)},
         {"tokenizer_config.json", text("{\"bos_token\": null, \"eos_token\": \"<|end|>\"}")},
         {"generation_config.json", text("{\"bos_token_id\": 0, \"eos_token_id\": [3, 2, 99]}")},
         {"chat_template.jinja", text("{{ messages }}")}});
  auto r = load_description(d.path);
  REQUIRE_MESSAGE(r.ok(), (r ? std::string() : r.error().message));
  const ModelDesc& m = **r;
  CHECK(m.format == FileFormat::safetensors);
  CHECK(std::string(file_format_name(m.format)) == "safetensors");
  CHECK(m.arch == "llama");
  CHECK(m.name == "model");
  CHECK(m.hf_qk_order);
  CHECK(m.find("token_embd.weight"));
  CHECK(m.find("output_norm.weight"));
  CHECK(m.find("output.weight"));
  CHECK(m.find("blk.0.ffn_norm.weight"));  // llama's post_attention_layernorm is the FFN pre-norm
  CHECK(m.find("rotary_emb.inv_freq"));
  const TensorView* q = m.find("blk.0.attn_q.weight");
  REQUIRE(q);
  CHECK(q->n_dims == 2);
  CHECK(q->ne[0] == 32);
  CHECK(q->type == DType::f32);
  CHECK(!m.hp.tied_embeddings);
  CHECK(m.hp.n_embd == 32);
  CHECK(m.hp.n_head_kv == 2);
  CHECK(m.hp.n_ctx_train == 256);
  CHECK(m.vocab.model == "gpt2");
  CHECK(m.vocab.tokens.size() == 4);
  CHECK(m.vocab.types[3] == 3);
  CHECK(m.vocab.bos == 0);  // tokenizer_config names none: generation_config's
  CHECK(m.vocab.eos == 3);
  CHECK(m.vocab.eos_ids == std::vector<int32_t>{3, 2});  // 99 is not a token
  CHECK(m.has_chat_template);
  CHECK(m.chat_template == "{{ messages }}");
  CHECK(m.generation_config["eos_token_id"].size() == 3);
}

TEST_CASE("safetensors: chat templates from tokenizer_config.json (string or list), then chat_template.json") {
  Bytes st = corpus::st_base();
  Bytes cfg = text(corpus::llama_config());
  {
    Dir d({{"config.json", cfg},
           {"model.safetensors", st},
           {"tokenizer_config.json", text("{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}, "
                                          "{\"name\": \"default\", \"template\": \"D\"}]}")},
           {"chat_template.jinja", text("J")}});
    auto r = load_description(d.path);
    REQUIRE(r.ok());
    CHECK((*r)->chat_template == "D");
  }
  {
    Dir d({{"config.json", cfg},
           {"model.safetensors", st},
           {"chat_template.json", text("{\"chat_template\": \"C\"}")},
           {"chat_template.jinja", text("J")}});
    auto r = load_description(d.path);
    REQUIRE(r.ok());
    CHECK((*r)->chat_template == "C");
  }
  {
    Dir d({{"config.json", cfg}, {"model.safetensors", st}});
    auto r = load_description(d.path + "/");  // a trailing separator is fine
    REQUIRE(r.ok());
    CHECK(!(*r)->has_chat_template);
    CHECK((*r)->name == "model");
  }
}

TEST_CASE("safetensors: a sharded model loads every shard named by its index") {
  test::SafetensorsWriter s1, s2;
  s1.tensor_f32("model.embed_tokens.weight", {4, 32}, corpus::ramp(128));
  s2.tensor_f32("model.norm.weight", {32}, std::vector<float>(32, 1.0f));
  const std::string n1 = "model-00001-of-00002.safetensors", n2 = "model-00002-of-00002.safetensors";
  Bytes b1 = s1.build(), b2 = s2.build();
  Dir d({{"config.json", text(corpus::llama_config())},
         {"model.safetensors.index.json",
          text(corpus::index_json({{"model.norm.weight", n2}, {"model.embed_tokens.weight", n1}}))},
         {n1, b1},
         {n2, b2},
         {"model.safetensors", corpus::st_base()}});  // ignored: the index decides
  auto r = load_description(d.path);
  REQUIRE_MESSAGE(r.ok(), (r ? std::string() : r.error().message));
  const ModelDesc& m = **r;
  CHECK(m.files.size() == 2);
  CHECK(m.file_bytes == b1.size() + b2.size());
  REQUIRE(m.find("token_embd.weight"));
  REQUIRE(m.find("output_norm.weight"));
  CHECK(m.find("token_embd.weight")->file == d.path + "/" + n1);
  CHECK(m.find("output_norm.weight")->file == d.path + "/" + n2);
  float first;
  std::memcpy(&first, m.find("token_embd.weight")->data, 4);
  CHECK(first == corpus::ramp(1)[0]);
}

TEST_CASE("safetensors: MLX affine checkpoints, with per-module quantization overrides") {
  // embedding 4-bit (group 32), q_proj 8-bit by override, k_proj unquantized by override.
  test::SafetensorsWriter w;
  Bytes aux4(4 * 1 * 2, 0x3C), aux8(32 * 2 * 2, 0x3C);
  w.tensor("model.embed_tokens.biases", "BF16", {4, 1}, aux4).tensor("model.embed_tokens.scales", "BF16", {4, 1}, aux4);
  w.tensor("model.embed_tokens.weight", "U32", {4, 4}, corpus::mlx_weight_words(4, 4));
  w.tensor("model.layers.0.self_attn.q_proj.biases", "F16", {32, 2}, aux8);
  w.tensor("model.layers.0.self_attn.q_proj.scales", "F16", {32, 2}, aux8);
  w.tensor("model.layers.0.self_attn.q_proj.weight", "U32", {32, 16}, corpus::mlx_weight_words(32, 16));
  w.tensor_f32("model.layers.0.self_attn.k_proj.weight", {16, 32}, corpus::ramp(512));
  w.tensor("model.norm.weight", "BF16", {32}, Bytes(64, 0x3F));
  std::string over =
      ", \"model.layers.0.self_attn.q_proj\": {\"group_size\": 32, \"bits\": 8}, "
      "\"model.layers.0.self_attn.k_proj\": false";
  Dir d({{"config.json", text(corpus::mlx_config(32, 4, over))}, {"model.safetensors", w.build()}});
  auto r = load_description(d.path);
  REQUIRE_MESSAGE(r.ok(), (r ? std::string() : r.error().message));
  const ModelDesc& m = **r;
  CHECK(m.tensors.size() == 4);
  const TensorView* e = m.find("token_embd.weight");
  REQUIRE(e);
  CHECK(e->type == DType::mlx_q4);
  CHECK(e->group_size == 32);
  CHECK(e->ne[0] == 32);
  CHECK(e->ne[1] == 4);
  CHECK(e->aux_type == DType::bf16);
  CHECK(e->nbytes == 64);
  CHECK(e->aux_bytes() == 16);
  const TensorView* q = m.find("blk.0.attn_q.weight");
  REQUIRE(q);
  CHECK(q->type == DType::mlx_q8);
  CHECK(q->ne[0] == 64);  // 16 words * 32 bits / 8 bits
  CHECK(q->aux_type == DType::f16);
  CHECK(m.find("blk.0.attn_k.weight")->type == DType::f32);
  CHECK(m.n_params() == 4 * 32 + 32 * 64 + 16 * 32 + 32);
}

TEST_CASE("safetensors: gemma3 norms are stored as w - 1; the loader records the offset, the definition adds it") {
  test::SafetensorsWriter w;
  w.tensor_f32("model.embed_tokens.weight", {4, 32}, corpus::ramp(128));
  w.tensor("model.norm.weight", "BF16", {2}, Bytes{0x80, 0x3F, 0x00, 0xC0});  // bf16 1.0, -2.0
  w.tensor_f32("model.layers.0.post_attention_layernorm.weight", {2}, {0.5f, 0.0f});
  std::string cfg =
      "{\"model_type\": \"gemma3_text\", \"hidden_size\": 32, \"num_hidden_layers\": 1, "
      "\"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 16, \"vocab_size\": 4}";
  Dir d({{"config.json", text(cfg)}, {"model.safetensors", w.build()}});
  auto r = load_description(d.path);
  REQUIRE_MESSAGE(r.ok(), (r ? std::string() : r.error().message));
  // the tensors as stored (w - 1); the offset is the table's default for `convention hf_norm_offset`,
  // which the gemma3 definition declares (tests/test_archdef_ext.cpp: the conventions)
  CHECK((*r)->hf_norm_offset == 1.0f);
  const TensorView* n = (*r)->find("output_norm.weight");
  REQUIRE(n);
  CHECK(n->type == DType::bf16);
  float v[2];
  dequant_row(*n, 0, v);
  CHECK(v[0] == 1.0f);
  CHECK(v[1] == -2.0f);
  const TensorView* p = (*r)->find("blk.0.post_attention_norm.weight");  // gemma: a post-norm
  REQUIRE(p);
  std::memcpy(v, p->data, 8);
  CHECK(v[0] == 0.5f);
  CHECK((*r)->arch == "gemma3");
  CHECK((*r)->hp.head_dim == 16);
}

TEST_CASE("safetensors: the fixtures' hf/smollm2-tiny directories load") {
  for (const char* name : {"hf-bf16", "mlx-4bit"}) {
    std::string dir = test::model_path(std::string("hf/smollm2-tiny/") + name);
    auto r = load_description(dir);
    REQUIRE_MESSAGE(r.ok(), (r ? std::string() : r.error().message));
    const ModelDesc& m = **r;
    CHECK(m.tensors.size() == 20);
    CHECK(m.vocab.tokens.size() == 49152);
    CHECK(m.vocab.eos_ids == std::vector<int32_t>{2});
    for (const auto& t : m.tensors) {
      const MappedFile& f = *m.files[0];
      CHECK(t.data >= f.data());
      CHECK(t.data + t.nbytes <= f.data() + f.size());
    }
  }
}
