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
constexpr unsigned PAGE = {{ stage.page_pairs }};  // pairs per page
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

{% include "output/offer_pairs.cu" %}

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
