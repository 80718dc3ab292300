// Writes the K best of each row of [begin, end) to values and ids, row i at (i - begin) * K.
// KNN has no cutoff, so no grid: rows of brute force only.
extern "C" void twobs_rows(const TwobsSet* a, const TwobsSet* b, const TwobsGrid*, uint64_t begin, uint64_t end,
                           double* values, uint32_t* ids) {
  twobs_prepare();
  for (uint64_t i = begin; i < end; ++i) {
    const Point own = load_point(a, i);
    TopK top;
    for_partners(a, b, i, [&](uint64_t j, const Point& q) { top.offer(twobs_pair(own, q), static_cast<unsigned>(j)); });
    for (unsigned k = 0; k < K; ++k) {
      values[(i - begin) * K + k] = static_cast<double>(top.best[k]);
      ids[(i - begin) * K + k] = top.index[k];
    }
  }
}
