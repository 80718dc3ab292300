// A bucket from the bits of an f32 (src/stage/bucket_table.rs): u, x's bits
// counted from the first threshold's, names a cell of 2^SHIFT bit patterns
// that holds one threshold at most (u >> SHIFT), and the cell's entry,
// ((class - 1) << SHIFT) plus where in the cell its threshold lies, less the
// cell's own start, gives the class with one add: u's low bits carry into it
// exactly where they reach the threshold's. Everything outside the cells
// (below the first threshold, which wraps, past the last's cell, negative,
// infinite, NaN) is clamped to the last entry, which sums to NONE. Each lane
// reads its own copy of the table (copy lane % COPIES, cell-major), so the
// lanes of a warp never meet in a bank. One shared load, no branch.
#ifndef TWOBS_BUCKET_TABLE
#define TWOBS_BUCKET_TABLE
//
// `shift` and `stride` are SHIFT and COPIES x 4 read from constant memory
// (the caller's __constant__ copies): as literals, ptxas folds the two
// shifts into the neighbouring multiplies as shift-and-mask pairs (the
// cell's address, the output's slot address), an instruction more each.
template <unsigned SHIFT, unsigned ORIGIN, unsigned CELLS, unsigned COPIES>
__device__ __forceinline__ unsigned table_slot(const unsigned* twobs_table, float twobs_x, unsigned twobs_shift,
                                               unsigned twobs_stride) {
  const unsigned twobs_u = min(__float_as_uint(twobs_x) - ORIGIN, CELLS << SHIFT);  // one add-and-min
#ifdef __CUDA_ARCH__
  // The shared address of this lane's copy (loop-invariant) plus the cell's
  // offset: a shift and one multiply-add.
  const unsigned twobs_mine = static_cast<unsigned>(__cvta_generic_to_shared(twobs_table + threadIdx.x % COPIES));
  unsigned twobs_entry;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(twobs_entry) : "r"(twobs_mine + (twobs_u >> twobs_shift) * twobs_stride));
  return (twobs_entry + twobs_u) >> twobs_shift;
#else
  (void)twobs_shift, (void)twobs_stride;
  return (twobs_table[(twobs_u >> SHIFT) * COPIES] + twobs_u) >> SHIFT;
#endif
}

// Copies the table's entries into shared memory, each entry COPIES times.
template <unsigned CELLS, unsigned COPIES>
__device__ __forceinline__ void prepare_table(unsigned* twobs_shared, const unsigned* twobs_entries) {
  for (unsigned twobs_j = TWOBS_THREAD; twobs_j < (CELLS + 1) * COPIES; twobs_j += TWOBS_THREADS) {
    twobs_shared[twobs_j] = twobs_entries[twobs_j / COPIES];
  }
}
#endif
