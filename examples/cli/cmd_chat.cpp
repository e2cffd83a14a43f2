// llminfer chat: an interactive conversation through the model's chat template. The session keeps
// its KV cache between turns, so each turn evaluates only the new tokens. Ctrl-C stops the reply
// (not the program); /reset starts over; /exit (or Ctrl-D, or Ctrl-C at the prompt) leaves.
// --save FILE keeps the session (conversation and KV cache) in FILE after every reply; --load FILE
// continues one.
#include <atomic>
#include <csignal>

#include "cli.hpp"
#include "sampling.hpp"

#if !defined(_WIN32)
#include <unistd.h>
#endif

namespace {

std::string chat_usage() {
  return std::string(
             "usage: llminfer chat -m MODEL [--system TEXT] [options]\n"
             "An interactive conversation with the model's own chat template. Type a message and press\n"
             "Enter (end a line with \\ to continue on the next one). Commands:\n"
             "  /reset    forget the conversation (keeps --system)\n"
             "  /exit     leave (also /quit, Ctrl-D, or Ctrl-C while waiting for input)\n"
             "Ctrl-C while the model answers stops that answer only.\n"
             "  -m, --model MODEL       a .gguf file, a .safetensors file or a Hugging Face / MLX directory\n"
             "  --system TEXT           a system message at the start of the conversation\n"
             "  --stats                 print a summary line (tokens, speed, cache reuse) after each reply\n"
             "  --load FILE             continue the session saved in FILE (conversation and KV cache; the\n"
             "                          same model and --kv-type; --system is then not added)\n"
             "  --save FILE             save the session to FILE after every reply (and at /reset)\n"
             "  --kv-type f16|f32       KV cache element type (default f16)\n") +
         cli::kSamplingHelp +
         "common:\n"
         "  -t, --threads N         threads (default: all hardware threads)\n"
         "  -c, --context N         context size in tokens (default: min(trained context, 4096))\n"
         "  --archdef DIR           directory of <arch>.archdef files overriding the built-ins\n"
         "  --no-mmap               read the weights into memory instead of mapping the file\n"
         "  --max-program-steps N   refuse a definition compiled into more than N steps (default 1000000)\n"
         "  --max-session-mb N      refuse a context whose KV cache and scratch need more than N MiB\n"
         "                          (default: the machine's physical memory)\n"
         "Exit status: 0 success, 1 usage error, 2 model error.\n";
}

std::atomic<bool> g_chat_cancel{false};
std::atomic<bool> g_replying{false};
std::atomic<bool> g_interrupted{false};
std::atomic<bool> g_too_long{false};  // a message longer than cli::max_input_bytes()
extern "C" void chat_on_sigint(int) {
  if (g_replying.load())
    g_chat_cancel.store(true);
  else
    g_interrupted.store(true);
}

void install_sigint() {
#if defined(_WIN32)
  std::signal(SIGINT, chat_on_sigint);
#else
  struct sigaction sa {};
  sa.sa_handler = chat_on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a Ctrl-C at the prompt interrupts the read
  sigaction(SIGINT, &sa, nullptr);
#endif
}

// One message from stdin (lines ending in '\' continue); false at end of input or on Ctrl-C.
bool read_message(std::string& msg, bool interactive) {
  msg.clear();
  for (bool first = true;; first = false) {
    if (interactive) {
      std::fputs(first ? "> " : ". ", stdout);
      std::fflush(stdout);
    }
    std::string line;
    int c;
    while ((c = std::fgetc(stdin)) != EOF && c != '\n') {
      if (msg.size() + line.size() >= cli::max_input_bytes()) {  // an endless line (/dev/zero) ends here
        std::fprintf(stderr, "error: %s\n", cli::input_too_long("-").c_str());
        g_too_long.store(true);
        return false;
      }
      line += static_cast<char>(c);
    }
    if (g_interrupted.load()) return false;
    if (c == EOF && line.empty()) return !msg.empty();
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      msg += line + "\n";
      if (c == EOF) return true;
      continue;
    }
    msg += line;
    return true;
  }
}

}  // namespace

