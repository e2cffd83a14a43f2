#if !defined(LLMI_KERNEL_PASS)
// The implementation's own macros end with it (`make check-macros` proves none is left).
#undef LLMI_API_DEF
#undef LLMI_DTYPES
#undef LLMI_ASSERT
#undef LLMI_NO_FP_CONTRACT
#undef LLMI_FORCE_INLINE
#undef LLMI_NOINLINE
#undef LLMI_KERNEL_ENTRIES
#undef LLMI_KERNEL_NAME
#undef LLMI_KNS_BEGIN
#undef LLMI_KNS_END
#undef LLMI_DISPATCH
#undef LLMI_HAS_FMA_F16C
#undef LLMI_SIMD_SCALAR
#undef LLMI_SIMD_AVX2
#undef LLMI_SIMD_AVX512
#undef LLMI_SIMD_VNNI
#undef LLMI_SIMD_BF16
#undef LLMI_SIMD_AMX
#undef LLMI_SIMD_NEON
#undef LLMI_VISIT_0
#undef LLMI_VISIT_1
#undef LLMI_X
#endif
#endif  // LLMINFER_IMPLEMENTATION

// ---------------------------------------------------------------------------------------------
// llminfer is released under the MIT License (also in the file LICENSE of the repository):
//
// MIT License
//
// Copyright (c) 2026 the llminfer authors
//
// Permission is hereby granted, free of charge, to any person obtaining a copy
// of this software and associated documentation files (the "Software"), to deal
// in the Software without restriction, including without limitation the rights
// to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
// copies of the Software, and to permit persons to whom the Software is
// furnished to do so, subject to the following conditions:
//
// The above copyright notice and this permission notice shall be included in all
// copies or substantial portions of the Software.
//
// THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
// IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
// FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
// AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
// LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
// OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
// SOFTWARE.
