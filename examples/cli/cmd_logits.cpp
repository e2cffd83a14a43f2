// llminfer logits: not implemented yet (see the open issues).
#include "cli.hpp"

int cmd_logits(int, char**) {
  std::fprintf(stderr, "error: 'llminfer logits' is not implemented yet\n");
  return cli::kFailure;
}
