// Architecture definitions that reach more architectures (issue 13): the built-ins phi3, starcoder2,
// stablelm, smollm3, gemma2 and olmo2 (with and without its sliding window) against llama.cpp's
// goldens with the bar; for every new operation and value form a definition without it (or
// with it changed) gives other logits on a fixture that exercises it, and an equivalent spelling
// gives the same bits; per-layer values from metadata arrays; the format conventions; the built-in
// texts as they were before this change still load and give identical logits; compare's
// max_abs_diff / max_rel_diff.
#define LLMINFER_IMPLEMENTATION
#include <cstring>
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

std::string builtin_text(const std::string& name) {
  for (const auto& b : builtin_archdefs())
    if (name == b.name) return b.text;
  return {};
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Replaces the first `from` in `s` by `to` (CHECKs that it is there).
std::string replace1(std::string s, const std::string& from, const std::string& to) {
  size_t p = s.find(from);
  CHECK_MESSAGE(p != std::string::npos, from);
  if (p != std::string::npos) s.replace(p, from.size(), to);
  return s;
}

std::vector<int32_t> ids_of(const Json& a) {
  std::vector<int32_t> v;
  for (const auto& x : a.items) v.push_back(static_cast<int32_t>(x.as_int()));
  return v;
}

// The goldens of issue 13, one set per llama.cpp CPU variant (tests/goldens/forward/README.md): its
// AVX2 (haswell) variant's in avx2/, its AVX-512 variant's beside it. A build checks against the set
// of its own kernels' float order (AVX2 kernels: avx2/; the others: the AVX-512 set), as
// test_conformance.cpp does.
std::string kernels_name() {
  auto k = select_kernels("");
  REQUIRE(k);
  return (*k)->name;
}
std::string golden_file(const std::string& name) {
  const std::string dir = tests_dir() + "/goldens/forward/", avx2 = dir + "avx2/" + name + ".json",
                    other = dir + name + ".json";
  if (kernels_name().rfind("avx2", 0) == 0 && file_exists(avx2)) return avx2;  // ("avx2", "avx2+sums")
  return file_exists(other) || !file_exists(avx2) ? other : avx2;
}

// Whether `name`'s golden comes from the llama.cpp variant whose float order our kernels follow
// (AVX2 or AVX-512; scalar and NEON kernels follow neither).
bool golden_of_our_kernels(const std::string& name) {
  const std::string k = kernels_name();
  const bool in_avx2 = golden_file(name).find("/avx2/") != std::string::npos;
  return in_avx2 ? k.rfind("avx2", 0) == 0 : k.rfind("avx512", 0) == 0;  // (F32: no block sums)
}

Json golden(const std::string& name) {
  auto j = json_parse(read_text(golden_file(name)), name);
  REQUIRE_MESSAGE(j, (j ? "" : j.error().message));
  return *j;
}

// The ids of a golden's longest prompt (the one that crosses the 8-token sliding windows).
std::vector<int32_t> long_prompt(const std::string& golden_name) {
  Json g = golden(golden_name);
  std::vector<int32_t> best;
  for (const auto& p : g["prompts"].items)
    if (p["ids"].size() > best.size()) best = ids_of(p["ids"]);
  return best;
}

Result<Model> load(const std::string& path, const std::string& archdef_dir = "") {
  LoadOptions o;
  o.threads = 1;
  o.kv_type = KvType::f32;
  o.archdef_dir = archdef_dir;
  return Model::load(path, o);
}

// Logits of every position of `ids`; `text` (when given) replaces the built-in definition of the
// model's architecture.
std::vector<float> logits(const std::string& path, const std::vector<int32_t>& ids, const std::string& text = "") {
  test::TempDir dir;
  std::string arch;
  if (!text.empty()) {
    auto d = load_description(path);
    REQUIRE_MESSAGE(d, (d ? "" : d.error().message));
    arch = (*d)->arch;
    REQUIRE(test::write_file(dir.file(arch + ".archdef"), text));
  }
  auto m = load(path, text.empty() ? "" : dir.path);
  REQUIRE_MESSAGE(m, (m ? "" : m.error().message));
  auto l = logits_of_ids(llminfer::detail::model_impl(*m).engine, ids, true);
  REQUIRE_MESSAGE(l, (l ? "" : l.error().message));
  return *l;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = a.size() == b.size() ? 0 : INFINITY;
  for (size_t k = 0; k < a.size() && k < b.size(); k++) m = std::max(m, std::fabs(double(a[k]) - double(b[k])));
  return m;
}

std::string fixture(const std::string& name) {
  return test::model_path("synth-" + name + "-f32.gguf");
}

// The architectures of issue 13 and the fixtures that prove them.
const char* const kNew[] = {"phi3-tiny",   "starcoder2-tiny", "stablelm-tiny", "smollm3-tiny",
                            "gemma2-tiny", "olmo2-tiny",      "olmo2-swa-tiny"};

}  // namespace

