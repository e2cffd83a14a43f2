// ==== Forward pass: run a compiled definition (Engine / Context) ====
// Engine::create compiles the model's definition once (ArchCompiler, 43_archdef_compile) into a
// flat list of Steps holding tensor pointers. Context::eval runs that list with a switch per step:
// no strings, no lookups, and no architecture names anywhere.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// Which definition an Engine runs (the status report shows the same for every architecture).
struct ArchInfo {
  std::string name;
  std::string origin;  // "builtin" or the path of the user's .archdef file
  std::string sha256;  // of the definition text
  int steps_per_layer = 0;
};

// Reported to a trace callback after every step (debugging, conformance diffs).
struct TraceEvent {
  int step;
  const char* op;
  int layer;
  int line;
  const std::string& reg;
  const float* data;  // [rows][width]
  int rows;
  int width;
};

class Batcher;  // 45_batch

// ---- the engine: one per loaded model, immutable, shared by every session ----
class Engine {
 public:
  // Compiles the model's architecture definition (built-in, or LoadOptions::archdef_dir's) against
  // the model: a broken definition, a missing tensor, a bad shape or a weight type the kernels
  // cannot compute fails here, not during a forward pass.
  static Result<std::shared_ptr<const Engine>> create(std::shared_ptr<const ModelDesc> desc, const LoadOptions& opts) {
    if (!desc) return make_error(Errc::invalid_argument, "Engine::create: no model");
    auto reg = load_arch_registry(opts.archdef_dir);
    if (!reg) return reg.error();
    const ArchDef* def = reg->find(desc->arch);
    std::string failures;
    for (const auto& f : reg->failed) failures += "\n  " + f.error;
    if (!def) {
      if (reg->failure(desc->arch))
        return make_error(Errc::archdef, strf("%s: architecture '%s' is unavailable: its definition did not load:%s",
                                              desc->path.c_str(), printable(desc->arch).c_str(), failures.c_str()));
      std::string known;
      for (const auto& d : reg->defs) known += (known.empty() ? "" : ", ") + d->name;
      return make_error(Errc::unsupported,
                        strf("%s: no architecture definition for '%s' (known: %s)%s%s", desc->path.c_str(),
                             printable(desc->arch).c_str(), known.c_str(),
                             failures.empty() ? "" : "; definitions that did not load:", failures.c_str()));
    }
    std::shared_ptr<Engine> e(new Engine());
    e->desc_ = std::move(desc);
    e->opts_ = opts;
    e->def_ = reg->defs[static_cast<size_t>(
        std::find_if(reg->defs.begin(), reg->defs.end(), [&](const auto& d) { return d.get() == def; }) -
        reg->defs.begin())];
    e->arch_ = ArchInfo{def->name, def->origin, def->sha256, def->steps_per_layer()};
    ArchCompiler comp(*def, *e->desc_, e->prog_, opts.max_program_steps);
    if (auto r = comp.run(); !r) return r.error();
    auto kern = select_kernels(opts.kernels);
    if (!kern) return kern.error();
    e->kern_ = *kern;
    e->pool_ = std::make_unique<ThreadPool>(opts.threads);
    return std::shared_ptr<const Engine>(std::move(e));
  }

  const ModelDesc& desc() const { return *desc_; }
  const HParams& hparams() const { return desc_->hp; }
  int n_vocab() const { return prog_.n_vocab; }
  // LoadOptions::context, else the trained context capped at 4096.
  int n_ctx_default() const {
    if (opts_.context > 0) return opts_.context;
    int64_t t = desc_->hp.n_ctx_train;
    return t > 0 ? static_cast<int>(std::min<int64_t>(t, 4096)) : 4096;
  }
  const ArchInfo& arch() const { return arch_; }
  const ArchDef& archdef() const { return *def_; }
  ThreadPool& pool() const { return *pool_; }
  // The kernels this engine runs (the level chosen at load, see 26_kernels_end).
  const KernelTable& kernels() const { return *kern_; }
  const LoadOptions& options() const { return opts_; }
  const Program& program() const { return prog_; }

 private:
  Engine() = default;
  std::shared_ptr<const ModelDesc> desc_;
  std::shared_ptr<const ArchDef> def_;
  LoadOptions opts_;
  ArchInfo arch_;
  Program prog_;
  std::unique_ptr<ThreadPool> pool_;
  const KernelTable* kern_ = nullptr;
  // Evaluations of this engine's contexts from different threads share steps (45_batch).
  friend class Batcher;
  mutable std::once_flag batch_once_;
  mutable std::shared_ptr<Batcher> batcher_;
};

// What an evaluation did (Context::eval, the Batcher, and the decode loop's GenerationIO::eval).
// context_full: nothing was evaluated (policy stop; ContextPolicy::slide makes room inside eval).
enum class EvalStatus { ok, cancelled, context_full };

// ---- elementwise kernels (f32 activations; rope_angles and rope_head are in 42_kv_cache) ----
// layer_norm / layer_norm_heads of one row (s.off: the length normalised at a time, the row or a
// head; one weight and bias for all heads, or one per head). As ggml's CPU build computes it: the
// sum in double, the mean in float; the squares of the float differences added in float by groups
// of the lanes of llama.cpp's variant for the same instruction set (16 with AVX-512, in the tree of
// GCC's _mm512_reduce_add_ps; 8 otherwise, as its AVX2 variant), the groups and the rest in double;
// every product and sum rounded on its own (LLMI_NO_FP_CONTRACT), as ggml's separate operations.
LLMI_NO_FP_CONTRACT inline void layer_norm_row(const Step& s, const KernelTable& kern, const float* xrow, float* yrow) {
  const int seg = s.off, wi = s.w_in;
  const bool per_head = s.vec_len != seg;
  const bool lanes16 = std::string_view(kern.name).substr(0, 6) == "avx512";
  for (int h = 0; h < wi / seg; h++) {
    const float* x = xrow + size_t(h) * seg;
    float* y = yrow + size_t(h) * seg;
    const float* w = s.vec + (per_head ? size_t(h) * seg : 0);
    const float* b = s.vec2 ? s.vec2 + (per_head ? size_t(h) * seg : 0) : nullptr;
    double sum = 0;
    for (int k = 0; k < seg; k++) sum += double(x[k]);
    const float mean = static_cast<float>(sum) / static_cast<float>(seg);
    double var = 0;
    int k0 = 0;
    float q[16];
    if (lanes16) {
      for (; k0 + 15 < seg; k0 += 16) {
        for (int j = 0; j < 16; j++) {
          const float dv = x[k0 + j] - mean;
          q[j] = dv * dv;
        }
        float t3[8], t6[4];
        for (int j = 0; j < 8; j++) t3[j] = q[8 + j] + q[j];
        for (int j = 0; j < 4; j++) t6[j] = t3[4 + j] + t3[j];
        var += double((t6[0] + t6[2]) + (t6[1] + t6[3]));
      }
    } else {
      for (; k0 + 7 < seg; k0 += 8) {
        for (int j = 0; j < 8; j++) {
          const float dv = x[k0 + j] - mean;
          q[j] = dv * dv;
        }
        var += double(((q[0] + q[4]) + (q[2] + q[6])) + ((q[1] + q[5]) + (q[3] + q[7])));
      }
    }
    for (; k0 < seg; k0++) {
      const float dv = x[k0] - mean;
      var += double(dv * dv);
    }
    const float sc = 1.0f / std::sqrt(static_cast<float>(var / seg) + s.f);
    for (int k = 0; k < seg; k++) {
      const float v = ((x[k] - mean) * sc) * w[k];
      y[k] = b ? v + b[k] : v;
    }
  }
}

