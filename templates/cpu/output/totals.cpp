// Adds the contributions of rows [begin, end) into totals[SLOTS].
extern "C" void twobs_rows(const TwobsSet* a, const TwobsSet* b, uint64_t begin, uint64_t end, Total* totals) {
  twobs_prepare();
  for (uint64_t i = begin; i < end; ++i) {
    const Point own = load_point(a, i);
    for_partners(a, b, i, [&](uint64_t, const Point& q) {
      const Contribution c = contribute(own, q);
      if (c.slot < SLOTS) totals[c.slot] += c.amount;
    });
  }
}
