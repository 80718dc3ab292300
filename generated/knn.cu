// twobs kernel: knn (problems/knn.xml)
// KNN self-join: the K nearest other points of every point (3-D, or as many coordinates as the input has), by Euclidean distance; with two inputs, the K nearest points of B to each point of A
//
// Input: one set (self), element f32 x 3; pair function `distance` from problems/distance.cu (symmetric)
// Output: k = 8 nearest per query (smallest values, ties to the smaller index)
// Parameters: k = 8
// Device: h100 (profile, sm_90): 132 SMs, 233472 B shared/SM, 232448 B shared/block (opt-in), 2048 threads and 32 blocks per SM
//
// plan for knn on h100: 1000000 points, 999999000000 pairs (all_pairs)
//   visit         all_pairs       per-query output: each query thread sees every other point (j != i)
//   output class  PerQuery        K results per query point (64000000 B in all)
//   test          values          a knn output is tested on values
//   output        topk            per query: the K best so far in registers, written once
//   input_cache   register_shm    tiles in shared memory: the lowest-latency cache, free for input since the output is not there
//   block_size    256             a tile of 256 points amortizes each barrier without large per-block output state
//   points/thread 1               one own point per thread (~48 registers): more measured no faster while the pair arithmetic, not the loads, bounds the loop
//   resources                     grid 3907 blocks; 3072 B shared per block (3072 B tile + 0 B output + 0 B key test); ~48 registers per thread (estimate)
//   occupancy                     5 blocks = 1280 threads per multiprocessor (limited by Registers); R = 6 rounds
//
// Launch: 3907 blocks of 256 threads, 3072 B dynamic shared memory.
// Compile: NVRTC --std=c++17 --fmad=false --gpu-architecture=sm_90
// Regenerate: twobs gen problems/knn.xml --device h100 --dims 3
// ------------------------------------------------------------------ types
typedef float3 Point;
typedef float Value;

// The point's coordinates by number, for snippets of any dimension: in an
// unrolled loop over DIMS every index is a constant and coord a register.
[[maybe_unused]] constexpr unsigned DIMS = 3;
__device__ __forceinline__ float coord(const Point& p, unsigned i) {
  return i == 0 ? p.x : i == 1 ? p.y : p.z;
}

// A periodic box (a parameter of type="box"): edge vectors (lx, 0, 0),
// (xy ly, ly, 0), (xz lz, yz lz, lz), tilt factors as in HOOMD and freud;
// lx == 0 for open boundaries.
template <typename T>
struct PeriodicBox {
  T lx, ly, lz, xy, xz, yz;
};

// Parameters are compile-time constants: the runner recompiles when they change.
namespace params {
[[maybe_unused]] constexpr unsigned k = 8u;
}  // namespace params

// ------------------------------------------------------------------ the pairwise function
#line 1 "problems/distance.cu"
// Euclidean distance between two points of DIMS coordinates: the square root
// of the squared distance, a non-decreasing map of a cheaper key (the spec
// says so), so that thresholds and bucket edges are tested on the squared
// distance. The built-ins take DIMS from their input (dims_from_input).
__device__ float squared_distance(const Point& a, const Point& b) {
  const float d0 = coord(a, 0) - coord(b, 0);
  float sum = d0 * d0;
  // In 3-D: fmaf(dz, dz, fmaf(dy, dy, dx * dx)), a rounding fewer per
  // coordinate than the plain sum, and an instruction fewer.
#pragma unroll
  for (unsigned i = 1; i < DIMS; ++i) {
    const float d = coord(a, i) - coord(b, i);
    sum = fmaf(d, d, sum);
  }
  return sum;
}

// Non-decreasing over every key, and one value for every NaN key, as a key
// map must be: no key the key function makes is negative, and negative ones
// and NaNs map to 0 (not fmaxf, which passes a signaling NaN on the host).
__device__ float root(float k) { return sqrtf(k > 0.0f ? k : 0.0f); }

// A fast approximation of root (within 2^-21 of it, or NaN; 2^-23 on sm_90,
// measured on every key), to bracket a histogram bucket with: on the GPU one
// approximate square root instruction.
__device__ float approx_root(float k) {
#ifdef __CUDA_ARCH__
  float r;
  asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(k));
  return r;
#else
  return sqrtf(k);
#endif
}