// The sums of squares of n rows of len values (x[c], c < n) as ggml computes each one: squares in
// float, summed in double in order. W rows at a time, interleaved: W independent chains of adds in
// flight instead of one (the same bits).
template <int W>
inline void sum_squares_w(const float* const* x, int len, double* out) {
  double s[W] = {};
  for (int k = 0; k < len; k++)
#pragma GCC unroll 8
    for (int j = 0; j < W; j++) s[j] += double(x[j][k] * x[j][k]);
  for (int j = 0; j < W; j++) out[j] = s[j];
}
inline void sum_squares(const float* const* x, int n, int len, double* out) {
  int c = 0;
  for (; c + 8 <= n; c += 8) sum_squares_w<8>(x + c, len, out + c);
  for (; c + 4 <= n; c += 4) sum_squares_w<4>(x + c, len, out + c);
  for (; c < n; c++) sum_squares_w<1>(x + c, len, out + c);
}
inline double sum_squares(const float* x, int len) {
  double sum;
  sum_squares_w<1>(&x, len, &sum);
  return sum;
}

// |x| as ggml's sqrt(sum_rows(sqr(x))): squares in float, summed in double, the root in float.
inline float l2_norm_f32(const float* x, int n) {
  return std::sqrt(static_cast<float>(sum_squares(x, n)));
}

// Row t of the operations that Context::run_chunk and Batcher::run_batch run alike: A, B, C are
// the step's registers a, b, c ([rows][width]), D its destination. Each result is rounded as the
// separate ggml operations llama.cpp chains round it (no fused multiply-add across them).
inline void row_op(const Step& s, const KernelTable& kern, const float* A, const float* B, const float* C, float* D,
                   size_t t) {
  const int wi = s.w_in, S = s.streams;
  const float* a = A + t * size_t(wi);
  float* d = D + t * size_t(s.w_out);
  switch (s.op) {
    case OpCode::sub: {
      const float* b = B + t * size_t(wi);
      for (int k = 0; k < wi; k++) d[k] = a[k] - b[k];
      break;
    }
    case OpCode::mul_weight:
      for (int k = 0; k < wi; k++) d[k] = a[k] * s.vec[k];
      break;
    case OpCode::rms_normalize:  // rms_norm without a weight, per group of S
      for (int g = 0; g < wi / S; g++) {
        const float* x = a + size_t(g) * S;
        float* y = d + size_t(g) * S;
        const float sc = 1.0f / std::sqrt(static_cast<float>(sum_squares(x, S) / S) + s.f);
        for (int k = 0; k < S; k++) y[k] = x[k] * sc;
      }
      break;
    case OpCode::gaussian_topk: {  // max(0, x - (mean + f * std)), std with n - 1 (llama.cpp's)
      double sum = 0;
      for (int k = 0; k < wi; k++) sum += double(a[k]);
      const float mean = static_cast<float>(sum) / static_cast<float>(wi);
      double sq = 0;
      for (int k = 0; k < wi; k++) {
        const float c = a[k] - mean;
        sq += double(c * c);
      }
      const float sd = std::sqrt(static_cast<float>(sq) * (1.0f / static_cast<float>(wi - 1)));
      volatile float spread = sd * s.f;  // rounded before the sum, as two ggml operations
      const float cut = mean + spread;
      for (int k = 0; k < wi; k++) {
        const float v = a[k] - cut;
        d[k] = v > 0 ? v : 0.0f;
      }
      break;
    }
    case OpCode::put:
      if (d != a) std::memcpy(d, a, size_t(wi) * 4);
      std::memcpy(d + s.off, B + t * size_t(s.vec_len), size_t(s.vec_len) * 4);
      break;
    case OpCode::streams:
      for (int k = 0; k < S; k++) std::memcpy(d + size_t(k) * wi, a, size_t(wi) * 4);
      break;
    case OpCode::match_norm: {  // streams 1.. scaled to the L2 norm of stream 0
      const int n = wi / S;
      if (d != a) std::memcpy(d, a, size_t(wi) * 4);
      const float target = l2_norm_f32(a, n);
      for (int k = 1; k < S; k++) {
        float* y = d + size_t(k) * n;
        const float norm = l2_norm_f32(y, n);
        for (int e = 0; e < n; e++) y[e] = (y[e] * target) / norm;
      }
      break;
    }
    case OpCode::stream_mix: {  // d[k] = a[k] + sum_j c[k * S + j] a[j], the sums as ggml's f32 dot
      const int n = wi / S;
      const float* c = B + t * size_t(S) * S;
      float col[256];
      for (int e = 0; e < n; e++) {
        for (int j = 0; j < S; j++) col[j] = a[size_t(j) * n + e];
        for (int k = 0; k < S; k++)
          d[size_t(k) * n + e] =
              kern.dot_f32(reinterpret_cast<const uint8_t*>(col), c + size_t(k) * S, S, false, false) +
              a[size_t(k) * n + e];
      }
      break;
    }
    case OpCode::stream_axpy: {  // d[k] = a[k] + g[k] * v: the products first (ggml_mul, then ggml_add)
      const int n = wi / S;
      const float* v = B + t * size_t(n);
      const float* g = C + t * size_t(S);
      float prod[256];
      for (int k = 0; k < S; k++) {
        for (int e0 = 0; e0 < n; e0 += 256) {
          const int m = std::min(256, n - e0);
          for (int e = 0; e < m; e++) prod[e] = v[e0 + e] * g[k];
          for (int e = 0; e < m; e++) d[size_t(k) * n + e0 + e] = prod[e] + a[size_t(k) * n + e0 + e];
        }
      }
      break;
    }
    case OpCode::stream_add: {
      const int n = wi / S;
      const float* v = B + t * size_t(n);
      if (d != a) std::memcpy(d, a, size_t(wi) * 4);
      for (int k = s.from; k < S; k++)
        for (int e = 0; e < n; e++) d[size_t(k) * n + e] += v[e];
      break;
    }
    case OpCode::stream_mean: {  // ((a[0] + a[1]) + ...) * (1 / S)
      const int n = s.w_out;
      std::memcpy(d, a, size_t(n) * 4);
      for (int k = 1; k < S; k++)
        for (int e = 0; e < n; e++) d[e] += a[size_t(k) * n + e];
      const float inv = 1.0f / static_cast<float>(S);
      for (int e = 0; e < n; e++) d[e] *= inv;
      break;
    }
    default: LLMI_ASSERT(false && "row_op: not a row operation");
  }
}

