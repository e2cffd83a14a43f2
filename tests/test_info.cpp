// `llminfer info` on every model the tests use (third_party/stories260K and the fixtures), field by
// field against goldens made by the llama.cpp oracle, the goldens script's own GGUF reader and the
// committed sha256 of the files
// (tests/goldens/info/make_goldens.py says how; the goldens are committed).
#define LLMINFER_IMPLEMENTATION
#include <map>

#include "common.hpp"

using llminfer::detail::Json;
using llminfer::detail::json_parse;

namespace {

Json load_goldens() {
  std::vector<uint8_t> bytes;
  std::string path = test::source_dir() + "/tests/goldens/info/info.json";
  REQUIRE_MESSAGE(test::read_file(path, bytes), path);
  auto j = json_parse(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path);
  REQUIRE_MESSAGE(j.ok(), (j ? std::string() : j.error().message));
  return std::move(*j);
}

Json info_json(const std::string& path, bool all) {
  test::CliResult r = test::run_cli("info --json " + std::string(all ? "--all " : "") + test::quote(path));
  CHECK_MESSAGE(r.status == 0, path);
  auto j = json_parse(r.out, "info --json output");
  CHECK_MESSAGE(j.ok(), path << ": " << (j ? std::string() : j.error().message));
  return j ? std::move(*j) : Json();
}

void same_int(const Json& got, const Json& want, const std::string& what) {
  CHECK_MESSAGE(got.is_int, what << " missing or not an integer");
  CHECK_MESSAGE(got.i == want.i, what << ": " << got.i << " != golden " << want.i);
}

// Compares the summary fields of `info --json` with a golden entry.
void compare(const std::string& model, const Json& got, const Json& g) {
  INFO(model);
  CHECK(got["format"].as_string() == g["format"].as_string());
  CHECK(got["architecture"].as_string() == g["architecture"].as_string());
  CHECK(got["name"].as_string() == g["name"].as_string());
  for (const char* k : {"file_bytes", "n_params", "n_tensors", "tensor_bytes"}) same_int(got[k], g[k], k);
  std::map<std::string, int64_t> want_types, got_types;
  for (const auto& [k, v] : g["tensor_types"].members) want_types[k] = v.i;
  for (const auto& [k, v] : got["tensor_types"].members) got_types[k] = v.i;
  CHECK(got_types == want_types);
  for (const char* k : {"n_layer", "n_embd", "n_head", "n_head_kv", "n_ff", "n_ctx_train", "head_dim"})
    same_int(got["hparams"][k], g["hparams"][k], std::string("hparams.") + k);
  CHECK(got["hparams"]["rope_freq_base"].as_number() == g["hparams"]["rope_freq_base"].as_number());
  const Json& t = got["tokenizer"];
  CHECK(t["model"].as_string() == g["tokenizer"]["model"].as_string());
  if (g["tokenizer"].find("pre")) CHECK(t["pre"].as_string() == g["tokenizer"]["pre"].as_string());
  for (const char* k : {"n_vocab", "bos", "eos"}) same_int(t[k], g["tokenizer"][k], std::string("tokenizer.") + k);
  // The end-of-sequence ids the files name are among those llama.cpp stops at (llama.cpp adds
  // more, found by token text).
  CHECK(!t["eos_ids"].items.empty());
  for (const auto& id : t["eos_ids"].items) {
    bool found = false;
    for (const auto& e : g["eog_ids"].items) found |= e.i == id.i;
    CHECK_MESSAGE(found, "eos id " << id.i << " is not an end-of-generation token for llama.cpp");
  }
  CHECK(got["chat_template"].as_bool() == g["chat_template"].as_bool());
  CHECK(got["chat_template"].is_bool());
}

}  // namespace