__device__ float distance(const Point& a, const Point& b) { return root(squared_distance(a, b)); }
#line 36 "problems/distance.cu"
__device__ __forceinline__ Value twobs_pair(const Point& twobs_a, const Point& twobs_b) { return distance(twobs_a, twobs_b); }
#line 5 "problems/distance.cu"
__device__ __forceinline__ Value twobs_key(const Point& twobs_a, const Point& twobs_b) { return squared_distance(twobs_a, twobs_b); }
#line 21 "problems/distance.cu"
__device__ __forceinline__ Value twobs_map(Value twobs_k) { return root(twobs_k); }
#line 26 "problems/distance.cu"
__device__ __forceinline__ Value twobs_estimate(Value twobs_k) { return approx_root(twobs_k); }
#line 94 "knn.cu"
// The calls into the snippet above are rendered at the lines of the functions
// they call, so that a parameter or return type that does not fit is reported there.

// Everything twobs defines after the snippet lives in its own namespace, so
// that no name of the user's can clash with it.
namespace twobs_generated {
// ------------------------------------------------------------------ launch shape
constexpr unsigned B = 256;  // threads per block = points per tile
constexpr unsigned R = 1;  // own points per thread: each tile point serves R pairs
[[maybe_unused]] constexpr unsigned TILE_BYTES = 3072;  // the input tile's shared memory; the output's follows
[[maybe_unused]] constexpr bool UNORDERED_PAIRS = false;  // a pair is (min, max), not (own, other)
[[maybe_unused]] constexpr unsigned FULL_WARP = 0xffffffffu;
#define TWOBS_THREAD threadIdx.x  // fragments that set up shared state split it over the block
#define TWOBS_THREADS B

__device__ __forceinline__ unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }

// A point set: one array per component (SoA), each padded to a multiple of
// 1024 elements so that whole tiles and 16-byte loads stay in bounds.
struct Set {
  const float* x;
  const float* y;
  const float* z;
  unsigned n;
};

// A grid's shape for a search of rings (src/stage/mod.rs RingShape): cells
// per axis (axis 0 varies fastest), a bit per wrapping axis, a ring's reach.
struct RingShape {
  unsigned cells[3];
  unsigned periodic;
  double reach;
};

__device__ __forceinline__ Point load_point(const Set& s, unsigned i) {
  Point p;
  p.x = s.x[i];
  p.y = s.y[i];
  p.z = s.z[i];
  return p;
}

// What the output stage learns about its thread. Own point r of the thread
// is A's point i0 + r * B (so that the block's loads of them coalesce).
struct Here {
  unsigned i0;               // the thread's first own point in set A's block
  unsigned own_end;          // the end of the block's own points: those at or past it are padding
  unsigned a_offset;         // whole-input index of A's first point
  unsigned other_offset;     // likewise for the other set
  unsigned char* output_smem;  // the output's shared memory, after the input tile

  __device__ __forceinline__ unsigned own(unsigned r) const { return i0 + r * B; }
  __device__ __forceinline__ bool valid(unsigned r) const { return own(r) < own_end; }
};

// ------------------------------------------------------------------ what a pair contributes: knn
constexpr unsigned K = static_cast<unsigned>(params::k);

// The K best (value, index) pairs seen so far, sorted; ties go to the smaller
// index, so the result does not depend on the order the pairs come in.
struct TopK {
  Value best[K];
  unsigned index[K];

  __device__ __forceinline__ TopK() {
#pragma unroll
    for (unsigned k = 0; k < K; ++k) {
      best[k] = __int_as_float(0x7f800000);  // ranks after every real value
      index[k] = 0xffffffffu;
    }
  }

  __device__ __forceinline__ static bool before(Value v, unsigned j, Value w, unsigned l) {
    return v < w || (v == w && j < l);
  }

  __device__ __forceinline__ void offer(Value v, unsigned j) {
    if (!before(v, j, best[K - 1], index[K - 1])) return;  // also drops NaN
    best[K - 1] = v;
    index[K - 1] = j;
    // Bubble the newcomer up: the rest of the list is already sorted.
#pragma unroll
    for (unsigned k = K - 1; k > 0; --k) {
      if (before(best[k], index[k], best[k - 1], index[k - 1])) {
        const Value tv = best[k];
        best[k] = best[k - 1];
        best[k - 1] = tv;
        const unsigned ti = index[k];
        index[k] = index[k - 1];
        index[k - 1] = ti;
      }
    }
  }
};

