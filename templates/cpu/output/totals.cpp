// Whether the pair adds anything to the totals (the promise check).
static inline bool twobs_adds(const Point& own, const Point& q) {
  const Contribution c = contribute(own, q);
  return c.slot < SLOTS && c.amount != 0;
}

// Adds the contributions of work items [begin, end) (rows, or grid units) into totals[SLOTS].
extern "C" void twobs_rows(const TwobsSet* a, const TwobsSet* b, const TwobsGrid* grid, uint64_t begin, uint64_t end,
                           Total* totals) {
  twobs_prepare();
  for_pairs(a, b, grid, begin, end, [&](uint64_t, const Point& own, uint64_t, const Point& q) {
    const Contribution c = contribute(own, q);
    if (c.slot < SLOTS) totals[c.slot] += c.amount;
  });
}
