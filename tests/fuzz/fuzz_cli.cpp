// libFuzzer target: the command-line program itself (examples/cli/, every command but bench and
// serve), called in-process through cli_main() with arguments and input files made from the fuzz
// input, on the committed stories260K model. Any crash, abort, sanitizer report, leak, timeout or
// allocation over libFuzzer's limit is a finding; so is an exit status outside the contract
// (0 success, 1 usage error, 2 model/input error).
//
// The input: ARGS \0 F \0@G\0 G   (F and G may hold NUL bytes: a GGUF file, float32 logits)
//   ARGS   the arguments, one per line ('\n'); the first is the command (llminfer COMMAND ...)
//   F      written to a file (the argument @F), and standard input
//   G      written to a file (@G), and as NAME.archdef in a directory (@D), NAME from its line
//          "arch NAME" (llama when there is none)
// Arguments @M (the model), @F, @G, @D and @O (an output file) are replaced by their paths; so is the
// end of a --flag=@X argument. tests/fuzz/cli.dict holds the flag names; tests/fuzz/corpus/cli/ a
// seed per command and the hostile shapes of issue 16.
//
// Bounded so that an input runs in milliseconds: arguments of at most 1 KiB in all; -t is 1 or 2,
// -c at most 64, -n at most 8 (-1 too), --max-session-mb at most 256 (these also when not given: the
// defaults are all threads, 256 tokens, and a fuzzed model's own context could ask for all the memory
// there is); chat
// reads at most 8 lines; inputs are read up to 16 KiB
// (LLMINFER_MAX_INPUT_BYTES, so the too-long paths run too); templates as said below. Safe to run as any user: an
// argument holding '/' is refused (paths are the placeholders' only, or relative to the current directory, which is
// only read), and --out and --save always write @O.
#define LLMINFER_CLI_NO_MAIN
// A template render stops after 100,000 steps and 64 KiB strings (not 10M and 16 MiB): fuzz_jinja
// tries the interpreter's own limits; here a render must stay well within the 10 s an input may take
// in this -O0 build (a step may scan 8 bytes with Unicode tables).
#define LLMINFER_JINJA_MAX_STEPS 100000
#define LLMINFER_JINJA_MAX_STRING (64ull << 10)
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "../../examples/cli/cmd_chat.cpp"
#include "../../examples/cli/cmd_compare.cpp"
#include "../../examples/cli/cmd_detokenize.cpp"
#include "../../examples/cli/cmd_info.cpp"
#include "../../examples/cli/cmd_logits.cpp"
#include "../../examples/cli/cmd_run.cpp"
#include "../../examples/cli/cmd_status.cpp"
#include "../../examples/cli/cmd_template.cpp"
#include "../../examples/cli/cmd_tokenize.cpp"
#include "../../examples/cli/main.cpp"

// Not fuzzed: bench runs for seconds, serve runs a server (they share the parsing fuzzed here).
int cmd_bench(int, char**) {
  return cli::kUsage;
}
int cmd_serve(int, char**) {
  return cli::kUsage;
}

#ifndef LLMINFER_SOURCE_DIR
#define LLMINFER_SOURCE_DIR "."
#endif

