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
// Up to this many buckets, keys are counted edge by edge (count_reaching);
// beyond, each key's bucket is bisected and counted.
constexpr bool TWOBS_EDGE_BY_EDGE = SLOTS <= 128;

// Adds keys k[0..n), each known to reach edge 0 and not edge SLOTS, to their
// buckets, edge by edge: reached[j], the keys that reach edge j, is one
// vectorised loop over all keys (a comparison and a subtraction a 16 keys),
// and bucket j holds reached[j] - reached[j + 1]. The edges a key reaches
// are a prefix (bucket j's keys reach every edge up to j and none after:
// KEY_EDGES never decreases, and the NaN edges no key reaches come last),
// so that is the bucket each key would be counted in one by one. k has
// room for 16 keys past n: NaN keys there, which reach no edge, make the
// loops whole vectors (a scalar remainder per edge cost more than the rest).
template <class K>
static inline void count_reaching(K* k, unsigned n, Total* totals) {
  const unsigned whole = (n + 15) & ~15u;
  for (unsigned u = n; u < whole; ++u) k[u] = std::numeric_limits<K>::quiet_NaN();
  Total reached[SLOTS + 1];
  reached[0] = n;
  reached[SLOTS] = 0;
  for (unsigned j = 1; j < SLOTS; ++j) {
    const K edge = KEY_EDGES[j];
    unsigned m = 0;
    for (unsigned u = 0; u < whole; u += 16) {
      for (unsigned v = 0; v < 16; ++v) m += k[u + v] >= edge;
    }
    reached[j] = m;
  }
  for (unsigned j = 0; j < SLOTS; ++j) totals[j] += reached[j] - reached[j + 1];
}
#if defined(__AVX512F__)
// The same for f32 keys, written out: each 16 keys are loaded once and
// compared with a group of edges (ordered, as >=: a NaN key or edge reaches
// nothing), each comparison's mask adding 1 to the lanes of that edge's
// count in a register; the lanes are summed at the end. The compiler's own
// vectorisation of the loop above spread the edges over lanes and left a
// scalar loop per edge (half the driver's time on DD(r), perf).
static inline void count_reaching(float* k, unsigned n, Total* totals) {
  const unsigned whole = (n + 15) & ~15u;
  for (unsigned u = n; u < whole; ++u) k[u] = std::numeric_limits<float>::quiet_NaN();
  Total reached[SLOTS + 1];
  reached[0] = n;
  reached[SLOTS] = 0;
  // Edges 1 .. SLOTS - 1, in groups whose counts fit the 32 registers.
  constexpr unsigned GROUP = SLOTS - 1 <= 24 ? (SLOTS > 1 ? SLOTS - 1 : 1) : 16;
  const __m512i one = _mm512_set1_epi32(1);
  for (unsigned j0 = 1; j0 < SLOTS; j0 += GROUP) {
    __m512i count[GROUP];
#pragma GCC unroll 32
    for (unsigned g = 0; g < GROUP; ++g) count[g] = _mm512_setzero_si512();
    for (unsigned u = 0; u < whole; u += 16) {
      const __m512 v = _mm512_loadu_ps(k + u);
#pragma GCC unroll 32
      for (unsigned g = 0; g < GROUP; ++g) {
        if (j0 + g < SLOTS) {
          const __mmask16 reach = _mm512_cmp_ps_mask(v, _mm512_set1_ps(KEY_EDGES[j0 + g]), _CMP_GE_OQ);
          count[g] = _mm512_mask_add_epi32(count[g], reach, count[g], one);
        }
      }
    }
    for (unsigned g = 0; g < GROUP && j0 + g < SLOTS; ++g) reached[j0 + g] = static_cast<unsigned>(_mm512_reduce_add_epi32(count[g]));
  }
  for (unsigned j = 0; j < SLOTS; ++j) totals[j] += reached[j] - reached[j + 1];
}
#elif defined(__AVX2__)
// The same with AVX2 (8 keys a vector): each 8 keys loaded once and compared
// with a group of 12 edges (ordered, as >=), each comparison's all-ones
// lanes subtracted from that edge's count (-1 per key that reaches it); the
// lanes summed at the end. A lane counts at most a pending batch's keys / 8.
// The generic loop above, as the compiler vectorises it, took 3-4 times as
// long on DD(r) of 20 log buckets (an AMD EPYC without AVX-512).
static inline void count_reaching(float* k, unsigned n, Total* totals) {
  const unsigned whole = (n + 7) & ~7u;
  for (unsigned u = n; u < whole; ++u) k[u] = std::numeric_limits<float>::quiet_NaN();
  Total reached[SLOTS + 1];
  reached[0] = n;
  reached[SLOTS] = 0;
  // Edges 1 .. SLOTS - 1, in groups whose counts, the key and an edge fit the 16 registers.
  constexpr unsigned GROUP = SLOTS - 1 <= 12 ? (SLOTS > 1 ? SLOTS - 1 : 1) : 12;
  for (unsigned j0 = 1; j0 < SLOTS; j0 += GROUP) {
    __m256i count[GROUP];
#pragma GCC unroll 16
    for (unsigned g = 0; g < GROUP; ++g) count[g] = _mm256_setzero_si256();
    for (unsigned u = 0; u < whole; u += 8) {
      const __m256 v = _mm256_loadu_ps(k + u);
#pragma GCC unroll 16
      for (unsigned g = 0; g < GROUP; ++g) {
        if (j0 + g < SLOTS) {
          const __m256 reach = _mm256_cmp_ps(v, _mm256_set1_ps(KEY_EDGES[j0 + g]), _CMP_GE_OQ);
          count[g] = _mm256_sub_epi32(count[g], _mm256_castps_si256(reach));
        }
      }
    }
    for (unsigned g = 0; g < GROUP && j0 + g < SLOTS; ++g) {
      __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(count[g]), _mm256_extracti128_si256(count[g], 1));
      sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0x4e));
      sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0xb1));
      reached[j0 + g] = static_cast<unsigned>(_mm_cvtsi128_si32(sum));
    }
  }
  for (unsigned j = 0; j < SLOTS; ++j) totals[j] += reached[j] - reached[j + 1];
}
#endif