// The bar against llama.cpp --precise --no-repack (goldens: tests/goldens/forward/README.md):
// top-1 at every position of the three prompts, the largest |logit difference| (over the golden's
// 256 sampled ids and its top 10 at every position) at most 1e-5 of llama.cpp's largest |logit|,
// 32 greedy tokens identical; the third prompt is longer than every sliding window (8 tokens).
// Our AVX2 and AVX-512 kernels follow the float order of llama.cpp's variant of the same
// instruction set, so such a build is held to 1e-6 beyond the goldens' printed precision (measured
// with `llminfer compare` on every logit of the three prompts: the same bits, all seven, on an AVX2
// and on an AVX-512 CPU). Other builds (scalar, NEON) follow neither order and get the bar,
// 1e-5, as far above what llama.cpp's own two variants differ by on the F32
// fixtures that have both sets (5.6e-7, the printed precision); except where GELU (tanh) goes
// through ggml's fp16 table (starcoder2, gemma2): an input one rounding away lands on the
// neighbouring entry, ~1e-3 of the value, and llama.cpp's variants differ by 1.3e-4 on gemma3-tiny
// F32 that way, so those two get 1e-3. Their fixtures spread the logits so that no llama.cpp top-1
// or greedy choice is closer than 1.7e-3.
TEST_CASE("archdef13: the new built-ins agree with llama.cpp (top-1, relative logit difference, 32 greedy tokens)") {
  for (const char* name : kNew) {
    const std::string gname = std::string("synth-") + name + "-f32";
    INFO(gname);
    Json g = golden(gname);
    auto m = load(fixture(name));
    REQUIRE_MESSAGE(m, (m ? "" : m.error().message));
    const auto& e = llminfer::detail::model_impl(*m).engine;
    const int nv = e->n_vocab();
    REQUIRE(nv == g["n_vocab"].as_int());
    const std::string arch = e->arch().name;
    CHECK(e->arch().origin == "builtin");
    const bool gelu_table = arch == "starcoder2" || arch == "gemma2";
    const double rel_max = golden_of_our_kernels(gname) ? 1e-6 : gelu_table ? 1e-3 : 1e-5;
    std::vector<int32_t> sample = ids_of(g["sample_ids"]);
    size_t longest = 0;
    for (const auto& pr : g["prompts"].items) {
      std::vector<int32_t> ids = ids_of(pr["ids"]);
      longest = std::max(longest, ids.size());
      auto ctx = Context::create(e, 0);
      REQUIRE(ctx);
      std::vector<float> lg;
      auto st = ctx->eval(ids, lg, true);
      REQUIRE(st);
      REQUIRE(*st == EvalStatus::ok);
      double diff = 0, ref_max = 0;
      int top1_wrong = 0;
      for (size_t p = 0; p < ids.size(); p++) {
        const float* row = lg.data() + p * size_t(nv);
        const Json& gp = pr["positions"][p];
        top1_wrong += argmax_f32(row, nv) != gp["argmax"].as_int();
        for (size_t k = 0; k < sample.size(); k++) {
          double ref = gp["sample"][k].as_number();
          diff = std::max(diff, std::fabs(double(row[sample[k]]) - ref));
          ref_max = std::max(ref_max, std::fabs(ref));
        }
        for (const auto& t : gp["top"].items) {
          diff = std::max(diff, std::fabs(double(row[t[0].as_int()]) - t[1].as_number()));
          ref_max = std::max(ref_max, std::fabs(t[1].as_number()));
        }
      }
      // the goldens print 7 significant digits: half a unit of the 7th of the largest value
      const double printed = 5e-7 * ref_max;
      const double rel = std::max(0.0, diff - printed) / ref_max;
      MESSAGE(gname << " prompt of " << ids.size() << " tokens: max |diff| " << diff << ", relative " << rel << " (bar "
                    << rel_max << ")");
      CHECK(top1_wrong == 0);
      CHECK(rel <= rel_max);
      // 32 greedy tokens, one evaluation each, identical to llama.cpp's
      std::vector<int32_t> want = ids_of(pr["greedy"]), got;
      int32_t next = argmax_f32(lg.data() + (ids.size() - 1) * size_t(nv), nv);
      for (int k = 0; k < 32; k++) {
        got.push_back(next);
        if (k == 31) break;
        std::vector<float> one;
        auto s2 = ctx->eval(std::span<const int32_t>(&next, 1), one);
        REQUIRE(s2);
        REQUIRE(*s2 == EvalStatus::ok);
        next = argmax_f32(one.data(), nv);
      }
      want.resize(32);
      CHECK(got == want);
    }
    CHECK(longest > 8);  // a prompt longer than the fixtures' sliding windows
  }
}

