// A bucket from the bits of an f32 (src/stage/bucket_table.rs): the top bits
// of x (its exponent and a few mantissa bits) name a cell of the bit patterns
// that holds one threshold at most, and the cell's entry, ((class - 1) <<
// SHIFT) plus where in the cell its threshold lies, gives the class with one
// add: x's low bits carry into it exactly where they reach the threshold's.
// Everything outside the cells (below the first threshold's cell, past the
// last's, negative, infinite, NaN) meets the last entry, NONE << SHIFT. Each
// lane reads its own copy of the table (copy lane % COPIES, cell-major), so
// the lanes of a warp never meet in a bank. One shared load, no branch.
#ifndef TWOBS_BUCKET_TABLE
#define TWOBS_BUCKET_TABLE
template <unsigned SHIFT, unsigned BASE, unsigned CELLS, unsigned COPIES, unsigned NONE>
__device__ __forceinline__ unsigned table_slot(const unsigned* twobs_table, float twobs_x) {
  const unsigned twobs_bits = __float_as_uint(twobs_x);
  const unsigned twobs_cell = min((twobs_bits >> SHIFT) - BASE, CELLS);  // below BASE wraps past CELLS
  const unsigned twobs_entry = twobs_table[twobs_cell * COPIES + TWOBS_THREAD % COPIES];
  return min((twobs_entry + (twobs_bits & ((1u << SHIFT) - 1u))) >> SHIFT, NONE);
}

// Copies the table's entries into shared memory, each entry COPIES times.
template <unsigned CELLS, unsigned COPIES>
__device__ __forceinline__ void prepare_table(unsigned* twobs_shared, const unsigned* twobs_entries) {
  for (unsigned twobs_j = TWOBS_THREAD; twobs_j < (CELLS + 1) * COPIES; twobs_j += TWOBS_THREADS) {
    twobs_shared[twobs_j] = twobs_entries[twobs_j / COPIES];
  }
}
#endif
