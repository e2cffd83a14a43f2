// The forward pass on tiny models this file writes itself (GgufWriter): the archdef interpreter
// against a straight-line reference forward (plain loops, double precision, full recomputation
// without a cache), batch vs token-by-token evaluation, the KV ring of sliding-window layers,
// the context-full policies, prefix reuse, cancel, concurrency, and bit-identical results for
// any thread count.
#define LLMINFER_IMPLEMENTATION
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <thread>

#include "common.hpp"

using namespace llminfer;
using namespace llminfer::detail;

namespace {

// ---- a tiny synthetic model and its reference forward ----
struct Synth {
  bool gemma = false;  // gemma3 layout (else llama)
  int vocab = 61, embd = 32, layers = 3, heads = 4, kv_heads = 2, head_dim = 8, ff = 48;
  int window = 0, period = 0;  // gemma: sliding window and global-layer period
  float rope_base = 10000.0f, rope_base_swa = 1000.0f, eps = 1e-5f, final_softcap = 0;
  bool biases = false;  // llama: q/k/v/o biases (optional tensors of the built-in definition)
  bool rope_freqs = false;
  std::map<std::string, std::vector<float>> w;  // name -> values, [rows][cols] row-major
  std::map<std::string, std::vector<uint64_t>> dims;
  // Hostile variants: metadata values that replace what the shapes say ({arch}.KEY suffix ->
  // value), and extra entries.
  std::map<std::string, uint32_t> key_u32;
  std::map<std::string, float> key_f32;
  std::function<void(test::GgufWriter&)> extra;

