// libFuzzer target: the GGUF reader and the model description built from it, from memory.
// Every accepted file's tensors must lie inside the input; every refusal must name the file.
#define LLMINFER_IMPLEMENTATION
#include "../../llminfer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llminfer::detail;
  auto m = gguf_description(data, size, "fuzz.gguf");
  if (!m) {
    if (m.error().message.rfind("fuzz.gguf: ", 0) != 0) __builtin_trap();
    return 0;
  }
  const ModelDesc& d = **m;
  volatile uint8_t sink = 0;
  for (const auto& t : d.tensors) {
    if (t.data < data || t.nbytes > static_cast<uint64_t>(data + size - t.data)) __builtin_trap();
    if (t.nbytes) sink = static_cast<uint8_t>(sink ^ t.data[0] ^ t.data[t.nbytes - 1]);
    if (t.nelements() < 0 || t.rows() < 0) __builtin_trap();
    if (d.find(t.name) == nullptr) __builtin_trap();
  }
  (void)d.n_params();
  (void)sink;
  return 0;
}
