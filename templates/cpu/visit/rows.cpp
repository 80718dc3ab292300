// Brute force: work item i is row i of set A, met with each of its partners.
struct TwobsGrid;
static inline uint64_t input_index_a(const TwobsGrid*, uint64_t i) { return i; }
static inline uint64_t input_index_b(const TwobsGrid*, uint64_t j) { return j; }
template <class F>
static inline void for_pairs(const TwobsSet* a, const TwobsSet* b, const TwobsGrid*, uint64_t begin, uint64_t end,
                             F&& f) {
  for (uint64_t i = begin; i < end; ++i) {
    const Point own = load_point(a, i);
    for_partners(a, b, i, [&](uint64_t j, const Point& q) { f(i, own, j, q); });
  }
}
// The same pairs as runs [lo, hi) of consecutive partners of own point i.
template <class F>
static inline void for_runs(const TwobsSet* a, const TwobsSet* b, const TwobsGrid*, uint64_t begin, uint64_t end,
                            F&& f) {
  for (uint64_t i = begin; i < end; ++i) {
    const Point own = load_point(a, i);
    partner_runs(a, b, i, [&](uint64_t lo, uint64_t hi) {
      if (lo < hi) f(i, own, lo, hi);
    });
  }
}