  uint64_t rng = 88172645463325252ull;
  float rnd() {  // xorshift64, uniform in [-1, 1)
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return static_cast<float>((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
  }
  void mat(const std::string& n, int rows, int cols, float scale) {
    std::vector<float> v(size_t(rows) * cols);
    for (auto& x : v) x = rnd() * scale;
    w[n] = v;
    dims[n] = {uint64_t(cols), uint64_t(rows)};
  }
  void vec(const std::string& n, int len, float center, float spread) {
    std::vector<float> v(static_cast<size_t>(len));
    for (auto& x : v) x = center + rnd() * spread;
    w[n] = v;
    dims[n] = {uint64_t(len)};
  }

  void build() {
    mat("token_embd.weight", vocab, embd, 1.0f);
    vec("output_norm.weight", embd, 1.0f, 0.2f);
    if (rope_freqs) vec("rope_freqs.weight", head_dim / 2, 2.0f, 1.0f);
    for (int l = 0; l < layers; l++) {
      std::string b = "blk." + std::to_string(l) + ".";
      vec(b + "attn_norm.weight", embd, 1.0f, 0.2f);
      mat(b + "attn_q.weight", heads * head_dim, embd, 0.35f);
      mat(b + "attn_k.weight", kv_heads * head_dim, embd, 0.35f);
      mat(b + "attn_v.weight", kv_heads * head_dim, embd, 0.35f);
      mat(b + "attn_output.weight", embd, heads * head_dim, 0.35f);
      if (biases) {
        vec(b + "attn_q.bias", heads * head_dim, 0.0f, 0.3f);
        vec(b + "attn_k.bias", kv_heads * head_dim, 0.0f, 0.3f);
        vec(b + "attn_v.bias", kv_heads * head_dim, 0.0f, 0.3f);
        vec(b + "attn_output.bias", embd, 0.0f, 0.3f);
      }
      if (gemma) {
        vec(b + "attn_q_norm.weight", head_dim, 1.0f, 0.2f);
        vec(b + "attn_k_norm.weight", head_dim, 1.0f, 0.2f);
        vec(b + "post_attention_norm.weight", embd, 1.0f, 0.2f);
        vec(b + "post_ffw_norm.weight", embd, 1.0f, 0.2f);
      }
      vec(b + "ffn_norm.weight", embd, 1.0f, 0.2f);
      mat(b + "ffn_gate.weight", ff, embd, 0.35f);
      mat(b + "ffn_up.weight", ff, embd, 0.35f);
      mat(b + "ffn_down.weight", embd, ff, 0.3f);
    }
  }

  std::string write(const test::TempDir& dir, const std::string& name) const {
    test::GgufWriter g;
    std::string a = gemma ? "gemma3" : "llama";
    g.kv_str("general.architecture", a);
    auto u32 = [&](const std::string& k, uint32_t v) { g.kv_u32(a + "." + k, key_u32.count(k) ? key_u32.at(k) : v); };
    auto f32 = [&](const std::string& k, float v) { g.kv_f32(a + "." + k, key_f32.count(k) ? key_f32.at(k) : v); };
    u32("block_count", uint32_t(layers));
    u32("context_length", 4096);
    u32("embedding_length", uint32_t(embd));
    u32("feed_forward_length", uint32_t(ff));
    u32("attention.head_count", uint32_t(heads));
    u32("attention.head_count_kv", uint32_t(kv_heads));
    u32("attention.key_length", uint32_t(head_dim));
    u32("attention.value_length", uint32_t(head_dim));
    f32("rope.freq_base", rope_base);
    f32("attention.layer_norm_rms_epsilon", eps);
    if (extra) extra(g);  // further entries
    if (gemma) {
      if (window) g.kv_u32(a + ".attention.sliding_window", uint32_t(window));
      g.kv_u32(a + ".attention.sliding_window_pattern", uint32_t(period));
      g.kv_f32(a + ".rope.freq_base_swa", rope_base_swa);
      if (final_softcap > 0) g.kv_f32(a + ".final_logit_softcapping", final_softcap);
    }
    for (const auto& [n, v] : w) g.tensor_f32(n, dims.at(n), v);
    std::string path = dir.file(name);
    REQUIRE(test::write_file(path, g.build()));
    return path;
  }

  // ---- reference forward: every position from scratch, double precision ----
  const std::vector<float>& W(const std::string& n) const { return w.at(n); }
  static std::vector<double> matvec(const std::vector<float>& m, int rows, int cols, const std::vector<double>& x) {
    std::vector<double> y(static_cast<size_t>(rows), 0.0);
    for (int r = 0; r < rows; r++)
      for (int c = 0; c < cols; c++) y[size_t(r)] += double(m[size_t(r) * cols + c]) * x[size_t(c)];
    return y;
  }
  void rmsnorm(std::vector<double>& x, size_t off, int n, const std::vector<float>& g) const {
    double s = 0;
    for (int k = 0; k < n; k++) s += x[off + k] * x[off + k];
    double sc = 1.0 / std::sqrt(s / n + eps);
    for (int k = 0; k < n; k++) x[off + k] = x[off + k] * sc * g[size_t(k)];
  }
  bool sliding(int l) const { return gemma && window > 0 && (period == 0 || (l + 1) % period != 0); }
  void rope(std::vector<double>& x, int n_heads, int pos, int layer) const {
    double base = sliding(layer) ? rope_base_swa : rope_base;
    for (int h = 0; h < n_heads; h++) {
      double* v = x.data() + size_t(h) * head_dim;
      for (int i = 0; i < head_dim / 2; i++) {
        double theta = pos * std::pow(base, -2.0 * i / head_dim);
        if (rope_freqs) theta /= W("rope_freqs.weight")[size_t(i)];
        double c = std::cos(theta), s = std::sin(theta);
        int i0 = gemma ? i : 2 * i, i1 = gemma ? i + head_dim / 2 : 2 * i + 1;  // neox / pairs
        double a = v[i0], b = v[i1];
        v[i0] = a * c - b * s;
        v[i1] = a * s + b * c;
      }
    }
  }

  // logits [n][vocab] of every position of `toks`
  std::vector<double> forward(const std::vector<int32_t>& toks) const {
    const int n = static_cast<int>(toks.size());
    std::vector<std::vector<double>> x(static_cast<size_t>(n));
    for (int t = 0; t < n; t++) {
      x[size_t(t)].resize(static_cast<size_t>(embd));
      for (int k = 0; k < embd; k++) {
        x[size_t(t)][size_t(k)] = W("token_embd.weight")[size_t(toks[size_t(t)]) * embd + k];
        if (gemma) x[size_t(t)][size_t(k)] *= std::sqrt(double(embd));
      }
    }
    for (int l = 0; l < layers; l++) {
      std::string b = "blk." + std::to_string(l) + ".";
      std::vector<std::vector<double>> q(static_cast<size_t>(n)), k(static_cast<size_t>(n)), v(static_cast<size_t>(n));
      for (int t = 0; t < n; t++) {
        std::vector<double> h = x[size_t(t)];
        rmsnorm(h, 0, embd, W(b + "attn_norm.weight"));
        q[size_t(t)] = matvec(W(b + "attn_q.weight"), heads * head_dim, embd, h);
        k[size_t(t)] = matvec(W(b + "attn_k.weight"), kv_heads * head_dim, embd, h);
        v[size_t(t)] = matvec(W(b + "attn_v.weight"), kv_heads * head_dim, embd, h);
        if (biases) {
          for (int e = 0; e < heads * head_dim; e++) q[size_t(t)][size_t(e)] += W(b + "attn_q.bias")[size_t(e)];
          for (int e = 0; e < kv_heads * head_dim; e++) k[size_t(t)][size_t(e)] += W(b + "attn_k.bias")[size_t(e)];
          for (int e = 0; e < kv_heads * head_dim; e++) v[size_t(t)][size_t(e)] += W(b + "attn_v.bias")[size_t(e)];
        }
        if (gemma) {
          for (int hh = 0; hh < heads; hh++)
            rmsnorm(q[size_t(t)], size_t(hh) * head_dim, head_dim, W(b + "attn_q_norm.weight"));
          for (int hh = 0; hh < kv_heads; hh++)
            rmsnorm(k[size_t(t)], size_t(hh) * head_dim, head_dim, W(b + "attn_k_norm.weight"));
        }
        rope(q[size_t(t)], heads, t, l);
        rope(k[size_t(t)], kv_heads, t, l);
      }
      for (int t = 0; t < n; t++) {
        std::vector<double> att(size_t(heads) * head_dim, 0.0);
        for (int hh = 0; hh < heads; hh++) {
          int g = hh / (heads / kv_heads);
          int lo = sliding(l) ? std::max(0, t - window + 1) : 0;
          std::vector<double> sc;
          double mx = -1e300;
          for (int j = lo; j <= t; j++) {
            double d = 0;
            for (int e = 0; e < head_dim; e++)
              d += q[size_t(t)][size_t(hh) * head_dim + e] * k[size_t(j)][size_t(g) * head_dim + e];
            d /= std::sqrt(double(head_dim));
            sc.push_back(d);
            mx = std::max(mx, d);
          }
          double sum = 0;
          for (auto& s : sc) sum += (s = std::exp(s - mx));
          for (int j = lo; j <= t; j++)
            for (int e = 0; e < head_dim; e++)
              att[size_t(hh) * head_dim + e] += sc[size_t(j - lo)] / sum * v[size_t(j)][size_t(g) * head_dim + e];
        }
        std::vector<double> o = matvec(W(b + "attn_output.weight"), embd, heads * head_dim, att);
        if (biases)
          for (int e = 0; e < embd; e++) o[size_t(e)] += W(b + "attn_output.bias")[size_t(e)];
        if (gemma) rmsnorm(o, 0, embd, W(b + "post_attention_norm.weight"));
        for (int e = 0; e < embd; e++) x[size_t(t)][size_t(e)] += o[size_t(e)];
        std::vector<double> h = x[size_t(t)];
        rmsnorm(h, 0, embd, W(b + "ffn_norm.weight"));
        std::vector<double> gt = matvec(W(b + "ffn_gate.weight"), ff, embd, h),
                            up = matvec(W(b + "ffn_up.weight"), ff, embd, h);
        for (int e = 0; e < ff; e++) {
          double z = gt[size_t(e)];
          double act;
          if (gemma) {  // GELU (tanh form) at fp16 precision of input and output, as ggml and the library
            double f = fp16_to_f32(f32_to_fp16(static_cast<float>(z)));
            act = std::fabs(z) >= 10
                      ? (z > 0 ? z : 0.0)
                      : fp16_to_f32(f32_to_fp16(static_cast<float>(
                            0.5 * f *
                            (1 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (f + 0.044715 * f * f * f))))));
          } else {
            act = z / (1 + std::exp(-z));
          }
          gt[size_t(e)] = act * up[size_t(e)];
        }
        std::vector<double> d = matvec(W(b + "ffn_down.weight"), embd, ff, gt);
        if (gemma) rmsnorm(d, 0, embd, W(b + "post_ffw_norm.weight"));
        for (int e = 0; e < embd; e++) x[size_t(t)][size_t(e)] += d[size_t(e)];
      }
    }
    std::vector<double> out;
    for (int t = 0; t < n; t++) {
      std::vector<double> h = x[size_t(t)];
      rmsnorm(h, 0, embd, W("output_norm.weight"));
      std::vector<double> lg = matvec(W("token_embd.weight"), vocab, embd, h);
      for (double z : lg) out.push_back(final_softcap > 0 ? final_softcap * std::tanh(z / final_softcap) : z);
    }
    return out;
  }
};

std::shared_ptr<const Engine> engine_for(const std::string& path, int threads = 1, KvType kv = KvType::f32,
                                         ContextPolicy policy = ContextPolicy::stop, int keep = 4) {
  LoadOptions o;
  o.threads = threads;
  o.kv_type = kv;
  o.context_policy = policy;
  o.keep = keep;
  auto m = Model::load(path, o);
  REQUIRE_MESSAGE(m, (m ? "" : m.error().message));
  return llminfer::detail::model_impl(*m).engine;
}

double max_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double worst = a.size() == b.size() ? 0.0 : 1e30;
  for (size_t k = 0; k < std::min(a.size(), b.size()); k++) worst = std::max(worst, std::fabs(double(a[k]) - b[k]));
  return worst;
}
double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = a.size() == b.size() ? 0.0 : 1e30;
  for (size_t k = 0; k < std::min(a.size(), b.size()); k++)
    worst = std::max(worst, std::fabs(double(a[k]) - double(b[k])));
  return worst;
}

}  // namespace

