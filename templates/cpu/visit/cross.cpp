// Calls f(j, q) for every point j of the other set.
template <class F>
static inline void for_partners(const TwobsSet*, const TwobsSet* b, uint64_t i, F&& f) {
  (void)i;
  for (uint64_t j = 0; j < b->n; ++j) f(j, load_point(b, j));
}
// Calls f(lo, hi) for the run of those partners: the whole other set.
template <class F>
static inline void partner_runs(const TwobsSet*, const TwobsSet* b, uint64_t, F&& f) {
  f(0, b->n);
}
{% include "cpu/visit/rows.cpp" %}
