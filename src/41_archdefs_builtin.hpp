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

// The text of each built-in, one constant per architecture (what `llminfer status --dump NAME`
// prints), then the table of them by name.
inline constexpr char kArchdefLlama[] = R"(# Llama 1/2/3, SmolLM, Mistral-style decoders (GGUF architecture "llama").
# GGUF files keep q/k rows permuted for adjacent-pair RoPE; Hugging Face checkpoints keep them in
# rotate-half order, where `pairs` runs as `neox` (convention hf_rope).
arch llama
kind decoder
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 0            # Hugging Face norm weights are stored as they are used

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
)";

inline constexpr char kArchdefQwen2[] = R"(# Qwen2 / Qwen2.5 decoders: q/k/v biases, NEOX rope.
arch qwen2
kind decoder
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 0            # Hugging Face norm weights are stored as they are used

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
)";

inline constexpr char kArchdefQwen3[] =
    R"(# Qwen3 dense decoders: per-head RMSNorm of q and k before rope, NEOX rope, no biases.
arch qwen3
kind decoder
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 0            # Hugging Face norm weights are stored as they are used

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
)";

inline constexpr char kArchdefGemma3[] =
    R"(# Gemma 3 text decoders: scaled embeddings, q/k norms, post-attention and post-FFN norms,
# GELU (tanh) gating, local sliding-window layers with their own rope base, every
# `sliding_period`-th layer global. GGUF norm weights already include Gemma's +1; Hugging Face
# checkpoints store w - 1 (convention hf_norm_offset).
arch gemma3
kind decoder
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 1            # Hugging Face norm weights are stored as w - 1

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
)";

inline constexpr char kArchdefPhi3[] =
    R"(# Phi-3 / Phi-3.5 / Phi-4-mini dense decoders: q, k and v are column ranges of one fused
# attn_qkv product; ffn_up is gate and up side by side (silu(first half) * second half); NEOX rope;
# queries scaled before the scores (llama.cpp's order). Not described: the 128k variants' rope
# factors (rope_factors_long / _short) and the MoE variant.
arch phi3
kind decoder
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 0            # Hugging Face norm weights are stored as they are used

prologue
  x = embed(token_embd.weight)

block
  h = rms_norm(x, blk.{i}.attn_norm.weight)
  qkv = matmul(h, blk.{i}.attn_qkv.weight)
  add_bias(qkv, blk.{i}.attn_qkv.bias | none)
  q = slice(qkv, 0, n_head * head_dim)
  k = slice(qkv, n_head * head_dim, n_head_kv * head_dim)
  v = slice(qkv, (n_head + n_head_kv) * head_dim, n_head_kv * head_dim)
  rope(q, neox)
  rope(k, neox)
  scale(q, rsqrt(head_dim))
  a = attention(q, k, v, scale = 1)
  o = matmul(a, blk.{i}.attn_output.weight)
  add(x, o)
  h = rms_norm(x, blk.{i}.ffn_norm.weight)
  gu = matmul(h, blk.{i}.ffn_up.weight)     # [gate | up], 2 * n_ff wide
  g = slice(gu, 0, n_ff)
  u = slice(gu, n_ff, n_ff)
  silu(g)
  mul(g, u)
  o = matmul(g, blk.{i}.ffn_down.weight)
  add(x, o)

epilogue
  last(x)
  rms_norm(x, output_norm.weight)
  logits = matmul(x, output.weight | token_embd.weight)
  add_bias(logits, output.bias | none)
)";

inline constexpr char kArchdefStarcoder2[] =
    R"(# StarCoder2 decoders: LayerNorm with bias (eps {arch}.attention.layer_norm_epsilon), biases on
# every projection, NEOX rope, a GELU (tanh) MLP without a gate.
arch starcoder2
kind decoder
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 0            # Hugging Face norm weights are stored as they are used

prologue
  x = embed(token_embd.weight)

block
  h = layer_norm(x, blk.{i}.attn_norm.weight, bias = blk.{i}.attn_norm.bias)
  q = matmul(h, blk.{i}.attn_q.weight)
  k = matmul(h, blk.{i}.attn_k.weight)
  v = matmul(h, blk.{i}.attn_v.weight)
  add_bias(q, blk.{i}.attn_q.bias | none)
  add_bias(k, blk.{i}.attn_k.bias | none)
  add_bias(v, blk.{i}.attn_v.bias | none)
  rope(q, neox)
  rope(k, neox)
  a = attention(q, k, v)
  o = matmul(a, blk.{i}.attn_output.weight)
  add_bias(o, blk.{i}.attn_output.bias)
  add(x, o)
  h = layer_norm(x, blk.{i}.ffn_norm.weight, bias = blk.{i}.ffn_norm.bias)
  u = matmul(h, blk.{i}.ffn_up.weight)
  add_bias(u, blk.{i}.ffn_up.bias)
  gelu_tanh(u)
  o = matmul(u, blk.{i}.ffn_down.weight)
  add_bias(o, blk.{i}.ffn_down.bias)
  add(x, o)

