// llminfer status: not implemented yet (see the open issues).
#include "cli.hpp"

int cmd_status(int, char**) {
  std::fprintf(stderr, "error: 'llminfer status' is not implemented yet\n");
  return cli::kFailure;
}
