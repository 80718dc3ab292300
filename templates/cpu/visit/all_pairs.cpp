// Calls f(j, q) for every partner j != i of row i: every ordered pair.
template <class F>
static inline void for_partners(const TwobsSet* a, const TwobsSet*, uint64_t i, F&& f) {
  for (uint64_t j = 0; j < a->n; ++j) {
    if (j != i) f(j, load_point(a, j));
  }
}
// Calls f(lo, hi) for the runs of those partners: [0, i) and [i + 1, n).
template <class F>
static inline void partner_runs(const TwobsSet* a, const TwobsSet*, uint64_t i, F&& f) {
  f(0, i);
  f(i + 1, a->n);
}
{% include "cpu/visit/rows.cpp" %}
