// llminfer compare: not implemented yet (see the open issues).
#include "cli.hpp"

int cmd_compare(int, char**) {
  std::fprintf(stderr, "error: 'llminfer compare' is not implemented yet\n");
  return cli::kFailure;
}