// How many matmul steps from steps[i] on (at most kMatmulGroup) take one input and may run as one
// product (matmul_group): the same input register, rounding, layer and section, each writing a
// register of its own that is not the input.
inline size_t matmul_group_size(const Program& p, size_t i) {
  const Step& s = p.steps[i];
  size_t n = 1;
  if (s.dst == s.a) return n;
  for (; n < size_t(kMatmulGroup) && i + n < p.steps.size(); n++) {
    const Step& g = p.steps[i + n];
    if (g.op != OpCode::matmul || g.a != s.a || g.round_input != s.round_input || g.layer != s.layer ||
        g.section != s.section || g.w_in != s.w_in || g.dst == s.a)
      break;
    bool clash = false;
    for (size_t j = 0; j < n; j++) clash = clash || p.steps[i + j].dst == g.dst;
    if (clash) break;
  }
  return n;
}

// The matrices, outputs and their strides of the matmul_group_size(p, si) steps from steps[si]
// (reg: a register's rows).
struct MatmulGroupArgs {
  int n;
  const TensorView* ws[kMatmulGroup];
  float* ys[kMatmulGroup];
  int64_t ldys[kMatmulGroup];
};
template <class Reg>
MatmulGroupArgs matmul_group_args(const Program& p, size_t si, Reg&& reg) {
  MatmulGroupArgs g{};
  g.n = static_cast<int>(matmul_group_size(p, si));
  for (int j = 0; j < g.n; j++) {
    const Step& s = p.steps[si + size_t(j)];
    g.ws[j] = s.w, g.ys[j] = reg(s.dst), g.ldys[j] = s.w_out;
  }
  return g;
}

// A matmul step's input as llama.cpp hands it to an F16 / BF16 weight (s.round_input 1 / 2): each
// value rounded to that type and back, into buf; otherwise a itself.
template <class ForRows>
const float* matmul_input(const Step& s, int rows, const float* a, float* buf, ForRows&& for_rows) {
  if (!s.round_input) return a;
  const int wi = s.w_in;
  const bool bf = s.round_input == 2;
  for_rows(rows, wi, [&](int t, int) {
    const float* x = a + size_t(t) * wi;
    float* y = buf + size_t(t) * wi;
    if (bf)
      for (int k = 0; k < wi; k++) y[k] = bf16_to_f32(f32_to_bf16(x[k]));
    else
      for (int k = 0; k < wi; k++) y[k] = fp16_to_f32(f32_to_fp16(x[k]));
  });
  return buf;
}

// for_rows over spans of rows: fn(row, first value, values, thread) for spans of kSpan values, so
// that the pool shares a single long row too (a decode token's logits or MLP activations). For
// elementwise steps only, where every value is computed alone; spans start at multiples of kSpan,
// so a SIMD row kernel's split into vectors and tail stays the row's own, and the bits with it.
template <class ForRows, class F>
void for_spans(ForRows&& for_rows, int rows, int width, int64_t work_per_value, F&& fn) {
  constexpr int kSpan = 4096;
  const int spans = std::max(1, (width + kSpan - 1) / kSpan);
  for_rows(rows * spans, int64_t(std::min(width, kSpan)) * work_per_value, [&](int i, int thread) {
    const int k0 = (i % spans) * kSpan;
    fn(i / spans, k0, std::min(kSpan, width - k0), thread);
  });
}

// The steps whose every output row depends on the same row of their inputs only (and embed, on the
// row's token): one definition for both evaluation loops, Context::run_chunk and Batcher::run_batch.
// b and c: the step's second and third registers or null; toks: the rows' tokens; for_rows(rows,
// work per row, fn(row, thread)) runs the rows, on the pool when it pays. False for the steps each
// loop runs its own way (matmul, rope, attention, last), which the caller's switch handles.
template <class ForRows>
bool run_row_step(const Step& s, const KernelTable& kern, int rows, const int32_t* toks, const float* a, const float* b,
                  const float* c, float* d, ForRows&& for_rows) {
  const int wi = s.w_in, wo = s.w_out;
  switch (s.op) {
    case OpCode::embed:
      for_rows(rows, wo, [&](int t, int) {
        const int32_t id = s.vec_len > 0 && toks[t] >= s.vec_len ? s.off : toks[t];  // beyond = off
        kern.dequant_row(*s.w, id, d + size_t(t) * wo);
      });
      return true;
    case OpCode::rms_norm:
    case OpCode::norm_heads: {
      // segments (a row, or a head of one) of 8 rows at a time: their sums run side by side
      constexpr int kRows = 8;
      const int seg = s.op == OpCode::rms_norm ? wi : s.vec_len, per_row = wi / seg;
      for_rows((rows + kRows - 1) / kRows, int64_t(wi) * kRows, [&](int g, int) {
        const int t0 = g * kRows, n = (std::min(rows, t0 + kRows) - t0) * per_row;
        const float* x[kRows * 16];
        double sum[kRows * 16];
        for (int c0 = 0; c0 < n; c0 += kRows * 16) {  // at most 16 heads a row at a time
          const int m = std::min(n - c0, kRows * 16);
          for (int c = 0; c < m; c++)
            x[c] = a + size_t(t0 + (c0 + c) / per_row) * wi + size_t((c0 + c) % per_row) * seg;
          sum_squares(x, m, seg, sum);
          for (int c = 0; c < m; c++) {
            float* y = d + size_t(t0 + (c0 + c) / per_row) * wo + size_t((c0 + c) % per_row) * seg;
            const float mean = static_cast<float>(sum[c] / seg);
            const float sc = 1.0f / std::sqrt(mean + s.f);
            for (int k = 0; k < seg; k++) y[k] = (x[c][k] * sc) * s.vec[k];
          }
        }
      });
      return true;
    }
    case OpCode::add_bias:
      for_rows(rows, wi, [&](int t, int) {
        for (int k = 0; k < wi; k++) d[size_t(t) * wi + k] = a[size_t(t) * wi + k] + s.vec[k];
      });
      return true;
    case OpCode::silu:
    case OpCode::gelu:
    case OpCode::gelu_tanh:
    case OpCode::relu: {
      const OpCode op = s.op;
      for_spans(for_rows, rows, wi, 8, [&](int t, int k0, int n, int) {
        const float* x = a + size_t(t) * wi + k0;
        float* y = d + size_t(t) * wi + k0;
        switch (op) {
          case OpCode::silu: kern.silu_row(x, y, n); break;
          case OpCode::gelu:
            for (int k = 0; k < n; k++) y[k] = gelu_erf_f32(x[k]);
            break;
          case OpCode::gelu_tanh: kern.gelu_tanh_row(x, y, n); break;
          default:
            for (int k = 0; k < n; k++) y[k] = x[k] > 0 ? x[k] : 0.0f;
            break;
        }
      });
      return true;
    }
    case OpCode::mul:
    case OpCode::add: {
      const bool mul_op = s.op == OpCode::mul;
      for_rows(rows, wi, [&](int t, int) {
        size_t o = size_t(t) * wi;
        if (mul_op)
          for (int k = 0; k < wi; k++) d[o + k] = a[o + k] * b[o + k];
        else
          for (int k = 0; k < wi; k++) d[o + k] = a[o + k] + b[o + k];
      });
      return true;
    }
    case OpCode::scale:
      for_rows(rows, wi, [&](int t, int) {
        if (s.f2 == 0)
          for (int k = 0; k < wi; k++) d[size_t(t) * wi + k] = a[size_t(t) * wi + k] * s.f;
        else  // ggml_scale_bias: one fused multiply-add
          for (int k = 0; k < wi; k++) d[size_t(t) * wi + k] = std::fma(a[size_t(t) * wi + k], s.f, s.f2);
      });
      return true;
    case OpCode::sub:
    case OpCode::mul_weight:
    case OpCode::rms_normalize:
    case OpCode::gaussian_topk:
    case OpCode::put:
    case OpCode::streams:
    case OpCode::match_norm:
    case OpCode::stream_mix:
    case OpCode::stream_axpy:
    case OpCode::stream_add:
    case OpCode::stream_mean:
      for_rows(rows, int64_t(wi) * 4, [&](int t, int) { row_op(s, kern, a, b, c, d, size_t(t)); });
      return true;
    case OpCode::stream_matmul:  // compiled into slice, matmul and put steps
      return true;
    case OpCode::softcap:
      for_spans(for_rows, rows, wi, 8, [&](int t, int k0, int n, int) {
        const float inv = 1.0f / s.f;  // tanh(x * (1/c)) * c, llama.cpp's operations
        const size_t o = size_t(t) * wi + k0;
        for (int k = 0; k < n; k++) d[o + k] = std::tanh(a[o + k] * inv) * s.f;
      });
      return true;
    case OpCode::copy: std::memcpy(d, a, size_t(rows) * wi * 4); return true;
    case OpCode::slice:
      for (int t = 0; t < rows; t++) std::memcpy(d + size_t(t) * wo, a + size_t(t) * wi + s.off, size_t(wo) * 4);
      return true;
    case OpCode::layer_norm:
    case OpCode::layer_norm_heads:
      for_rows(rows, wi, [&](int t, int) { layer_norm_row(s, kern, a + size_t(t) * wi, d + size_t(t) * wo); });
      return true;
    case OpCode::matmul:
    case OpCode::rope:
    case OpCode::attention:
    case OpCode::last: return false;
  }
  return false;
}

