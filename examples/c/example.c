/* The C API in a few lines (C99): load a model, stream a generation, print why it stopped.
     make libllminfer.so
     cc -std=c99 -I. examples/c/example.c -Lbuild -lllminfer -Wl,-rpath,$PWD/build -o build/example-c
     build/example-c third_party/stories260K/stories260K.gguf "Once upon a time" */
#include <stdio.h>
#include <string.h>

#include "../../llminfer.hpp"

static int print_piece(const char* piece, size_t len, void* user_data) {
  (void)user_data;
  fwrite(piece, 1, len, stdout);
  fflush(stdout);
  return 1; /* 0 would cancel */
}

int main(int argc, char** argv) {
  llminfer_model* model = NULL;
  llminfer_error* err = NULL;
  llminfer_result* res = NULL;
  llminfer_generate_options go;
  const char* prompt = argc > 2 ? argv[2] : "Once upon a time";
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL [PROMPT]\n", argv[0]);
    return 1;
  }
  if (llminfer_model_load(argv[1], strlen(argv[1]), NULL, &model, &err) != LLMINFER_OK) {
    fprintf(stderr, "%s\n", llminfer_error_message(err, NULL));
    llminfer_error_free(err);
    return 2;
  }
  llminfer_generate_options_init(&go);
  go.max_tokens = 64;
  go.on_piece = print_piece;
  if (llminfer_generate(model, prompt, strlen(prompt), &go, &res, &err) != LLMINFER_OK) {
    fprintf(stderr, "%s\n", llminfer_error_message(err, NULL));
    llminfer_error_free(err);
    llminfer_model_free(model);
    return 2;
  }
  printf("\n[%zu tokens, stop: %s, %.1f tokens/s]\n", res->n_tokens, llminfer_stop_string(res->stop), res->decode_tps);
  llminfer_result_free(res);
  llminfer_model_free(model);
  return 0;
}