TEST_CASE("forward: the llama definition equals a straight-line reference (pairs rope, biases, llama-3 factors)") {
  test::TempDir dir;
  Synth s;
  s.biases = true;
  s.rope_freqs = true;
  s.build();
  std::string path = s.write(dir, "llama.gguf");
  auto e = engine_for(path);
  CHECK(e->arch().name == "llama");
  CHECK(e->n_vocab() == s.vocab);
  auto toks = test::some_ids(40, s.vocab, 7);
  auto got = logits_of_ids(e, toks, true);
  REQUIRE(got);
  std::vector<double> want = s.forward(toks);
  double d = max_diff(*got, want);
  MESSAGE("llama: max |interpreter - reference| = " << d);
  CHECK(d < 1e-4);
  // the optional steps were compiled in: removing the biases changes the result
  Synth s2 = s;
  s2.biases = false;
  for (auto it = s2.w.begin(); it != s2.w.end();)
    it = it->first.find(".bias") != std::string::npos ? s2.w.erase(it) : std::next(it);
  auto got2 = logits_of_ids(engine_for(s2.write(dir, "nobias.gguf")), toks, true);
  REQUIRE(got2);
  CHECK(max_diff(*got2, s2.forward(toks)) < 1e-4);
  CHECK(max_diff(*got2, want) > 1e-2);
}

TEST_CASE("forward: the gemma3 definition equals the reference (sliding layers, local rope base, norms, softcap)") {
  test::TempDir dir;
  Synth s;
  s.gemma = true;
  s.layers = 4;
  s.window = 5;
  s.period = 2;  // layers 0 and 2 sliding, 1 and 3 global
  s.final_softcap = 3.0f;
  s.build();
  std::string path = s.write(dir, "gemma.gguf");
  auto e = engine_for(path);
  CHECK(e->arch().name == "gemma3");
  // 300 tokens: more than a sliding layer's ring (5 + 256 - 1 slots), in two batches
  auto toks = test::some_ids(300, s.vocab, 11);
  auto got = logits_of_ids(e, toks, true);
  REQUIRE(got);
  std::vector<double> want = s.forward(toks);
  double d = max_diff(*got, want);
  MESSAGE("gemma3: max |interpreter - reference| = " << d);
  // GELU is evaluated at fp16 (as ggml): the reference rounds a double tanh, the library a float one,
  // so an output on an fp16 rounding boundary may land one fp16 step apart (~5e-4 in the logits).
  CHECK(d < 2e-3);
  // the window really matters: without it the reference differs
  Synth full = s;
  full.window = 0;
  CHECK(max_diff(*got, full.forward(toks)) > 1e-2);
}

TEST_CASE("forward: batch, token-by-token and multi-batch evaluation give the same logits") {
  test::TempDir dir;
  Synth s;
  s.gemma = true;
  s.window = 3;
  s.period = 3;
  s.build();
  auto e = engine_for(s.write(dir, "g.gguf"));
  auto toks = test::some_ids(600, s.vocab, 3);
  auto batch = logits_of_ids(e, toks, true);  // 600 tokens: batches of 256, 256, 88
  REQUIRE(batch);
  auto ctx = Context::create(e, 1024);
  REQUIRE(ctx);
  std::vector<float> one, all;
  for (size_t t = 0; t < 40; t++) {
    auto st = ctx->eval(std::span<const int32_t>(&toks[t], 1), one);
    REQUIRE(st);
    CHECK(*st == EvalStatus::ok);
    all.insert(all.end(), one.begin(), one.end());
  }
  // As in llama.cpp, a batch of one token and a batch of several sum some products in different
  // orders (its vector dot product, its tiled one), so results may differ in the last bits, and
  // GELU at fp16 may turn that into one fp16 step (~5e-4). A wrong position, cache slot or
  // window gives differences of 1e-2 and more.
  const double tol = 2e-3;
  std::vector<float> head(batch->begin(), batch->begin() + 40 * s.vocab);
  CHECK(max_diff(all, head) < tol);
  // the rest in uneven pieces
  size_t t = 40;
  for (size_t piece : {1u, 7u, 300u, 252u}) {
    std::vector<float> lg;
    auto st = ctx->eval(std::span<const int32_t>(toks.data() + t, piece), lg, true);
    REQUIRE(st);
    std::vector<float> want(batch->begin() + long(t * s.vocab), batch->begin() + long((t + piece) * s.vocab));
    CHECK(max_diff(lg, want) < tol);
    t += piece;
  }
  CHECK(ctx->n_past() == 600);
  CHECK(ctx->tokens() == toks);
}