// For every new operation, keyword and value form: taking it out of a definition (or changing it)
// changes the logits on the fixture, so the fixtures really exercise it; where a new spelling means
// the same as an old one, the bits are identical.
TEST_CASE("archdef13: every new operation is exercised by its fixture") {
  struct Case {
    const char* fixture;
    const char* from;
    const char* to;
    bool same;  // the change must leave the bits as they are
    const char* what;
  };
  const Case cases[] = {
      // slice: q / k / v column ranges of attn_qkv, and the fused gate|up (phi3)
      {"phi3-tiny", "  u = slice(gu, n_ff, n_ff)\n", "  u = slice(gu, 0, n_ff)\n", false, "slice of the fused ffn_up"},
      {"phi3-tiny", "  v = slice(qkv, (n_head + n_head_kv) * head_dim, n_head_kv * head_dim)\n",
       "  v = slice(qkv, n_head * head_dim, n_head_kv * head_dim)\n", false, "slice offsets of v"},
      {"phi3-tiny", "  v = slice(qkv, (n_head + n_head_kv) * head_dim, n_head_kv * head_dim)\n",
       "  v = slice(qkv, n_head*head_dim + n_head_kv*head_dim, head_dim * n_head_kv)\n", true,
       "arithmetic: the same value"},
      // layer_norm with its bias (starcoder2, stablelm)
      {"starcoder2-tiny", "  h = layer_norm(x, blk.{i}.attn_norm.weight, bias = blk.{i}.attn_norm.bias)\n",
       "  h = layer_norm(x, blk.{i}.attn_norm.weight)\n", false, "layer_norm bias"},
      {"starcoder2-tiny", "  h = layer_norm(x, blk.{i}.attn_norm.weight, bias = blk.{i}.attn_norm.bias)\n",
       "  h = rms_norm(x, blk.{i}.attn_norm.weight)\n", false, "layer_norm against rms_norm"},
      {"starcoder2-tiny", "  add_bias(o, blk.{i}.ffn_down.bias)\n", "", false, "the ffn_down bias"},
      {"starcoder2-tiny", "layer_norm(x, output_norm.weight, bias = output_norm.bias)",
       "layer_norm(x, output_norm.weight, bias = output_norm.bias, eps = norm_eps)", true, "eps defaults to norm_eps"},
      {"starcoder2-tiny", "layer_norm(x, output_norm.weight, bias = output_norm.bias)",
       "layer_norm(x, output_norm.weight, bias = output_norm.bias, eps = 0.01)", false, "layer_norm eps"},
      // layer_norm_heads with a weight per head (stablelm), partial rotary
      {"stablelm-tiny", "  layer_norm_heads(q, blk.{i}.attn_q_norm.weight | none)\n", "", false,
       "per-head q LayerNorm"},
      {"stablelm-tiny", "  layer_norm_heads(k, blk.{i}.attn_k_norm.weight | none)\n", "", false,
       "per-head k LayerNorm"},
      {"stablelm-tiny", "  rope(q, neox, dims = rope_dims)\n  rope(k, neox, dims = rope_dims)\n",
       "  rope(q, neox, dims = head_dim)\n  rope(k, neox, dims = head_dim)\n", false, "partial rotary (4 of 16)"},
      // NoPE layers by a period with an offset (smollm3)
      {"smollm3-tiny", "  rope(q, pairs, skip = every(4, 3))\n  rope(k, pairs, skip = every(4, 3))\n",
       "  rope(q, pairs)\n  rope(k, pairs)\n", false, "skip = every(4, 3)"},
      {"smollm3-tiny", "skip = every(4, 3))\n  rope(k, pairs, skip = every(4, 3))",
       "skip = 1 - (1 - every(4, 3)))\n  rope(k, pairs, skip = every(2 + 2, 6 / 2))", true, "every() in arithmetic"},
      // soft-capped attention scores and the sliding period (gemma2)
      {"gemma2-tiny", "softcap = attn_softcap, ", "", false, "attention soft-cap"},
      {"gemma2-tiny", "period = sliding_period)", "period = sliding_period, offset = 0)", false, "offset 0"},
      {"gemma2-tiny", "period = sliding_period)", "period = sliding_period, offset = sliding_period - 1)", true,
       "the default offset"},
      {"gemma2-tiny", "  scale(q, rsqrt(query_scalar))\n", "  scale(q, 1 / sqrt(query_scalar))\n", true, "1 / x"},
      // per-layer sliding and the period with an offset (olmo2 with its window)
      {"olmo2-swa-tiny", "period = sliding_period)", "period = sliding_period, offset = 1)", false, "offset 1"},
      {"olmo2-swa-tiny", "period = sliding_period)", "sliding = 1 - every(sliding_period, sliding_period - 1))", true,
       "sliding = every() as the period"},
      {"olmo2-swa-tiny", "period = sliding_period)", "sliding = 1)", false, "every layer sliding"},
      // rms_norm over all of q (olmo2)
      {"olmo2-tiny", "  rms_norm(q, blk.{i}.attn_q_norm.weight)\n", "", false, "q norm"},
  };
  for (const auto& c : cases) {
    const std::string label = std::string(c.fixture) + ": " + c.what;
    INFO(label);
    const std::string path = fixture(c.fixture);
    auto d = load_description(path);
    REQUIRE(d);
    const std::string base = builtin_text((*d)->arch);
    REQUIRE(!base.empty());
    std::string text = replace1(base, c.from, c.to);
    std::vector<int32_t> ids = long_prompt(std::string("synth-") + c.fixture + "-f32");
    std::vector<float> a = logits(path, ids), b = logits(path, ids, text);
    if (c.same)
      CHECK(same_bits(a, b));
    else
      CHECK(max_diff(a, b) > 1e-4);  // the same definition gives the same bits: this is the change
  }
}