// ---- a context: one session's KV cache and scratch ----
// Replaceable for tests: > 0 caps the tokens of an attention task (1: one token at a time), so
// that a test can compare the blocks with the tokens alone; 0: as attention_cut finds.
inline int attention_block_forced = 0;

class Context {
 public:
  Context(Context&&) noexcept = default;
  Context& operator=(Context&&) noexcept = default;

  // What a context of n_ctx tokens (0: the engine's default) will allocate (KV cache and scratch),
  // checked against LoadOptions::max_session_bytes (or the machine's physical memory) before any
  // of it is allocated: out_of_memory naming the file and both sizes. Model::load checks its
  // context with this, create() every context.
  static Result<void> check_size(const Engine& e, int n_ctx) {
    if (n_ctx <= 0) n_ctx = e.n_ctx_default();
    if (n_ctx > (1 << 24)) return make_error(Errc::invalid_argument, strf("context of %d tokens is too large", n_ctx));
    const Program& p = e.program();
    const LoadOptions& o = e.options();
    const int ubatch = std::min(kUbatch, n_ctx);
    uint64_t kv = KvCache::planned_bytes(p.kv, n_ctx, ubatch, o.kv_type);
    uint64_t scratch = 0;
    for (size_t r = 0; r < p.reg_names.size(); r++)
      scratch += uint64_t(ubatch) * uint64_t(std::max(1, p.reg_width[r])) * 4;
    scratch += uint64_t(ubatch) * uint64_t(p.max_round_width) * 4;
    // the attention's scores per thread: the queries that score at once, a row of n_ctx cells each
    scratch += uint64_t(e.pool().size()) * uint64_t(n_ctx) * uint64_t(attention_rows(p)) * 4;
    uint64_t total = kv == UINT64_MAX ? UINT64_MAX : kv + scratch;
    uint64_t limit = o.max_session_bytes ? o.max_session_bytes : physical_memory_bytes();
    if (limit && total > limit)
      return make_error(
          Errc::out_of_memory,
          strf("%s: a session of %d tokens needs %s (KV cache %s for %d attention layers, scratch %s), more "
               "than the limit of %s (%s); use a smaller context",
               e.desc().path.c_str(), n_ctx, kv == UINT64_MAX ? "more than 2^64 bytes" : human_bytes(total).c_str(),
               kv == UINT64_MAX ? "overflow" : human_bytes(kv).c_str(), static_cast<int>(p.kv.size()),
               human_bytes(scratch).c_str(), human_bytes(limit).c_str(),
               o.max_session_bytes ? "LoadOptions::max_session_bytes, --max-session-mb"
                                   : "the machine's physical memory; LoadOptions::max_session_bytes, "
                                     "--max-session-mb"));
    return {};
  }

  // n_ctx: tokens this context can hold (0: the engine's default).
  static Result<Context> create(std::shared_ptr<const Engine> engine, int n_ctx) {
    if (!engine) return make_error(Errc::invalid_argument, "Context::create: no engine");
    if (auto r = check_size(*engine, n_ctx); !r) return r.error();
    Context c;
    c.e_ = std::move(engine);
    c.kern_ = &c.e_->kernels();
    const Program& p = c.e_->program();
    const LoadOptions& o = c.e_->options();
    c.n_ctx_ = n_ctx > 0 ? n_ctx : c.e_->n_ctx_default();
    c.ubatch_ = std::min(kUbatch, c.n_ctx_);
    if (auto r = c.kv_.init(p.kv, p.ropes, c.n_ctx_, c.ubatch_, o.kv_type, c.kern_); !r) return r.error();
    c.slide_ = o.context_policy == ContextPolicy::slide;
    c.keep_ = std::max(0, o.keep);
    if (c.slide_) {  // sliding keeps `keep` tokens, and ring layers must still hold their window afterwards
      c.slide_chunk_ = std::min(c.ubatch_, c.n_ctx_ - c.keep_ - c.kv_.ring_window() + 1);
      if (c.slide_chunk_ < 1)
        return make_error(
            Errc::invalid_argument,
            strf("a context of %d tokens is too small to slide while keeping %d tokens", c.n_ctx_, c.keep_));
    }
    if (auto r = c.init_scratch(); !r) return r.error();
    if (auto r = reserve_shared(*c.e_); !r) return r.error();
    return c;
  }

  // Evaluates `tokens` at positions n_past()...; fills logits of the last token ([n_vocab]) or, with
  // all_logits, of every token ([n][n_vocab]). `cancel` (may be empty) is polled before every layer.
  // context_full (policy stop): nothing was evaluated. cancelled: the chunks (of up to 256 tokens)
  // finished before the cancel stay in the cache (tokens() says which), logits are not filled.
  // Evaluation allocates nothing (the scratch was sized by create()) but the logits when `logits`
  // must grow: a FloatBuf grows through a checked allocation (out_of_memory), a std::vector (tests
  // and tools) as vectors do.
  template <class Logits>
  Result<EvalStatus> eval(std::span<const int32_t> tokens, Logits& logits, bool all_logits = false,
                          const std::function<bool()>& cancel = {}) {
    uint64_t out_n = 0;
    if (auto v = check_eval(tokens, all_logits, out_n); !v || *v != EvalStatus::ok) return v;
    if (!grow(logits, out_n))
      return make_error(Errc::out_of_memory,
                        strf("eval: cannot allocate %s for the logits", human_bytes(out_n * 4).c_str()));
    const Program& p = e_->program();
    const int n = static_cast<int>(tokens.size());
    int done = 0;
    while (done < n) {
      int chunk = std::min(n - done, slide_ ? slide_chunk_ : ubatch_);
      if (n_past_ + chunk > n_ctx_) slide(n_past_ + chunk - n_ctx_);
      bool final_chunk = done + chunk == n;
      float* out = all_logits ? logits.data() + size_t(done) * p.n_vocab : (final_chunk ? logits.data() : nullptr);
      auto st = run_chunk_shared(tokens.data() + done, chunk, out, all_logits, cancel);
      if (!st) return st.error();
      if (*st != EvalStatus::ok) return *st;
      tokens_.insert(tokens_.end(), tokens.begin() + done, tokens.begin() + done + chunk);  // reserved: n_ctx
      n_past_ += chunk;
      done += chunk;
    }
    return EvalStatus::ok;
  }