TEST_CASE("forward: greedy output is bit-identical with 1, 2, 3 and 4 threads") {
  test::TempDir dir;
  Synth s;
  s.embd = 64;
  s.ff = 256;
  s.vocab = 300;
  s.build();
  std::string path = s.write(dir, "t.gguf");
  auto prompt = test::some_ids(300, s.vocab, 5);  // long enough for the threaded paths of every op
  std::vector<int32_t> first;
  std::vector<float> first_logits;
  for (int threads : {1, 2, 3, 4}) {
    auto e = engine_for(path, threads, KvType::f16);
    CHECK(e->pool().size() == threads);
    auto all = logits_of_ids(e, prompt, true);
    REQUIRE(all);
    auto ctx = Context::create(e, 0);
    REQUIRE(ctx);
    auto out = greedy_ids(*ctx, prompt, 24);
    REQUIRE(out);
    if (threads == 1) {
      first = *out;
      first_logits = *all;
    } else {
      CHECK(*out == first);
      CHECK(std::memcmp(all->data(), first_logits.data(), all->size() * 4) == 0);
    }
  }
  // and on a real file (its vocabulary of 151936 makes the output matmul the big one)
  std::vector<int32_t> ids = {9707, 1879, 11, 419, 374, 264, 1273};
  std::vector<int32_t> ref;
  for (int threads : {1, 2, 3, 4}) {
    auto e = engine_for(test::model_path("synth-qwen3-tiny-q8_0.gguf"), threads, KvType::f16);
    auto ctx = Context::create(e, 0);
    REQUIRE(ctx);
    auto out = greedy_ids(*ctx, ids, 8);
    REQUIRE(out);
    if (threads == 1)
      ref = *out;
    else
      CHECK(*out == ref);
  }
}

// Consecutive products of one input (q, k and v; gate and up) run as one matmul_group: which steps
// group (matmul_group_size), and a trace still sees every step once, in order, with the group's
// outputs written when it reports them (2 threads: one job of the pool per group for a token).
TEST_CASE("forward: products of one input run as one group, and a trace still sees every step in order") {
  test::TempDir dir;
  Synth s;
  s.build();
  auto e = engine_for(s.write(dir, "t.gguf"), 2, KvType::f16);
  const Program& p = e->program();
  auto at = [&](const char* name) {
    for (size_t i = 0; i < p.steps.size(); i++)
      if (p.steps[i].op == OpCode::matmul && p.steps[i].w->name == name) return i;
    FAIL("no step for " << name);
    return size_t(0);
  };
  CHECK(matmul_group_size(p, at("blk.1.attn_q.weight")) == 3);
  CHECK(matmul_group_size(p, at("blk.1.attn_k.weight")) == 2);
  CHECK(matmul_group_size(p, at("blk.1.attn_output.weight")) == 1);
  CHECK(matmul_group_size(p, at("blk.1.ffn_gate.weight")) == 2);
  CHECK(matmul_group_size(p, at("blk.1.ffn_down.weight")) == 1);
  // the rules, on steps made by hand: input register 0
  auto group = [](std::vector<std::array<int, 3>> ops) {  // {dst, a, layer}, all matmuls
    Program q;
    for (auto [dst, a, layer] : ops) {
      Step st;
      st.op = OpCode::matmul;
      st.dst = static_cast<int16_t>(dst), st.a = static_cast<int16_t>(a), st.layer = layer;
      q.steps.push_back(st);
    }
    return matmul_group_size(q, 0);
  };
  CHECK(group({{1, 0, 0}, {2, 0, 0}, {3, 0, 0}, {4, 0, 0}, {5, 0, 0}}) == size_t(kMatmulGroup));
  CHECK(group({{0, 0, 0}, {2, 0, 0}}) == 1);             // the first writes the input
  CHECK(group({{1, 0, 0}, {2, 0, 0}, {0, 0, 0}}) == 2);  // the third writes it
  CHECK(group({{1, 0, 0}, {1, 0, 0}}) == 1);             // one output twice: the second wins
  CHECK(group({{1, 0, 0}, {2, 1, 0}}) == 1);             // another input
  CHECK(group({{1, 0, 0}, {2, 0, 1}}) == 1);             // another layer
  auto ctx = Context::create(e, 0);
  REQUIRE(ctx);
  std::vector<int> seen;
  std::map<std::string, std::vector<float>> last;  // register -> its value as last traced
  ThreadPool pool1(1);
  MatmulScratch scratch1(1);
  int products = 0, products_ok = 0;
  ctx->set_trace([&](const TraceEvent& ev) {
    seen.push_back(ev.step);
    const Step& st = p.steps[static_cast<size_t>(ev.step)];
    if (st.op == OpCode::matmul && st.round_input == 0) {  // the product of its input as last traced
      const std::vector<float>& x = last[p.reg_names[static_cast<size_t>(st.a)]];
      std::vector<float> y(static_cast<size_t>(ev.rows) * ev.width, -7.0f);
      products++;
      if (x.size() == static_cast<size_t>(ev.rows) * st.w_in &&
          kernels().matmul_x(*st.w, x.data(), ev.rows, y.data(), ev.width, pool1, false, scratch1))
        products_ok += std::memcmp(y.data(), ev.data, y.size() * 4) == 0;
    }
    last[ev.reg].assign(ev.data, ev.data + static_cast<size_t>(ev.rows) * ev.width);
  });
  auto out = greedy_ids(*ctx, test::some_ids(7, s.vocab, 3), 3);
  REQUIRE(out);
  REQUIRE(!seen.empty());
  int passes = 0;
  for (size_t i = 0; i < seen.size(); i++) {
    if (seen[i] == 0) {
      passes++;
      continue;
    }
    REQUIRE(i > 0);
    CHECK(seen[i] == seen[i - 1] + 1);
  }
  CHECK(passes >= 3);
  CHECK(products > 0);
  CHECK(products_ok == products);
}

