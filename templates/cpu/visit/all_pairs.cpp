// Calls f(j, q) for every partner j != i of row i: every ordered pair.
template <class F>
static inline void for_partners(const TwobsSet* a, const TwobsSet*, uint64_t i, F&& f) {
  for (uint64_t j = 0; j < a->n; ++j) {
    if (j != i) f(j, load_point(a, j));
  }
}
{% include "cpu/visit/rows.cpp" %}