  int n_past() const { return n_past_; }
  int n_ctx() const { return n_ctx_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }

  // Keeps the first n_keep tokens (prefix reuse). False when a sliding-window layer no longer
  // holds the keys a continuation needs (then clear() and evaluate again).
  bool truncate(int n_keep) {
    if (n_keep < 0 || n_keep > n_past_) return false;
    if (!kv_.can_truncate(n_keep)) return false;
    n_past_ = n_keep;
    tokens_.resize(static_cast<size_t>(n_keep));
    return true;
  }
  void clear() {
    n_past_ = 0;
    tokens_.clear();
    kv_.clear();
  }
  uint64_t kv_bytes() const { return kv_.bytes(); }
  const Engine& engine() const { return *e_; }
  // Called after every step with the register it wrote (slow; for debugging and tests).
  void set_trace(std::function<void(const TraceEvent&)> fn) { trace_ = std::move(fn); }

 private:
  static constexpr int kUbatch = 256;  // tokens per prefill batch (bounds the scratch)

  Context() = default;

  // The scratch of evaluation, sized for the largest chunk (ubatch tokens): every register
  // [ubatch][widest] (logits [1 or ubatch][n_vocab]), the matrix products' scratch for each
  // matrix, attention's per-thread rows, the rope tables [ubatch][n_dims], the token list [n_ctx].
  Result<void> init_scratch() {
    const Program& p = e_->program();
    regs_.resize(p.reg_names.size());
    reg_ptr_.assign(p.reg_names.size(), nullptr);
    for (size_t r = 0; r < p.reg_names.size(); r++) {
      if (static_cast<int>(r) == p.reg_logits) continue;
      auto b = HeapBuf::alloc(uint64_t(ubatch_) * uint64_t(std::max(1, p.reg_width[r])), 4, "activations");
      if (!b) return b.error();
      regs_[r] = std::move(*b);
    }
    auto lb = HeapBuf::alloc(uint64_t(p.has_last ? 1 : ubatch_) * uint64_t(p.n_vocab), 4, "logits");
    if (!lb) return lb.error();
    logits_buf_ = std::move(*lb);
    int threads = e_->pool().size();
    mm_ = std::make_unique<MatmulScratch>(threads);
    mm_->block_sums = kernels_use_block_sums(*kern_);
    for (const Step& s : p.steps)
      if (s.op == OpCode::gelu_tanh) (void)gelu_tanh_table();  // (filled once per process: see there)
    for (const Step& s : p.steps)
      if (s.op == OpCode::matmul && !kern_->matmul_reserve(*s.w, ubatch_, *mm_))
        return make_error(Errc::out_of_memory, strf("out of memory for the scratch of a matrix product (%s, %d tokens)",
                                                    s.w->name.c_str(), ubatch_));
    int max_slots = 1, max_hd = 1;
    for (int l = 0; l < kv_.n_layers(); l++) {
      max_slots = std::max(max_slots, kv_.layer(l).slots);
      max_hd = std::max({max_hd, kv_.layer(l).spec.hd_k, kv_.layer(l).spec.hd_v});
    }
    for (const auto& r : p.ropes) max_hd = std::max(max_hd, r.head_dim);
    const int max_rows = attention_rows(p);
    scores_stride_ = size_t(max_slots) * size_t(max_rows);
    // per thread: a row of partial sums, or 64 lanes of them (llama.cpp's order)
    row_stride_ = size_t(64) * size_t((max_hd + 15) & ~15);
    // per thread: a block's queries and value sums (attention_block)
    block_stride_ = size_t(2) * size_t(max_rows) * size_t(max_hd);
    auto sb = HeapBuf::alloc(uint64_t(threads) * uint64_t(scores_stride_), 4, "attention scratch");
    if (!sb) return sb.error();
    scores_ = std::move(*sb);
    auto bb = HeapBuf::alloc(uint64_t(threads) * uint64_t(block_stride_), 4, "attention scratch");
    if (!bb) return bb.error();
    block_ = std::move(*bb);
    auto rb = HeapBuf::alloc(uint64_t(threads) * row_stride_, 4, "attention scratch");
    if (!rb) return rb.error();
    rows_ = std::move(*rb);
    auto rnd = HeapBuf::alloc(uint64_t(ubatch_) * uint64_t(p.max_round_width), 4, "activations");
    if (!rnd) return rnd.error();
    round_buf_ = std::move(*rnd);
    rope_cache_.resize(p.ropes.size());
    for (size_t r = 0; r < p.ropes.size(); r++) {
      auto b = HeapBuf::alloc(uint64_t(ubatch_) * uint64_t(std::max(1, p.ropes[r].n_dims)), 4, "rope tables");
      if (!b) return b.error();
      rope_cache_[r] = std::move(*b);
    }
    rope_valid_.assign(p.ropes.size(), 0);
    tokens_.reserve(static_cast<size_t>(n_ctx_));
    return {};
  }

  // The checks of eval before anything changes: ok with the number of logits it fills, or
  // context_full, or the error.
  Result<EvalStatus> check_eval(std::span<const int32_t> tokens, bool all_logits, uint64_t& out_n) const {
    const Program& p = e_->program();
    const int n = static_cast<int>(tokens.size());
    if (tokens.empty()) return make_error(Errc::invalid_argument, "eval: no tokens");
    if (tokens.size() > size_t(1) << 30) return make_error(Errc::invalid_argument, "eval: too many tokens");
    for (size_t k = 0; k < tokens.size(); k++)
      if (tokens[k] < 0 || tokens[k] >= p.embed_rows)
        return make_error(Errc::invalid_argument, strf("eval: token id %d (at %zu) is outside the vocabulary (0..%lld)",
                                                       tokens[k], k, static_cast<long long>(p.embed_rows - 1)));
    if (!slide_ && n_past_ + n > n_ctx_) return EvalStatus::context_full;
    out_n = uint64_t(all_logits ? n : 1) * uint64_t(p.n_vocab);
    if (all_logits) {  // [n][n_vocab] floats: refused, not an abort, when the machine cannot hold them
      const LoadOptions& o = e_->options();
      uint64_t limit = o.max_session_bytes ? o.max_session_bytes : physical_memory_bytes();
      if (limit && out_n > limit / 4)
        return make_error(Errc::out_of_memory,
                          strf("eval: the logits of %d tokens x %d would need %s, more than %s", n, p.n_vocab,
                               human_bytes(out_n * 4).c_str(), human_bytes(limit).c_str()));
    }
    return EvalStatus::ok;
  }
  static bool grow(FloatBuf& b, uint64_t n) { return b.resize(static_cast<size_t>(n)); }
  static bool grow(std::vector<float>& v, uint64_t n) {
    v.resize(static_cast<size_t>(n));
    return true;
  }