// With an f16 cache, the attention of several tokens runs in blocks of consecutive tokens whose
// queries read a group's cells together (attention_block): every token must keep the bits it has
// alone. Group sizes 1, 2, 3, 4 and 8 (blocks of 8, 4, 8, 2 and 1 tokens), head sizes with and
// without a rest of 16 values, and sliding windows whose tokens start at different cells (one at a
// time there) and rings that wrap; two chunks (the second starts at position 45), 1 and 2 threads.
TEST_CASE("forward: attention in blocks of tokens has the bits of one token at a time (f16 cache)") {
  struct Shape {
    int heads, kv_heads, head_dim, window;
  };
  for (const Shape sh : {Shape{4, 4, 16, 0}, Shape{4, 2, 32, 0}, Shape{6, 2, 24, 0}, Shape{8, 2, 16, 0},
                         Shape{8, 1, 8, 0}, Shape{4, 2, 16, 20}, Shape{6, 2, 16, 3}}) {
    CAPTURE(sh.heads);
    CAPTURE(sh.kv_heads);
    CAPTURE(sh.head_dim);
    CAPTURE(sh.window);
    test::TempDir dir;
    Synth s;
    s.heads = sh.heads;
    s.kv_heads = sh.kv_heads;
    s.head_dim = sh.head_dim;
    s.layers = 2;
    if (sh.window) {
      s.gemma = true;
      s.window = sh.window;
      s.period = 2;  // layer 0 sliding, layer 1 global
    }
    s.build();
    const std::string path = s.write(dir, "a.gguf");
    const auto toks = test::some_ids(330, s.vocab, 13);
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      auto e = engine_for(path, threads, KvType::f16);
      std::vector<float> got[2];
      for (int forced : {1, 0}) {
        attention_block_forced = forced;
        auto ctx = Context::create(e, 0);
        REQUIRE(ctx);
        size_t t = 0;
        for (size_t piece : {45u, 285u}) {
          std::vector<float> lg;
          auto st = ctx->eval(std::span<const int32_t>(toks.data() + t, piece), lg, true);
          REQUIRE(st);
          got[forced].insert(got[forced].end(), lg.begin(), lg.end());
          t += piece;
        }
      }
      attention_block_forced = 0;
      REQUIRE(got[0].size() == got[1].size());
      CHECK(std::memcmp(got[0].data(), got[1].data(), got[0].size() * 4) == 0);
    }
  }
}

TEST_CASE("forward: separate contexts of one engine run concurrently with the same results") {
  test::TempDir dir;
  Synth s;
  s.build();
  auto e = engine_for(s.write(dir, "c.gguf"), 2);
  auto a = test::some_ids(50, s.vocab, 1), b = test::some_ids(70, s.vocab, 2);
  auto ra = logits_of_ids(e, a, true), rb = logits_of_ids(e, b, true);
  REQUIRE(ra);
  REQUIRE(rb);
  std::vector<float> ga, gb;
  bool oka = false, okb = false;
  std::thread ta([&] {
    for (int rep = 0; rep < 5; rep++) {
      auto r = logits_of_ids(e, a, true);
      oka = r && (rep == 0 || *r == ga);
      if (r) ga = *r;
    }
  });
  std::thread tb([&] {
    for (int rep = 0; rep < 5; rep++) {
      auto r = logits_of_ids(e, b, true);
      okb = r && (rep == 0 || *r == gb);
      if (r) gb = *r;
    }
  });
  ta.join();
  tb.join();
  CHECK(oka);
  CHECK(okb);
  CHECK(ga == *ra);
  CHECK(gb == *rb);
}

TEST_CASE("kv cache: context full with the stop policy; bad token ids") {
  test::TempDir dir;
  Synth s;
  s.build();
  auto e = engine_for(s.write(dir, "k.gguf"));
  auto ctx = Context::create(e, 16);
  REQUIRE(ctx);
  CHECK(ctx->n_ctx() == 16);
  std::vector<float> lg;
  auto toks = test::some_ids(17, s.vocab, 9);
  auto st = ctx->eval(std::span<const int32_t>(toks.data(), 10), lg);
  REQUIRE(st);
  CHECK(*st == EvalStatus::ok);
  st = ctx->eval(std::span<const int32_t>(toks.data() + 10, 7), lg);
  REQUIRE(st);
  CHECK(*st == EvalStatus::context_full);
  CHECK(ctx->n_past() == 10);  // nothing of the refused batch was evaluated
  st = ctx->eval(std::span<const int32_t>(toks.data() + 10, 6), lg);
  REQUIRE(st);
  CHECK(*st == EvalStatus::ok);
  CHECK(ctx->n_past() == 16);
  std::vector<int32_t> bad = {3, s.vocab};
  auto r = ctx->eval(bad, lg);
  CHECK(!r);
  CHECK(r.error().code == Errc::invalid_argument);
  std::vector<int32_t> neg = {-1};
  CHECK(!ctx->eval(neg, lg));
  CHECK(!ctx->eval(std::span<const int32_t>(), lg));
  // f16 cells take half the bytes of f32 cells
  auto e16 = engine_for(dir.file("k.gguf"), 1, KvType::f16);
  auto c16 = Context::create(e16, 16);
  REQUIRE(c16);
  CHECK(c16->kv_bytes() * 2 == ctx->kv_bytes());
  CHECK(ctx->kv_bytes() == uint64_t(s.layers) * 2 * 16 * s.kv_heads * s.head_dim * 4);
}

TEST_CASE("kv cache: sliding the context keeps the first tokens at the right positions") {
  // With one layer, cached keys and values depend only on each token and its position, so after a
  // slide (drop, move down, re-rotate the keys) the next logits must equal a fresh evaluation of
  // the tokens the context holds. Deeper models slide the same way (their cached values also
  // carry what the dropped tokens contributed, as in llama.cpp's context shift).
  test::TempDir dir;
  struct Case {
    bool gemma;
    int layers, period;
  };
  for (Case cs : {Case{false, 1, 0}, Case{true, 1, 1}, Case{true, 1, 2}, Case{true, 3, 2}}) {
    Synth s;
    s.gemma = cs.gemma;
    s.layers = cs.layers;
    s.window = 4;
    s.period = cs.period;
    s.build();
    std::string path = s.write(dir, "s.gguf");
    auto e = engine_for(path, 1, KvType::f32, ContextPolicy::slide, 4);
    auto fresh = engine_for(path, 1, KvType::f32);
    for (int n_ctx : {32, 600}) {  // 600: sliding layers keep a ring shorter than the context
      auto ctx = Context::create(e, n_ctx);
      REQUIRE(ctx);
      auto toks = test::some_ids(n_ctx + 40, s.vocab, 21);
      std::vector<float> lg;
      auto st = ctx->eval(std::span<const int32_t>(toks.data(), size_t(n_ctx)), lg);
      REQUIRE(st);
      CHECK(ctx->n_past() == n_ctx);
      int slides = 0;
      for (int k = 0; k < 40; k++) {
        int before = ctx->n_past();
        st = ctx->eval(std::span<const int32_t>(&toks[size_t(n_ctx + k)], 1), lg);
        REQUIRE(st);
        CHECK(*st == EvalStatus::ok);
        if (ctx->n_past() <= before) slides++;
        std::vector<int32_t> held = ctx->tokens();
        CHECK(int(held.size()) == ctx->n_past());
        CHECK(ctx->n_past() <= n_ctx);
        CHECK(std::equal(held.begin(), held.begin() + 4, toks.begin()));
        CHECK(held.back() == toks[size_t(n_ctx + k)]);
        if (cs.layers == 1 && (k == 0 || k == 39)) {
          auto want = logits_of_ids(fresh, held, false);
          REQUIRE(want);
          double d = max_diff(lg, *want);
          INFO("gemma " << cs.gemma << " period " << cs.period << " n_ctx " << n_ctx << " step " << k << " diff " << d);
          CHECK(d < 1e-4);
        }
      }
      CHECK(slides >= 1);
    }
  }
}