// "0 means absent" for a metadata value: nonzero(KEY) skips a key that holds 0. general.file_type is
// 0 (F32) in every F32 fixture.
TEST_CASE("archdef13: nonzero(KEY) treats 0 as absent; a param's value is exact arithmetic") {
  const std::string path = fixture("olmo2-tiny");
  std::vector<int32_t> ids = long_prompt("synth-olmo2-tiny-f32");
  const std::string base = builtin_text("olmo2");
  auto with = [&](const std::string& params, const std::string& factor) {
    std::string t = replace1(base, "\nprologue\n", "\n" + params + "\nprologue\n");
    return replace1(t, "  logits = matmul(x, output.weight)\n",
                    "  logits = matmul(x, output.weight)\n  scale(logits, " + factor + ")\n");
  };
  std::vector<float> two = logits(path, ids, with("", "2"));
  CHECK(same_bits(two, logits(path, ids, with("param s = nonzero(general.file_type) | 2", "s"))));
  CHECK(!same_bits(two, logits(path, ids, with("param s = general.file_type | 2", "s"))));  // 0: every logit 0
  // precedence, parentheses, unary minus, division: 2 * (3 + 4) - 10 / 4 - 9.5 = 2
  CHECK(same_bits(two, logits(path, ids, with("param s = 2 * (3 + 4) - 10 / 4 - 9.5", "s"))));
  CHECK(same_bits(two, logits(path, ids, with("", "-(-2)"))));
  CHECK(same_bits(two, logits(path, ids, with("param a = 4\nparam s = a/2", "s"))));
  CHECK(same_bits(two, logits(path, ids, with("", "n_head / 2"))));
  CHECK(same_bits(two, logits(path, ids, with("", "sqrt(n_head)"))));
}

// Values that cannot be used fail the load with the definition's line, not a crash.
TEST_CASE("archdef13: compile-time errors of the new forms name the definition line") {
  const std::string path = fixture("olmo2-swa-tiny");
  const std::string base = builtin_text("olmo2");
  auto load_with = [&](const std::string& text) {
    test::TempDir dir;
    REQUIRE(test::write_file(dir.file("olmo2.archdef"), text));
    return load(path, dir.path);
  };
  struct Bad {
    const char* from;
    const char* to;
    const char* message;
  };
  const Bad bad[] = {
      {"  q = matmul(x, blk.{i}.attn_q.weight)\n", "  qq = matmul(x, blk.{i}.attn_q.weight)\n  q = slice(qq, 60, 8)\n",
       "olmo2.archdef:18: slice: columns 60 to 67 (start 60, width 8) are not within 'qq' (64 wide)"},
      {"period = sliding_period)", "sliding = every(0, 0))",
       "olmo2.archdef:24: every(0, 0): the period must be a whole number"},
      {"period = sliding_period)", "period = sliding_period, offset = 4)",
       "olmo2.archdef:24: offset 4 is not a layer within the period 4 (0 to 3; layer 0)"},
      {"  rope(q, neox)\n", "  rope(q, neox, dims = head_dim / (n_head - 4))\n",
       "olmo2.archdef:22: division of 16 by 0"},
      {"  rope(q, neox)\n", "  rope(q, neox, dims = head_dim / 3)\n",
       "olmo2.archdef:22: rope: 5.33333 rotated dimensions do not fit heads of 16"},
      {"  rms_norm(q, blk.{i}.attn_q_norm.weight)\n", "  layer_norm_heads(q, blk.{i}.attn_k_norm.weight)\n",
       "olmo2.archdef:20: layer_norm_heads: weight 'blk.0.attn_k_norm.weight' has 32 elements: expected head_dim (16, "
       "shared by every head) or the width of 'q' (64, one weight per head)"},
  };
  for (const auto& b : bad) {
    INFO(b.message);
    auto m = load_with(replace1(base, b.from, b.to));
    REQUIRE(!m);
    CHECK_MESSAGE(m.error().message.find(b.message) != std::string::npos, m.error().message);
  }
}

