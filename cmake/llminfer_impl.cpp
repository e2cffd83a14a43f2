// The implementation library (CMake option LLMINFER_BUILD_LIBRARY, target llminfer::impl): the
// one translation unit that compiles llminfer's implementation, with the SIMD flags of
// LLMINFER_SIMD. Programs linking it include llminfer.hpp for the declarations only.
#define LLMINFER_IMPLEMENTATION
#include "llminfer.hpp"
