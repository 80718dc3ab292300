// Writes the passing pairs of rows [begin, end) as (i, j) while they fit
// `capacity`; returns how many there are.
extern "C" uint64_t twobs_rows(const TwobsSet* a, const TwobsSet* b, uint64_t begin, uint64_t end, uint32_t* out,
                               uint64_t capacity) {
  twobs_prepare();
  uint64_t m = 0;
  for (uint64_t i = begin; i < end; ++i) {
    const Point own = load_point(a, i);
    for_partners(a, b, i, [&](uint64_t j, const Point& q) {
      if (passes(own, q)) {
        if (m < capacity) {
          out[2 * m] = static_cast<uint32_t>(i);
          out[2 * m + 1] = static_cast<uint32_t>(j);
        }
        ++m;
      }
    });
  }
  return m;
}