  // A context of the engine is created: the engine's Batcher sizes its step's scratch when a
  // second one exists (45_batch).
  static Result<void> reserve_shared(const Engine& e);

  // run_chunk, in a step shared with the other contexts of the engine that evaluate at the same
  // time (continuous batching; 45_batch).
  Result<EvalStatus> run_chunk_shared(const int32_t* toks, int n, float* out_logits, bool all_logits,
                                      const std::function<bool()>& cancel);
  friend class Batcher;

  float* reg(int r) const { return reg_ptr_[static_cast<size_t>(r)]; }

  // Runs fn(row) for rows [0, rows), on the pool when the work is worth it. Each row is computed
  // by one task with the same arithmetic, so the thread count never changes a result.
  template <class F>
  void for_rows(int rows, int64_t work_per_row, F&& fn) {
    ThreadPool& pool = e_->pool();
    int nt = pool.size();
    if (nt == 1 || rows == 1 || int64_t(rows) * work_per_row < 32768) {
      for (int r = 0; r < rows; r++) fn(r, 0);
      return;
    }
    int tasks = std::min(rows, nt * 4);
    pool.parallel_for(tasks, [&](int task, int thread) {
      int r0 = static_cast<int>(int64_t(rows) * task / tasks),
          r1 = static_cast<int>(int64_t(rows) * (task + 1) / tasks);
      for (int r = r0; r < r1; r++) fn(r, thread);
    });
  }

  Result<EvalStatus> run_chunk(const int32_t* toks, int n, float* out_logits, bool all_logits,
                               const std::function<bool()>& cancel) {
    const Program& p = e_->program();
    for (size_t r = 0; r < regs_.size(); r++) reg_ptr_[r] = regs_[r].as<float>();
    float* lg = all_logits ? out_logits : logits_buf_.as<float>();
    reg_ptr_[static_cast<size_t>(p.reg_logits)] = lg;
    std::fill(rope_valid_.begin(), rope_valid_.end(), 0);
    const int pos0 = n_past_;
    int rows = n;
    int cur_layer = -2;
    const auto each_row = [this](int r, int64_t w, auto&& fn) { for_rows(r, w, fn); };  // for_rows as a value
    for (size_t si = 0; si < p.steps.size(); si++) {
      const size_t s0 = si;  // (a group of products moves si on to its last step)
      const Step& s = p.steps[si];
      if (s.section == Section::epilogue && !out_logits) break;  // a middle chunk: its logits are not wanted
      if (s.layer != cur_layer) {
        cur_layer = s.layer;
        if (cancel && cancel()) return EvalStatus::cancelled;
      }
      float* a = s.a >= 0 ? reg(s.a) : nullptr;
      float* d = reg(s.dst);
      const int wi = s.w_in;
      const float* b = s.b >= 0 ? reg(s.b) : nullptr;
      const float* c = s.c >= 0 ? reg(s.c) : nullptr;
      if (!run_row_step(s, *kern_, rows, toks, a, b, c, d, each_row))
        switch (s.op) {  // the steps run_row_step leaves to the loop
          case OpCode::matmul: {
            // this step and the next that take the same input, as one product (one alone too)
            const float* in = matmul_input(s, rows, a, round_buf_.as<float>(), each_row);
            const MatmulGroupArgs g = matmul_group_args(p, si, [this](int r) { return reg(r); });
            if (!kern_->matmul_group(g.ws, g.n, in, rows, g.ys, g.ldys, e_->pool(), s.round_input == 2, *mm_))
              return make_error(
                  Errc::out_of_memory,
                  strf("out of memory for the scratch of a matrix product (%s, %d tokens)", s.w->name.c_str(), rows));
            si += size_t(g.n) - 1;  // (the trace below reports each of them)
            break;
          }
          case OpCode::rope: {
            const RopeSpec& rs = p.ropes[static_cast<size_t>(s.idx)];
            float* cache = rope_cache_[static_cast<size_t>(s.idx)].as<float>();  // [ubatch][n_dims]
            if (!rope_valid_[static_cast<size_t>(s.idx)]) {
              for (int t = 0; t < n; t++) rope_angles(rs, pos0 + t, cache + size_t(t) * rs.n_dims);
              rope_valid_[static_cast<size_t>(s.idx)] = 1;
            }
            for_rows(rows, wi, [&](int t, int) {
              for (int h = 0; h < wi / rs.head_dim; h++) {
                size_t off = size_t(t) * wi + size_t(h) * rs.head_dim;
                rope_head(rs, cache + size_t(t) * rs.n_dims, a + off, d + off);
              }
            });
            break;
          }
          case OpCode::attention: attention(s, n, pos0, a, b, c, d); break;
          case OpCode::last:
            if (!all_logits && rows > 1) {
              std::memmove(a, a + size_t(rows - 1) * wi, size_t(wi) * 4);
              rows = 1;
            }
            break;
          default: break;
        }
      if (trace_)  // the step, or each of a group of products
        for (size_t j = s0; j <= si; j++) {
          const Step& t = p.steps[j];
          trace_(TraceEvent{static_cast<int>(j), op_spec(t.op).name, t.layer, t.line,
                            p.reg_names[static_cast<size_t>(t.dst)], reg(t.dst), rows, t.w_out});
        }
    }
    if (out_logits && !all_logits && lg != out_logits)
      std::memcpy(out_logits, lg + size_t(rows - 1) * p.n_vocab, size_t(p.n_vocab) * 4);
    return EvalStatus::ok;
  }