// Per-layer values from metadata arrays: an array under a {arch}. key gives one value per layer
// (as llama.cpp's get_key_or_arr). Checked on a copy of the olmo2 fixture with an extra array key.
TEST_CASE("archdef13: a metadata array is read per layer") {
  const std::string src = fixture("olmo2-swa-tiny");
  // the fixture's description with an array added (the engine reads metadata from the description)
  auto with_array = [&](const std::string& key, std::vector<double> values) {
    auto desc = load_description(src);
    REQUIRE_MESSAGE(desc, (desc ? "" : desc.error().message));
    std::shared_ptr<ModelDesc> d = *desc;
    d->meta_arrays[key] = std::move(values);
    return d;
  };
  std::vector<int32_t> ids = long_prompt("synth-olmo2-swa-tiny-f32");
  auto run = [&](std::shared_ptr<ModelDesc> d, const std::string& text) -> Result<std::vector<float>> {
    test::TempDir dir;
    REQUIRE(test::write_file(dir.file("olmo2.archdef"), text));
    LoadOptions o;
    o.threads = 1;
    o.kv_type = KvType::f32;
    o.archdef_dir = dir.path;
    auto e = Engine::create(d, o);
    if (!e) return e.error();
    return logits_of_ids(*e, ids, true);
  };
  const std::string base = builtin_text("olmo2");
  auto builtin = run(with_array("olmo2.x", {0, 0, 0, 0}), base);
  REQUIRE(builtin);
  const std::string per_layer =
      replace1(replace1(base, "\nprologue\n", "\nparam slides = {arch}.attention.slides\nprologue\n"),
               "period = sliding_period)", "sliding = slides)");
  // the layers llama.cpp slides (period 4: layer 3 global) as an array: the same bits
  auto a = run(with_array("olmo2.attention.slides", {1, 1, 1, 0}), per_layer);
  REQUIRE_MESSAGE(a, (a ? "" : a.error().message));
  CHECK(same_bits(*builtin, *a));
  auto b = run(with_array("olmo2.attention.slides", {0, 1, 1, 1}), per_layer);
  REQUIRE(b);
  CHECK(max_diff(*builtin, *b) > 1e-3);
  // a per-layer window: 8 on the sliding layers and 0 on the global one is the same again
  auto c = run(with_array("olmo2.attention.windows", {8, 8, 8, 0}),
               replace1(replace1(base, "\nprologue\n", "\nparam win = {arch}.attention.windows\nprologue\n"),
                        "window = sliding_window, period = sliding_period)", "window = win)"));
  REQUIRE_MESSAGE(c, (c ? "" : c.error().message));
  CHECK(same_bits(*builtin, *c));
  // an array of the wrong length names the key and block_count
  auto bad = run(with_array("olmo2.attention.slides", {1, 1, 0}), per_layer);
  REQUIRE(!bad);
  CHECK(bad.error().message.find(
            "metadata 'olmo2.attention.slides' is an array of 3 values, param 'slides' needs one per "
            "layer (olmo2.block_count is 4)") != std::string::npos);
  // an array outside the block
  auto outside =
      run(with_array("olmo2.attention.slides", {1, 1, 1, 0}),
          replace1(replace1(base, "\nprologue\n", "\nparam slides = {arch}.attention.slides\nprologue\n"),
                   "  x = embed(token_embd.weight)\n", "  x = embed(token_embd.weight)\n  scale(x, slides)\n"));
  REQUIRE(!outside);
  CHECK(outside.error().message.find("param 'slides' reads the metadata array 'olmo2.attention.slides' (one value per "
                                     "layer): only the 'block' section can use it") != std::string::npos);
}

// The GGUF loader keeps the architecture's numeric arrays (not the tokenizer's).
TEST_CASE("archdef13: GGUF numeric arrays of the architecture are kept as per-layer metadata") {
  test::TempDir dir;
  test::GgufWriter g;
  g.kv_str("general.architecture", "olmo2");
  g.kv_i32s("olmo2.attention.sliding_window_pattern", {1, 1, 0});
  g.kv_f32s("olmo2.scales", {0.5f, 2.0f});
  g.kv_i32s("general.other_array", {1, 1});  // not the architecture's: not kept
  g.kv_u32("olmo2.block_count", 3);
  g.tensor_f32("token_embd.weight", {2, 2}, {1, 2, 3, 4});
  REQUIRE(test::write_file(dir.file("a.gguf"), g.build()));
  auto d = load_description(dir.file("a.gguf"));
  REQUIRE_MESSAGE(d, (d ? "" : d.error().message));
  const auto* p = (*d)->find_meta_array("olmo2.attention.sliding_window_pattern");
  REQUIRE(p);
  CHECK(*p == std::vector<double>{1, 1, 0});
  REQUIRE((*d)->find_meta_array("olmo2.scales"));
  CHECK(*(*d)->find_meta_array("olmo2.scales") == std::vector<double>{0.5, 2.0});
  CHECK(!(*d)->find_meta_array("general.other_array"));
}