epilogue
  last(x)
  layer_norm(x, output_norm.weight, bias = output_norm.bias)
  logits = matmul(x, output.weight | token_embd.weight)
)";

inline constexpr char kArchdefStablelm[] =
    R"(# StableLM (2) decoders: LayerNorm with bias, q/k/v biases, partial NEOX rope (the first
# rope_dims = {arch}.rope.dimension_count of each head, 25% in StableLM 2), optional per-head q/k
# LayerNorm with a weight per head (StableLM 2 12B). Without ffn_norm (12B) the MLP reads the
# attention's input norm: the parallel residual.
arch stablelm
kind decoder
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 0            # Hugging Face norm weights are stored as they are used

prologue
  x = embed(token_embd.weight)

block
  h = layer_norm(x, blk.{i}.attn_norm.weight, bias = blk.{i}.attn_norm.bias)
  q = matmul(h, blk.{i}.attn_q.weight)
  k = matmul(h, blk.{i}.attn_k.weight)
  v = matmul(h, blk.{i}.attn_v.weight)
  add_bias(q, blk.{i}.attn_q.bias | none)
  add_bias(k, blk.{i}.attn_k.bias | none)
  add_bias(v, blk.{i}.attn_v.bias | none)
  layer_norm_heads(q, blk.{i}.attn_q_norm.weight | none)
  layer_norm_heads(k, blk.{i}.attn_k_norm.weight | none)
  rope(q, neox, dims = rope_dims)
  rope(k, neox, dims = rope_dims)
  a = attention(q, k, v)
  o = matmul(a, blk.{i}.attn_output.weight)
  add(x, o)
  h = layer_norm(x, blk.{i}.ffn_norm.weight | none, bias = blk.{i}.ffn_norm.bias | none)
  g = matmul(h, blk.{i}.ffn_gate.weight)
  u = matmul(h, blk.{i}.ffn_up.weight)
  silu(g)
  mul(g, u)
  o = matmul(g, blk.{i}.ffn_down.weight)
  add(x, o)

epilogue
  last(x)
  layer_norm(x, output_norm.weight, bias = output_norm.bias)
  logits = matmul(x, output.weight)
)";

inline constexpr char kArchdefSmollm3[] =
    R"(# SmolLM3 decoders: Llama-style, with no rope on every 4th layer (NoPE: layers 3, 7, 11, ...,
# where (i + 1) % 4 == 0; llama.cpp's n_no_rope_layer_step).
arch smollm3
kind decoder
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 0            # Hugging Face norm weights are stored as they are used

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
  rope(q, pairs, skip = every(4, 3))
  rope(k, pairs, skip = every(4, 3))
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
  logits = matmul(x, output.weight | token_embd.weight)
)";

inline constexpr char kArchdefGemma2[] =
    R"(# Gemma 2 decoders: scaled embeddings, post-attention and post-FFN norms, GELU (tanh) gating,
# soft-capped attention scores and logits, sliding-window layers alternating with global ones
# (layer i global iff i % sliding_period == sliding_period - 1). GGUF norm weights include Gemma's +1.
# The query scale: {arch}.attention.query_pre_attn_scalar when the file has it, else head_dim
# (llama.cpp picks n_embd / n_head for the 46-layer 27B model by its layer count).
arch gemma2
kind decoder
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 1            # Hugging Face norm weights are stored as w - 1

param sliding_window = {arch}.attention.sliding_window | 4096
param sliding_period = {arch}.attention.sliding_window_pattern | 2
param rope_base_local = {arch}.rope.freq_base_swa | rope_base
param query_scalar = {arch}.attention.query_pre_attn_scalar | head_dim
param attn_softcap = {arch}.attn_logit_softcapping | 50
param final_softcap = {arch}.final_logit_softcapping | 30

prologue
  x = embed(token_embd.weight)
  scale(x, sqrt(n_embd))

block
  h = rms_norm(x, blk.{i}.attn_norm.weight)
  q = matmul(h, blk.{i}.attn_q.weight)
  k = matmul(h, blk.{i}.attn_k.weight)
  v = matmul(h, blk.{i}.attn_v.weight)
  rope(q, neox, base_swa = rope_base_local)
  rope(k, neox, base_swa = rope_base_local)
  scale(q, rsqrt(query_scalar))
  a = attention(q, k, v, scale = 1, softcap = attn_softcap, window = sliding_window, period = sliding_period)
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
  logits = matmul(x, token_embd.weight)
  softcap(logits, final_softcap)
)";