// No setup: the value is tested as it is.
__device__ __forceinline__ void prepare_contribution() {}

// ------------------------------------------------------------------ input stage: register_shm
// Register-SHM: each thread keeps its own points in registers; the block
// stages the other tile in shared memory with 16-byte loads, one array per
// component, and every thread reads it back (broadcast, no bank conflicts),
// RUN points of each array in one load.
constexpr unsigned RUN = 4;
// Tiles start where every array's 16-byte loads are aligned.
[[maybe_unused]] constexpr unsigned TILE_ALIGN = 4;
template <class T>
struct alignas(RUN * sizeof(T)) Run {
  T v[RUN];
};

struct Tiles {
  float* x;
  float* y;
  float* z;

  __device__ __forceinline__ explicit Tiles(unsigned char* smem) {
    x = reinterpret_cast<float*>(smem + 0);
    y = reinterpret_cast<float*>(smem + 1024);
    z = reinterpret_cast<float*>(smem + 2048);
  }

  __device__ __forceinline__ static void copy16(const void* from, void* to, unsigned bytes) {
    const uint4* src = static_cast<const uint4*>(from);
    uint4* dst = static_cast<uint4*>(to);
    for (unsigned k = threadIdx.x; k < bytes / 16; k += B) dst[k] = src[k];
  }

  __device__ __forceinline__ void load(const Set& s, unsigned start) {
    __syncthreads();  // everyone is done with the previous tile
    copy16(s.x + start, x, B * sizeof(float));
    copy16(s.y + start, y, B * sizeof(float));
    copy16(s.z + start, z, B * sizeof(float));
    __syncthreads();
  }

  __device__ __forceinline__ Point at(unsigned j) const {
    Point p;
    p.x = x[j];
    p.y = y[j];
    p.z = z[j];
    return p;
  }

  template <class F>
  __device__ __forceinline__ void for_each(unsigned len, F&& f) const {
    unsigned j = 0;
    // Unrolled a little (Tallying::tile_runs_unrolled): a full tile of a constant length would otherwise unroll whole.
#pragma unroll 2
    for (; j + RUN <= len; j += RUN) {
      const Run<float> run_x = *reinterpret_cast<const Run<float>*>(x + j);
      const Run<float> run_y = *reinterpret_cast<const Run<float>*>(y + j);
      const Run<float> run_z = *reinterpret_cast<const Run<float>*>(z + j);
#pragma unroll
      for (unsigned k = 0; k < RUN; ++k) {
        Point p;
        p.x = run_x.v[k];
        p.y = run_y.v[k];
        p.z = run_z.v[k];
        f(j + k, p);
      }
    }
    for (; j < len; ++j) f(j, at(j));
  }
};

// ------------------------------------------------------------------ output stage: topk
// Per-query top-K: each query thread keeps the K best (value, index) pairs of
// each of its R own points in registers (K and R are compile-time constants,
// so the arrays stay in registers while they fit). It starts from empty lists
// on a query block's first launch (`fresh`), else from the lists already in
// the output, so that launches over further blocks of points refine them, and
// writes them back once.
struct Output {
  Value* out_value;
  unsigned* out_index;
  unsigned other_offset;
  TopK top[R];

  __device__ __forceinline__ Output(Value* values, unsigned* indices, unsigned fresh, const Here& here)
      : out_value(values), out_index(indices), other_offset(here.other_offset) {
#pragma unroll
    for (unsigned r = 0; r < R; ++r) {
      if (fresh || !here.valid(r)) continue;  // TopK() starts empty
#pragma unroll
      for (unsigned k = 0; k < K; ++k) {
        top[r].best[k] = out_value[static_cast<size_t>(here.own(r)) * K + k];
        top[r].index[k] = out_index[static_cast<size_t>(here.own(r)) * K + k];
      }
    }
  }
  __device__ __forceinline__ unsigned first_step(unsigned from) const { return from; }
  __device__ __forceinline__ void begin_step(unsigned) {}

  // The pairs of every own point with tile point (j, q), one at a time.
  template <class Valid>
  __device__ __forceinline__ void offer(const Here& here, const Point (&own)[R], unsigned j, const Point& q,
                                        const Valid& valid) {
#pragma unroll
    for (unsigned r = 0; r < R; ++r) add(r, here.own(r), own[r], j, q, valid(r));
  }


