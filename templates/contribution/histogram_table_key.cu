{% include "contribution/keys.cu" %}
{% include "contribution/bucket.cu" %}
{% include "contribution/bucket_table.cu" %}
typedef unsigned Tally;            // a thread meets fewer than 2^32 pairs per launch
typedef unsigned long long Total;  // 64-bit totals in shared and global memory

// A log-spaced bucket from the key alone (src/stage/bucket_table.rs): the
// value is {{ stage.map }}(key), non-decreasing, so each bucket is a run of keys
// from its key edge, the smallest key whose value reaches the bucket's lower
// edge. The key's bits name a cell of {{ stage.table.cells }} ({{ 23 - stage.table.shift }} mantissa bits each) that
// holds one key edge at most, and the cell's entry gives the bucket with one
// comparison on the bits (bucket_table.cu). No estimate, no vote: every
// key's bucket is exact, NaN and infinite keys included (no bucket: their
// values lie outside the buckets, as the key probes check on every key).
__device__ const Key TWOBS_KEY_EDGES[SLOTS + 1] = {
  {%- for e in stage.table.thresholds %}{{ e }}{% if not loop.last %}, {% endif %}{% endfor -%}
};
__device__ const unsigned TWOBS_KEY_TABLE[{{ stage.table.cells }} + 1] = {
  {%- for e in stage.table.entries %}{{ e }}{% if not loop.last %}, {% endif %}{% endfor -%}
};
__shared__ unsigned twobs_key_table[({{ stage.table.cells }} + 1) * {{ stage.table.copies }}];
__constant__ unsigned TWOBS_KEY_TABLE_SHIFT = {{ stage.table.shift }}, TWOBS_KEY_TABLE_STRIDE = {{ stage.table.copies }} * 4;

__device__ __forceinline__ unsigned bucket_of_key(Key twobs_k) {
  return table_slot<{{ stage.table.shift }}, {{ stage.table.origin }}, {{ stage.table.cells }}, {{ stage.table.copies }}>(twobs_key_table, twobs_k, TWOBS_KEY_TABLE_SHIFT,
                                                                                      TWOBS_KEY_TABLE_STRIDE);
}

// The key edges were found on the host with the map's arithmetic
// (bucket_table::key_thresholds); each kernel checks them with its own when
// it starts: edge j's value reaches the bucket edge, the key before it's does
// not. So every key edge is the one a bisection here would find, and a
// kernel whose arithmetic differed stops rather than count a pair wrongly.
__device__ __forceinline__ void prepare_contribution() {
  prepare_buckets();
  prepare_table<{{ stage.table.cells }}, {{ stage.table.copies }}>(twobs_key_table, TWOBS_KEY_TABLE);
#ifdef __CUDA_ARCH__
  for (unsigned twobs_j = TWOBS_THREAD; twobs_j <= SLOTS; twobs_j += TWOBS_THREADS) {
    const Key twobs_edge = TWOBS_KEY_EDGES[twobs_j];
    const Key twobs_before = key_of_rank(key_rank(twobs_edge) - 1, Key(0));
    if (!(twobs_map(twobs_edge) >= TWOBS_LOG_EDGES[twobs_j]) || twobs_map(twobs_before) >= TWOBS_LOG_EDGES[twobs_j]) {
      printf("twobs: key edge %u (%a) is not the smallest key whose value reaches %a on this GPU\n", twobs_j,
             static_cast<double>(twobs_edge), static_cast<double>(TWOBS_LOG_EDGES[twobs_j]));
      __trap();
    }
  }
#endif
}

// The bucket of a key, and of its value, which the key probe checks it
// against; the key edges, for the probe to look around.
__device__ __forceinline__ unsigned key_slot(Key twobs_k) { return bucket_of_key(twobs_k); }
__device__ __forceinline__ unsigned value_slot(Key twobs_k) { return bucket_of(twobs_map(twobs_k)); }
__device__ __forceinline__ unsigned key_edges() { return SLOTS + 1; }
__device__ __forceinline__ Key key_edge(unsigned twobs_j) { return TWOBS_KEY_EDGES[twobs_j]; }
__device__ __forceinline__ bool key_agrees(Key twobs_k) { return key_slot(twobs_k) == value_slot(twobs_k); }
// No estimate: nothing to measure.
__device__ __forceinline__ double key_estimate_error(Key) { return 0.0; }

struct Contribution {
  unsigned slot;  // SLOTS: the pair adds nothing
  Tally amount;
};

__device__ __forceinline__ Contribution contribute(const Point& twobs_a, const Point& twobs_b) {
  return {bucket_of_key(twobs_key(twobs_a, twobs_b)), 1u};
}

// Every answer of contribute is exact: nothing to read, nothing unsure.
struct Setup {};

__device__ __forceinline__ bool contribute_fast(const Point& twobs_a, const Point& twobs_b, const Setup&,
                                                Contribution& twobs_c) {
  twobs_c = contribute(twobs_a, twobs_b);
  return true;
}

// Never called: the fast answer is always sure.
__device__ __forceinline__ Contribution contribute_unsure(const Point& twobs_a, const Point& twobs_b) {
  return contribute(twobs_a, twobs_b);
}
