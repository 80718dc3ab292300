// Whether the pair adds anything to the totals (the promise check).
static inline bool twobs_adds(const Point& own, const Point& q) {
  const Contribution c = contribute(own, q);
  return c.slot < SLOTS && c.amount != 0;
}
{%- if stage.key_edges %}
{% include "contribution/keys.cu" %}
// Buckets from keys (src/backend/cpu.rs, KeyEdges): the value is map(key),
// map non-decreasing (the spec's promise, which the promise check tests), and
// the bucket of a value non-decreasing from the lowest edge on, so each
// bucket is a run of keys. KEY_EDGES[j] is the smallest key whose value is at
// or past bucket j's lower edge (KEY_EDGES[SLOTS]: past the last bucket),
// found by bisection with this driver's own map and bucket_of: a key's bucket
// is the number of edges it reaches, less one, exactly the bucket of its value.
// NaN edges (no key reaches them) are reached by no key; NaN keys are tested
// on their values.
static inline bool at_or_past(Value v, unsigned j) {
  const unsigned s = bucket_of(v);
  if (s < SLOTS) return s >= j;
  // No bucket: past the last one, or below the first (or NaN).
  return v >= {% if stage.log %}twobs_bucket_edges[0]{% else %}LO{% endif %};
}
static Key KEY_EDGES[SLOTS + 1];
static inline void prepare_key_edges() {
  for (unsigned j = 0; j <= SLOTS; ++j) {
    KEY_EDGES[j] = smallest_key([j](Key k) { return at_or_past(twobs_map(k), j); });
  }
}
// The bucket of key k, known to reach edge 0 and not edge SLOTS: the edges
// k reaches are a prefix, bisected in a fixed number of steps without a
// branch (conditional moves: a bucket's keys come in no order to predict).
static inline unsigned slot_of_key(Key k) {
  unsigned lo = 0;  // k reaches KEY_EDGES[lo]; its bucket is in [lo, lo + len)
  for (unsigned len = SLOTS; len > 1;) {
    const unsigned half = len / 2;
    lo = k >= KEY_EDGES[lo + half] ? lo + half : lo;
    len -= half;
  }
  return lo;
}
// The buckets of keys k[0..n), each known to reach edge 0 and not edge
// SLOTS (NaN keys get some bucket, which the caller does not use). Up to 128
// buckets, each key's count of the edges it reaches, edge by edge over all
// keys at once (a vectorised loop, about SLOTS / 16 instructions a key);
// beyond, a bisection each.
static inline void slots_of_keys(const Key* k, unsigned n, unsigned* slot) {
  if (SLOTS <= 128) {
    for (unsigned u = 0; u < n; ++u) slot[u] = 0;
    for (unsigned j = 1; j < SLOTS; ++j) {
      const Key edge = KEY_EDGES[j];
      for (unsigned u = 0; u < n; ++u) slot[u] += k[u] >= edge;
    }
  } else {
    for (unsigned u = 0; u < n; ++u) slot[u] = slot_of_key(k[u]);
  }
}

// Adds the contributions of work items [begin, end) (rows, or grid units)
// into totals[SLOTS]: each run of partners' keys in blocks (a loop the
// compiler vectorises), then the few in a bucket counted.
extern "C" void twobs_rows(const TwobsSet* a, const TwobsSet* b, const TwobsGrid* grid, uint64_t begin, uint64_t end,
                           Total* totals) {
  twobs_prepare();
  {
    static std::once_flag once;  // the edges are computed once, before any thread reads them
    std::call_once(once, [] { prepare_key_edges(); });
  }
  const Key first = KEY_EDGES[0], past = KEY_EDGES[SLOTS];
  const TwobsColumns partners = columns_of(b);
  for_runs(a, b, grid, begin, end, [&](uint64_t, const Point& own, uint64_t lo, uint64_t hi) {
    constexpr uint64_t BLOCK = 64;
    Key k[BLOCK];
    for (uint64_t j0 = lo; j0 < hi; j0 += BLOCK) {
      const uint64_t m = std::min(BLOCK, hi - j0);
      for (uint64_t t = 0; t < m; ++t) k[t] = twobs_key(own, load_point(partners, j0 + t));
      // The keys within the range (and NaN ones), marked in a vectorised
      // loop and gathered without a branch: most keys a grid visits lie past
      // the last bucket, in no order a branch could predict.
      uint8_t hit[BLOCK];
      for (uint64_t t = 0; t < m; ++t) hit[t] = (k[t] >= first) & !(k[t] >= past) | (k[t] != k[t]);
      unsigned kept[BLOCK], n = 0;
      Key within[BLOCK];
      for (unsigned t = 0; t < m; ++t) {
        kept[n] = t;
        within[n] = k[t];
        n += hit[t];
      }
      unsigned slot[BLOCK];
      slots_of_keys(within, n, slot);
      for (unsigned u = 0; u < n; ++u) {
        if (within[u] == within[u]) {
          totals[slot[u]] += 1;
        } else {
          const Contribution c = contribute(own, load_point(b, j0 + kept[u]));
          if (c.slot < SLOTS) totals[c.slot] += c.amount;
        }
      }
    }
  });
}
{%- else %}

// Adds the contributions of work items [begin, end) (rows, or grid units) into totals[SLOTS].
extern "C" void twobs_rows(const TwobsSet* a, const TwobsSet* b, const TwobsGrid* grid, uint64_t begin, uint64_t end,
                           Total* totals) {
  twobs_prepare();
  for_pairs(a, b, grid, begin, end, [&](uint64_t, const Point& own, uint64_t, const Point& q) {
    const Contribution c = contribute(own, q);
    if (c.slot < SLOTS) totals[c.slot] += c.amount;
  });
}
{%- endif %}
