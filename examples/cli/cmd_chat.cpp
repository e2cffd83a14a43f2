// llminfer chat: not implemented yet (see the open issues).
#include "cli.hpp"

int cmd_chat(int, char**) {
  std::fprintf(stderr, "error: 'llminfer chat' is not implemented yet\n");
  return cli::kFailure;
}
