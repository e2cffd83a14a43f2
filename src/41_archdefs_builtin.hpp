// ==== Built-in architecture definitions and the registry (built-ins + a user directory) ====
// The texts below are the whole description of each architecture: the forward pass has no
// `if (arch == ...)` anywhere. A directory of <arch>.archdef files (LoadOptions::archdef_dir,
// --archdef DIR) overrides a built-in of the same name; a broken file makes that architecture
// unavailable instead of silently falling back to the built-in.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

struct BuiltinArchdef {
  const char* name;
  const char* text;
};

inline const std::vector<BuiltinArchdef>& builtin_archdefs() {
  static const std::vector<BuiltinArchdef> defs = {
      {"llama", R"(# Llama 1/2/3, SmolLM, Mistral-style decoders (GGUF architecture "llama").
# GGUF files keep q/k rows permuted for adjacent-pair RoPE; for Hugging Face checkpoints
# (rotate-half order) the rope op switches `pairs` to `neox` itself.
arch llama
kind decoder

prologue
  x = embed(token_embd.weight)

block
  h = rms_norm(x, blk.{i}.attn_norm.weight)
  q = matmul(h, blk.{i}.attn_q.weight)
  k = matmul(h, blk.{i}.attn_k.weight)
  v = matmul(h, blk.{i}.attn_v.weight)
  add_bias(q, blk.{i}.attn_q.bias | none)
  add_bias(k, blk.{i}.attn_k.bias | none)
  add_bias(v, blk.{i}.attn_v.bias | none)
  rope(q, pairs, factors = rope_freqs.weight | none)   # llama-3 frequency factors when present
  rope(k, pairs, factors = rope_freqs.weight | none)
  a = attention(q, k, v)
  o = matmul(a, blk.{i}.attn_output.weight)
  add_bias(o, blk.{i}.attn_output.bias | none)
  add(x, o)
  h = rms_norm(x, blk.{i}.ffn_norm.weight)
  g = matmul(h, blk.{i}.ffn_gate.weight)
  u = matmul(h, blk.{i}.ffn_up.weight)
  silu(g)
  mul(g, u)
  o = matmul(g, blk.{i}.ffn_down.weight)
  add(x, o)

epilogue
  last(x)
  rms_norm(x, output_norm.weight)
  logits = matmul(x, output.weight | token_embd.weight)   # tied embeddings: no output.weight
)"},
      {"qwen2", R"(# Qwen2 / Qwen2.5 decoders: q/k/v biases, NEOX rope.
arch qwen2
kind decoder

prologue
  x = embed(token_embd.weight)

block
  h = rms_norm(x, blk.{i}.attn_norm.weight)
  q = matmul(h, blk.{i}.attn_q.weight)
  k = matmul(h, blk.{i}.attn_k.weight)
  v = matmul(h, blk.{i}.attn_v.weight)
  add_bias(q, blk.{i}.attn_q.bias)
  add_bias(k, blk.{i}.attn_k.bias)
  add_bias(v, blk.{i}.attn_v.bias)
  rope(q, neox)
  rope(k, neox)
  a = attention(q, k, v)
  o = matmul(a, blk.{i}.attn_output.weight)
  add(x, o)
  h = rms_norm(x, blk.{i}.ffn_norm.weight)
  g = matmul(h, blk.{i}.ffn_gate.weight)
  u = matmul(h, blk.{i}.ffn_up.weight)
  silu(g)
  mul(g, u)
  o = matmul(g, blk.{i}.ffn_down.weight)
  add(x, o)

epilogue
  last(x)
  rms_norm(x, output_norm.weight)
  logits = matmul(x, output.weight | token_embd.weight)
)"},
      {"qwen3", R"(# Qwen3 dense decoders: per-head RMSNorm of q and k before rope, NEOX rope, no biases.
arch qwen3
kind decoder

prologue
  x = embed(token_embd.weight)

block
  h = rms_norm(x, blk.{i}.attn_norm.weight)
  q = matmul(h, blk.{i}.attn_q.weight)
  k = matmul(h, blk.{i}.attn_k.weight)
  v = matmul(h, blk.{i}.attn_v.weight)
  norm_heads(q, blk.{i}.attn_q_norm.weight)
  norm_heads(k, blk.{i}.attn_k_norm.weight)
  rope(q, neox)
  rope(k, neox)
  a = attention(q, k, v)
  o = matmul(a, blk.{i}.attn_output.weight)
  add(x, o)
  h = rms_norm(x, blk.{i}.ffn_norm.weight)
  g = matmul(h, blk.{i}.ffn_gate.weight)
  u = matmul(h, blk.{i}.ffn_up.weight)
  silu(g)
  mul(g, u)
  o = matmul(g, blk.{i}.ffn_down.weight)
  add(x, o)

epilogue
  last(x)
  rms_norm(x, output_norm.weight)
  logits = matmul(x, output.weight | token_embd.weight)
)"},
      {"gemma3", R"(# Gemma 3 text decoders: scaled embeddings, q/k norms, post-attention and post-FFN norms,
# GELU (tanh) gating, local sliding-window layers with their own rope base, every
# `sliding_period`-th layer global. GGUF norm weights already include Gemma's +1.
arch gemma3
kind decoder

param sliding_window = {arch}.attention.sliding_window | 0           # 0: no sliding layers
param sliding_period = {arch}.attention.sliding_window_pattern | 6   # layer i global iff (i+1) % 6 == 0
param rope_base_local = {arch}.rope.freq_base_swa | 10000
param query_scalar = {arch}.attention.query_pre_attn_scalar | head_dim
param final_softcap = {arch}.final_logit_softcapping | 0            # 0: none

prologue
  x = embed(token_embd.weight)
  scale(x, sqrt(n_embd))

block
  h = rms_norm(x, blk.{i}.attn_norm.weight)
  q = matmul(h, blk.{i}.attn_q.weight)
  k = matmul(h, blk.{i}.attn_k.weight)
  v = matmul(h, blk.{i}.attn_v.weight)
  norm_heads(q, blk.{i}.attn_q_norm.weight)
  norm_heads(k, blk.{i}.attn_k_norm.weight)
  rope(q, neox, base_swa = rope_base_local)
  rope(k, neox, base_swa = rope_base_local)
  scale(q, rsqrt(query_scalar))   # scaled queries, then unscaled scores: llama.cpp's order
  a = attention(q, k, v, scale = 1, window = sliding_window, period = sliding_period)
  o = matmul(a, blk.{i}.attn_output.weight)
  rms_norm(o, blk.{i}.post_attention_norm.weight)
  add(x, o)
  h = rms_norm(x, blk.{i}.ffn_norm.weight)
  g = matmul(h, blk.{i}.ffn_gate.weight)
  u = matmul(h, blk.{i}.ffn_up.weight)
  gelu_tanh(g)
  mul(g, u)
  o = matmul(g, blk.{i}.ffn_down.weight)
  rms_norm(o, blk.{i}.post_ffw_norm.weight)
  add(x, o)

epilogue
  last(x)
  rms_norm(x, output_norm.weight)
  logits = matmul(x, output.weight | token_embd.weight)
  softcap(logits, final_softcap)
)"},
  };
  return defs;
}