int cmd_chat(int argc, char** argv) {
  g_too_long.store(false);  // (a program may run the command more than once: tests/fuzz/fuzz_cli.cpp)
  g_interrupted.store(false);
  cli::Args a(chat_usage());
  a.option({"-m", "--model"}, true).option({"--system"}, true).option({"--stats"}, false).common();
  a.option({"--save"}, true).option({"--load"}, true).option({"--kv-type"}, true);
  cli::add_sampling_options(a);
  if (!a.parse(argc, argv)) return a.exit_code();
  if (!a.positional().empty()) return (a.usage_error("unexpected argument '" + a.positional()[0] + "'"), a.exit_code());
  if (!a.has("--model")) return (a.usage_error("-m MODEL is required"), a.exit_code());
  llminfer::GenerateOptions o;
  if (!cli::read_sampling(a, o, false)) return a.exit_code();
  if (int st = cli::read_structured(a, o); st != cli::kOk) return st;
  llminfer::LoadOptions lo;
  if (!a.load_options(lo) || !a.kv_type(lo)) return a.exit_code();
  const std::string system = a.get("--system");
  const std::string save_path = a.get("--save"), load_path = a.get("--load");
  if ((a.has("--save") && save_path.empty()) || (a.has("--load") && load_path.empty()))
    return (a.usage_error("--save and --load need a file name"), a.exit_code());
  const bool stats = a.has("--stats");
#if defined(_WIN32)
  const bool interactive = true;
#else
  const bool interactive = isatty(0) != 0;
#endif

  auto model = llminfer::Model::load(a.get("--model"), lo);
  if (!model) return cli::fail(model.error());
  // a random seed is drawn once, then advanced per reply: replies differ, runs are reproducible
  // with --seed
  uint64_t seed = o.seed;
  if (seed == llminfer::random_seed) {
    std::random_device rd;
    seed = (static_cast<uint64_t>(rd()) << 32 ^ rd()) & ~(uint64_t{1} << 63);
  }
  auto session = model->session();
  if (!load_path.empty()) {
    if (auto l = session.load(std::string_view(load_path)); !l) return cli::fail(l.error());
    if (interactive)
      std::fprintf(stderr, "continuing %s: %zu messages, %d tokens cached\n", load_path.c_str(),
                   session.messages().size(), session.cached_tokens());
  } else if (!system.empty()) {
    session.add("system", system);
  }
  // --save: after every reply, so that nothing is lost when the program is stopped
  auto save = [&]() -> bool {
    if (save_path.empty()) return true;
    auto sv = session.save(std::string_view(save_path));
    if (!sv) std::fprintf(stderr, "error: %s\n", sv.error().message.c_str());
    return static_cast<bool>(sv);
  };
  if (interactive)
    std::fprintf(stderr, "chatting with %s (/reset to start over, /exit to leave, Ctrl-C stops a reply)\n",
                 a.get("--model").c_str());
  install_sigint();

  o.cancel = &g_chat_cancel;
  o.on_token = [](std::string_view piece) {
    cli::out(piece);
    std::fflush(stdout);
    return true;
  };
  std::string msg;
  int status = cli::kOk;
  while (read_message(msg, interactive)) {
    if (msg == "/exit" || msg == "/quit") break;
    if (msg == "/reset") {
      session.reset();
      if (!system.empty()) session.add("system", system);
      std::fputs("(conversation reset)\n", stderr);
      if (!save()) status = cli::kFailure;
      continue;
    }
    if (msg.empty()) continue;
    if (msg[0] == '/' && msg.find(' ') == std::string::npos && msg.find('\n') == std::string::npos) {
      std::fprintf(stderr, "unknown command %s (commands: /reset, /exit)\n", msg.c_str());
      continue;
    }
    session.add("user", msg);
    o.seed = seed++;
    g_chat_cancel.store(false);
    g_replying.store(true);
    auto r = session.reply(o);
    g_replying.store(false);
    if (!r) {
      // The message that could not be answered leaves the conversation (a template that refuses
      // it, a render stopped with Ctrl-C): the chat goes on without it.
      (void)session.erase(session.messages().size() - 1);
      if (g_chat_cancel.load()) {
        std::fputs("\n(stopped; the message was not sent)\n", stderr);
      } else {
        std::fprintf(stderr, "\nerror: %s\n(the message was not sent)\n", r.error().message.c_str());
        status = cli::kFailure;
      }
      continue;
    }
    cli::out("\n");
    std::fflush(stdout);
    if (r->stop == llminfer::StopReason::cancelled) std::fputs("(stopped)\n", stderr);
    if (r->stop == llminfer::StopReason::context_full) {
      if (r->error.code != llminfer::Errc::ok) {  // nothing generated: the message leaves the conversation
        (void)session.erase(session.messages().size() - 1);
        std::fprintf(stderr, "error: %s\n", r->error.message.c_str());
      }
      std::fputs("(the context is full: /reset to start a new conversation, or use a larger -c)\n", stderr);
    }
    if (r->stop == llminfer::StopReason::error) std::fprintf(stderr, "error: %s\n", r->error.message.c_str());
    if (stats) std::fprintf(stderr, "%s\n", cli::summary_line(*r).c_str());
    if (!save()) status = cli::kFailure;
  }
  if (g_too_long.load()) status = cli::kFailure;
  if (interactive && status == cli::kOk) std::fputs("\n", stdout);
  return status;
}
