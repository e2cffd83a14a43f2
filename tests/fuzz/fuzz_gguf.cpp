// libFuzzer target: the GGUF reader, the model description built from it, and its compilation
// against the built-in architecture definitions, from memory. Every accepted file's tensors must
// lie inside the input; every refusal must name the file.
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
  // Compiled against the built-in definitions: metadata that contradicts the tensors, absurd layer
  // counts and non-finite numbers are refused naming the file (never a crash or a huge allocation).
  llminfer::LoadOptions o;
  o.threads = 1;
  o.max_program_steps = 100000;
  auto e = Engine::create(*m, o);
  if (!e && e.error().message.rfind("fuzz.gguf: ", 0) != 0) __builtin_trap();
  return 0;
}
