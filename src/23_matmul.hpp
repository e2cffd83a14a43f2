// ==== Matrix products: the kernel seam the forward pass calls ====
// Y[t][r] = sum_k W[r][k] * X[t][k] for t < n_tokens, r < rows(W); X is [n_tokens][ne0(W)] f32,
// Y is [n_tokens][ldy] f32 (ldy >= rows). Work is split over rows, so every output element is
// computed by one task with the same arithmetic whatever the thread count.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// Scratch for one thread of a matmul (dequantized rows).
struct MatmulScratch {
  std::vector<float> row;
};

inline void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* y, int64_t ldy, ThreadPool& pool) {
  const int64_t rows = w.rows(), n = w.ne[0];
  constexpr int64_t kRowsPerTask = 16;
  const int n_tasks = static_cast<int>((rows + kRowsPerTask - 1) / kRowsPerTask);
  std::vector<std::vector<float>> scratch(static_cast<size_t>(pool.size()));
  pool.parallel_for(n_tasks, [&](int task, int thread) {
    std::vector<float>& buf = scratch[static_cast<size_t>(thread)];
    if (buf.size() < static_cast<size_t>(n)) buf.resize(static_cast<size_t>(n));
    int64_t r0 = task * kRowsPerTask, r1 = std::min(rows, r0 + kRowsPerTask);
    for (int64_t r = r0; r < r1; r++) {
      dequant_row(w, r, buf.data());
      for (int64_t t = 0; t < n_tokens; t++) {
        const float* xt = x + t * n;
        float acc = 0;
        for (int64_t k = 0; k < n; k++) acc += buf[static_cast<size_t>(k)] * xt[k];
        y[t * ldy + r] = acc;
      }
    }
  });
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
