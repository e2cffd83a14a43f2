// Compile matrix, translation unit 2 of 2: includes the header for its declarations only and uses
// the public API, which the other translation unit implements. Built with -fno-exceptions
// -fno-rtti, with the scalar kernels forced, with g++ and clang++ (make compile-matrix).
#include <cstdio>
#include <cstring>

#include "../../llminfer.hpp"

const char* matrix_version();

int main() {
  if (std::strcmp(matrix_version(), LLMINFER_VERSION_STRING) != 0) return 1;
  auto model = llminfer::Model::load("/nonexistent/model.gguf", {.threads = 1});
  if (model) return 2;  // must be an error value, not an exception or a crash
  if (model.error().code != llminfer::Errc::io) return 3;
  if (std::strstr(model.error().message.c_str(), "/nonexistent/model.gguf") == nullptr) return 4;
  std::printf("compile matrix: ok (%s)\n", llminfer::describe(model.error().code));
  return 0;
}
