// twobs kernel: selfjoin (problems/selfjoin.xml)
// Epsilon self-join: the pairs of points (2-D, or as many coordinates as the input has) whose Euclidean distance is at most eps
//
// Input: one set (self), element f32 x 2; pair function `distance` from problems/distance.cu (symmetric)
// Output: pairs with value <= eps = 0.01
// Parameters: eps = 0.01
// Device: h100 (profile, sm_90): 132 SMs, 233472 B shared/SM, 232448 B shared/block (opt-in), 2048 threads and 32 blocks per SM
//
// plan for selfjoin on h100: 1000000 points, 499999500000 pairs (lower_triangle)
//   visit         lower_triangle  one set and a symmetric function: each unordered pair i < j once
//   output class  TypeIII         output unknown in advance: above beta = 232448 B or unknown
//   test          keys            distance(a, b) is root(squared_distance(a, b)): each pair is tested on the key, one comparison against an edge found by bisection at start with root's own arithmetic
//   output        dob             Type-III: pages of 512 pairs taken with one atomicAdd each
//   input_cache   register_shm    tiles in shared memory: the lowest-latency cache, free for input since the output is not there
//   block_size    256             a tile of 256 points amortizes each barrier without large per-block output state
//   points/thread 1               one own point per thread (~40 registers): more measured no faster while the pair arithmetic, not the loads, bounds the loop
//   diagonal      balanced        thread t pairs with (t + s) % B for s = 1..B/2: no divergence on the diagonal tile (section 3.4.1)
//   resources                     grid 3907 blocks; 2052 B shared per block (2048 B tile + 0 B output + 4 B key test); ~40 registers per thread (estimate)
//   occupancy                     6 blocks = 1536 threads per multiprocessor (limited by Registers); R = 5 rounds
//   page_size     512             512 pairs of 2 x u32 per page; the runner sizes the pool
//
// Launch: 3907 blocks of 256 threads, 2048 B dynamic shared memory.
// Compile: NVRTC --std=c++17 --fmad=false --gpu-architecture=sm_90
// Regenerate: twobs gen problems/selfjoin.xml --device h100 --dims 2
// ------------------------------------------------------------------ types
typedef float2 Point;
typedef float Value;

