// The whole embed: load a model, stream a continuation, print the numbers. Errors are values.
//   g++ -std=c++20 -O2 -march=native -pthread -fno-exceptions -fno-rtti simple.cpp -o simple
//   ./simple MODEL.gguf "Once upon a time"
#define LLMINFER_IMPLEMENTATION  // in exactly one .cpp file of a program
#include <cstdio>

#include "../llminfer.hpp"

int main(int argc, char** argv) {
  if (argc < 2) return std::fprintf(stderr, "usage: %s MODEL [PROMPT]\n", argv[0]), 1;
  auto model = llminfer::Model::load(argv[1], {.context = 512});
  if (!model) return std::fprintf(stderr, "error: %s\n", model.error().message.c_str()), 2;

  llminfer::GenerateOptions options{.max_tokens = 48, .temperature = 0.7f, .top_p = 0.9f, .seed = 42};
  options.on_token = [](std::string_view piece) {  // called with complete UTF-8 as it is decided
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;  // false would stop the generation
  };
  auto result = model->generate(argc > 2 ? argv[2] : "Once upon a time", options);
  if (!result) return std::fprintf(stderr, "error: %s\n", result.error().message.c_str()), 2;
  if (result->error.code != llminfer::Errc::ok)  // an error mid-way, or a prompt longer than the context
    return std::fprintf(stderr, "\nerror: %s\n", result->error.message.c_str()), 2;
  std::printf("\n[%zu tokens, stop: %s, %.1f tokens/s]\n", result->tokens.size(), llminfer::to_string(result->stop),
              result->timings.decode_tps);
  return 0;
}
