// twobs kernel: nlj (problems/nlj.xml)
// Band join: the row pairs (a, b) of two tables whose integer keys differ by at most d
//
// Input: two sets (A x B), element record { key: i32 }; pair function `key_gap` from problems/nlj.cu
// Output: pairs with value <= d = 0
// Parameters: d = 0
// Device: h100 (profile, sm_90): 132 SMs, 233472 B shared/SM, 232448 B shared/block (opt-in), 2048 threads and 32 blocks per SM
//
// plan for nlj on h100: 1000000 x 1000000 points, 1000000000000 pairs (cross)
//   visit         cross           two sets: every (a, b)
//   output class  TypeIII         output unknown in advance: above beta = 232448 B or unknown
//   test          values          the spec declares no key map: each pair's value is tested
//   output        dob             Type-III: pages of 512 pairs taken with one atomicAdd each
//   input_cache   register_shm    tiles in shared memory: the lowest-latency cache, free for input since the output is not there
//   block_size    256             a tile of 256 points amortizes each barrier without large per-block output state
//   points/thread 1               one own point per thread (~32 registers): more measured no faster while the pair arithmetic, not the loads, bounds the loop
//   resources                     grid 3907 blocks; 1024 B shared per block (1024 B tile + 0 B output + 0 B key test); ~32 registers per thread (estimate)
//   occupancy                     8 blocks = 2048 threads per multiprocessor (limited by Threads); R = 4 rounds
//   page_size     512             512 pairs of 2 x u32 per page; the runner sizes the pool
//
// Launch: 3907 blocks of 256 threads, 1024 B dynamic shared memory.
// Compile: NVRTC --std=c++17 --fmad=false --gpu-architecture=sm_90
// Regenerate: twobs gen problems/nlj.xml --device h100
// ------------------------------------------------------------------ types
struct Point {
  int key;
};
typedef long long Value;

// A periodic box (a parameter of type="box"): edge vectors (lx, 0, 0),
// (xy ly, ly, 0), (xz lz, yz lz, lz), tilt factors as in HOOMD and freud;
// lx == 0 for open boundaries.
template <typename T>
struct PeriodicBox {
  T lx, ly, lz, xy, xz, yz;
};

// Parameters are compile-time constants: the runner recompiles when they change.
namespace params {
[[maybe_unused]] constexpr int d = 0;
}  // namespace params

// ------------------------------------------------------------------ the pairwise function
#line 1 "problems/nlj.cu"
// |a.key - b.key| in 64 bits, so that no pair of int keys overflows.
__device__ long long key_gap(Point a, Point b) {
  const long long gap = static_cast<long long>(a.key) - static_cast<long long>(b.key);
  return gap < 0 ? -gap : gap;
}
#line 2 "problems/nlj.cu"
__device__ __forceinline__ Value twobs_pair(const Point& twobs_a, const Point& twobs_b) { return key_gap(twobs_a, twobs_b); }
#line 53 "nlj.cu"
// The calls into the snippet above are rendered at the lines of the functions
// they call, so that a parameter or return type that does not fit is reported there.

// Everything twobs defines after the snippet lives in its own namespace, so
// that no name of the user's can clash with it.
namespace twobs_generated {
// ------------------------------------------------------------------ launch shape
constexpr unsigned B = 256;  // threads per block = points per tile
constexpr unsigned R = 1;  // own points per thread: each tile point serves R pairs
[[maybe_unused]] constexpr unsigned TILE_BYTES = 1024;  // the input tile's shared memory; the output's follows
[[maybe_unused]] constexpr bool UNORDERED_PAIRS = false;  // a pair is (min, max), not (own, other)
[[maybe_unused]] constexpr unsigned FULL_WARP = 0xffffffffu;
#define TWOBS_THREAD threadIdx.x  // fragments that set up shared state split it over the block
#define TWOBS_THREADS B

__device__ __forceinline__ unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }

// A point set: one array per component (SoA), each padded to a multiple of
// 1024 elements so that whole tiles and 16-byte loads stay in bounds.
struct Set {
  const int* key;
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
  p.key = s.key[i];
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
constexpr Value THRESHOLD = static_cast<Value>(params::d);

// Whether the pair belongs to the output.
__device__ __forceinline__ bool passes(const Point& twobs_a, const Point& twobs_b) {
  return twobs_pair(twobs_a, twobs_b) <= THRESHOLD;
}

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
  int* key;

  __device__ __forceinline__ explicit Tiles(unsigned char* smem) {
    key = reinterpret_cast<int*>(smem + 0);
  }

  __device__ __forceinline__ static void copy16(const void* from, void* to, unsigned bytes) {
    const uint4* src = static_cast<const uint4*>(from);
    uint4* dst = static_cast<uint4*>(to);
    for (unsigned k = threadIdx.x; k < bytes / 16; k += B) dst[k] = src[k];
  }

  __device__ __forceinline__ void load(const Set& s, unsigned start) {
    __syncthreads();  // everyone is done with the previous tile
    copy16(s.key + start, key, B * sizeof(int));
    __syncthreads();
  }

  __device__ __forceinline__ Point at(unsigned j) const {
    Point p;
    p.key = key[j];
    return p;
  }

  template <class F>
  __device__ __forceinline__ void for_each(unsigned len, F&& f) const {
    unsigned j = 0;
    // Unrolled a little (Tallying::tile_runs_unrolled): a full tile of a constant length would otherwise unroll whole.
#pragma unroll 2
    for (; j + RUN <= len; j += RUN) {
      const Run<int> run_key = *reinterpret_cast<const Run<int>*>(key + j);
#pragma unroll
      for (unsigned k = 0; k < RUN; ++k) {
        Point p;
        p.key = run_key.v[k];
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

// ------------------------------------------------------------------ kernel: cross
extern "C" __global__ void __launch_bounds__(B) twobs_nlj(
    const int* a_key,
    unsigned n_a,
    const int* b_key,
    unsigned n_b,
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
  const Set a = { a_key, n_a };
  const Set other = { b_key, n_b };
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
  // Every block walks all tiles of the other set, starting at its own so that
  // blocks spread over memory.
  const unsigned tiles_total = (other.n + B - 1) / B;
  for (unsigned s = out.first_step(step_first); s < umin(tiles_total, step_end); ++s) {
    out.begin_step(s);
    const unsigned tile = (block * R + s) % tiles_total;
    tiles.load(other, tile * B);
    const unsigned len = umin(B, other.n - tile * B);
    if (all_own_valid && len == B) {
      tiles.for_each(B, [&](unsigned jl, const Point& q) { offer(tile * B + jl, q, always); });
    } else {
      tiles.for_each(len, [&](unsigned jl, const Point& q) { offer(tile * B + jl, q, own_valid); });
    }
    if (out.end_step(s)) return;  // output full: this block resumes at step s
  }

  out.finish(here);
}
}  // namespace twobs_generated
