{% include "contribution/bucket.cu" %}
{% include "contribution/keys.cu" %}
typedef unsigned Tally;            // a thread meets fewer than 2^32 pairs per launch
typedef unsigned long long Total;  // 64-bit totals in shared and global memory

// edges[j]: the smallest key whose value reaches bucket j or beyond, so that
// bucket_of(map(k)) == j exactly when edges[j] <= k < edges[j + 1].
__shared__ Key twobs_edges[SLOTS + 1];

__device__ __forceinline__ void prepare_contribution() {
  prepare_buckets();
  for (unsigned twobs_j = TWOBS_THREAD; twobs_j <= SLOTS; twobs_j += TWOBS_THREADS) {
    twobs_edges[twobs_j] = smallest_key([twobs_j](Key twobs_k) { return (twobs_map(twobs_k) - LO) * SCALE >= Value(twobs_j); });
  }
}

__device__ __forceinline__ int bucket_of_key(Key twobs_k) {
  if (twobs_k != twobs_k) return bucket_of(twobs_map(twobs_k));
  // A guess from the estimate (possibly a bucket off), then the edges make it exact.
  int b = guess_index((twobs_estimate(twobs_k) - LO) * SCALE);
  while (b > 0 && !(twobs_k >= twobs_edges[b])) --b;
  while (b + 1 < static_cast<int>(SLOTS) && twobs_k >= twobs_edges[b + 1]) ++b;
  return (twobs_k >= twobs_edges[b] && !(twobs_k >= twobs_edges[b + 1])) ? b : -1;
}

// The bucket of a key from the edges, and from its value, which the key probe
// checks it against.
__device__ __forceinline__ int key_slot(Key twobs_k) { return bucket_of_key(twobs_k); }
__device__ __forceinline__ int value_slot(Key twobs_k) { return bucket_of(twobs_map(twobs_k)); }
__device__ __forceinline__ unsigned key_edges() { return SLOTS + 1; }
__device__ __forceinline__ Key key_edge(unsigned j) { return twobs_edges[j]; }

struct Contribution {
  int slot;  // < 0: the pair adds nothing
  Tally amount;
};

__device__ __forceinline__ Contribution contribute(const Point& twobs_a, const Point& twobs_b) {
  return {bucket_of_key(twobs_key(twobs_a, twobs_b)), 1u};
}
