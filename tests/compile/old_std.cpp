// Compile matrix: the header compiled as C++17 (or older) must stop with one #error that says C++20
// is required, and nothing else (make compile-matrix checks the compiler's output for exactly that).
// Both parts are included: the declarations and the implementation.
#define LLMINFER_IMPLEMENTATION
#include "../../llminfer.hpp"

int main() {
  return 0;
}