  // Grouped-query causal attention of n new tokens (positions pos0..): stores their keys and values,
  // then for every (token, head): softmax(scale * q.k (soft-capped)) over the visible keys, times V.
  void attention(const Step& s, int n, int pos0, const float* q, const float* k, const float* v, float* out) {
    const AttnSpec& at = e_->program().attns[static_cast<size_t>(s.idx)];
    attention_store(at, n, pos0, k, v);
    ThreadPool& pool = e_->pool();
    const AttnCut cut = attention_cut(at, n, pool.size());
    const int tasks = attention_tasks(at, n, cut);
    if (pool.size() == 1 || tasks == 1 || attention_work(at, n, pos0) < kAttnSerialWork) {
      for (int i = 0; i < tasks; i++) attention_task(at, n, pos0, q, out, cut, i, 0);
    } else {
      pool.parallel_for(tasks, [&](int i, int thread) { attention_task(at, n, pos0, q, out, cut, i, thread); });
    }
  }
  // The parts of attention, for a step that runs the heads of several contexts as one job
  // (45_batch): the keys and values of the n new tokens into the cache (unless an earlier layer's
  // cache is read), the work of its heads (for the choice of threads), how its tasks split a
  // key-value group, and task i (its scratch is this context's row of `thread`).
  void attention_store(const AttnSpec& at, int n, int pos0, const float* k, const float* v) {
    if (!at.shared) kv_.write(at.kv_layer, pos0, n, k, v);  // else an earlier layer wrote this cache
  }
  static constexpr int64_t kAttnSerialWork = 32768;  // less work than this: the heads run on the caller
  static int64_t attention_work(const AttnSpec& at, int n, int pos0) {
    return int64_t(n) * at.n_head * (pos0 + n) * (at.hd_k + at.hd_v);
  }
  // A task is the heads of one key-value group for a block of consecutive tokens (the kernels read
  // the group's cells once for all their queries, 8 at a time), or a part of the heads of one token
  // where whole groups would leave a thread without a task (one token, fewer groups than threads);
  // two tasks per thread there cut gemma3's one group into single heads, each reading the cells
  // again (decode after 2048 tokens: attention 11% -> 6.7% of a token, bench/RESULTS.md).
  struct AttnCut {
    int block = 1;  // tokens per task
    int split = 1;  // parts of a group's heads per task (block 1)
  };
  // The most tokens of a block: as many as make the queries a multiple of 8 (8 for one head per
  // group, 4 for 2, 2 for 4 or 12, 1 for 8 or 16).
  static int attention_block_max(int group) { return 8 >> std::min(std::countr_zero(unsigned(group)), 3); }
  // The most queries that score at once: a group's heads, of a block of tokens.
  static int attention_rows(const Program& p) {
    int rows = 1;
    for (const auto& a : p.attns) {
      const int group = std::max(1, a.n_head / std::max(1, a.n_kv));
      rows = std::max(rows, group * attention_block_max(group));
    }
    return rows;
  }
  static AttnCut attention_cut(const AttnSpec& at, int n, int threads) {
    const int group = at.n_head / at.n_kv, have = std::max(1, n * at.n_kv);
    AttnCut c;
    c.split = std::clamp((threads + have - 1) / have, 1, group);
    if (c.split > 1) return c;
    c.block = std::min(attention_block_max(group), std::max(1, n));
    if (attention_block_forced > 0) c.block = std::min(c.block, attention_block_forced);
    while (c.block > 1 && (n + c.block - 1) / c.block * at.n_kv < 2 * threads) c.block /= 2;
    return c;
  }
  static int attention_tasks(const AttnSpec& at, int n, AttnCut c) {
    return (n + c.block - 1) / c.block * at.n_kv * c.split;
  }
  // Task i of attention_tasks: block i / (n_kv * split), group (i / split) % n_kv, part i % split.
  void attention_task(const AttnSpec& at, int n, int pos0, const float* q, float* out, AttnCut c, int i, int thread) {
    const int group = at.n_head / at.n_kv, per = (group + c.split - 1) / c.split;
    const int t = i / (at.n_kv * c.split) * c.block, g = (i / c.split) % at.n_kv, h0 = (i % c.split) * per;
    const int nh = std::min(group - h0, per), nt = std::min(c.block, n - t);
    if (nh <= 0) return;
    if (nt > 1 && attention_block(at, pos0, q, out, t, nt, g, thread)) return;
    for (int u = t; u < t + nt; u++) attention_heads(at, n, pos0, q, out, u, g * group + h0, nh, thread);
  }
  // The first cell the token at pos sees (its sliding window's, else 0).
  static int attention_lo(const AttnSpec& at, int pos) { return at.window > 0 ? std::max(0, pos - at.window + 1) : 0; }
  // The softmax of one head's scores s[0..nk) (soft-capped first where the model says so); lo: the
  // position of s[0].
  void attention_softmax(const AttnSpec& at, float* s, int nk, int lo) {
    if (at.softcap > 0)
      for (int j = 0; j < nk; j++) s[j] = std::tanh(s[j] * (1.0f / at.softcap)) * at.softcap;  // as llama.cpp
    // the largest score (in 8 running maxima: any order finds it, and the vectorizer may)
    float m8[8];
    for (float& m : m8) m = -INFINITY;
    int j = 0;
    for (; j + 8 <= nk; j += 8)
      for (int u = 0; u < 8; u++) m8[u] = s[j + u] > m8[u] ? s[j + u] : m8[u];
    for (; j < nk; j++) m8[0] = s[j] > m8[0] ? s[j] : m8[0];
    float mx = m8[0];
    for (int u = 1; u < 8; u++) mx = std::max(mx, m8[u]);
    const double sum = kern_->attn_exp(s, nk, mx, lo % 16);
    const float inv = static_cast<float>(1.0 / sum);
    for (int k = 0; k < nk; k++) s[k] *= inv;
  }
  // All the heads of group g for the nt tokens t..t + nt - 1 at once, with the bits of each token
  // alone (attention_heads): every query scores the cells up to the last token's (a token ignores
  // the scores of the cells after its own), and each value sum runs over the cells the first
  // token sees for all of them, then goes on over each later token's own (attn_values' add).
  // False (nothing done) where it does not apply: an f32 cache (its order differs with the count
  // of queries), tokens whose windows start at different cells, or cells that wrap around the ring.
  bool attention_block(const AttnSpec& at, int pos0, const float* q, float* out, int t, int nt, int g, int thread) {
    const KvLayer& L = kv_.layer(at.kv_layer);
    const int group = at.n_head / at.n_kv, nq = nt * group;
    const int pa = pos0 + t, pb = pa + nt - 1;  // the first and last token's positions
    const int lo = attention_lo(at, pa);
    if (kv_.type() != KvType::f16 || attention_lo(at, pb) != lo || lo % L.slots + (pb - lo) >= L.slots) return false;
    const int wq = at.n_head * at.hd_k, wo = at.n_head * at.hd_v;
    const size_t ks = size_t(at.hd_k) * kv_.elem(), vs = size_t(at.hd_v) * kv_.elem();
    const size_t ss = size_t(pb - lo + 1);  // a query's scores: cells lo..pb
    float* sc = scores_.as<float>() + size_t(thread) * scores_stride_;
    float* qb = block_.as<float>() + size_t(thread) * block_stride_;  // [nq][hd_k], then [nq][hd_v]
    float* ob = qb + size_t(nq) * size_t(at.hd_k);
    const size_t qrow = size_t(group) * size_t(at.hd_k), orow = size_t(group) * size_t(at.hd_v);
    for (int u = 0; u < nt; u++)
      std::memcpy(qb + size_t(u) * qrow, q + size_t(t + u) * wq + size_t(g) * qrow, qrow * 4);
    kern_->attn_scores(qb, nq, size_t(at.hd_k), kv_.k_at(L, g, lo % L.slots), ks, static_cast<int>(ss), at.hd_k, true,
                       at.scale, sc, ss);
    for (int u = 0; u < nt; u++)
      for (int h = 0; h < group; h++) attention_softmax(at, sc + size_t(u * group + h) * ss, pa + u - lo + 1, lo);
    float* part = rows_.as<float>() + size_t(thread) * row_stride_;
    const uint8_t* v0 = kv_.v_at(L, g, 0);
    // (several tokens: `several` holds; it changes only an f32 cache's order)
    kern_->attn_values(sc, nq, ss, v0, vs, L.slots, lo, pa, at.hd_v, true, true, false, part, ob, size_t(at.hd_v));
    for (int u = 1; u < nt; u++)  // token u's cells after the first token's
      kern_->attn_values(sc + size_t(u * group) * ss + size_t(pa + 1 - lo), group, ss, v0, vs, L.slots, pa + 1, pa + u,
                         at.hd_v, true, true, true, part, ob + size_t(u) * orow, size_t(at.hd_v));
    for (int u = 0; u < nt; u++)
      std::memcpy(out + size_t(t + u) * wo + size_t(g) * orow, ob + size_t(u) * orow, orow * 4);
    return true;
  }
  // Heads h0..h0 + nh - 1 (of one key-value group) of token t.
  void attention_heads(const AttnSpec& at, int n, int pos0, const float* q, float* out, int t, int h0, int nh,
                       int thread) {
    const KvLayer& L = kv_.layer(at.kv_layer);
    const int group = at.n_head / at.n_kv;
    const int wq = at.n_head * at.hd_k, wo = at.n_head * at.hd_v;
    const bool f16 = kv_.type() == KvType::f16;
    const size_t ks = size_t(at.hd_k) * kv_.elem(), vs = size_t(at.hd_v) * kv_.elem();
    const int pos = pos0 + t;
    const int lo = attention_lo(at, pos);
    const int g = h0 / group;
    const float* qh = q + size_t(t) * wq + size_t(h0) * at.hd_k;
    const int nk = pos - lo + 1;
    const size_t ss = size_t(nk);  // one head's scores
    float* sc = scores_.as<float>() + size_t(thread) * scores_stride_;
    // the visible keys lo..pos are at most two contiguous runs of ring slots
    for (int j = lo; j <= pos;) {
      const int slot = j % L.slots, run = std::min(pos - j + 1, L.slots - slot);
      kern_->attn_scores(qh, nh, size_t(at.hd_k), kv_.k_at(L, g, slot), ks, run, at.hd_k, f16, at.scale, sc + (j - lo),
                         ss);
      j += run;
    }
    for (int i = 0; i < nh; i++) attention_softmax(at, sc + size_t(i) * ss, nk, lo);
    float* o = out + size_t(t) * wo + size_t(h0) * at.hd_v;
    float* part = rows_.as<float>() + size_t(thread) * row_stride_;
    kern_->attn_values(sc, nh, ss, kv_.v_at(L, g, 0), vs, L.slots, lo, pos, at.hd_v, f16, n > 1, false, part, o,
                       size_t(at.hd_v));
  }