// The keys of own point `own` with partners j0 .. j0 + m, into k: a loop the
// compiler vectorises once every call in it is inlined, which flatten asks
// (the compiler's own limits leave a snippet's larger functions, such as
// rdf's minimum image, as calls).
[[gnu::flatten]] static void keys_of_run(const Point& own, const TwobsColumns& partners, uint64_t j0, uint64_t m,
                                         Key* k) {
  for (uint64_t t = 0; t < m; ++t) k[t] = twobs_key(own, load_point(partners, j0 + t));
}

// Keeps the keys of k[0..m) within the range (reaching `first`, not `past`)
// at out[0..), in order; returns how many. NaN keys are not kept: `nan`
// says whether there was one.
template <class K>
static inline unsigned keep_within(const K* k, unsigned m, K first, K past, K* out, bool& nan) {
  unsigned n = 0;
  for (unsigned t = 0; t < m; ++t) {
    out[n] = k[t];
    n += (k[t] >= first) & !(k[t] >= past);
  }
  bool any = false;
  for (unsigned t = 0; t < m; ++t) any |= k[t] != k[t];
  nan = any;
  return n;
}
#if defined(__AVX512F__)
// The same, 16 keys an instruction: a mask of the comparisons (ordered, so
// that a NaN key is not kept and a NaN edge is reached by none), the kept
// keys packed to the front and stored whole (out has 16 keys of room past m).
static inline unsigned keep_within(const float* k, unsigned m, float first, float past, float* out, bool& nan) {
  const __m512 lo = _mm512_set1_ps(first), hi = _mm512_set1_ps(past);
  unsigned n = 0;
  __mmask16 unordered = 0;
  for (unsigned t = 0; t < m; t += 16) {
    const __mmask16 valid = m - t >= 16 ? 0xffff : static_cast<__mmask16>((1u << (m - t)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(valid, k + t);
    const __mmask16 in = valid & _mm512_cmp_ps_mask(v, lo, _CMP_GE_OQ) & ~_mm512_cmp_ps_mask(v, hi, _CMP_GE_OQ);
    _mm512_storeu_ps(out + n, _mm512_maskz_compress_ps(in, v));
    n += static_cast<unsigned>(__builtin_popcount(in));
    unordered |= valid & _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  }
  nan = unordered != 0;
  return n;
}
#endif

// Adds the contributions of work items [begin, end) (rows, or grid units)
// into totals[SLOTS]: each run of partners' keys in blocks (a loop the
// compiler vectorises), those within the range kept until a few hundred
// wait, then counted together: edge by edge up to 128 buckets, else each
// key's bucket bisected and counted in four copies of the totals where they
// are small (a bucket's count is then not a chain of increments of one
// word, each waiting for the last). A NaN key is tested on its value.
extern "C" void twobs_rows(const TwobsSet* a, const TwobsSet* b, const TwobsGrid* grid, uint64_t begin, uint64_t end,
                           Total* totals) {
  twobs_prepare();
  {
    static std::once_flag once;  // the edges are computed once, before any thread reads them
    std::call_once(once, [] { prepare_key_edges(); });
  }
  const Key first = KEY_EDGES[0], past = KEY_EDGES[SLOTS];
  const TwobsColumns partners = columns_of(b);
  constexpr unsigned BLOCK = 64, PENDING = 256, COPIES = !TWOBS_EDGE_BY_EDGE && SLOTS <= 512 ? 4 : 1;
  // On the stack (16 KiB at most): a thread_local would be looked up at every count.
  Total copies[COPIES][COPIES > 1 ? SLOTS : 1];
  Total* const count = COPIES > 1 ? &copies[0][0] : totals;
  if (COPIES > 1) memset(copies, 0, sizeof copies);
  Key pending[PENDING + BLOCK + 16];
  unsigned held = 0;
  auto count_pending = [&] {
    if (TWOBS_EDGE_BY_EDGE) {
      count_reaching(pending, held, count);
    } else {
      unsigned slot[PENDING + BLOCK + 16];
      for (unsigned u = 0; u < held; ++u) slot[u] = slot_of_key(pending[u]);
      for (unsigned u = 0; u < held; ++u) count[(u % COPIES) * SLOTS + slot[u]] += 1;
    }
    held = 0;
  };
  const uint64_t partners_n = b->n;
  for_runs(a, b, grid, begin, end, [&](uint64_t, const Point& own, uint64_t lo, uint64_t hi) {
    Key k[BLOCK];
    for (uint64_t j0 = lo; j0 < hi; j0 += BLOCK) {
      const unsigned m = static_cast<unsigned>(std::min<uint64_t>(BLOCK, hi - j0));
      // Keys of whole vectors where the points are there (those past the run
      // are not kept): the loop's scalar remainder costs more than its lanes.
      const unsigned whole = (m + 15) & ~15u;
      keys_of_run(own, partners, j0, j0 + whole <= partners_n ? whole : m, k);
      bool nan;
      held += keep_within(k, m, first, past, pending + held, nan);
      for (unsigned t = 0; nan && t < m; ++t) {
        if (k[t] != k[t]) {
          const Contribution c = contribute(own, load_point(b, j0 + t));
          if (c.slot < SLOTS) totals[c.slot] += c.amount;
        }
      }
      if (held >= PENDING) count_pending();
    }
  });
  count_pending();
  for (unsigned c = 0; COPIES > 1 && c < COPIES; ++c) {
    for (unsigned j = 0; j < SLOTS; ++j) totals[j] += copies[c][j];
  }
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
