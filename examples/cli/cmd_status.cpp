// llminfer status [--archdef DIR] [--json] [--dump ARCH]
// The architecture definitions in effect: built-ins, overridden by the files of --archdef DIR,
// with their steps per layer, origin and sha256; the files that did not load and why; the SIMD
// kernels compiled in. --dump prints the text of one definition, then the conventions it leaves at
// their defaults (as comment lines).
#define LLMINFER_IMPLEMENTATION  // uses the detail API directly (all functions are inline)
#include "cli.hpp"

namespace {
using namespace llminfer::detail;

const char* kStatusUsage =
    "usage: llminfer status [--archdef DIR] [--json] [--dump ARCH]\n"
    "  --archdef DIR  a directory of <arch>.archdef files that override the built-in definitions\n"
    "  --json         machine-readable output\n"
    "  --dump ARCH    print the text of the definition in effect for ARCH\n";
}  // namespace

int cmd_status(int argc, char** argv) {
  cli::Args args(kStatusUsage);
  args.option({"--archdef"}, true).option({"--json"}, false).option({"--dump"}, true);
  if (!args.parse(argc, argv)) return args.exit_code();
  if (!args.positional().empty()) {
    args.usage_error("unexpected argument '" + args.positional()[0] + "'");
    return args.exit_code();
  }
  auto reg = load_arch_registry(args.get("--archdef"));
  if (!reg) return cli::fail(reg.error());
  if (args.has("--dump")) {
    std::string name = args.get("--dump");
    if (const ArchdefFailure* f = reg->failure(name))
      return cli::fail(llminfer::Error{llminfer::Errc::archdef, "the definition of '" + name + "' did not load: " + f->error});
    const ArchDef* d = reg->find(name);
    if (!d) return cli::fail(llminfer::Error{llminfer::Errc::invalid_argument, "no architecture definition named '" + name + "'"});
    // the text, then the conventions it does not declare (their defaults run): everything that runs
    cli::out(d->text + (d->text.empty() || d->text.back() == '\n' ? "" : "\n") + d->default_conventions_text());
    return cli::kOk;
  }
  // the kernels a model loaded now would run (LLMINFER_KERNELS, else the best level this CPU has)
  auto kern = select_kernels("");
  std::string s;
  if (args.has("--json")) {
    s = "{\"architectures\":[";
    for (size_t k = 0; k < reg->defs.size(); k++) {
      const ArchDef& d = *reg->defs[k];
      s += (k ? "," : "") + strf("{\"name\":%s,\"steps_per_layer\":%d,\"origin\":%s,\"sha256\":%s}", json_quote(d.name).c_str(),
                                 d.steps_per_layer(), json_quote(d.origin).c_str(), json_quote(d.sha256).c_str());
    }
    s += "],\"failed\":[";
    for (size_t k = 0; k < reg->failed.size(); k++)
      s += (k ? "," : "") + strf("{\"name\":%s,\"path\":%s,\"error\":%s}", json_quote(reg->failed[k].name).c_str(),
                                 json_quote(reg->failed[k].path).c_str(), json_quote(reg->failed[k].error).c_str());
    s += strf("],\"simd\":%s,\"kernels\":%s,\"kernel_levels\":[", json_quote(simd_compiled()).c_str(),
              kern ? json_quote((*kern)->name).c_str() : "null");
    std::string levels = kernel_levels_compiled();
    for (size_t i = 0, k = 0; i <= levels.size(); i++)
      if (i == levels.size() || levels[i] == ',') {
        s += (k ? "," : "") + json_quote(levels.substr(k, i - k));
        k = i + 1;
      }
    s += "]";
    if (!kern) s += strf(",\"kernels_error\":%s", json_quote(kern.error().message).c_str());
    s += "}\n";
  } else {
    s += strf("architectures (%zu):\n", reg->defs.size());
    for (const auto& d : reg->defs)
      s += strf("  %-10s %3d steps/layer  sha256 %.12s  %s\n", d->name.c_str(), d->steps_per_layer(), d->sha256.c_str(),
                d->origin.c_str());
    if (!reg->failed.empty()) {
      s += strf("did not load (%zu; these architectures are unavailable):\n", reg->failed.size());
      for (const auto& f : reg->failed) s += "  " + f.error + "\n";
    }
    s += strf("simd: %s\n", simd_compiled());
    if (kern) s += strf("kernels: %s (compiled in: %s)\n", (*kern)->name, kernel_levels_compiled().c_str());
    else s += strf("kernels: none (%s)\n", kern.error().message.c_str());
  }
  cli::out(s);
  return cli::kOk;
}
