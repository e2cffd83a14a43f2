// llminfer bench: not implemented yet (see the open issues).
#include "cli.hpp"

int cmd_bench(int, char**) {
  std::fprintf(stderr, "error: 'llminfer bench' is not implemented yet\n");
  return cli::kFailure;
}
