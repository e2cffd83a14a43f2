// llminfer detokenize: not implemented yet (see the open issues).
#include "cli.hpp"

int cmd_detokenize(int, char**) {
  std::fprintf(stderr, "error: 'llminfer detokenize' is not implemented yet\n");
  return cli::kFailure;
}
