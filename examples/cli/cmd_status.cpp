// llminfer status [--archdef DIR] [--json] [--dump ARCH]
// The architecture definitions in effect: built-ins, overridden by the files of --archdef DIR,
// with their steps per layer, origin and sha256; the files that did not load and why; the SIMD
// kernels compiled in. --dump prints the text of one definition, then the conventions it leaves at
// their defaults (as comment lines). (llminfer::load_archdefs and llminfer::kernel_info.)
#include "cli.hpp"

namespace {

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
  auto reg = llminfer::load_archdefs(args.get("--archdef"));
  if (!reg) return cli::fail(reg.error());
  if (args.has("--dump")) {
    std::string name = args.get("--dump");
    for (const auto& f : reg->failed)
      if (f.name == name)
        return cli::fail(
            llminfer::Error{llminfer::Errc::archdef, "the definition of '" + name + "' did not load: " + f.error});
    for (const auto& d : reg->defs)
      if (d.name == name) {
        // the text, then the conventions it does not declare (their defaults run): everything that runs
        cli::out(d.text + (d.text.empty() || d.text.back() == '\n' ? "" : "\n") + d.default_conventions);
        return cli::kOk;
      }
    return cli::fail(
        llminfer::Error{llminfer::Errc::invalid_argument, "no architecture definition named '" + name + "'"});
  }
  // the kernels a model loaded now would run (LLMINFER_KERNELS, else the best level this CPU has)
  const llminfer::KernelInfo kern = llminfer::kernel_info();
  std::string levels;
  for (const auto& l : kern.levels) levels += (levels.empty() ? "" : ",") + l;
  std::string s;
  if (args.has("--json")) {
    s = "{\"architectures\":[";
    for (size_t k = 0; k < reg->defs.size(); k++) {
      const llminfer::ArchdefInfo& d = reg->defs[k];
      s += (k ? "," : "") + cli::strf("{\"name\":%s,\"steps_per_layer\":%d,\"origin\":%s,\"sha256\":%s}",
                                      cli::json_quote(d.name).c_str(), d.steps_per_layer,
                                      cli::json_quote(d.origin).c_str(), cli::json_quote(d.sha256).c_str());
    }
    s += "],\"failed\":[";
    for (size_t k = 0; k < reg->failed.size(); k++)
      s += (k ? "," : "") +
           cli::strf("{\"name\":%s,\"path\":%s,\"error\":%s}", cli::json_quote(reg->failed[k].name).c_str(),
                     cli::json_quote(reg->failed[k].path).c_str(), cli::json_quote(reg->failed[k].error).c_str());
    s += cli::strf("],\"simd\":%s,\"kernels\":%s,\"kernel_levels\":[", cli::json_quote(kern.simd).c_str(),
                   kern.selected.empty() ? "null" : cli::json_quote(kern.selected).c_str());
    for (size_t k = 0; k < kern.levels.size(); k++) s += (k ? "," : "") + cli::json_quote(kern.levels[k]);
    s += "]";
    if (kern.selected.empty()) s += cli::strf(",\"kernels_error\":%s", cli::json_quote(kern.error.message).c_str());
    s += "}\n";
  } else {
    s += cli::strf("architectures (%zu):\n", reg->defs.size());
    for (const auto& d : reg->defs)
      s += cli::strf("  %-10s %3d steps/layer  sha256 %.12s  %s\n", d.name.c_str(), d.steps_per_layer, d.sha256.c_str(),
                     d.origin.c_str());
    if (!reg->failed.empty()) {
      s += cli::strf("did not load (%zu; these architectures are unavailable):\n", reg->failed.size());
      for (const auto& f : reg->failed) s += "  " + f.error + "\n";
    }
    s += cli::strf("simd: %s\n", kern.simd.c_str());
    if (!kern.selected.empty())
      s += cli::strf("kernels: %s (compiled in: %s)\n", kern.selected.c_str(), levels.c_str());
    else
      s += cli::strf("kernels: none (%s)\n", kern.error.message.c_str());
  }
  cli::out(s);
  return cli::kOk;
}