// Definitions written for the language before issue 13 (the built-in texts of llama, qwen2, qwen3
// and gemma3 as they were, tests/archdef/v0/) load unchanged and give the same bits as today's
// built-ins, which declare the format conventions those texts got by default: GGUF files in every
// weight type (the rounding before F16/BF16 products) and Hugging Face directories (the q/k order,
// Gemma's norm + 1).
TEST_CASE("archdef13: definitions written before this change give identical logits") {
  const std::string v0 = tests_dir() + "/archdef/v0";
  const std::pair<const char*, std::vector<std::string>> models[] = {
      {"llama",
       {fixture("llama-tiny"), test::model_path("synth-llama-tiny-f16.gguf"),
        test::model_path("synth-llama-tiny-bf16.gguf"), test::model_path("hf/llama-tiny/hf-bf16"),
        test::model_path("stories260K.gguf")}},
      {"qwen2",
       {fixture("qwen2-tiny"), test::model_path("synth-qwen2-tiny-bf16.gguf"),
        test::model_path("hf/qwen2-tiny/hf-bf16")}},
      {"qwen3",
       {fixture("qwen3-tiny"), test::model_path("synth-qwen3-tiny-f16.gguf"),
        test::model_path("hf/qwen3-tiny/hf-bf16")}},
      {"gemma3",
       {fixture("gemma3-tiny"), test::model_path("synth-gemma3-tiny-bf16.gguf"),
        test::model_path("hf/gemma3-tiny/hf-bf16"), test::model_path("synth-gemma3-tiny-softcap-f32.gguf")}},
  };
  const std::vector<int32_t> ids = {1,   300, 7,  2048, 99, 13, 5000, 42, 8,  1234, 77,
                                    300, 9,   10, 11,   12, 13, 14,   15, 16, 17,   18};
  for (const auto& model : models) {
    const char* arch = model.first;  // (not a structured binding: clang 14 cannot capture one in INFO's lambda)
    const auto& paths = model.second;
    const std::string old_text = read_text(v0 + "/" + arch + ".archdef");
    REQUIRE(!old_text.empty());
    auto parsed = archdef_parse(old_text, arch, arch, "v0");
    REQUIRE_MESSAGE(parsed, (parsed ? "" : parsed.error().message));
    CHECK(parsed->conventions.empty());
    for (const auto& path : paths) {
      INFO(arch << ": " << path);
      REQUIRE_MESSAGE((file_exists(path) || is_directory(path)), path << " is missing: run `make fixtures`");
      std::vector<int32_t> use = ids;
      if (path.find("stories260K") != std::string::npos)
        for (auto& t : use) t %= 512;
      CHECK(same_bits(logits(path, use), logits(path, use, old_text)));
    }
  }
}

// The conventions change what runs exactly where they say: hf_rope and hf_norm_offset on Hugging
// Face checkpoints only, matmul_input on GGUF F16/BF16 weights only.
TEST_CASE("archdef13: the format conventions are what the definition says") {
  const std::vector<int32_t> ids = {1, 300, 7, 2048, 99, 13, 5000, 42, 8, 1234};
  {  // llama: as_written on a Hugging Face directory runs 'pairs' on rotate-half rows: other logits
    const std::string base = builtin_text("llama");
    const std::string as_written = replace1(base, "convention hf_rope = neox", "convention hf_rope = as_written");
    const std::string hf = test::model_path("hf/llama-tiny/hf-bf16"), gguf = fixture("llama-tiny");
    CHECK(max_diff(logits(hf, ids), logits(hf, ids, as_written)) > 1e-3);
    CHECK(same_bits(logits(gguf, ids), logits(gguf, ids, as_written)));  // GGUF: as written anyway
  }
  {  // gemma3: the norm offset of Hugging Face files
    const std::string base = builtin_text("gemma3");
    const std::string zero = replace1(base, "convention hf_norm_offset = 1", "convention hf_norm_offset = 0");
    const std::string hf = test::model_path("hf/gemma3-tiny/hf-bf16"), gguf = fixture("gemma3-tiny");
    CHECK(max_diff(logits(hf, ids), logits(hf, ids, zero)) > 1e-3);
    CHECK(same_bits(logits(gguf, ids), logits(gguf, ids, zero)));
  }
  {  // matmul_input = f32: F16 GGUF weights multiply unrounded activations (other bits); F32 weights: no change
    const std::string base = builtin_text("qwen3");
    const std::string f32 = replace1(base, "convention matmul_input = gguf_rounded", "convention matmul_input = f32");
    const std::string f16 = test::model_path("synth-qwen3-tiny-f16.gguf");
    auto a = logits(f16, ids), b = logits(f16, ids, f32);
    CHECK(!same_bits(a, b));
    CHECK(max_diff(a, b) < 1e-2);
    CHECK(same_bits(logits(fixture("qwen3-tiny"), ids), logits(fixture("qwen3-tiny"), ids, f32)));
  }
}