  // ContextPolicy::slide: the cache drops `need` or more tokens after the first keep_ and shifts
  // the rest down (KvCache::slide); the tokens follow.
  void slide(int need) {
    const int keep = std::min(keep_, n_past_);
    const int d = kv_.slide(n_past_, keep, need);
    if (d < 0) {  // a ring no longer holds what it must keep
      LLMI_ASSERT(false && "slide: the cache cannot shift");
      return;
    }
    drop_tokens(keep, d);
  }

  // Tokens [from, from + count) leave, as their cells did.
  void drop_tokens(int from, int count) {
    tokens_.erase(tokens_.begin() + from, tokens_.begin() + from + count);
    n_past_ -= count;
  }

 public:
  // Drops the cached tokens [from, from + count) and shifts the later ones down (KvCache::erase:
  // keys re-rotated). False (nothing changed) when a sliding-window ring no longer holds what it
  // must keep.
  bool erase(int from, int count) {
    if (!kv_.erase(n_past_, from, count)) return false;
    drop_tokens(from, count);
    return true;
  }

  // Keeps [0, moves[0].dst) and moves each [src, src + len) to [dst, dst + len) (KvCache::shift:
  // contiguous, downwards), leaving n_new tokens; the tokens follow their cells. False (nothing
  // changed) when the moves are not of that shape or a ring no longer holds what it must keep.
  bool shift(std::span<const KvMove> moves, int n_new) {
    if (moves.empty()) return truncate(n_new);
    if (!kv_.shift(moves, n_past_, n_new)) return false;
    // in place: the moves go downwards, in order (KvCache::shift checked them)
    for (const auto& m : moves)
      std::copy(tokens_.begin() + m.src, tokens_.begin() + m.src + m.len, tokens_.begin() + m.dst);
    tokens_.resize(static_cast<size_t>(n_new));
    n_past_ = n_new;
    return true;
  }

  // Tokens ContextPolicy::slide keeps at the start (LoadOptions::keep; a session raises it to its
  // system prompt's length).
  // Never so many that a slide could not make room for one token.
  void set_keep(int keep) {
    keep_ = std::max(0, std::min(keep, n_ctx_ - kv_.ring_window()));
    slide_chunk_ = std::max(1, std::min(ubatch_, n_ctx_ - keep_ - kv_.ring_window() + 1));
  }
  int keep() const { return keep_; }
  KvCache& kv() { return kv_; }
  const KvCache& kv() const { return kv_; }
  // Restores what a saved session held (Session::load): the tokens whose cells were written.
  void set_tokens(const std::vector<int32_t>& t) {
    tokens_.assign(t.begin(), t.end());  // keeps the capacity reserved (n_ctx)
    n_past_ = static_cast<int>(tokens_.size());
  }
  bool slides() const { return slide_; }

 private:
  std::shared_ptr<const Engine> e_;
  KvCache kv_;
  int n_ctx_ = 0, n_past_ = 0, ubatch_ = 0;
  bool slide_ = false;
  int keep_ = 0, slide_chunk_ = 0;
  std::vector<int32_t> tokens_;
  std::vector<HeapBuf> regs_;
  std::vector<float*> reg_ptr_;
  HeapBuf logits_buf_, scores_, rows_, block_, round_buf_;
  size_t scores_stride_ = 0, row_stride_ = 0, block_stride_ = 0;
  const KernelTable* kern_ = nullptr;  // the engine's kernels
  std::unique_ptr<MatmulScratch> mm_;  // the matrix products' scratch
  std::vector<HeapBuf> rope_cache_;    // per rope: [ubatch][n_dims] cos/sin of the chunk's positions
  std::vector<char> rope_valid_;
  std::function<void(const TraceEvent&)> trace_;
};

// Greedy continuation by ids (argmax, ties to the lowest id, as llama.cpp's greedy sampler):
// evaluates `prompt`, then up to n_predict tokens; stops early at an id in `stop_ids`.
inline int argmax_f32(const float* x, int n) {
  int best = 0;
  for (int k = 1; k < n; k++)
    if (x[k] > x[best]) best = k;
  return best;
}

inline Result<std::vector<int32_t>> greedy_ids(Context& ctx, std::span<const int32_t> prompt, int n_predict,
                                               std::span<const int32_t> stop_ids = {}) {
  std::vector<float> logits;
  std::vector<int32_t> out;
  auto st = ctx.eval(prompt, logits);
  if (!st) return st.error();
  if (*st != EvalStatus::ok) return out;
  const int nv = ctx.engine().n_vocab();
  for (int k = 0; k < n_predict; k++) {
    int32_t id = argmax_f32(logits.data(), nv);
    out.push_back(id);
    if (std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end()) break;
    if (k + 1 == n_predict) break;
    auto s = ctx.eval(std::span<const int32_t>(&id, 1), logits);
    if (!s) return s.error();
    if (*s != EvalStatus::ok) break;
  }
  return out;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
