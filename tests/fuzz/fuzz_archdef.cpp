// libFuzzer target: the architecture-definition parser and validator, from memory (tests/fuzz/corpus/archdef
// holds the built-in definitions and a few broken ones as seeds).
// Every refusal must name the text (and be an archdef error); every accepted text must parse again to
// the same definition (same sha256, sections and parameters): parsing is a pure function of the bytes.
#define LLMINFER_IMPLEMENTATION
#include "../../llminfer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llminfer;
  using namespace llminfer::detail;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto d = archdef_parse(text, "fuzz.archdef", "", "fuzz.archdef");
  if (!d) {
    if (d.error().code != Errc::archdef) __builtin_trap();
    if (d.error().message.rfind("fuzz.archdef", 0) != 0) __builtin_trap();
    return 0;
  }
  if (d->name.empty() || d->block.empty() || d->epilogue.empty()) __builtin_trap();
  if (d->text != text || d->sha256 != sha256_hex(text)) __builtin_trap();
  // the file-name rule: the same text under its own name is accepted, under another name refused
  auto again = archdef_parse(text, "fuzz.archdef", d->name, "fuzz.archdef");
  if (!again || again->sha256 != d->sha256 || again->steps_per_layer() != d->steps_per_layer() ||
      again->prologue.size() != d->prologue.size() || again->epilogue.size() != d->epilogue.size() ||
      again->params.size() != d->params.size())
    __builtin_trap();
  if (archdef_parse(text, "fuzz.archdef", d->name + "x", "fuzz.archdef")) __builtin_trap();
  return 0;
}
