// The grid: work item u is unit u, a run of set A's points in cell order, met
// with the other set's points (in cell order too) in the unit's ranges, the
// runs of the cells next to its own.
struct TwobsGrid {
  const uint32_t* units;   // 4 per unit: own points [lo, hi), its ranges [first, end)
  const uint32_t* ranges;  // 2 per range: sorted points [lo, hi)
  const uint32_t* perm_a;  // input index of each sorted point of A
  const uint32_t* perm_b;  // and of the other set
};
// One set, each unordered pair once: a unit's first range is its own row,
// where own point i meets only the points after it.
constexpr bool TWOBS_DIAGONAL = {{ stage.diagonal }};
// One set, every ordered pair: a point is not its own partner.
constexpr bool TWOBS_SKIP_SELF = {{ stage.skip_self }};

// The input index of sorted point i of set A, and of sorted point j of the other set.
static inline uint64_t input_index_a(const TwobsGrid* g, uint64_t i) { return g->perm_a[i]; }
static inline uint64_t input_index_b(const TwobsGrid* g, uint64_t j) { return g->perm_b[j]; }

// Calls f(i, own, lo, hi) for the pairs of work items [begin, end), as runs
// [lo, hi) of consecutive partners j of own point i (i and j the points' places
// in cell order; input_index_* names them): a loop over a run can be vectorised.
template <class F>
static inline void for_runs(const TwobsSet* a, const TwobsSet*, const TwobsGrid* g, uint64_t begin, uint64_t end,
                            F&& f) {
  for (uint64_t u = begin; u < end; ++u) {
    const uint32_t* unit = g->units + 4 * u;
    for (uint64_t i = unit[0]; i < unit[1]; ++i) {
      const Point own = load_point(a, i);
      for (uint32_t r = unit[2]; r < unit[3]; ++r) {
        const uint64_t lo = TWOBS_DIAGONAL && r == unit[2] ? i + 1 : g->ranges[2 * r];
        const uint64_t hi = g->ranges[2 * r + 1];
        if (TWOBS_SKIP_SELF && lo <= i && i < hi) {
          f(i, own, lo, i);
          f(i, own, i + 1, hi);
        } else if (lo < hi) {
          f(i, own, lo, hi);
        }
      }
    }
  }
}
// Calls f(i, own, j, q) for the same pairs as for_runs, one at a time.
template <class F>
static inline void for_pairs(const TwobsSet* a, const TwobsSet* b, const TwobsGrid* g, uint64_t begin, uint64_t end,
                             F&& f) {
  for_runs(a, b, g, begin, end, [&](uint64_t i, const Point& own, uint64_t lo, uint64_t hi) {
    for (uint64_t j = lo; j < hi; ++j) f(i, own, j, load_point(b, j));
  });
}
