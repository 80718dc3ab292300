// Whether the pair belongs to the output (the promise check).
static inline bool twobs_adds(const Point& own, const Point& q) { return passes(own, q); }

// Writes the passing pairs of work items [begin, end) (rows, or grid units) as
// (i, j) while they fit `capacity`; returns how many there are.
extern "C" uint64_t twobs_rows(const TwobsSet* a, const TwobsSet* b, const TwobsGrid* grid, uint64_t begin,
                               uint64_t end, uint32_t* out, uint64_t capacity) {
  twobs_prepare();
  uint64_t m = 0;
  for_pairs(a, b, grid, begin, end, [&](uint64_t i, const Point& own, uint64_t j, const Point& q) {
    if (passes(own, q)) {
      if (m < capacity) {
        uint64_t first = input_index_a(grid, i), second = input_index_b(grid, j);
        // One set, each pair once, as (min, max).
        if (TWOBS_UNORDERED && first > second) std::swap(first, second);
        out[2 * m] = static_cast<uint32_t>(first);
        out[2 * m + 1] = static_cast<uint32_t>(second);
      }
      ++m;
    }
  });
  return m;
}
