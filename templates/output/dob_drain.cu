// Drains the direct output buffer at bus speed: packs the pairs of the pages
// the host keeps into one array, so that only the pairs cross the bus (a page
// holds PAGE pairs, and a warp that finds one pair takes a whole page).
// A page is kept where its step precedes its block's resume point (the block
// finished, or stopped later); one warp copies one page, coalesced.
// The pool's pairs are (i, j) words; one kernel serves every problem. A
// grid's kernel names points in cell order: with perm_a (not null), i and j
// are mapped back to the input's indices through perm_a and perm_b, and with
// `unordered` each pair is then written as (min, max).
extern "C" __global__ void twobs_dob_drain(const uint2* pool, const uint2* page_owner, const unsigned* page_fill,
                                           const unsigned* next_page, unsigned num_pages, unsigned page_pairs,
                                           const unsigned* resume, const unsigned* perm_a, const unsigned* perm_b,
                                           unsigned unordered, uint2* packed, unsigned long long* packed_count) {
  constexpr unsigned DONE = 0xffffffffu;
  const unsigned page = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const unsigned lane = threadIdx.x & 31;
  const unsigned used = min(*next_page, num_pages);
  if (page >= used) return;  // the same in every lane of the warp
  const uint2 owner = page_owner[page];  // (block, step)
  const unsigned stop = resume[owner.x];
  if (stop != DONE && owner.y >= stop) return;  // its step runs again on resume
  const unsigned n = min(page_fill[page], page_pairs);
  if (n == 0) return;
  // A pool may hold 2^32 pairs or more: count and place them in 64 bits.
  unsigned long long base = 0;
  if (lane == 0) base = atomicAdd(packed_count, static_cast<unsigned long long>(n));
  base = __shfl_sync(0xffffffffu, base, 0);
  const uint2* from = pool + static_cast<size_t>(page) * page_pairs;
  for (unsigned e = lane; e < n; e += 32) {
    uint2 pair = from[e];
    if (perm_a != nullptr) {
      pair = make_uint2(perm_a[pair.x], perm_b[pair.y]);
      if (unordered && pair.x > pair.y) pair = make_uint2(pair.y, pair.x);
    }
    packed[base + e] = pair;
  }
}