inline constexpr char kArchdefOlmo2[] =
    R"(# OLMo 2 and OLMo 3 decoders: no pre-norms; RMSNorm over all of q and of k, post-attention and
# post-FFN norms, NEOX rope. OLMo 3 ({arch}.attention.sliding_window > 0): sliding-window layers,
# every sliding_period-th layer (i % 4 == 3) global.
arch olmo2
kind decoder
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 0            # Hugging Face norm weights are stored as they are used

param sliding_window = {arch}.attention.sliding_window | 0           # 0: no sliding layers
param sliding_period = {arch}.attention.sliding_window_pattern | 4

prologue
  x = embed(token_embd.weight)

block
  q = matmul(x, blk.{i}.attn_q.weight)
  k = matmul(x, blk.{i}.attn_k.weight)
  v = matmul(x, blk.{i}.attn_v.weight)
  rms_norm(q, blk.{i}.attn_q_norm.weight)
  rms_norm(k, blk.{i}.attn_k_norm.weight)
  rope(q, neox)
  rope(k, neox)
  a = attention(q, k, v, window = sliding_window, period = sliding_period)
  o = matmul(a, blk.{i}.attn_output.weight)
  rms_norm(o, blk.{i}.post_attention_norm.weight)
  add(x, o)
  g = matmul(x, blk.{i}.ffn_gate.weight)
  u = matmul(x, blk.{i}.ffn_up.weight)
  silu(g)
  mul(g, u)
  o = matmul(g, blk.{i}.ffn_down.weight)
  rms_norm(o, blk.{i}.post_ffw_norm.weight)
  add(x, o)

epilogue
  last(x)
  rms_norm(x, output_norm.weight)
  logits = matmul(x, output.weight)
)";

inline constexpr char kArchdefGemma3n[] =
    R"(# Gemma 3n text decoders (E2B, E4B), as llama.cpp computes them. Four AltUp residual streams
# (X: n_streams rows of n_embd side by side): each layer predicts them from a learned router, runs
# on the active stream, then corrects all of them. LAuReL, a low-rank path around attention. A
# per-layer input per token (its own embedding table of ple_width values per layer, plus a
# projection of the embedding), gated into every layer. Activation sparsity (a Gaussian top-k of the
# FFN gate) in the first layers; the layers from n_layer - shared_kv on reuse the cache of the last
# earlier layer of their kind; sliding-window layers except every 5th; no norm offset (norm weights
# are used as stored); tied output, final soft-cap. Defaults are llama.cpp's where a key is absent
# (which ignores altup.*, embedding_length_per_layer_input, attention.shared_kv_layers,
# attention.sliding_window_pattern, activation_sparsity_scale and final_logit_softcapping: it
# hard-codes 4 streams, stream 0 active, 256, 20 cache-owning layers, period 5, 10 sparse layers and
# 30; a file whose keys say the same runs the same).
arch gemma3n
kind decoder
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 0            # norm weights are stored as they are used (no Gemma +1)

param n_streams = {arch}.altup.num_inputs | 4
param active = {arch}.altup.active_idx | 0
param ple_width = {arch}.embedding_length_per_layer_input | 256
param sliding_window = {arch}.attention.sliding_window
param swa_layers = {arch}.attention.sliding_window_pattern | 1 - every(5, 4)   # per layer: 1 = sliding
param rope_base_local = {arch}.rope.freq_base_swa | 10000
param shared_kv = {arch}.attention.shared_kv_layers | n_layer - 20
# the standard deviations above the mean a gate value must exceed, per layer (-inf: all pass)
param sparsity = {arch}.activation_sparsity_scale | where(less(layer, 10), 1.6448533535003662, -inf)
param final_softcap = {arch}.final_logit_softcapping | 30

prologue
  x = embed(token_embd.weight)
  scale(x, sqrt(n_embd))
  ple = embed(per_layer_token_embd.weight, beyond = 0)   # n_layer x ple_width per token (HF: ids past it read row 0)
  scale(ple, sqrt(ple_width))
  pp = matmul(x, per_layer_model_proj.weight)
  scale(pp, rsqrt(n_embd))
  norm_heads(pp, per_layer_proj_norm.weight)        # each layer's ple_width values
  add(ple, pp)
  scale(ple, rsqrt(2))
  X = streams(x, n_streams)
  stream_matmul(X, altup_proj.weight | altup_proj.{k}.weight)   # streams 1.. projected (GGUF: stacked; HF: one per stream)
  match_norm(X, n_streams)                          # ... to the magnitude of stream 0

