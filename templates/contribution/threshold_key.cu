{% include "contribution/keys.cu" %}
constexpr Value THRESHOLD = static_cast<Value>({{ stage.threshold }});
constexpr unsigned PASS = 0, FAIL = 1;  // the slots of a threshold's test

// The largest key whose value passes: with map non-decreasing and the test
// `value {{ stage.compare }} THRESHOLD`, exactly the keys up to it pass.
__shared__ Key twobs_last_pass;

// The threshold as one saturating multiply-add a key, for a count to add on
// the FMA pipe instead of comparing and selecting on the ALU:
// sat(k * scale + offset) is exactly 1 for a key that is counted and 0 for
// one that is not. With e the last passing key and f the next, 1 / (f - e)
// is a power of two S, and S (f - k) is at least 1 up to e and at most 0
// from f on; one rounding keeps it so, and sat sends NaN to 0. Where a NaN
// key passes, the count counts failures instead, S (k - e), and takes them
// from the pairs it met. `on` is false where no such S exists (an edge
// within 2^-103 of 0, or not finite): the count then tests keys as pairs do.
struct Weights {
  Key scale, offset;
  bool on;
  bool counts_fails;
};
__shared__ Weights twobs_weights;

// a * b + c rounded once and clamped to [0, 1], NaN to 0: one FFMA.SAT.
__device__ __forceinline__ float saturated_fma(float a, float b, float c) { return __saturatef(__fmaf_rn(a, b, c)); }
__device__ __forceinline__ double saturated_fma(double a, double b, double c) { return fmin(fmax(fma(a, b, c), 0.0), 1.0); }
__device__ __forceinline__ Key weigh_key(Key twobs_k, const Weights& twobs_w) {
  return saturated_fma(twobs_k, twobs_w.scale, twobs_w.offset);
}

// The slot of a key, from its value, which the key probe checks the rest against.
__device__ __forceinline__ unsigned value_slot(Key twobs_k) { return twobs_map(twobs_k) {{ stage.compare }} THRESHOLD ? PASS : FAIL; }

// The weights of edge e, found with the very instruction the count uses: the
// weight is monotone in the key, so the two keys either side of the edge
// and NaN having the right weights proves every key's.
__device__ Weights weights_of(Key twobs_e) {
  const Key inf = key_infinity(Key(0));
  const Key f = key_of_rank(key_rank(twobs_e) + 1, Key(0));  // only used where e is finite
  const Key s = Key(1) / (f - twobs_e);
  Weights w = {Key(0), Key(0), false, value_slot(inf - inf) == PASS};
  if (!(twobs_e > -inf && twobs_e < inf && f < inf && s < inf)) return w;
  w.scale = w.counts_fails ? s : -s;
  w.offset = w.counts_fails ? -(s * twobs_e) : s * f;
  const Key below = w.counts_fails ? Key(0) : Key(1), above = Key(1) - below;
  w.on = weigh_key(twobs_e, w) == below && weigh_key(f, w) == above && weigh_key(inf - inf, w) == Key(0);
  return w;
}

__device__ __forceinline__ void prepare_contribution() {
  if (TWOBS_THREAD == 0) {
    twobs_last_pass = largest_key([](Key twobs_k) { return twobs_map(twobs_k) {{ stage.compare }} THRESHOLD; });
    twobs_weights = weights_of(twobs_last_pass);
  }
}

// The slot of a key, from the edge. A NaN key is tested on its value (map
// may send it anywhere).
__device__ __forceinline__ unsigned key_slot_fast(Key twobs_k, Key twobs_edge) { return twobs_k <= twobs_edge ? PASS : FAIL; }
__device__ __forceinline__ unsigned key_slot(Key twobs_k) {
  return twobs_k == twobs_k ? key_slot_fast(twobs_k, twobs_last_pass) : value_slot(twobs_k);
}
__device__ __forceinline__ unsigned key_edges() { return 1; }
__device__ __forceinline__ Key key_edge(unsigned) { return twobs_last_pass; }

// Whether a count on keys would weigh its pairs: the probe checks the weights only then.
__device__ __forceinline__ bool key_weighed() { return twobs_weights.on; }

// What the key probe checks on every key: its slot from the edge and, where
// a count would weigh it, its weight, against its value's slot.
__device__ __forceinline__ bool key_agrees(Key twobs_k) {
  const unsigned twobs_slot = value_slot(twobs_k);
  const unsigned twobs_counted = twobs_weights.counts_fails ? FAIL : PASS;
  return key_slot(twobs_k) == twobs_slot &&
         (!twobs_weights.on || weigh_key(twobs_k, twobs_weights) == (twobs_slot == twobs_counted ? Key(1) : Key(0)));
}
