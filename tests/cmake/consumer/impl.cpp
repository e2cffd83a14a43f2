// Header-only use (the llminfer::llminfer target alone): this one file compiles the implementation,
// and only it gets the SIMD flags (see CMakeLists.txt).
#define LLMINFER_IMPLEMENTATION
#include "llminfer.hpp"