  __device__ __forceinline__ void add(unsigned r, unsigned, const Point& own, unsigned j, const Point& q, bool valid) {
    const Value v = twobs_pair(own, q);
    if (valid) top[r].offer(v, other_offset + j);
  }

  __device__ __forceinline__ bool end_step(unsigned) { return false; }

  // Own point r's K-th value so far (a search of rings stops on it).
  __device__ __forceinline__ Value kth(unsigned r) const { return top[r].best[K - 1]; }

  // Writes own point r's list to row row(r) of the output.
  template <class Row>
  __device__ __forceinline__ void finish_at(const Here& here, const Row& row) {
#pragma unroll
    for (unsigned r = 0; r < R; ++r) {
      if (!here.valid(r)) continue;
      const size_t at = static_cast<size_t>(row(r)) * K;
#pragma unroll
      for (unsigned k = 0; k < K; ++k) {
        out_value[at + k] = top[r].best[k];
        out_index[at + k] = top[r].index[k];
      }
    }
  }

  __device__ __forceinline__ void finish(const Here& here) {
    finish_at(here, [&](unsigned r) { return here.own(r); });
  }
};

// Offers the pairs of a thread's own points with tile point (j, q);
// valid(r) says whether own point r's pair is in the visit. Every lane of
// the warp offers together (the output may vote).
struct Offer {
  Output& out;
  const Here& here;
  const Point (&own)[R];

  template <class Valid>
  __device__ __forceinline__ void operator()(unsigned j, const Point& q, const Valid& valid) const {
    out.offer(here, own, j, q, valid);
  }
};

// ------------------------------------------------------------------ kernel: all_pairs
extern "C" __global__ void __launch_bounds__(B) twobs_knn(
    const float* a_x,
    const float* a_y,
    const float* a_z,
    unsigned n_a,
    unsigned a_offset,
    unsigned other_offset,
    unsigned step_first,
    unsigned step_end,
    Value* values,
    unsigned* indices,
    unsigned fresh) {
  extern __shared__ __align__(16) unsigned char smem[];
  const Set a = { a_x, a_y, a_z, n_a };
  [[maybe_unused]] const Set& other = a;
  const unsigned t = threadIdx.x;
  const unsigned block = blockIdx.x;
  const unsigned first = block * B * R;  // the block's first own point
  const unsigned own_end = a.n;          // own points at or past it are padding

  const Here here = {first + t, own_end, a_offset, other_offset, smem + TILE_BYTES};
  prepare_contribution();
  __syncthreads();
  Point own[R];
#pragma unroll
  for (unsigned r = 0; r < R; ++r) own[r] = load_point(a, here.own(r));  // padding rows are loaded, never counted
  // Interior blocks own no padding: their full tiles skip every validity test.
  [[maybe_unused]] const bool all_own_valid = first + B * R <= own_end;
  Output out(values, indices, fresh, here);
  Tiles tiles(smem);
  [[maybe_unused]] const auto always = [](unsigned) { return true; };
  [[maybe_unused]] const auto own_valid = [&](unsigned r) { return here.valid(r); };
  [[maybe_unused]] const Offer offer{out, here, own};
  // Every block walks all tiles, starting at its own so that blocks spread
  // over memory; a point is not paired with itself, so tiles that overlap the
  // block's own points test j != i.
  const unsigned tiles_total = (other.n + B - 1) / B;
  for (unsigned s = out.first_step(step_first); s < umin(tiles_total, step_end); ++s) {
    out.begin_step(s);
    const unsigned tile = (block * R + s) % tiles_total;
    const unsigned start = tile * B;
    tiles.load(other, start);
    const unsigned len = umin(B, other.n - start);
    const bool overlaps = start < first + B * R && first < start + B;
    if (all_own_valid && len == B && !overlaps) {
      tiles.for_each(B, [&](unsigned jl, const Point& q) { offer(start + jl, q, always); });
    } else {
      tiles.for_each(len, [&](unsigned jl, const Point& q) {
        const unsigned j = start + jl;
        offer(j, q, [&](unsigned r) { return here.valid(r) && here.own(r) != j; });
      });
    }
    if (out.end_step(s)) return;  // output full: this block resumes at step s
  }

  out.finish(here);
}
}  // namespace twobs_generated