// Context shifting (KvCache::shift, as a session slides or edits its history) on the layers of issue
// 13: every cell that moves keeps its values bit for bit; its keys are re-rotated where the layer's
// rope rotated them and only there: NoPE layers (smollm3: no rope on layer 3) and the dims past a
// partial rotary (stablelm: the first quarter of each head rotates) move bit for bit, the rotary
// dims change. Layer 0 (sliding in gemma2 and olmo2-swa, whose windows differ by layer, and with its
// own rope base in gemma2) depends only on each token and its position, so after the shift it must
// equal a fresh evaluation of the kept tokens within the tolerances of the session tests (keys up to
// the re-rotation's rounding); the next tokens' logits are reported as there.
TEST_CASE(
    "archdef13: context shifting re-rotates only what each layer's rope rotated (NoPE, partial rotary, per-layer "
    "windows)") {
  for (const char* name : {"smollm3-tiny", "stablelm-tiny", "gemma2-tiny", "olmo2-swa-tiny"}) {
    for (auto kv : {KvType::f32, KvType::f16}) {
      const bool f32 = kv == KvType::f32;
      CAPTURE(std::string(name));
      CAPTURE(f32);
      LoadOptions o;
      o.threads = 1;
      o.context = 512;
      o.kv_type = kv;
      auto m = Model::load(fixture(name), o);
      REQUIRE_MESSAGE(m, (m ? "" : m.error().message));
      const Program& p = llminfer::detail::model_impl(*m).engine->program();
      const std::vector<int32_t> t = long_prompt(std::string("synth-") + name + "-f32");
      const int keep = 4, drop = 12, n = int(t.size()), n_new = n - drop;
      REQUIRE(n_new > 8 + keep);  // the kept part is longer than the 8-token windows
      std::vector<int32_t> held(t.begin(), t.begin() + keep);
      held.insert(held.end(), t.begin() + keep + drop, t.end());

      auto s = m->session();
      REQUIRE(s.eval(t));
      Context& ctx = *llminfer::detail::session_impl(s).ctx;
      KvCache& cache = ctx.kv();
      const int nl = cache.n_layers();
      auto cell = [&](int li, int pos) {
        std::string raw;
        cache.read_cell(li, pos, raw);
        std::vector<float> f(raw.size() / cache.elem());
        cache.load(reinterpret_cast<const uint8_t*>(raw.data()), f.data(), int(f.size()));
        return f;
      };
      std::vector<std::vector<std::vector<float>>> before(static_cast<size_t>(nl),
                                                          std::vector<std::vector<float>>(static_cast<size_t>(n)));
      for (int li = 0; li < nl; li++)
        for (int pos = cache.held_from(li, n); pos < n; pos++) before[size_t(li)][size_t(pos)] = cell(li, pos);
      REQUIRE(ctx.erase(keep, drop));
      CHECK(s.tokens() == held);

      int nope_layers = 0, partial_layers = 0, checked_cells = 0;
      std::vector<int> windows;
      for (int li = 0; li < nl; li++) {
        const KvLayerSpec& sp = cache.layer(li).spec;
        windows.push_back(sp.window);
        const int rot = sp.k_rope >= 0 ? p.ropes[size_t(sp.k_rope)].n_dims : 0;
        nope_layers += rot == 0;
        partial_layers += rot > 0 && rot < sp.hd_k;
        const int from = sp.window > 0 ? std::max(0, n_new - sp.window + 1) : 0;
        double rotated = 0;  // largest change of a rotary dim of a moved key
        bool moved_exact = true;
        for (int q = std::max(from, keep); q < n_new; q++) {
          const std::vector<float>& b = before[size_t(li)][size_t(q + drop)];
          REQUIRE(!b.empty());
          std::vector<float> a = cell(li, q);
          REQUIRE(a.size() == b.size());
          checked_cells++;
          const size_t nk = size_t(sp.n_kv) * sp.hd_k;
          for (size_t k = 0; k < a.size(); k++) {
            const bool rotary = k < nk && int(k % size_t(sp.hd_k)) < rot;
            if (rotary)
              rotated = std::max(rotated, std::fabs(double(a[k]) - double(b[k])));
            else
              moved_exact = moved_exact && std::memcmp(&a[k], &b[k], 4) == 0;
          }
        }
        INFO("layer " << li << ": " << rot << " of " << sp.hd_k << " key dims rotate, window " << sp.window);
        CHECK(moved_exact);                  // values, NoPE keys, the dims past a partial rotary
        if (rot > 0) CHECK(rotated > 1e-3);  // re-rotated (by -12 positions)
      }
      CHECK(checked_cells > 0);
      const std::string arch = llminfer::detail::model_impl(*m).engine->arch().name;
      if (arch == "smollm3") CHECK(nope_layers == 1);
      if (arch == "stablelm") CHECK(partial_layers == nl);
      if (arch == "gemma2" || arch == "olmo2") {
        CHECK(*std::min_element(windows.begin(), windows.end()) == 0);  // global layers beside
        CHECK(windows[0] == 8);                                         // sliding ones (layer 0)
      }

      // layer 0 against a fresh evaluation of the kept tokens
      auto fresh = m->session();
      REQUIRE(fresh.eval(held));
      Context& fctx = *llminfer::detail::session_impl(fresh).ctx;
      const KvLayerSpec& sp0 = cache.layer(0).spec;
      const size_t nk0 = size_t(sp0.n_kv) * sp0.hd_k;
      double key_diff = 0, value_diff = 0;
      for (int q = sp0.window > 0 ? std::max(keep, n_new - sp0.window + 1) : keep; q < n_new; q++) {
        std::vector<float> a = cell(0, q), b;
        {
          std::string raw;
          fctx.kv().read_cell(0, q, raw);
          b.resize(raw.size() / cache.elem());
          cache.load(reinterpret_cast<const uint8_t*>(raw.data()), b.data(), int(b.size()));
        }
        REQUIRE(a.size() == b.size());
        for (size_t k = 0; k < a.size(); k++) {
          const double d = std::fabs(double(a[k]) - double(b[k]));
          (k < nk0 ? key_diff : value_diff) = std::max(k < nk0 ? key_diff : value_diff, d);
        }
      }
      std::vector<int32_t> next(t.begin() + 5, t.begin() + 13);
      REQUIRE(fresh.eval(next, true));
      REQUIRE(s.eval(next, true));
      const int nv = m->info().n_vocab;
      auto rep = compare_logits(s.logits().data(), fresh.logits().data(), int(next.size()), nv);
      MESSAGE(std::string(name) << (f32 ? " f32" : " f16") << ": layer 0 after the shift vs fresh: keys " << key_diff
                                << ", values " << value_diff << "; the next 8 tokens: top1 " << rep.top1_matches << "/"
                                << rep.positions << ", pearson min " << rep.pearson_min << ", max |diff| "
                                << rep.max_abs_diff);
      CHECK(value_diff < (f32 ? 1e-5 : 1e-3));
      CHECK(key_diff < (f32 ? 1e-4 : 1e-2));
      CHECK(rep.pearson_min > 0.5);
    }
  }
}

