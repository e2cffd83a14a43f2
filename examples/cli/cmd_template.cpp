// llminfer template: not implemented yet (see the open issues).
#include "cli.hpp"

int cmd_template(int, char**) {
  std::fprintf(stderr, "error: 'llminfer template' is not implemented yet\n");
  return cli::kFailure;
}
