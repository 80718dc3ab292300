// twobs CPU backend: what CUDA snippets expect, for the host C++ compiler.
// Built with -ffp-contract=off, so a * b + c rounds twice as on the GPU
// (which twobs compiles with --fmad=false).
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <cmath>
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <mutex>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#include <utility>

#define __device__
#define __host__
#define __forceinline__ inline
#define __constant__ const  // read-only, as on the GPU; internal linkage at namespace scope
#define __shared__ static thread_local
{% for t in vector_types %}
struct {{ t.prefix }}1 { {{ t.c }} x; };
struct {{ t.prefix }}2 { {{ t.c }} x, y; };
struct {{ t.prefix }}3 { {{ t.c }} x, y, z; };
struct {{ t.prefix }}4 { {{ t.c }} x, y, z, w; };
inline {{ t.prefix }}1 make_{{ t.prefix }}1({{ t.c }} x) { return {x}; }
inline {{ t.prefix }}2 make_{{ t.prefix }}2({{ t.c }} x, {{ t.c }} y) { return {x, y}; }
inline {{ t.prefix }}3 make_{{ t.prefix }}3({{ t.c }} x, {{ t.c }} y, {{ t.c }} z) { return {x, y, z}; }
inline {{ t.prefix }}4 make_{{ t.prefix }}4({{ t.c }} x, {{ t.c }} y, {{ t.c }} z, {{ t.c }} w) { return {x, y, z, w}; }
{%- endfor %}

// Bit casts.
inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned i; memcpy(&i, &f, 4); return i; }
inline double __longlong_as_double(long long i) { double d; memcpy(&d, &i, 8); return d; }
inline long long __double_as_longlong(double d) { long long i; memcpy(&i, &d, 8); return i; }

// Correctly rounded intrinsics: the same results as on the GPU.
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline double __dsqrt_rn(double x) { return sqrt(x); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
inline float __saturatef(float x) { return fminf(fmaxf(x, 0.0f), 1.0f); }
inline double twobs_saturate(double x) { return fmin(fmax(x, 0.0), 1.0); }  // __saturatef in f64 mode

// CUDA computes these approximately: the CPU gives the exact result, so a
// snippet that uses them can differ between backends in the last bits.
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __powf(float a, float b) { return powf(a, b); }

template <class T> inline T min(T a, T b) { return b < a ? b : a; }
template <class T> inline T max(T a, T b) { return a < b ? b : a; }
