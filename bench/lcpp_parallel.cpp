// llama.cpp's parallel decoding (what `llama-server -np P` does for P slots that decode at once),
// timed the way `llminfer bench --parallel P` times llminfer: P sequences in one context
// (n_seq_max = P, a KV cache per sequence), each step one llama_decode of a batch holding the next
// token of every sequence; aggregate tokens/s = P x N / wall time, median of R runs after a warm-up.
// Built against the llama.cpp oracle's headers and shared libraries (bench/batch.sh builds it):
//   lcpp_parallel BINS_DIR MODEL THREADS P N R [DEPTH [prompt]]
//     -> one JSON line {"parallel":P,"depth":D,"median_tps":x,"samples_ms":[...]}
// DEPTH (default 0): every sequence starts each run with DEPTH tokens in its cache (evaluated once,
// untimed, in batches; each run removes what came after them), as `llminfer bench -d DEPTH`.
// "prompt" (P = 1): each run evaluates N prompt tokens instead, in batches of 512 as llama-bench,
// after DEPTH: llama-bench's pp<N> at --n-depth DEPTH, `llminfer bench -p N -d DEPTH`'s prompt
// (JSON "prompt":N).
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
  if (argc < 7 || argc > 9) {
    std::fprintf(stderr, "usage: lcpp_parallel BINS_DIR MODEL THREADS P N R [DEPTH [prompt]]\n");
    return 1;
  }
  const char* bins = argv[1];
  const char* path = argv[2];
  const int threads = std::atoi(argv[3]), P = std::atoi(argv[4]), N = std::atoi(argv[5]), R = std::atoi(argv[6]);
  const int D = argc >= 8 ? std::atoi(argv[7]) : 0;
  const bool prompt = argc == 9 && std::string(argv[8]) == "prompt";
  if (threads < 1 || P < 1 || N < 1 || R < 1 || D < 0 || (argc == 9 && (!prompt || P != 1))) {
    std::fprintf(stderr, "lcpp_parallel: THREADS, P, N, R must be positive, DEPTH not negative; prompt with P = 1\n");
    return 1;
  }
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
  cp.n_ctx = static_cast<uint32_t>(P * (D + N + 16));  // (a prompt: D + N + 16 as well)
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
  const int n_fill = 512;
  llama_batch batch = llama_batch_init(std::max(P, n_fill), 0, 1);
  uint64_t st = 0x2545F4914F6CDD1Dull;
  auto random_token = [&] {
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<llama_token>((st >> 33) % static_cast<uint64_t>(n_vocab));
  };
  auto decode = [&] {
    if (llama_decode(ctx, batch) != 0) {
      std::fprintf(stderr, "llama_decode failed\n");
      std::exit(2);
    }
  };
  // the DEPTH tokens of each sequence (BOS first), once
  llama_memory_t mem = llama_get_memory(ctx);
  llama_memory_clear(mem, true);
  for (int s = 0; s < P; s++)
    for (int at = 0; at < D; at += n_fill) {
      batch.n_tokens = std::min(n_fill, D - at);
      for (int i = 0; i < batch.n_tokens; i++) {
        batch.token[i] = at + i == 0 ? bos : random_token();
        batch.pos[i] = at + i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = s;
        batch.logits[i] = at + i == D - 1;
      }
      decode();
    }
  auto run = [&](int n) -> double {
    if (D == 0)
      llama_memory_clear(mem, true);
    else
      for (int s = 0; s < P; s++) llama_memory_seq_rm(mem, s, D, -1);
    auto t0 = std::chrono::steady_clock::now();
    for (int at = 0; prompt && at < n; at += n_fill) {  // a prompt of n tokens, sequence 0
      batch.n_tokens = std::min(n_fill, n - at);
      for (int i = 0; i < batch.n_tokens; i++) {
        batch.token[i] = D + at + i == 0 ? bos : random_token();
        batch.pos[i] = D + at + i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = at + i == n - 1;
      }
      decode();
    }
    for (int k = 0; !prompt && k < n; k++) {
      batch.n_tokens = P;
      for (int s = 0; s < P; s++) {
        batch.token[s] = k == 0 && D == 0 ? bos : random_token();
        batch.pos[s] = D + k;
        batch.n_seq_id[s] = 1;
        batch.seq_id[s][0] = s;
        batch.logits[s] = 1;
      }
      decode();
    }
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  run(prompt ? N : 2);  // warm-up
  std::vector<double> ms, tps;
  for (int r = 0; r < R; r++) {
    ms.push_back(run(N));
    tps.push_back(1000.0 * P * N / ms.back());
  }
  std::sort(tps.begin(), tps.end());
  double med = tps.size() % 2 ? tps[tps.size() / 2] : 0.5 * (tps[tps.size() / 2 - 1] + tps[tps.size() / 2]);
  std::printf("{\"parallel\":%d,\"depth\":%d,", P, D);
  if (prompt) std::printf("\"prompt\":%d,", N);
  std::printf("\"median_tps\":%.2f,\"samples_ms\":[", med);
  for (size_t i = 0; i < ms.size(); i++) std::printf("%s%.1f", i ? "," : "", ms[i]);
  std::printf("]}\n");
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