TEST_CASE("kv cache: prefix reuse with truncate, and what a sliding ring no longer holds") {
  test::TempDir dir;
  Synth s;
  s.gemma = true;
  s.window = 4;
  s.period = 2;
  s.build();
  auto e = engine_for(s.write(dir, "t.gguf"));
  auto a = test::some_ids(300, s.vocab, 31), c = test::some_ids(12, s.vocab, 32);
  auto ctx = Context::create(e, 1024);
  REQUIRE(ctx);
  std::vector<float> lg;
  REQUIRE(ctx->eval(a, lg));
  CHECK(!ctx->truncate(301));
  CHECK(!ctx->truncate(10));  // the ring of 259 cells no longer holds positions 7..9
  CHECK(ctx->n_past() == 300);
  REQUIRE(ctx->truncate(290));
  CHECK(ctx->n_past() == 290);
  CHECK(ctx->tokens().size() == 290);
  auto st = ctx->eval(c, lg, true);
  REQUIRE(st);
  std::vector<int32_t> joined(a.begin(), a.begin() + 290);
  joined.insert(joined.end(), c.begin(), c.end());
  auto want = logits_of_ids(e, joined, true);
  REQUIRE(want);
  std::vector<float> tail(want->end() - long(c.size() * s.vocab), want->end());
  CHECK(max_diff(lg, tail) < 1e-5);
  ctx->clear();
  CHECK(ctx->n_past() == 0);
  REQUIRE(ctx->eval(c, lg));
  auto want_c = logits_of_ids(e, c, false);
  REQUIRE(want_c);
  CHECK(max_diff(lg, *want_c) < 1e-6);
}

TEST_CASE("kv cache: cancel is polled per layer; finished batches stay") {
  test::TempDir dir;
  Synth s;
  s.build();
  auto e = engine_for(s.write(dir, "x.gguf"));
  auto toks = test::some_ids(300, s.vocab, 41);
  auto ctx = Context::create(e, 1024);
  REQUIRE(ctx);
  std::vector<float> lg;
  int polls = 0;
  auto st = ctx->eval(toks, lg, false, [&] { return ++polls > 3 + s.layers; });  // cancel inside the 2nd batch
  REQUIRE(st);
  CHECK(*st == EvalStatus::cancelled);
  CHECK(polls > s.layers);
  CHECK(ctx->n_past() == 256);  // the first batch of 256 finished
  // continuing gives what an uncancelled run gives
  st = ctx->eval(std::span<const int32_t>(toks.data() + 256, 44), lg);
  REQUIRE(st);
  auto want = logits_of_ids(e, toks, false);
  REQUIRE(want);
  CHECK(max_diff(lg, *want) < 1e-5);
  polls = 0;
  ctx->clear();
  st = ctx->eval(std::span<const int32_t>(toks.data(), 5), lg, false, [&] { return ++polls >= 2; });
  REQUIRE(st);
  CHECK(*st == EvalStatus::cancelled);
  CHECK(ctx->n_past() == 0);
}

TEST_CASE("forward: the row activations equal their scalar definitions") {
  std::vector<float> x;
  for (int i = -1300; i <= 1300; i++) x.push_back(static_cast<float>(i) * 0.00937f);  // -12.2 .. 12.2
  for (float v : {-10.0f, 10.0f, -9.999f, 9.999f, 0.0f, -0.0f, 1e-8f, -1e-8f, 80.0f, -80.0f, 1e5f, -1e5f})
    x.push_back(v);
  const int n = static_cast<int>(x.size());  // not a multiple of 16: the scalar tail runs too
  std::vector<float> y(x.size());
  // GELU (tanh form) by table: the same bits as gelu_tanh_f32
  gelu_tanh_row(x.data(), y.data(), n);
  int gelu_diff = 0;
  for (int i = 0; i < n; i++) gelu_diff += y[i] != gelu_tanh_f32(x[i]);
  CHECK(gelu_diff == 0);
  // SiLU: the vector exp is within ~2 ulp of expf
  silu_row(x.data(), y.data(), n);
  double worst = 0;
  for (int i = 0; i < n; i++) {
    const float want = silu_f32(x[i]);
    worst = std::max(worst, std::fabs(double(y[i]) - want) / std::max(1e-30, std::fabs(double(want))));
  }
  MESSAGE("silu_row: largest relative difference to silu_f32 " << worst);
  CHECK(worst < 1e-6);
}

// ---- hostile files: what the metadata says against what the tensors hold (issue 16) ----
namespace {

Result<Model> load_variant(const test::TempDir& dir, Synth s, const std::string& name, LoadOptions o = {}) {
  s.build();
  o.threads = 1;
  return Model::load(s.write(dir, name), o);
}

// The load fails with `code` and a message holding every one of `parts`.
void check_refused(const Result<Model>& m, Errc code, std::initializer_list<std::string> parts) {
  REQUIRE_MESSAGE(!m, "accepted");
  CHECK_MESSAGE(m.error().code == code, m.error().message);
  for (const auto& p : parts)
    CHECK_MESSAGE(m.error().message.find(p) != std::string::npos, "expected \"" << p << "\" in: " << m.error().message);
}

void add_vocab(test::GgufWriter& g, int n) {
  std::vector<std::string> toks;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (int k = 0; k < n; k++) {
    toks.push_back(k == 0 ? "<unk>" : "t" + std::to_string(k));
    scores.push_back(-float(k));
    types.push_back(k == 0 ? 2 : 1);
  }
  g.kv_str("tokenizer.ggml.model", "llama").kv_strs("tokenizer.ggml.tokens", toks);
  g.kv_f32s("tokenizer.ggml.scores", scores).kv_i32s("tokenizer.ggml.token_type", types);
}

}  // namespace