// Every definition in effect: the built-ins, overridden by a user directory.
struct ArchdefFailure {
  std::string name;   // architecture the file was for (from its file name)
  std::string path;
  std::string error;  // file:line: message
};

struct ArchRegistry {
  std::vector<std::shared_ptr<const ArchDef>> defs;  // sorted by name
  std::vector<ArchdefFailure> failed;

  const ArchDef* find(std::string_view name) const {
    for (const auto& d : defs)
      if (d->name == name) return d.get();
    return nullptr;
  }
  const ArchdefFailure* failure(std::string_view name) const {
    for (const auto& f : failed)
      if (f.name == name) return &f;
    return nullptr;
  }
};

inline Result<ArchRegistry> load_arch_registry(const std::string& user_dir) {
  ArchRegistry reg;
  for (const auto& b : builtin_archdefs()) {
    auto d = archdef_parse(b.text, std::string("<builtin>/") + b.name + ".archdef", b.name, "builtin");
    if (!d) {  // a built-in that does not parse is a bug in this file (the tests catch it)
      reg.failed.push_back({b.name, std::string("<builtin>/") + b.name + ".archdef", d.error().message});
      continue;
    }
    reg.defs.push_back(std::make_shared<const ArchDef>(std::move(*d)));
  }
  if (!user_dir.empty()) {
    if (!is_directory(user_dir))
      return make_error(Errc::io, "architecture definitions: '" + user_dir + "' is not a directory");
    // Every entry: a NAME.archdef that is not a regular file (a directory, a FIFO, a dangling
    // link) is a definition that did not load, not one to skip.
    for (const auto& file : list_directory(user_dir, false)) {
      if (!ends_with(file, ".archdef")) continue;
      std::string name = file.substr(0, file.size() - 8);
      std::string path = path_join(user_dir, file);
      // The user's file replaces the built-in, whether or not it loads (never a silent fallback).
      reg.defs.erase(std::remove_if(reg.defs.begin(), reg.defs.end(), [&](const auto& d) { return d->name == name; }),
                     reg.defs.end());
      auto f = MappedFile::open(path);
      if (!f) {
        reg.failed.push_back({name, path, f.error().message});
        continue;
      }
      auto d = archdef_parse(f->view(), path, name, path);
      if (!d) {
        reg.failed.push_back({name, path, d.error().message});
        continue;
      }
      reg.defs.push_back(std::make_shared<const ArchDef>(std::move(*d)));
    }
  }
  std::sort(reg.defs.begin(), reg.defs.end(), [](const auto& a, const auto& b) { return a->name < b->name; });
  return reg;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