block
  # AltUp predict: a router on the active stream mixes the streams
  a = slice(X, active * n_embd, n_embd)
  r = rms_norm(a, blk.{i}.altup_router_norm.weight)
  scale(r, 1 / n_embd)
  m = matmul(r, blk.{i}.altup_router.weight)
  softcap(m, 1)                                     # tanh
  c = matmul(m, blk.{i}.altup_predict_coef.weight)
  P = stream_mix(X, c)
  a = slice(P, active * n_embd, n_embd)
  h = rms_norm(a, blk.{i}.attn_norm.weight)
  # LAuReL
  l = matmul(h, blk.{i}.laurel_l.weight)
  lr = matmul(l, blk.{i}.laurel_r.weight)
  rms_norm(lr, blk.{i}.laurel_post_norm.weight)
  add(lr, h)
  # attention (k and v are dropped where the layer reuses another's cache)
  q = matmul(h, blk.{i}.attn_q.weight)
  k = matmul(h, blk.{i}.attn_k.weight)
  v = matmul(h, blk.{i}.attn_v.weight)
  norm_heads(q, blk.{i}.attn_q_norm.weight)
  norm_heads(k, blk.{i}.attn_k_norm.weight)
  rms_normalize(v, size = head_dim_v)
  rope(q, neox, base_swa = rope_base_local)
  rope(k, neox, base_swa = rope_base_local)
  o = attention(q, k, v, scale = 1, window = sliding_window, sliding = swa_layers, reuse_kv_from = n_layer - shared_kv)
  al = matmul(o, blk.{i}.attn_output.weight)
  rms_norm(al, blk.{i}.post_attention_norm.weight)
  add(al, a)
  add(al, lr)
  scale(al, rsqrt(2))
  # FFN
  f = rms_norm(al, blk.{i}.ffn_norm.weight)
  g = matmul(f, blk.{i}.ffn_gate.weight)
  u = matmul(f, blk.{i}.ffn_up.weight)
  gaussian_topk(g, sparsity)
  gelu_tanh(g)
  mul(u, g)
  y = matmul(u, blk.{i}.ffn_down.weight)
  rms_norm(y, blk.{i}.post_ffw_norm.weight)
  add(y, al)
  # AltUp correct: every stream moves by its gain times the active stream's innovation
  r = rms_norm(y, blk.{i}.altup_router_norm.weight)
  scale(r, 1 / n_embd)
  m = matmul(r, blk.{i}.altup_router.weight)
  softcap(m, 1)
  gk = matmul(m, blk.{i}.altup_correct_coef.weight)
  scale(gk, 1, bias = 1)
  sub(y, a)
  stream_axpy(P, y, gk)
  # the per-layer input, gated by the active stream, into streams 1..
  z = slice(P, active * n_embd, n_embd)
  mul_weight(z, blk.{i}.altup_correct_scale.weight)
  zg = matmul(z, blk.{i}.inp_gate.weight)
  gelu_tanh(zg)
  pl = slice(ple, layer * ple_width, ple_width)
  mul(zg, pl)
  zp = matmul(zg, blk.{i}.proj.weight)
  rms_norm(zp, blk.{i}.post_norm.weight)
  stream_add(P, zp, from = 1)
  X = copy(P)

epilogue
  last(X)
  stream_matmul(X, altup_unembd_proj.weight | altup_unembd_proj.{k}.weight)
  match_norm(X, n_streams)
  x = stream_mean(X, n_streams)
  rms_norm(x, output_norm.weight)
  logits = matmul(x, output.weight | token_embd.weight)
  softcap(logits, final_softcap)
)";

// Every built-in, by architecture name (the registry sorts them by name).
inline constexpr BuiltinArchdef kBuiltinArchdefs[] = {
    {"llama", kArchdefLlama},       {"qwen2", kArchdefQwen2},     {"qwen3", kArchdefQwen3},
    {"gemma3", kArchdefGemma3},     {"phi3", kArchdefPhi3},       {"starcoder2", kArchdefStarcoder2},
    {"stablelm", kArchdefStablelm}, {"smollm3", kArchdefSmollm3}, {"gemma2", kArchdefGemma2},
    {"olmo2", kArchdefOlmo2},       {"gemma3n", kArchdefGemma3n},
};

inline std::span<const BuiltinArchdef> builtin_archdefs() {
  return kBuiltinArchdefs;
}

// Every definition in effect: the built-ins, overridden by a user directory.
struct ArchdefFailure {
  std::string name;  // architecture the file was for (from its file name)
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