TEST_CASE("robust: hyper-parameters that contradict the tensors fail the load, naming the key and the tensor") {
  test::TempDir dir;
  Synth base;
  {  // the unmodified file loads (so each refusal below is the contradiction's)
    auto m = load_variant(dir, base, "ok.gguf");
    REQUIRE_MESSAGE(m, (m ? "" : m.error().message));
  }
  {  // n_embd twice the tensors' width (ran with half the heads before)
    Synth s = base;
    s.key_u32["embedding_length"] = 64;
    check_refused(load_variant(dir, s, "embd.gguf"), Errc::shape_mismatch,
                  {"embd.gguf",
                   "llama.embedding_length is 64 but the residual 'x' is 32 wide (from tensor 'token_embd.weight')"});
  }
  {  // head counts the q / k widths do not give
    Synth s = base;
    s.key_u32["attention.head_count"] = 8;
    check_refused(load_variant(dir, s, "heads.gguf"), Errc::shape_mismatch,
                  {"llama.attention.head_count is 8 but attention gets 4 heads of 8", "layer 0"});
    Synth t = base;
    t.key_u32["attention.head_count_kv"] = 1;
    check_refused(load_variant(dir, t, "kvheads.gguf"), Errc::shape_mismatch,
                  {"llama.attention.head_count_kv is 1 but attention gets 2 heads"});
  }
  {  // fewer layers declared than the file holds (the rest were silently ignored)
    Synth s = base;
    s.key_u32["block_count"] = 2;
    check_refused(load_variant(dir, s, "layers.gguf"), Errc::shape_mismatch,
                  {"llama.block_count is 2 but the file holds tensor 'blk.2."});
  }
  {  // a 1-token vocabulary over a 61-row embedding (printed nothing)
    Synth s = base;
    s.extra = [](test::GgufWriter& g) { add_vocab(g, 1); };
    check_refused(
        load_variant(dir, s, "vocab1.gguf"), Errc::shape_mismatch,
        {"the vocabulary (tokenizer.ggml.tokens) has 1 tokens but the output 'token_embd.weight' gives 61 logits"});
    Synth t = base;  // the same vocabulary size loads
    t.extra = [](test::GgufWriter& g) { add_vocab(g, 61); };
    auto m = load_variant(dir, t, "vocab61.gguf");
    CHECK_MESSAGE(m, (m ? "" : m.error().message));
  }
  {  // an output wider than the embedding (failed at the first decode without naming the file)
    Synth s = base;
    s.build();
    s.mat("output.weight", s.vocab + 10, s.embd, 0.3f);
    auto m = Model::load(s.write(dir, "wide.gguf"), {.threads = 1});
    check_refused(
        m, Errc::shape_mismatch,
        {"wide.gguf", "the output 'output.weight' gives 71 logits but the embedding 'token_embd.weight' has 61 rows"});
  }
  {  // vocab_size that the output contradicts
    Synth s = base;
    s.extra = [](test::GgufWriter& g) { g.kv_u32("llama.vocab_size", 60); };
    check_refused(load_variant(dir, s, "vsize.gguf"), Errc::shape_mismatch, {"llama.vocab_size is 60 but the output"});
  }
  {  // numbers used as floats must be finite (and fit a float)
    for (auto [key, value] : {std::pair<const char*, float>{"attention.layer_norm_rms_epsilon", INFINITY},
                              {"attention.layer_norm_rms_epsilon", -1.0f},
                              {"rope.freq_base", INFINITY},
                              {"rope.freq_base", NAN},
                              {"rope.freq_base", 0.0f}}) {
      Synth s = base;
      s.key_f32[key] = value;
      check_refused(load_variant(dir, s, "f.gguf"), Errc::bad_format,
                    {"f.gguf: metadata 'llama." + std::string(key) + "'"});
    }
    Synth s = base;  // a double beyond float range
    s.extra = [](test::GgufWriter& g) { g.kv_f64("llama.rope.scaling.factor", 1e300); };
    check_refused(load_variant(dir, s, "big.gguf"), Errc::bad_format,
                  {"metadata 'llama.rope.scaling.factor' is 1e+300"});
  }
  {  // rope factors divide the angle: zero or infinity is refused (named)
    for (float bad : {0.0f, INFINITY}) {
      Synth s = base;
      s.rope_freqs = true;
      s.build();
      s.w["rope_freqs.weight"][1] = bad;
      auto m = Model::load(s.write(dir, "factors.gguf"), {.threads = 1});
      REQUIRE(!m);
      CHECK(m.error().code == Errc::bad_format);
      CHECK_MESSAGE(m.error().message.find("rope_freqs.weight") != std::string::npos, m.error().message);
    }
  }
}