// compare --json: max_abs_diff and max_rel_diff see a scale that top-1, Pearson and top-10 do not.
TEST_CASE("compare: max_abs_diff and max_rel_diff") {
  test::TempDir dir;
  const std::string model = test::quote(fixture("olmo2-tiny"));
  const std::string ids = "1,300,7,2048,99";
  auto r =
      test::run_cli("logits -m " + model + " --ids " + ids + " --all -t 1 --out " + test::quote(dir.file("a.f32")));
  REQUIRE(r.status == 0);
  std::string bytes = read_text(dir.file("a.f32"));
  REQUIRE(bytes.size() % 4 == 0);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), bytes.size());
  double mx = 0;
  for (float& x : v) {
    mx = std::max(mx, std::fabs(double(x)));
    x *= 8;  // every logit times 8: the same ranking, the same correlation
  }
  REQUIRE(test::write_file(dir.file("b.f32"), std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4)));
  auto same = test::run_cli("compare -m " + model + " --ids " + ids + " -t 1 --json --reference " +
                            test::quote(dir.file("a.f32")));
  REQUIRE(same.status == 0);
  auto j = json_parse(same.out, "compare");
  REQUIRE(j);
  CHECK((*j)["max_abs_diff"].as_number() == 0);
  CHECK((*j)["max_rel_diff"].as_number() == 0);
  auto scaled = test::run_cli("compare -m " + model + " --ids " + ids + " -t 1 --json --reference " +
                              test::quote(dir.file("b.f32")));
  REQUIRE(scaled.status == 0);
  auto k = json_parse(scaled.out, "compare");
  REQUIRE(k);
  CHECK((*k)["top1_match_all"].as_bool());
  CHECK((*k)["pearson_min"].as_number() > 0.999999);
  CHECK((*k)["top10_overlap_mean"].as_number() == 10);
  CHECK((*k)["max_abs_diff"].as_number() == doctest::Approx(7 * mx).epsilon(1e-6));
  CHECK((*k)["max_rel_diff"].as_number() == doctest::Approx(7.0 / 8.0).epsilon(1e-6));
  auto text =
      test::run_cli("compare -m " + model + " --ids " + ids + " -t 1 --reference " + test::quote(dir.file("b.f32")));
  CHECK(text.out.find("max diff") != std::string::npos);
}
