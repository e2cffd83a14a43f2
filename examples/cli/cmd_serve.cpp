// llminfer serve -m MODEL [--host H] [--port P] [--parallel N] [--api-key KEY] [-c N] ...
// The server is a program of its own, llminfer-serve (examples/server/, `make serve`): it uses
// Debian's header-only cpp-httplib and nlohmann-json, which this CLI (like the header) does not
// need. `llminfer serve` runs the llminfer-serve beside this program with the same arguments.
#include "cli.hpp"

#if !defined(_WIN32)
#include <limits.h>
#include <unistd.h>
#endif

int cmd_serve(int argc, char** argv) {
#if defined(_WIN32)
  (void)argc;
  (void)argv;
  std::fputs("error: llminfer serve is not available on Windows (the server example is POSIX only)\n", stderr);
  return cli::kFailure;
#else
  std::string dir = ".";
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    self[n] = '\0';
    std::string s(self);
    size_t slash = s.find_last_of('/');
    if (slash != std::string::npos) dir = s.substr(0, slash);
  }
  const std::string server = dir + "/llminfer-serve";
  if (access(server.c_str(), X_OK) != 0) {
    std::fprintf(stderr,
                 "error: llminfer serve runs %s, which is not built: run `make serve` (it needs Debian's "
                 "libcpp-httplib-dev and nlohmann-json3-dev, which make installs when it can)\n",
                 server.c_str());
    return cli::kFailure;
  }
  std::vector<char*> args;
  args.push_back(const_cast<char*>(server.c_str()));
  args.push_back(const_cast<char*>("serve"));
  for (int i = 0; i < argc; i++) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(server.c_str(), args.data());
  std::fprintf(stderr, "error: cannot run %s: %s\n", server.c_str(), std::strerror(errno));
  return cli::kFailure;
#endif
}
