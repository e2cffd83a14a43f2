// llminfer tokenize: not implemented yet (see the open issues).
#include "cli.hpp"

int cmd_tokenize(int, char**) {
  std::fprintf(stderr, "error: 'llminfer tokenize' is not implemented yet\n");
  return cli::kFailure;
}