TEST_CASE("info: every model file matches the oracle's figures") {
  Json goldens = load_goldens();
  CHECK(goldens["models"].size() >= 16);
  for (const auto& [rel, g] : goldens["models"].members) {
    std::string path = test::model_path(rel);
    Json got = info_json(path, false);
    compare(rel, got, g);
    CHECK(got["path"].as_string() == path);
  }
  // A safetensors file given directly reads its directory's side files.
  const Json& hf = goldens["models"]["hf/smollm2-tiny/hf-bf16"];
  REQUIRE(hf.is_object());
  compare("hf-bf16/model.safetensors", info_json(test::model_path("hf/smollm2-tiny/hf-bf16/model.safetensors"), false),
          hf);
}

TEST_CASE("info: --all lists every metadata key and every tensor as the fixtures' reader sees them") {
  Json goldens = load_goldens();
  int checked = 0;
  for (const auto& [rel, g] : goldens["models"].members) {
    if (g["format"].as_string() != "gguf") continue;
    const std::string model = rel;  // clang 14 cannot capture a structured binding (INFO does)
    INFO(model);
    Json got = info_json(test::model_path(rel), true);
    compare(rel, got, g);
    CHECK(got["metadata"].members.size() == static_cast<size_t>(g["n_metadata"].i));
    const Json& tensors = got["tensors"];
    REQUIRE(tensors.items.size() == g["tensors"].items.size());
    for (size_t k = 0; k < tensors.items.size(); k++) {
      const Json& a = tensors.items[k];
      const Json& b = g["tensors"].items[k];  // [name, type, ne, offset, bytes]
      CHECK(a["name"].as_string() == b[0].as_string());
      CHECK(a["type"].as_string() == b[1].as_string());
      REQUIRE(a["shape"].items.size() == b[2].items.size());
      for (size_t d = 0; d < b[2].items.size(); d++) CHECK(a["shape"][d].i == b[2][d].i);
      CHECK(a["offset"].i == b[3].i);
      CHECK(a["bytes"].i == b[4].i);
    }
    // long arrays are abbreviated: {"type", "length", "first"}
    const Json& tokens = got["metadata"]["tokenizer.ggml.tokens"];
    CHECK(tokens["type"].as_string() == "string");
    CHECK(tokens["length"].i == g["tokenizer"]["n_vocab"].i);
    CHECK(tokens["first"].size() == 8);
    checked++;
  }
  CHECK(checked >= 14);
  // A directory's --all shows config.json, generation_config.json and __metadata__.
  Json mlx = info_json(test::model_path("hf/smollm2-tiny/mlx-4bit"), true);
  CHECK(mlx["metadata"]["config.json"]["quantization"]["bits"].i == 4);
  CHECK(mlx["metadata"]["generation_config.json"]["eos_token_id"].i == 2);
  CHECK(mlx["metadata"]["__metadata__"]["format"].as_string() == "mlx");
  CHECK(mlx["tensors"].items.size() == 20);
  CHECK(mlx["tensors"][0]["type"].as_string() == "mlx_q4");
}

TEST_CASE("info: text output, usage errors (exit 1) and model errors (exit 2)") {
  test::CliResult r = test::run_cli("info " + test::quote(test::model_path("stories260K.gguf")));
  CHECK(r.status == 0);
  CHECK(r.out.find("architecture  llama") != std::string::npos);
  CHECK(r.out.find("tokenizer     llama, 512 tokens, bos 1, eos 2") != std::string::npos);
  r = test::run_cli("info --all " + test::quote(test::model_path("stories260K.gguf")));
  CHECK(r.status == 0);
  CHECK(r.out.find("tokenizer.ggml.tokens = string[512]") != std::string::npos);
  CHECK(r.out.find("blk.4.ffn_down.weight") != std::string::npos);
  CHECK(test::run_cli("info").status == 1);
  CHECK(test::run_cli("info a b").status == 1);
  CHECK(test::run_cli("info --bogus x.gguf").status == 1);
  CHECK(test::run_cli("info --help").status == 0);
  r = test::run_cli("info /nonexistent/model.gguf", true);
  CHECK(r.status == 2);
  CHECK(r.out.find("error: /nonexistent/model.gguf: cannot open") == 0);
}
