// Calls f(j, q) for every partner j > i of row i: each unordered pair once.
template <class F>
static inline void for_partners(const TwobsSet* a, const TwobsSet*, uint64_t i, F&& f) {
  for (uint64_t j = i + 1; j < a->n; ++j) f(j, load_point(a, j));
}
// Calls f(lo, hi) for the run of those partners: [i + 1, n).
template <class F>
static inline void partner_runs(const TwobsSet* a, const TwobsSet*, uint64_t i, F&& f) {
  f(i + 1, a->n);
}
{% include "cpu/visit/rows.cpp" %}
