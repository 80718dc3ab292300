// Takes points that already lie on the GPU (an array of CuPy, PyTorch, Numba
// or JAX, src/backend/cuda/take.rs) into twobs's layout: one column per
// component, of the spec's scalar, as the host path's columns are; and what
// the planner reads of a set without its points crossing the bus: each
// column's extremes, the first row holding NaN or infinity and how many do,
// and an evenly strided sample of rows. One module for every problem.

// The scalars of a given array and of the spec: 0 f32, 1 f64, 2 i32, 3 i64.
__device__ __forceinline__ double given_at(const char* p, unsigned kind) {
  switch (kind) {
    case 0: return *reinterpret_cast<const float*>(p);
    case 1: return *reinterpret_cast<const double*>(p);
    case 2: return *reinterpret_cast<const int*>(p);
    default: return static_cast<double>(*reinterpret_cast<const long long*>(p));
  }
}

// A double as an unsigned key in the same order (negative values flipped whole).
__device__ __forceinline__ unsigned long long order_key(double x) {
  const unsigned long long bits = static_cast<unsigned long long>(__double_as_longlong(x));
  return (bits >> 63) ? ~bits : (bits | 0x8000000000000000ull);
}

constexpr unsigned TAKE_THREADS = 256;
constexpr unsigned MAX_COMPONENTS = 16;

// Row i, component c of the given array lies at base + i row_stride + c
// column_stride (bytes; strides may be negative). Each component is
// converted once to the spec's scalar (`out_f64`: double, else float, the
// nearest value, as numpy's astype and the command line's readers round)
// and written to columns[c]; the extremes are those of the converted
// values, as the host's `Column::min_max` reads them; a row is bad where
// any converted component is NaN or infinite. `state` is the set's one
// buffer of 64-bit words, uploaded once and read back once
// (src/backend/cuda/take.rs): the columns' addresses (`components` words),
// then 2 keys a component (min, max), which start at (~0, 0), then one word
// whose low half is the first bad row (starting at ~0u) and high half how
// many rows are bad (starting at 0); the samples follow.
extern "C" __global__ void __launch_bounds__(TAKE_THREADS)
twobs_take_columns(const char* base, long long row_stride, long long column_stride, unsigned kind, unsigned n,
                   unsigned components, unsigned out_f64, unsigned long long* state) {
  void* const* columns = reinterpret_cast<void* const*>(state);
  unsigned long long* extremes = state + components;
  unsigned* first_bad = reinterpret_cast<unsigned*>(state + 3 * components);
  unsigned* bad_rows = first_bad + 1;
  double lo[MAX_COMPONENTS], hi[MAX_COMPONENTS];
  for (unsigned c = 0; c < components; ++c) {
    lo[c] = __longlong_as_double(0x7ff0000000000000ll);  // +inf
    hi[c] = -lo[c];
  }
  unsigned my_first = ~0u, my_bad = 0;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const char* row = base + static_cast<long long>(i) * row_stride;
    bool bad = false;
    for (unsigned c = 0; c < components; ++c) {
      const double given = given_at(row + static_cast<long long>(c) * column_stride, kind);
      double x;
      if (out_f64) {
        x = given;
        static_cast<double*>(columns[c])[i] = x;
      } else {
        const float f = __double2float_rn(given);
        x = f;
        static_cast<float*>(columns[c])[i] = f;
      }
      if (isfinite(x)) {
        lo[c] = fmin(lo[c], x);
        hi[c] = fmax(hi[c], x);
      } else {
        bad = true;
      }
    }
    if (bad) {
      my_first = min(my_first, i);
      ++my_bad;
    }
  }
  // A warp's extremes, then one atomic a warp.
  const unsigned lane = threadIdx.x % 32;
  for (unsigned c = 0; c < components; ++c) {
    double l = lo[c], h = hi[c];
    for (int d = 16; d > 0; d /= 2) {
      l = fmin(l, __shfl_down_sync(0xffffffffu, l, d));
      h = fmax(h, __shfl_down_sync(0xffffffffu, h, d));
    }
    if (lane == 0 && l <= h) {
      atomicMin(&extremes[2 * c], order_key(l));
      atomicMax(&extremes[2 * c + 1], order_key(h));
    }
  }
  for (int d = 16; d > 0; d /= 2) {
    my_first = min(my_first, __shfl_down_sync(0xffffffffu, my_first, d));
    my_bad += __shfl_down_sync(0xffffffffu, my_bad, d);
  }
  if (lane == 0 && my_bad > 0) {
    atomicMin(first_bad, my_first);
    atomicAdd(bad_rows, my_bad);
  }
}

// The strided samples that `index::SetShape` and the range check read, of
// every column at once: rows 0, step, 2 step, ... (`count` of them) of each
// column for the first sample, then of each column for the second, written
// one after another (values of `width` bytes, 4 or 8) from word
// `sample_word` of `state` (the addresses of twobs_take_columns).
extern "C" __global__ void twobs_take_samples(unsigned long long* state, unsigned components, unsigned width,
                                              unsigned step0, unsigned count0, unsigned step1, unsigned count1,
                                              unsigned sample_word) {
  const unsigned first = components * count0;
  const unsigned total = first + components * count1;
  char* out = reinterpret_cast<char*>(state + sample_word);
  for (unsigned t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
    const bool second = t >= first;
    const unsigned u = second ? t - first : t;
    const unsigned count = second ? count1 : count0;
    const unsigned c = u / count;
    const unsigned long long row = static_cast<unsigned long long>(u % count) * (second ? step1 : step0);
    const char* column = reinterpret_cast<const char*>(state[c]);
    if (width == 8)
      reinterpret_cast<unsigned long long*>(out)[t] = reinterpret_cast<const unsigned long long*>(column)[row];
    else
      reinterpret_cast<unsigned*>(out)[t] = reinterpret_cast<const unsigned*>(column)[row];
  }
}
