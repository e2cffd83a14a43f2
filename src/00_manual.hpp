// llminfer.hpp — load a language model (GGUF or safetensors) and generate text on a CPU.
// One C++20 header, nothing beyond the standard library. Generated from src/ by tools/amalgamate:
// edit the parts in src/, never this file.
//
// ==== Quick start ====
//
//   // In exactly ONE .cpp file of your program:
//   #define LLMINFER_IMPLEMENTATION
//   #include "llminfer.hpp"
//   // Everywhere else just #include "llminfer.hpp" (declarations only, cheap to include).
//
//   auto model = llminfer::Model::load("model.gguf", {.threads = 4, .context = 4096});
//   if (!model) { std::puts(model.error().message.c_str()); return 1; }   // errors are values
//   auto result = model->generate("Once upon a time", {.max_tokens = 32});
//   if (result) std::puts(result->text.c_str());
//
// Build the implementation TU with optimisation and the CPU's instruction set, for example
// `g++ -std=c++20 -O2 -march=native -pthread`. Nothing needs exceptions or RTTI: the header
// builds with -fno-exceptions -fno-rtti.
//
// ==== Build options (define before including, in the implementation TU) ====
//
//   LLMINFER_IMPLEMENTATION     compile the implementation into this translation unit
//   LLMINFER_SIMD_SCALAR        force the portable scalar kernels (also LLMINFER_FORCE_SCALAR)
//   LLMINFER_NO_CPU_CHECK       do not verify at load that the CPU has the instructions compiled in
//   LLMINFER_MAX_TENSORS        largest tensor count a file may declare (default 1<<20)
//   LLMINFER_MAX_METADATA       largest metadata key/value count a file may declare (default 1<<20)
//   LLMINFER_MAX_JSON_DEPTH     deepest JSON nesting accepted (default 512)
//
// ==== Threads and ownership ====
//
//   A Model is immutable after load and cheap to copy (copies share the weights). Sessions are
//   independent: one session must be used by one thread at a time, separate sessions may run at
//   once on one model. Callbacks run on the thread that called generate()/reply().
//
// ==== Security ====
//
//   Model files, tokenizer files, chat templates and architecture definitions are untrusted
//   input. Every size and offset is checked before use (overflow-safe); bad input produces an
//   Error naming the file and what is wrong, never a crash, a hang or an unbounded allocation.
//
// ==== Version ====
#ifndef LLMINFER_HPP
#define LLMINFER_HPP

#define LLMINFER_VERSION_MAJOR 0
#define LLMINFER_VERSION_MINOR 1
#define LLMINFER_VERSION_PATCH 0
#define LLMINFER_VERSION_STRING "0.1.0"
