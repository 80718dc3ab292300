// A KNN list takes every pair: its promise is on values (the promise check).
static inline bool twobs_adds(const Point&, const Point&) { return true; }

// Writes the K best of each row of [begin, end) to values and ids, row i at (i - begin) * K.
{%- if stage.rings %}
// On a grid the rows are A's points in cell order, each searching its rings;
// a neighbour is named by its input index, which also breaks ties as brute
// force does.
{%- endif %}
extern "C" void twobs_rows(const TwobsSet* a, const TwobsSet* b, const TwobsGrid* g, uint64_t begin, uint64_t end,
                           Value* values, uint32_t* ids) {
  twobs_prepare();
  for (uint64_t i = begin; i < end; ++i) {
    const Point own = load_point(a, i);
    TopK top;
{%- if stage.rings %}
    for_rings(
        b, g, i,
        [&](uint64_t j, const Point& q) {
          top.offer(twobs_pair(own, q), static_cast<unsigned>(input_index_b(g, j)));
        },
        [&](double reach) { return static_cast<double>(top.best[K - 1]) < reach; });
{%- else %}
    (void)g;
    for_partners(a, b, i, [&](uint64_t j, const Point& q) { top.offer(twobs_pair(own, q), static_cast<unsigned>(j)); });
{%- endif %}
    for (unsigned k = 0; k < K; ++k) {
      values[(i - begin) * K + k] = top.best[k];
      ids[(i - begin) * K + k] = top.index[k];
    }
  }
}