namespace {

struct Paths {
  std::string model, dir, f, g, defs, out, def;  // def: the definition file in defs (named by G)
};
Paths g_paths;
FILE* g_null = nullptr;

void remove_dir() {
  if (g_paths.dir.empty()) return;
  for (const std::string& p : {g_paths.f, g_paths.g, g_paths.def, g_paths.out}) ::unlink(p.c_str());
  ::rmdir(g_paths.defs.c_str());
  ::rmdir(g_paths.dir.c_str());
}

bool put(const std::string& path, std::string_view bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

// The value of an option that takes a number, made small: -t 1..2, -c <= 64, -n <= 8. Values that
// are not numbers stay as they are (the parser must refuse them).
std::string bounded(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || !end || *end) return value;
  if ((flag == "-t" || flag == "--threads") && (v == 0 || v > 2)) return "1";
  if ((flag == "-c" || flag == "--context") && v > 64) return "64";
  if ((flag == "-n" || flag == "--max-tokens") && (v == -1 || v > 8)) return "8";
  if (flag == "--max-session-mb" && v > 256) return "256";
  return value;
}

// The architecture a definition names ("arch NAME"), for its file name; "llama" when none.
std::string arch_name(std::string_view def) {
  for (size_t p = 0; p < def.size();) {
    size_t nl = def.find('\n', p);
    std::string_view line = def.substr(p, nl == std::string_view::npos ? std::string_view::npos : nl - p);
    if (line.rfind("arch ", 0) == 0) {
      std::string name;
      for (char c : line.substr(5))
        if (std::isalnum(static_cast<unsigned char>(c)) || c == '_')
          name += c;
        else
          break;
      if (!name.empty() && name.size() <= 32) return name;
    }
    if (nl == std::string_view::npos) break;
    p = nl + 1;
  }
  return "llama";
}

std::string placeholder(const std::string& a) {
  if (a == "@M") return g_paths.model;
  if (a == "@F") return g_paths.f;
  if (a == "@G") return g_paths.g;
  if (a == "@D") return g_paths.defs;
  if (a == "@O") return g_paths.out;
  return a;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* src = std::getenv("LLMINFER_SOURCE_DIR");
  g_paths.model = std::string(src && *src ? src : LLMINFER_SOURCE_DIR) + "/third_party/stories260K/stories260K.gguf";
  char tmpl[] = "/tmp/llminfer-fuzz-cli-XXXXXX";
  if (!::mkdtemp(tmpl)) {
    std::perror("fuzz_cli: mkdtemp");
    std::abort();
  }
  g_paths.dir = tmpl;
  g_paths.f = g_paths.dir + "/f";
  g_paths.g = g_paths.dir + "/g";
  g_paths.defs = g_paths.dir + "/defs";
  g_paths.out = g_paths.dir + "/out";
  ::mkdir(g_paths.defs.c_str(), 0700);
  std::atexit(remove_dir);
  g_null = std::fopen("/dev/null", "w+");
  if (!g_null) std::abort();
  ::setenv("LLMINFER_MAX_INPUT_BYTES", "16384", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t z1 = in.find('\0');
  std::string_view args_text = in.substr(0, z1);
  std::string_view f = z1 == std::string_view::npos ? std::string_view() : in.substr(z1 + 1);
  std::string_view g;
  constexpr std::string_view kG("\0@G\0", 4);
  if (size_t z2 = f.find(kG); z2 != std::string_view::npos) {
    g = f.substr(z2 + kG.size());
    f = f.substr(0, z2);
  }
  if (args_text.empty() || args_text.size() > 1024) return -1;  // (not added to the corpus)

  std::vector<std::string> args;
  for (size_t p = 0; p <= args_text.size();) {
    size_t nl = args_text.find('\n', p);
    if (nl == std::string_view::npos) nl = args_text.size();
    args.emplace_back(args_text.substr(p, nl - p));
    p = nl + 1;
  }
  for (const auto& a : args)
    if (a.find('/') != std::string::npos) return -1;
  const std::string cmd = args[0];
  if (cmd == "bench" || cmd == "serve") return -1;

  // the bounds, placeholders and the output path, as the parser would see them
  std::vector<std::string> argv_s = {"llminfer", cmd};
  const bool model_cmd = cmd == "run" || cmd == "chat" || cmd == "logits" || cmd == "compare" || cmd == "template";
  if (model_cmd) argv_s.insert(argv_s.end(), {"-t", "1", "-c", "64", "--max-session-mb", "256"});  // later ones win
  if (cmd == "run" || cmd == "chat") argv_s.insert(argv_s.end(), {"-n", "8"});
  for (size_t k = 1; k < args.size(); k++) {
    std::string a = args[k];
    size_t eq = a.rfind("--", 0) == 0 ? a.find('=') : std::string::npos;
    if (eq != std::string::npos) {
      std::string flag = a.substr(0, eq), value = placeholder(a.substr(eq + 1));
      if (flag == "--out" || flag == "--save") value = g_paths.out;
      argv_s.push_back(flag + "=" + bounded(flag, value));
      continue;
    }
    const std::string& prev = argv_s.back();
    if (prev == "--out" || prev == "--save") a = g_paths.out;
    argv_s.push_back(bounded(prev, placeholder(a)));
  }

  ::unlink(g_paths.def.c_str());
  g_paths.def = g_paths.defs + "/" + arch_name(g) + ".archdef";
  if (!put(g_paths.f, f) || !put(g_paths.g, g) || !put(g_paths.def, g)) std::abort();
  std::string_view stdin_text = f;
  if (cmd == "chat") {  // a few messages at most
    size_t lines = 0, p = 0;
    while (p < stdin_text.size() && lines < 8)
      if (stdin_text[p++] == '\n') lines++;
    stdin_text = stdin_text.substr(0, p);
  }
  FILE* input = std::tmpfile();
  if (!input) std::abort();
  std::fwrite(stdin_text.data(), 1, stdin_text.size(), input);
  std::rewind(input);

  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);

  // The program's stdio goes to /dev/null and reads the input (libFuzzer keeps its own stderr: it
  // captured the FILE* before; sanitizer reports are written to file descriptor 2).
  struct sigaction old_int {};
  sigaction(SIGINT, nullptr, &old_int);
  FILE *so = stdout, *se = stderr, *si = stdin;
  stdout = g_null;
  stderr = g_null;
  stdin = input;
  int rc = cli_main(static_cast<int>(argv.size()) - 1, argv.data());
  std::fflush(g_null);
  std::clearerr(g_null);
  stdout = so;
  stderr = se;
  stdin = si;
  sigaction(SIGINT, &old_int, nullptr);
  std::fclose(input);
  if (rc != cli::kOk && rc != cli::kUsage && rc != cli::kFailure) __builtin_trap();
  return 0;
}
