// llminfer run: not implemented yet (see the open issues).
#include "cli.hpp"

int cmd_run(int, char**) {
  std::fprintf(stderr, "error: 'llminfer run' is not implemented yet\n");
  return cli::kFailure;
}