// The point's coordinates by number, for snippets of any dimension: in an
// unrolled loop over DIMS every index is a constant and coord a register.
[[maybe_unused]] constexpr unsigned DIMS = 2;
__device__ __forceinline__ float coord(const Point& p, unsigned i) {
  return i == 0 ? p.x : p.y;
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
[[maybe_unused]] constexpr float eps = 0.01f;
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
#line 96 "selfjoin.cu"
// The calls into the snippet above are rendered at the lines of the functions
// they call, so that a parameter or return type that does not fit is reported there.

// Everything twobs defines after the snippet lives in its own namespace, so
// that no name of the user's can clash with it.
namespace twobs_generated {
// ------------------------------------------------------------------ launch shape
constexpr unsigned B = 256;  // threads per block = points per tile
constexpr unsigned R = 1;  // own points per thread: each tile point serves R pairs
[[maybe_unused]] constexpr unsigned TILE_BYTES = 2048;  // the input tile's shared memory; the output's follows
[[maybe_unused]] constexpr bool UNORDERED_PAIRS = true;  // a pair is (min, max), not (own, other)
[[maybe_unused]] constexpr unsigned FULL_WARP = 0xffffffffu;
#define TWOBS_THREAD threadIdx.x  // fragments that set up shared state split it over the block
#define TWOBS_THREADS B

__device__ __forceinline__ unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }

// A point set: one array per component (SoA), each padded to a multiple of
// 1024 elements so that whole tiles and 16-byte loads stay in bounds.
struct Set {
  const float* x;
  const float* y;
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

// ------------------------------------------------------------------ what a pair contributes: pairs
// Keys (the spec's key map): the value of a pair is map(key) with map
// non-decreasing, so whether a value passes a test, or reaches a bucket,
// holds for all keys from some edge on. Each edge is the smallest key that
// passes, found by bisection over the keys in order with the very arithmetic
// of map; each backend finds its edges when it starts, with its own
// arithmetic. Pairs are then tested on the key alone. A NaN key is tested on
// its value.
typedef Value Key;

// Non-NaN keys in order, as unsigned integers (sign-magnitude to offset binary).
__device__ __forceinline__ unsigned long long key_rank(float k) {
  const unsigned u = __float_as_uint(k);
  return (u & 0x80000000u) ? static_cast<unsigned long long>(~u) : static_cast<unsigned long long>(u | 0x80000000u);
}
__device__ __forceinline__ float key_of_rank(unsigned long long r, float) {
  const unsigned u = static_cast<unsigned>(r);
  return __uint_as_float((u & 0x80000000u) ? (u & 0x7fffffffu) : ~u);
}
__device__ __forceinline__ float key_infinity(float) { return __uint_as_float(0x7f800000u); }
__device__ __forceinline__ unsigned long long key_rank(double k) {
  const unsigned long long u = static_cast<unsigned long long>(__double_as_longlong(k));
  return (u >> 63) ? ~u : (u | (1ull << 63));
}
__device__ __forceinline__ double key_of_rank(unsigned long long r, double) {
  return __longlong_as_double(static_cast<long long>((r >> 63) ? (r & ~(1ull << 63)) : ~r));
}
__device__ __forceinline__ double key_infinity(double) { return __longlong_as_double(0x7ff0000000000000LL); }

// The smallest key k with passes(k), for passes false and then true along the
// keys: -inf when every key passes, NaN when none does (a comparison
// `k >= edge` is then false for every key).
template <class Passes>
__device__ Key smallest_key(Passes passes) {
  const Key inf = key_infinity(Key(0));
  if (!passes(inf)) return inf - inf;  // NaN
  if (passes(-inf)) return -inf;
  unsigned long long lo = key_rank(-inf), hi = key_rank(inf);  // passes(lo) false, passes(hi) true
  while (hi - lo > 1) {
    const unsigned long long mid = lo + (hi - lo) / 2;
    if (passes(key_of_rank(mid, Key(0)))) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return key_of_rank(hi, Key(0));
}

// The key before first_fail, the smallest key that fails (as smallest_key
// gives it): the largest key that passes, +inf when none fails, NaN when
// every key does (a comparison `k <= edge` is then false for every key).
__device__ __forceinline__ Key key_before(Key first_fail) {
  const Key inf = key_infinity(Key(0));
  if (first_fail != first_fail) return inf;  // none fails
  if (first_fail == -inf) return inf - inf;   // every key fails: NaN
  return key_of_rank(key_rank(first_fail) - 1, Key(0));
}

constexpr Value THRESHOLD = static_cast<Value>(params::eps);
constexpr unsigned PASS = 0, FAIL = 1;  // the slots of a threshold's test

// The largest key whose value passes: with map non-decreasing and the test
// `value <= THRESHOLD`, exactly the keys up to it pass.
__shared__ Key twobs_last_pass;

// The smallest key whose value fails: -inf when every key fails, NaN when
// none does (a comparison `k >= edge` is then false for every key).
__device__ __forceinline__ Key find_first_fail() {
  return smallest_key([](Key twobs_k) { return !(twobs_map(twobs_k) <= THRESHOLD); });
}
__device__ __forceinline__ Key find_last_pass() { return key_before(find_first_fail()); }

// The slot of a key, from its value, which the key probe checks the rest against.
__device__ __forceinline__ unsigned value_slot(Key twobs_k) { return twobs_map(twobs_k) <= THRESHOLD ? PASS : FAIL; }

// The slot of a key, from the edge. A NaN key is tested on its value (map
// may send it anywhere).
__device__ __forceinline__ unsigned key_slot_fast(Key twobs_k, Key twobs_edge) { return twobs_k <= twobs_edge ? PASS : FAIL; }
__device__ __forceinline__ unsigned key_slot(Key twobs_k) {
  return twobs_k == twobs_k ? key_slot_fast(twobs_k, twobs_last_pass) : value_slot(twobs_k);
}
__device__ __forceinline__ unsigned key_edges() { return 1; }
__device__ __forceinline__ Key key_edge(unsigned) { return twobs_last_pass; }

__device__ __forceinline__ void prepare_contribution() {
  if (TWOBS_THREAD == 0) twobs_last_pass = find_last_pass();
}

// Whether the pair belongs to the output, tested on the key.
__device__ __forceinline__ bool passes(const Point& twobs_a, const Point& twobs_b) {
  return key_slot(twobs_key(twobs_a, twobs_b)) == PASS;
}

// What the key probe checks on every key.
__device__ __forceinline__ bool key_agrees(Key twobs_k) { return key_slot(twobs_k) == value_slot(twobs_k); }
// No estimate: nothing to measure.
__device__ __forceinline__ double key_estimate_error(Key) { return 0.0; }

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

  __device__ __forceinline__ explicit Tiles(unsigned char* smem) {
    x = reinterpret_cast<float*>(smem + 0);
    y = reinterpret_cast<float*>(smem + 1024);
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
    __syncthreads();
  }

  __device__ __forceinline__ Point at(unsigned j) const {
    Point p;
    p.x = x[j];
    p.y = y[j];
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
#pragma unroll
      for (unsigned k = 0; k < RUN; ++k) {
        Point p;
        p.x = run_x.v[k];
        p.y = run_y.v[k];
        f(j + k, p);
      }
    }
    for (; j < len; ++j) f(j, at(j));
  }
};

// ------------------------------------------------------------------ output stage: dob
// Direct output buffer (section 3.3.3), one page per warp: the warp appends
// its passing pairs to its page with one ballot, and takes a new page from the
// pool with one atomicAdd on next_page when the page is full.
//
// The pool may run out. Every pair belongs to a step of its block (one tile),
// and the steps of a block run in order, so a block that cannot get a page
// stops at the end of that step: it truncates the page it began the step with
// back to where the step began, records the step in resume[block] and raises
// overflow. Pages record the (block, step) that took them; the host keeps a
// page only if its step precedes its block's resume step, drains the pool and
// relaunches. Blocks then start at their resume step: no pair is lost or
// written twice.
constexpr unsigned PAGE = 512;  // pairs per page
constexpr unsigned NO_PAGE = 0xffffffffu;
constexpr unsigned DONE = 0xffffffffu;

struct Output {
  uint2* pool;            // num_pages x PAGE pairs (i, j)
  uint2* page_owner;      // (block, step) that took each page
  unsigned* page_fill;    // pairs used in each page, written when the warp leaves it
  unsigned* next_page;    // first free page: the global pointer
  unsigned num_pages;
  unsigned* resume;       // per block: first step to run; DONE when finished
  unsigned* overflow;     // set when any block stopped early
  unsigned a_offset, other_offset;
  unsigned page;          // this warp's page (the same in every lane)
  unsigned fill;          // pairs used in it
  unsigned step_page, step_fill, step;
  bool failed;            // this warp found the pool empty during the current step

  __device__ __forceinline__ Output(uint2* pool_, uint2* owner_, unsigned* fill_, unsigned* next_, unsigned pages_,
                                    unsigned* resume_, unsigned* overflow_, const Here& here)
      : pool(pool_), page_owner(owner_), page_fill(fill_), next_page(next_), num_pages(pages_), resume(resume_),
        overflow(overflow_), a_offset(here.a_offset), other_offset(here.other_offset), page(NO_PAGE), fill(0),
        step_page(NO_PAGE), step_fill(0), step(0), failed(false) {}

  // The launch's first step, or the block's resume point when it stopped
  // later (DONE skips the whole block); the read is the same in every thread.
  __device__ __forceinline__ unsigned first_step(unsigned from) const { return max(resume[blockIdx.x], from); }

  __device__ __forceinline__ void begin_step(unsigned s) {
    step = s;
    step_page = page;
    step_fill = fill;
  }

  // The pairs of every own point with tile point (j, q), one at a time.
  template <class Valid>
  __device__ __forceinline__ void offer(const Here& here, const Point (&own)[R], unsigned j, const Point& q,
                                        const Valid& valid) {
#pragma unroll
    for (unsigned r = 0; r < R; ++r) add(r, here.own(r), own[r], j, q, valid(r));
  }


  __device__ __forceinline__ void add(unsigned, unsigned i, const Point& own, unsigned j, const Point& q, bool valid) {
    const bool pass = passes(own, q);
    const bool hit = valid && pass;
    const unsigned mask = __ballot_sync(FULL_WARP, hit);
    if (mask == 0 || failed) return;  // the same in every lane
    const unsigned lane = threadIdx.x & 31;
    const unsigned rank = __popc(mask & ((1u << lane) - 1));
    const unsigned count = __popc(mask);
    const unsigned room = page == NO_PAGE ? 0 : PAGE - fill;
    unsigned fresh = NO_PAGE;
    if (count > room) {
      if (lane == 0) {
        fresh = atomicAdd(next_page, 1u);
        if (fresh < num_pages) page_owner[fresh] = make_uint2(blockIdx.x, step);
      }
      fresh = __shfl_sync(FULL_WARP, fresh, 0);
      if (fresh >= num_pages) {
        failed = true;  // the pairs of this step are dropped and redone on resume
        return;
      }
    }
    if (hit) {
      // One set visited once per unordered pair: report it as (min, max).
      const uint2 pair = !UNORDERED_PAIRS ? make_uint2(a_offset + i, other_offset + j)
                         : i < j          ? make_uint2(a_offset + i, a_offset + j)
                                          : make_uint2(a_offset + j, a_offset + i);
      const size_t slot = rank < room ? static_cast<size_t>(page) * PAGE + fill + rank
                                      : static_cast<size_t>(fresh) * PAGE + (rank - room);
      pool[slot] = pair;
    }
    if (count > room) {
      if (page != NO_PAGE && lane == 0) page_fill[page] = PAGE;
      page = fresh;
      fill = count - room;
    } else {
      fill += count;
    }
  }

  __device__ __forceinline__ bool end_step(unsigned s) {
    const bool stop = __syncthreads_or(failed);
    if (stop) {
      const unsigned lane = threadIdx.x & 31;
      if (lane == 0 && step_page != NO_PAGE) page_fill[step_page] = step_fill;
      if (threadIdx.x == 0) {
        resume[blockIdx.x] = s;
        atomicExch(overflow, 1u);
      }
    }
    return stop;
  }

  __device__ __forceinline__ void finish(const Here&) {
    if ((threadIdx.x & 31) == 0 && page != NO_PAGE) page_fill[page] = fill;
    if (threadIdx.x == 0) resume[blockIdx.x] = DONE;
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

// ------------------------------------------------------------------ kernel: lower_triangle
extern "C" __global__ void __launch_bounds__(B) twobs_selfjoin(
    const float* a_x,
    const float* a_y,
    unsigned n_a,
    unsigned a_offset,
    unsigned other_offset,
    unsigned step_first,
    unsigned step_end,
    uint2* pool,
    uint2* page_owner,
    unsigned* page_fill,
    unsigned* next_page,
    unsigned num_pages,
    unsigned* resume,
    unsigned* overflow) {
  extern __shared__ __align__(16) unsigned char smem[];
  const Set a = { a_x, a_y, n_a };
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
  Output out(pool, page_owner, page_fill, next_page, num_pages, resume, overflow, here);
  Tiles tiles(smem);
  [[maybe_unused]] const auto always = [](unsigned) { return true; };
  [[maybe_unused]] const auto own_valid = [&](unsigned r) { return here.valid(r); };
  [[maybe_unused]] const Offer offer{out, here, own};
  // Circulant pairing of spans of B x R points: block b meets the spans
  // b+1 .. b+M/2 (mod M), so every unordered pair of spans is visited once and
  // every block does the same work; the last step pairs the block's own points
  // with each other. A step loads the span's R tiles in turn.
  const unsigned span = B * R;
  const unsigned spans = (a.n + span - 1) / span;
  const unsigned offdiag = (spans - 1) / 2 + ((spans % 2 == 0 && block < spans / 2) ? 1 : 0);
  const unsigned steps = offdiag + 1;
  for (unsigned s = out.first_step(step_first); s < umin(steps, step_end); ++s) {
    out.begin_step(s);
    const bool diagonal = s == offdiag;
    const unsigned partner = diagonal ? block : (block + 1 + s) % spans;
#pragma unroll 1
    for (unsigned u = 0; u < R; ++u) {  // not unrolled: own[] is indexed by the unrolled r only
      const unsigned start = partner * span + u * B;
      if (start >= a.n) break;  // the same in every thread
      tiles.load(a, start);
      const unsigned len = umin(B, a.n - start);
      if (!diagonal) {
        if (all_own_valid && len == B) {
          tiles.for_each(B, [&](unsigned jl, const Point& q) { offer(start + jl, q, always); });
        } else {
          tiles.for_each(len, [&](unsigned jl, const Point& q) { offer(start + jl, q, own_valid); });
        }
      } else {
        // Own rows before u meet the whole tile, row u meets it by the diagonal
        // pattern, rows after u come later (the pair is met from their side).
        if (u > 0) {
          tiles.for_each(len, [&](unsigned jl, const Point& q) {
            offer(start + jl, q, [&](unsigned r) { return r < u && here.valid(r); });
          });
        }
        // Load-balanced pairing (section 3.4.1): thread t meets (t + d) % B for
        // d = 1..B/2; at d = B/2 only the lower half, so each pair is met once.
#pragma unroll
        for (unsigned r = 0; r < R; ++r) {
          if (r != u) continue;
#pragma unroll 4
          for (unsigned d = 1; d <= B / 2; ++d) {
            const unsigned jl = (t + d) & (B - 1);
            const bool valid = here.valid(r) && jl < len && (d < B / 2 || t < B / 2);
            out.add(r, here.own(r), own[r], start + jl, tiles.at(jl), valid);
          }
        }

      }
    }
    if (out.end_step(s)) return;  // output full: this block resumes at step s
  }

  out.finish(here);
}
}  // namespace twobs_generated
