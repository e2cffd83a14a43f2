// libFuzzer target: the safetensors reader, then the model description built from the input as a
// directory's only weight file under three config.json files (plain llama, MLX 4-bit, gemma3), all
// from memory. Accepted tensors must lie inside the input; refusals must name the file.
#define LLMINFER_IMPLEMENTATION
#include "../../llminfer.hpp"

namespace {
const char* const kConfigs[] = {
    R"({"model_type": "llama", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 4, "tie_word_embeddings": true})",
    R"({"model_type": "llama", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4,
        "quantization": {"group_size": 32, "bits": 4, "model.layers.0.mlp.down_proj": {"group_size": 64, "bits": 8}}})",
    R"({"model_type": "gemma3_text", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
        "head_dim": 16, "quantization_config": {"group_size": 32}})",
};

bool inside(const uint8_t* p, uint64_t n, const uint8_t* data, size_t size) {
  return p >= data && n <= static_cast<uint64_t>(data + size - p);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llminfer::detail;
  auto st = safetensors_parse(data, size, "fuzz.safetensors");
  if (!st) {
    if (st.error().message.rfind("fuzz.safetensors", 0) != 0) __builtin_trap();
  } else {
    for (const auto& t : st->tensors)
      if (!inside(t.data, t.nbytes, data, size)) __builtin_trap();
  }
  for (const char* cfg : kConfigs) {
    HfSources src;
    src.dir = "fuzz";
    src.config_text = cfg;
    auto m = safetensors_description("fuzz", src, {StImage{"fuzz/model.safetensors", data, size}});
    if (!m) {
      if (m.error().message.rfind("fuzz", 0) != 0) __builtin_trap();
      continue;
    }
    for (const auto& t : (*m)->tensors) {
      bool owned = false;  // converted at load (gemma norms)
      for (const auto& o : (*m)->owned) owned |= t.data == reinterpret_cast<const uint8_t*>(o.get());
      if (!owned && !inside(t.data, t.nbytes, data, size)) __builtin_trap();
      if (t.scales &&
          (!inside(t.scales, t.aux_bytes() / 2, data, size) || !inside(t.biases, t.aux_bytes() / 2, data, size)))
        __builtin_trap();
      if (t.nelements() < 0) __builtin_trap();
    }
    (void)(*m)->n_params();
  }
  return 0;
}
