// The shared library of the C API (make libllminfer.so): the implementation compiled once, built
// with -fvisibility=hidden so that it exports the llminfer_* functions of the header's C section
// alone (nm -D --defined-only build/libllminfer.so).
#define LLMINFER_IMPLEMENTATION
#include "../../llminfer.hpp"
