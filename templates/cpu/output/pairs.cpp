// Writes the passing pairs of work items [begin, end) (rows, or grid units) as
// (i, j) while they fit `capacity`; returns how many there are.
extern "C" uint64_t twobs_rows(const TwobsSet* a, const TwobsSet* b, const TwobsGrid* grid, uint64_t begin,
                               uint64_t end, uint32_t* out, uint64_t capacity) {
  twobs_prepare();
  uint64_t m = 0;
  for_pairs(a, b, grid, begin, end, [&](uint64_t i, const Point& own, uint64_t j, const Point& q) {
    if (passes(own, q)) {
      if (m < capacity) {
        out[2 * m] = static_cast<uint32_t>(i);
        out[2 * m + 1] = static_cast<uint32_t>(j);
      }
      ++m;
    }
  });
  return m;
}