TEST_CASE("robust: the compiled size and a session's memory are refused before anything is allocated") {
  test::TempDir dir;
  Synth base;
  {  // the limit is settable; the default lets a normal model through
    auto ok = load_variant(dir, base, "ok.gguf");
    REQUIRE(ok);
    check_refused(load_variant(dir, base, "ok-limited.gguf", {.max_program_steps = 20}), Errc::out_of_memory,
                  {"llama.block_count 3 x 20 steps per layer (+ 4) makes 64 compiled steps, more than the limit of 20 "
                   "(LoadOptions::max_program_steps, --max-program-steps)"});
  }
  {  // block_count 65536 x a definition of 7,900 tensor-free steps: 517 million steps (aborted after 16 s at 4.2 GB)
    test::GgufWriter g;
    g.kv_str("general.architecture", "hostile")
        .kv_u32("hostile.block_count", 65536)
        .kv_u32("hostile.embedding_length", 8);
    g.tensor_f32("token_embd.weight", {8, 4}, std::vector<float>(32, 0.5f));
    REQUIRE(test::write_file(dir.file("steps.gguf"), g.build()));
    std::string def = "arch hostile\nkind decoder\nprologue\n  x = embed(token_embd.weight)\nblock\n";
    for (int k = 0; k < 7900; k++) def += "silu(x)\n";
    def += "epilogue\n  logits = matmul(x, token_embd.weight)\n";
    REQUIRE(def.size() <= kArchdefMaxBytes);
    test::TempDir defs;
    REQUIRE(test::write_file(defs.file("hostile.archdef"), def));
    auto t0 = std::chrono::steady_clock::now();
    auto m = Model::load(dir.file("steps.gguf"), {.threads = 1, .archdef_dir = defs.path});
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    check_refused(m, Errc::out_of_memory,
                  {"steps.gguf", "hostile.block_count 65536 x 7900 steps per layer", "517734402 compiled steps"});
    CHECK(s < 5.0);
  }
  {  // a tensor-free attention per layer: 4096 layers x 4096 positions = 32 GiB of KV cache
    test::GgufWriter g;
    g.kv_str("general.architecture", "kvhog").kv_u32("kvhog.block_count", 4096).kv_u32("kvhog.embedding_length", 512);
    g.kv_u32("kvhog.context_length", 4096)
        .kv_u32("kvhog.attention.head_count", 8)
        .kv_u32("kvhog.attention.head_count_kv", 8);
    g.tensor_f32("token_embd.weight", {512, 4}, std::vector<float>(2048, 0.01f));
    REQUIRE(test::write_file(dir.file("kv.gguf"), g.build()));
    test::TempDir defs;
    REQUIRE(test::write_file(
        defs.file("kvhog.archdef"),
        "arch kvhog\nkind decoder\nprologue\n  x = embed(token_embd.weight)\nblock\n  a = attention(x, x, x)\n"
        "  add(x, a)\n  scale(x, 0.5)\nepilogue\n  last(x)\n  logits = matmul(x, token_embd.weight)\n"));
    // refused at load: a session of the load's context is what every reply would need
    auto t0 = std::chrono::steady_clock::now();
    auto m = Model::load(dir.file("kv.gguf"),
                         {.threads = 1, .archdef_dir = defs.path, .max_session_bytes = uint64_t(1) << 30});
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    check_refused(m, Errc::out_of_memory,
                  {"kv.gguf: a session of 4096 tokens needs 32.0 GiB (KV cache 32 GiB for 4096 attention layers",
                   "more than the limit of 1 GiB (LoadOptions::max_session_bytes, --max-session-mb)"});
    CHECK(s < 5.0);
    // a smaller context fits the same limit
    std::vector<int32_t> ids = {1, 2};
    auto small =
        Model::load(dir.file("kv.gguf"),
                    {.threads = 1, .context = 16, .archdef_dir = defs.path, .max_session_bytes = uint64_t(1) << 30});
    REQUIRE_MESSAGE(small, (small ? "" : small.error().message));
    auto r2 = small->generate(std::span<const int32_t>(ids), {.max_tokens = 1});
    CHECK_MESSAGE(r2, (r2 ? "" : r2.error().message));
  }
}

TEST_CASE("robust: read_into_memory gives the same logits as the mapping and survives the file being truncated") {
  test::TempDir dir;
  Synth s;
  s.build();
  std::string path = s.write(dir, "m.gguf");
  auto mapped = Model::load(path, {.threads = 1, .kv_type = KvType::f32});
  auto owned = Model::load(path, {.threads = 1, .kv_type = KvType::f32, .read_into_memory = true});
  REQUIRE(mapped);
  REQUIRE(owned);
  CHECK(!llminfer::detail::model_impl(*mapped).desc->files[0]->owned());
  CHECK(llminfer::detail::model_impl(*owned).desc->files[0]->owned());
  auto toks = test::some_ids(20, s.vocab, 3);
  auto a = logits_of_ids(llminfer::detail::model_impl(*mapped).engine, toks, true);
  auto b = logits_of_ids(llminfer::detail::model_impl(*owned).engine, toks, true);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(*a == *b);  // bit for bit
  // Truncated (and rewritten) after the load: the owned copy does not notice. (The mapped model
  // must not run now: its pages are gone, a read would be SIGBUS.)
  mapped = Result<Model>(Model());
  REQUIRE(truncate(path.c_str(), 0) == 0);
  auto c = logits_of_ids(llminfer::detail::model_impl(*owned).engine, toks, true);
  REQUIRE(c);
  CHECK(*c == *b);
  REQUIRE(test::write_file(path, std::string(4096, 'x')));
  auto d = logits_of_ids(llminfer::detail::model_impl(*owned).engine, toks, true);
  REQUIRE(d);
  CHECK(*d == *b);
  // a missing file is an io error in this mode too
  auto gone = Model::load(dir.file("missing.gguf"), {.read_into_memory = true});
  REQUIRE(!gone);
  CHECK(gone.error().code == Errc::io);
}

#if !defined(_WIN32)  // (mkfifo)
TEST_CASE("robust: a FIFO or a directory as the model or as a definition is refused at once, never waited on") {
  test::TempDir dir;
  std::string fifo = dir.file("model.gguf");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  for (bool read : {false, true}) {
    auto t0 = std::chrono::steady_clock::now();
    auto m = Model::load(fifo, {.read_into_memory = read});
    REQUIRE(!m);
    CHECK(m.error().code == Errc::io);
    CHECK_MESSAGE(m.error().message.find("model.gguf: is a pipe (FIFO), not a regular file") != std::string::npos,
                  m.error().message);
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 5.0);
  }
  Synth s;
  s.build();
  std::string path = s.write(dir, "m.gguf");
  for (bool as_fifo : {true, false}) {  // <arch>.archdef that is not a regular file: no silent fallback
    test::TempDir defs;
    std::string def = defs.file("llama.archdef");
    REQUIRE((as_fifo ? mkfifo(def.c_str(), 0600) : mkdir(def.c_str(), 0700)) == 0);
    auto m = Model::load(path, {.threads = 1, .archdef_dir = defs.path});
    REQUIRE(!m);
    CHECK(m.error().code == Errc::archdef);
    CHECK_MESSAGE(m.error().message.find("architecture 'llama' is unavailable") != std::string::npos,
                  m.error().message);
    CHECK_MESSAGE(
        m.error().message.find(def + (as_fifo ? ": is a pipe (FIFO)" : ": is a directory")) != std::string::npos,
        m.error().message);
  }
}
#endif
