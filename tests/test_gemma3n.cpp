// Gemma 3n (issue 19) and the generic operations its definition is written with: every stream op
// and the new row ops against a plain reference; the value forms layer / inf / less / where; the
// KV-reuse plan (layers that own no cache, their k / v steps dropped, a smaller cache) and that a
// continuation reading a shared cache gives the bits of one evaluation. The logits against llama.cpp
// are in test_conformance.cpp.
#define LLMINFER_IMPLEMENTATION
#include <cmath>
#include <random>

#include "common.hpp"

using namespace llminfer;
using namespace llminfer::detail;

namespace {

const KernelTable& kernels_here() {
  auto k = select_kernels("");
  REQUIRE(k);
  return **k;
}

std::vector<float> random_row(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// Runs row_op on `rows` rows: a, b, c are [rows][widths] as the step says.
std::vector<float> run_rows(const Step& s, int rows, const std::vector<float>& a, const std::vector<float>& b = {},
                            const std::vector<float>& c = {}) {
  std::vector<float> d(size_t(rows) * size_t(s.w_out), -7.0f);
  if (s.op == OpCode::put || s.op == OpCode::match_norm || s.op == OpCode::stream_add || s.op == OpCode::stream_axpy)
    d = a;
  for (int t = 0; t < rows; t++)
    row_op(s, kernels_here(), a.data(), b.empty() ? nullptr : b.data(), c.empty() ? nullptr : c.data(), d.data(),
           size_t(t));
  return d;
}

Step step(OpCode op, int w_in, int w_out, int streams = 0) {
  Step s;
  s.op = op;
  s.w_in = w_in;
  s.w_out = w_out;
  s.streams = streams;
  return s;
}

}  // namespace

TEST_CASE(
    "gemma3n ops: streams, stream_mix, stream_axpy, stream_add, stream_mean, match_norm against a plain reference") {
  const int S = 4, D = 24, T = 3;
  auto x = random_row(size_t(T) * D, 1);
  // streams: S copies
  auto X = run_rows(step(OpCode::streams, D, S * D, S), T, x);
  for (int t = 0; t < T; t++)
    for (int k = 0; k < S; k++)
      for (int e = 0; e < D; e++) REQUIRE(X[size_t(t) * S * D + size_t(k) * D + e] == x[size_t(t) * D + e]);
  X = random_row(size_t(T) * S * D, 2);
  // stream_mix: P[k] = X[k] + sum_j c[k*S+j] X[j]
  auto c = random_row(size_t(T) * S * S, 3, 0.3f);
  auto P = run_rows(step(OpCode::stream_mix, S * D, S * D, S), T, X, c);
  double worst = 0;
  for (int t = 0; t < T; t++)
    for (int k = 0; k < S; k++)
      for (int e = 0; e < D; e++) {
        double want = X[size_t(t) * S * D + size_t(k) * D + e];
        for (int j = 0; j < S; j++)
          want += double(c[size_t(t) * S * S + size_t(k) * S + j]) * X[size_t(t) * S * D + size_t(j) * D + e];
        worst = std::max(worst, std::fabs(want - P[size_t(t) * S * D + size_t(k) * D + e]));
      }
  CHECK(worst < 1e-5);
  // a mixing matrix of zeros changes nothing, a 1 at (k, j) adds stream j to stream k
  std::vector<float> z(size_t(T) * S * S, 0.0f);
  CHECK(run_rows(step(OpCode::stream_mix, S * D, S * D, S), T, X, z) == X);
  z[size_t(2) * S + 1] = 1.0f;  // token 0: stream 2 += stream 1
  auto P2 = run_rows(step(OpCode::stream_mix, S * D, S * D, S), T, X, z);
  for (int e = 0; e < D; e++) CHECK(P2[size_t(2) * D + e] == X[size_t(2) * D + e] + X[size_t(1) * D + e]);
  // stream_axpy: X[k] + g[k] * v
  auto v = random_row(size_t(T) * D, 4), g = random_row(size_t(T) * S, 5);
  auto Y = run_rows(step(OpCode::stream_axpy, S * D, S * D, S), T, X, v, g);
  for (int t = 0; t < T; t++)
    for (int k = 0; k < S; k++)
      for (int e = 0; e < D; e++) {
        const float prod = v[size_t(t) * D + e] * g[size_t(t) * S + k];
        REQUIRE(Y[size_t(t) * S * D + size_t(k) * D + e] == prod + X[size_t(t) * S * D + size_t(k) * D + e]);
      }
  // stream_add from 1: stream 0 untouched
  Step sa = step(OpCode::stream_add, S * D, S * D, S);
  sa.from = 1;
  auto A = run_rows(sa, T, X, v);
  for (int t = 0; t < T; t++)
    for (int k = 0; k < S; k++)
      for (int e = 0; e < D; e++)
        REQUIRE(A[size_t(t) * S * D + size_t(k) * D + e] ==
                (k == 0 ? X[size_t(t) * S * D + e] : X[size_t(t) * S * D + size_t(k) * D + e] + v[size_t(t) * D + e]));
  // stream_mean: ((X0 + X1) + X2 + X3) / 4
  auto M = run_rows(step(OpCode::stream_mean, S * D, D, S), T, X);
  for (int t = 0; t < T; t++)
    for (int e = 0; e < D; e++) {
      const float* r = X.data() + size_t(t) * S * D;
      REQUIRE(M[size_t(t) * D + e] == (((r[e] + r[D + e]) + r[2 * D + e]) + r[3 * D + e]) * 0.25f);
    }
  // match_norm: streams 1.. get the L2 norm of stream 0, keep their direction
  auto N = run_rows(step(OpCode::match_norm, S * D, S * D, S), T, X);
  for (int t = 0; t < T; t++) {
    auto norm = [&](const float* p) {
      double s = 0;
      for (int e = 0; e < D; e++) s += double(p[e]) * p[e];
      return std::sqrt(s);
    };
    const float* r = N.data() + size_t(t) * S * D;
    CHECK(std::equal(r, r + D, X.data() + size_t(t) * S * D));
    for (int k = 1; k < S; k++) {
      CHECK(norm(r + size_t(k) * D) == doctest::Approx(norm(r)).epsilon(1e-6));
      CHECK(r[size_t(k) * D] / X[size_t(t) * S * D + size_t(k) * D] ==
            doctest::Approx(r[size_t(k) * D + 5] / X[size_t(t) * S * D + size_t(k) * D + 5]).epsilon(1e-5));
    }
  }
}

TEST_CASE("gemma3n ops: gaussian_topk, rms_normalize, put, sub, mul_weight against a plain reference") {
  const int D = 64, T = 2;
  auto x = random_row(size_t(T) * D, 7);
  // gaussian_topk: max(0, x - (mean + f * std)), std with n - 1
  Step gt = step(OpCode::gaussian_topk, D, D);
  gt.f = 1.6448533535003662f;
  auto y = run_rows(gt, T, x);
  for (int t = 0; t < T; t++) {
    const float* r = x.data() + size_t(t) * D;
    double mean = 0, var = 0;
    for (int e = 0; e < D; e++) mean += r[e];
    mean /= D;
    for (int e = 0; e < D; e++) var += (r[e] - mean) * (r[e] - mean);
    const double cut = mean + 1.6448533535003662 * std::sqrt(var / (D - 1));
    int kept = 0;
    for (int e = 0; e < D; e++) {
      CHECK(y[size_t(t) * D + e] == doctest::Approx(std::max(0.0, r[e] - cut)).epsilon(1e-5));
      kept += y[size_t(t) * D + e] > 0;
    }
    CHECK(kept > 0);
    CHECK(kept < D / 4);  // about 5% of a normal sample stays
  }
  // rms_normalize per group of 16: every group has mean square 1 (up to eps)
  Step rn = step(OpCode::rms_normalize, D, D, 16);
  rn.f = 1e-6f;
  auto z = run_rows(rn, T, x);
  for (int t = 0; t < T; t++)
    for (int g = 0; g < D / 16; g++) {
      double ms = 0;
      for (int e = 0; e < 16; e++)
        ms += double(z[size_t(t) * D + size_t(g) * 16 + e]) * z[size_t(t) * D + size_t(g) * 16 + e];
      CHECK(ms / 16 == doctest::Approx(1.0).epsilon(1e-4));
    }
  // put: 8 values into columns 10..17
  auto v = random_row(size_t(T) * 8, 8);
  Step pt = step(OpCode::put, D, D);
  pt.off = 10;
  pt.vec_len = 8;
  auto p = run_rows(pt, T, x, v);
  for (int t = 0; t < T; t++)
    for (int e = 0; e < D; e++)
      REQUIRE(p[size_t(t) * D + e] == (e >= 10 && e < 18 ? v[size_t(t) * 8 + e - 10] : x[size_t(t) * D + e]));
  // sub and mul_weight
  auto b = random_row(size_t(T) * D, 9);
  auto s = run_rows(step(OpCode::sub, D, D), T, x, b);
  for (size_t k = 0; k < s.size(); k++) REQUIRE(s[k] == x[k] - b[k]);
  auto w = random_row(D, 10);
  Step mw = step(OpCode::mul_weight, D, D);
  mw.vec = w.data();
  auto m = run_rows(mw, T, x);
  for (size_t k = 0; k < m.size(); k++) REQUIRE(m[k] == x[k] * w[k % D]);
}

TEST_CASE(
    "archdef values: layer, inf, less and where are worked out per layer; misuse is an error that names the line") {
  const std::string head = "arch t\nkind decoder\n";
  const std::string body =
      "prologue\n  x = embed(token_embd.weight)\nblock\n  h = rms_norm(x, blk.{i}.attn_norm.weight)\n"
      "epilogue\n  last(x)\n  logits = matmul(x, output.weight)\n";
  auto ok = archdef_parse(head + "param p = where(less(layer, 3), 1.5, -inf)\n" + body, "t.archdef", "t", "test");
  CHECK_MESSAGE(ok, (ok ? "" : ok.error().message));
  if (ok) {
    REQUIRE(ok->params.size() == 1);
    CHECK(ok->params[0].per_layer);
  }
  auto e1 =
      archdef_parse(head + body.substr(0, body.find("block")) + "  scale(x, layer)\n" + body.substr(body.find("block")),
                    "t.archdef", "t", "test");
  REQUIRE_FALSE(e1);
  CHECK_MESSAGE(e1.error().message.find("t.archdef:5:") != std::string::npos, e1.error().message);
  CHECK_MESSAGE(e1.error().message.find("'layer'") != std::string::npos, e1.error().message);
  auto e2 = archdef_parse(head + "param p = where(1, 2)\n" + body, "t.archdef", "t", "test");
  REQUIRE_FALSE(e2);
  CHECK_MESSAGE(e2.error().message.find("where(CONDITION, THEN, ELSE) takes three values") != std::string::npos,
                e2.error().message);
  auto e3 = archdef_parse(head + "param layer = 3\n" + body, "t.archdef", "t", "test");
  REQUIRE_FALSE(e3);
  CHECK_MESSAGE(e3.error().message.find("built-in value") != std::string::npos, e3.error().message);
}

namespace {

std::string g3n_path(const std::string& mix) {
  return test::model_path("synth-gemma3n-mini-" + mix + ".gguf");
}

std::shared_ptr<const Engine> g3n_engine(const std::string& mix, const std::string& archdef_dir = "") {
  auto d = load_description(g3n_path(mix));
  REQUIRE_MESSAGE(d, (d ? "" : d.error().message));
  LoadOptions o;
  o.threads = 1;
  o.kv_type = KvType::f32;
  o.archdef_dir = archdef_dir;
  auto e = Engine::create(*d, o);
  REQUIRE_MESSAGE(e, (e ? "" : e.error().message));
  return *e;
}

}  // namespace

TEST_CASE(
    "gemma3n: the layers from n_layer - shared_kv_layers on own no cache, read the last owning layer of their kind, "
    "and compute no k / v") {
  auto e = g3n_engine("f32");
  const Program& p = e->program();
  const int n_layer = static_cast<int>(e->hparams().n_layer);
  REQUIRE(n_layer == 25);
  CHECK(p.kv.size() == 20);  // 25 layers, 5 sharing
  // the sliding layers keep a window of 16, the global ones everything
  int windowed = 0;
  for (const auto& kv : p.kv) windowed += kv.window == 16;
  CHECK(windowed == 16);
  // attention of layer i: shared from 20 on, reading layer 18's cache (sliding) or 19's (global)
  std::vector<const AttnSpec*> at(static_cast<size_t>(n_layer), nullptr);
  std::vector<int> kv_matmuls(static_cast<size_t>(n_layer), 0);
  for (const Step& s : p.steps) {
    if (s.layer < 0) continue;
    if (s.op == OpCode::attention) at[static_cast<size_t>(s.layer)] = &p.attns[static_cast<size_t>(s.idx)];
    if (s.op == OpCode::matmul &&
        (s.w->name.find("attn_k.") != std::string::npos || s.w->name.find("attn_v.") != std::string::npos))
      kv_matmuls[static_cast<size_t>(s.layer)]++;
  }
  for (int i = 0; i < n_layer; i++) {
    INFO("layer " << i);
    REQUIRE(at[static_cast<size_t>(i)]);
    const bool global = i % 5 == 4;
    CHECK(at[static_cast<size_t>(i)]->window == (global ? 0 : 16));
    CHECK(at[static_cast<size_t>(i)]->shared == (i >= 20));
    CHECK(kv_matmuls[static_cast<size_t>(i)] == (i >= 20 ? 0 : 2));
    if (i >= 20)
      CHECK(at[static_cast<size_t>(i)]->kv_layer == (global ? 19 : 18));
    else
      CHECK(at[static_cast<size_t>(i)]->kv_layer == i);
  }
}

TEST_CASE("gemma3n: the cache holds the owning layers only, and a definition without reuse needs more") {
  test::TempDir dir;
  std::string text;
  for (const auto& b : builtin_archdefs())
    if (std::string(b.name) == "gemma3n") text = b.text;
  REQUIRE(!text.empty());
  const std::string from = ", reuse_kv_from = n_layer - shared_kv)";
  REQUIRE(text.find(from) != std::string::npos);
  text.replace(text.find(from), from.size(), ")");
  REQUIRE(test::write_file(dir.file("gemma3n.archdef"), text));
  auto shared = g3n_engine("f32"), own = g3n_engine("f32", dir.path);
  CHECK(own->program().kv.size() == 25);
  const uint64_t a = KvCache::planned_bytes(shared->program().kv, 1024, 256, KvType::f32);
  const uint64_t b = KvCache::planned_bytes(own->program().kv, 1024, 256, KvType::f32);
  CHECK(a < b);
  // and they compute something else: the shared layers read other keys
  const std::vector<int32_t> ids = {1, 403, 407, 261, 378};
  auto la = logits_of_ids(shared, ids, true);
  auto lb = logits_of_ids(own, ids, true);
  REQUIRE(la);
  REQUIRE(lb);
  CHECK(*la != *lb);
}

TEST_CASE("gemma3n: token by token through the shared caches gives the logits of one evaluation") {
  auto e = g3n_engine("f32");
  // more tokens than the sliding window (16), so that the rings wrap
  std::vector<int32_t> ids;
  for (int k = 0; k < 40; k++) ids.push_back(static_cast<int32_t>(1 + (k * 37) % 500));
  auto all = logits_of_ids(e, ids, true);
  REQUIRE(all);
  auto ctx = Context::create(e, 256);
  REQUIRE(ctx);
  std::vector<float> one;
  const int nv = e->n_vocab();
  double worst = 0;
  int top1_same = 0;
  for (size_t k = 0; k < ids.size(); k++) {
    auto st = ctx->eval(std::span<const int32_t>(&ids[k], 1), one);
    REQUIRE(st);
    const float* row = all->data() + k * size_t(nv);
    for (int j = 0; j < nv; j++) worst = std::max(worst, std::fabs(double(one[size_t(j)]) - row[j]));
    top1_same += argmax_f32(one.data(), nv) == argmax_f32(row, nv);
  }
  // One token at a time takes the single-token float order of the products, not the batched one:
  // close, not bit for bit (ggml's fp16 GELU table turns a last-bit difference into a step of
  // ~1e-3, and 25 layers compound it: 4e-3 here). A layer reading the wrong cache, or a cache that
  // is not written, moves logits by 1 to 4.
  CHECK(worst < 2e-2);
  CHECK(top1_same == static_cast<int>(ids.size()));
  CHECK(ctx->kv_bytes() == KvCache::planned_bytes(e->program().kv, 256, 256, KvType::f32));
}

// `compare --generated`: the report of a generation (on the F32 file: this 25-layer random net turns the
// last-bit differences of quantized activations into visible ones). The reference rows are the logits each generated
// id was chosen from; ours come from the prompt as one batch and then one token at a time. Our own
// batch logits of prompt + generated ids (every position) as the reference must agree everywhere
// (the incremental path through the shared, wrapping caches against one evaluation), a row out of
// place must show (row i belongs to the prefix ending with generated id i - 1), and a reference whose
// top-1 is moved at one step must give that step as the first divergence.
TEST_CASE("cli: compare --generated reports every generated prefix against a reference generation") {
  test::TempDir dir;
  const std::string model = test::quote(g3n_path("f32"));
  std::vector<int32_t> all;
  for (int i = 0; i < 40; i++) all.push_back(1 + (i * 37) % 500);  // 40 > the sliding window of 16
  const int n_prompt = 9, n_gen = int(all.size()) - n_prompt;
  // all = prompt (all[0, n_prompt)) + generated ids (all[n_prompt, end))
  std::string ids, prompt, gen;
  for (size_t i = 0; i < all.size(); i++) {
    ids += (i ? "," : "") + std::to_string(all[i]);
    if (int(i) < n_prompt)
      prompt += (i ? "," : "") + std::to_string(all[i]);
    else
      gen += (int(i) > n_prompt ? "," : "") + std::to_string(all[i]);
  }
  auto w =
      test::run_cli("logits -m " + model + " --ids " + ids + " --all -t 1 --out " + test::quote(dir.file("all.f32")));
  REQUIRE(w.status == 0);
  std::vector<uint8_t> bytes;
  REQUIRE(test::read_file(dir.file("all.f32"), bytes));
  const size_t row = 512 * 4;
  REQUIRE(bytes.size() == all.size() * row);
  // rows n_prompt - 1 .. all.size() - 2: the logits that chose all[n_prompt..]
  std::vector<uint8_t> ref(bytes.begin() + std::ptrdiff_t((n_prompt - 1) * row), bytes.end() - std::ptrdiff_t(row));
  REQUIRE(ref.size() == size_t(n_gen) * row);
  REQUIRE(test::write_file(dir.file("ref.f32"), ref));
  auto run = [&](const std::string& file) {
    auto r = test::run_cli("compare -m " + model + " --ids " + prompt + " --generated " + gen +
                           " -t 1 --json --reference " + test::quote(dir.file(file)));
    REQUIRE_MESSAGE(r.status == 0, r.out);
    auto j = json_parse(r.out, "compare");
    REQUIRE(j);
    return Json(*j);
  };
  auto same = run("ref.f32");
  CHECK(same["positions"].as_number() == n_gen);
  CHECK(same["top1_match_all"].as_bool());
  CHECK(same["first_divergence"].as_number() == -1);
  CHECK(same["pearson_min"].as_number() > 0.99999);
  // one step late: every row compared with its neighbour's prefix
  std::vector<uint8_t> late(ref.begin() + std::ptrdiff_t(row), ref.end());
  late.insert(late.end(), ref.end() - std::ptrdiff_t(row), ref.end());
  REQUIRE(test::write_file(dir.file("late.f32"), late));
  CHECK(run("late.f32")["pearson_min"].as_number() < 0.99);
  // step 20's top-1 moved to another id in the reference
  const int k = 20;
  std::vector<float> rowk(512);
  std::memcpy(rowk.data(), ref.data() + size_t(k) * row, row);
  const auto top = std::max_element(rowk.begin(), rowk.end());
  const size_t other = size_t(top - rowk.begin()) == 0 ? 1 : 0;
  rowk[other] = *top + 1.0f;
  std::vector<uint8_t> moved = ref;
  std::memcpy(moved.data() + size_t(k) * row, rowk.data(), row);
  REQUIRE(test::write_file(dir.file("moved.f32"), moved));
  auto m = run("moved.f32");
  CHECK(!m["top1_match_all"].as_bool());
  CHECK(m["first_divergence"].as_number() == k);
  CHECK(m["top1_matches"].as_number() == n_gen - 1);
  // a reference that is not one row per generated id is refused, naming the counts
  std::vector<uint8_t> short_ref(ref.begin(), ref.end() - std::ptrdiff_t(row));
  REQUIRE(test::write_file(dir.file("short.f32"), short_ref));
  auto bad = test::run_cli("compare -m " + model + " --ids " + prompt + " --generated " + gen + " -t 1 --reference " +
                               test::quote(dir.file("short.f32")),
                           true);
  CHECK(bad.status != 0);
  CHECK_MESSAGE(bad.out.find("is not " + std::to_string(n_gen) + " generated positions of 512 float32 logits") !=
                    std::string::npos,
                bad.out);
}

// The feed-forward length of a per-layer list (the converter writes Gemma 3n's intermediate_size as an
// array): the summary shows the largest, not 0.
TEST_CASE("gemma3n: info shows the feed-forward length of the per-layer list") {
  auto r = test::run_cli("info " + test::quote(g3n_path("q8_0")) + " --json");
  REQUIRE(r.status == 0);
  auto j = json_parse(r.out, "info");
  REQUIRE(j);
  CHECK((*j)["hparams"]["n_ff"].as_number() == 256);
}
