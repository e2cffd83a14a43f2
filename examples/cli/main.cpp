// llminfer: the command-line program. One subcommand per cmd_*.cpp file, each a user of the public
// API alone: they include the header for its declarations, and the implementation is compiled
// here, in this file only (as any program embedding llminfer does).
#define LLMINFER_IMPLEMENTATION
// The header itself, not only through cli.hpp: in a unity build (CMake's) the subcommands' files
// may come first, and cli.hpp (#pragma once) would then be skipped here.
#include <cstring>

#include "../../llminfer.hpp"
#include "cli.hpp"

namespace {
struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};
const Command kCommands[] = {
    {"info", cmd_info, "print a model file's architecture, sizes, tensor types and tokenizer"},
    {"status", cmd_status, "list the architecture definitions in effect"},
    {"tokenize", cmd_tokenize, "text -> token ids"},
    {"detokenize", cmd_detokenize, "token ids -> text"},
    {"template", cmd_template, "render the model's chat template"},
    {"logits", cmd_logits, "write the logits of a token sequence to a file"},
    {"compare", cmd_compare, "compare logits against a reference file (validation report)"},
    {"run", cmd_run, "generate text from a prompt"},
    {"chat", cmd_chat, "interactive conversation"},
    {"bench", cmd_bench, "measure load, prefill and decode speed"},
    {"serve", cmd_serve, "an OpenAI-compatible HTTP server (runs llminfer-serve: make serve)"},
};

void usage(FILE* f) {
  std::fprintf(f,
               "llminfer %s - run language models on a CPU\n\nusage: llminfer COMMAND [options]   "
               "(llminfer COMMAND --help for its options)\n\ncommands:\n",
               llminfer::version());
  for (const auto& c : kCommands) std::fprintf(f, "  %-11s %s\n", c.name, c.summary);
}
}  // namespace

// The whole program as a function: the fuzz target (tests/fuzz/fuzz_cli.cpp) calls it many times in
// one process, with LLMINFER_CLI_NO_MAIN defined.
int cli_main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return cli::kUsage;
  }
  if (!std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "help")) {
    usage(stdout);
    return cli::kOk;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("llminfer %s\n", llminfer::version());
    return cli::kOk;
  }
  for (const auto& c : kCommands)
    if (!std::strcmp(argv[1], c.name)) return cli::finish_output(c.run(argc - 2, argv + 2));
  std::fprintf(stderr, "error: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return cli::kUsage;
}

#if !defined(LLMINFER_CLI_NO_MAIN)
int main(int argc, char** argv) {
  return cli_main(argc, argv);
}
#endif
