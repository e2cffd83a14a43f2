// llama.cpp's parallel decoding (what `llama-server -np P` does for P slots that decode at once),
// timed the way `llminfer bench --parallel P` times llminfer: P sequences in one context
// (n_seq_max = P, a KV cache per sequence), each step one llama_decode of a batch holding the next
// token of every sequence; aggregate tokens/s = P x N / wall time, median of R runs after a warm-up.
// Built against the llama.cpp oracle's headers and shared libraries (bench/batch.sh builds it):
//   lcpp_parallel MODEL THREADS P N R     -> one JSON line {"parallel":P,"median_tps":x,"samples_ms":[...]}
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "llama.h"

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: lcpp_parallel BINS_DIR MODEL THREADS P N R\n");
    return 1;
  }
  const char* bins = argv[1];
  const char* path = argv[2];
  const int threads = std::atoi(argv[3]), P = std::atoi(argv[4]), N = std::atoi(argv[5]), R = std::atoi(argv[6]);
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  ggml_backend_load_all_from_path(bins);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(path, mp);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", path);
    return 2;
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(P * (N + 16));
  cp.n_batch = static_cast<uint32_t>(std::max(P, 512));
  cp.n_ubatch = static_cast<uint32_t>(std::max(P, 512));
  cp.n_seq_max = static_cast<uint32_t>(P);
  cp.kv_unified = false;  // a cache per sequence, as llama-server's slots without a shared prefix
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "cannot create the context\n");
    return 2;
  }
  // an explicit threadpool, as llama-bench and the oracle's bench attach
  auto* cpu_dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  auto* cpu_reg = ggml_backend_dev_backend_reg(cpu_dev);
  auto* tp_new = (decltype(ggml_threadpool_new)*)ggml_backend_reg_get_proc_address(cpu_reg, "ggml_threadpool_new");
  if (tp_new) {
    ggml_threadpool_params tpp = ggml_threadpool_params_default(threads);
    ggml_threadpool* tp = tp_new(&tpp);
    if (tp) llama_attach_threadpool(ctx, tp, nullptr);
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  llama_token bos = llama_vocab_bos(vocab);
  if (bos < 0) bos = 1;
  llama_batch batch = llama_batch_init(P, 0, 1);
  uint64_t st = 0x2545F4914F6CDD1Dull;
  auto run = [&](int n) -> double {
    llama_memory_clear(llama_get_memory(ctx), true);
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < n; k++) {
      batch.n_tokens = P;
      for (int s = 0; s < P; s++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        batch.token[s] = k == 0 ? bos : static_cast<llama_token>((st >> 33) % static_cast<uint64_t>(n_vocab));
        batch.pos[s] = k;
        batch.n_seq_id[s] = 1;
        batch.seq_id[s][0] = s;
        batch.logits[s] = 1;
      }
      if (llama_decode(ctx, batch) != 0) {
        std::fprintf(stderr, "llama_decode failed\n");
        std::exit(2);
      }
    }
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  run(2);  // warm-up
  std::vector<double> ms, tps;
  for (int r = 0; r < R; r++) {
    ms.push_back(run(N));
    tps.push_back(1000.0 * P * N / ms.back());
  }
  std::sort(tps.begin(), tps.end());
  double med = tps.size() % 2 ? tps[tps.size() / 2] : 0.5 * (tps[tps.size() / 2 - 1] + tps[tps.size() / 2]);
  std::printf("{\"parallel\":%d,\"median_tps\":%.2f,\"samples_ms\":[", P, med);
  for (size_t i = 0; i < ms.size(); i++) std::printf("%s%.1f", i ? "," : "", ms[i]);
  std::printf("]}\n");
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
