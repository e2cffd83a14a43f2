// Compile matrix, translation unit 1 of 2: the one that holds the implementation.
#define LLMINFER_IMPLEMENTATION
#include "../../llminfer.hpp"

// Something of this TU for the other one to call, so both halves are linked and used.
const char* matrix_version() {
  return llminfer::version();
}
