{% include "contribution/threshold_key.cu" %}
// The threshold as one saturating multiply-add a key, for a count to add on
// the FMA pipe instead of comparing and selecting on the ALU:
// sat(k * scale + offset) is exactly 1 for a key that is counted and 0 for
// one that is not. With e the last passing key and f the next, 1 / (f - e)
// is a power of two S, and S (f - k) is at least 1 up to e and at most 0
// from f on; one rounding keeps it so, and sat sends NaN to 0. Where a NaN
// key passes, the count counts failures instead, S (k - e), and takes them
// from the pairs it met. `on` is false where no such S exists (an edge
// within about 2^-104 of 0, or not finite): the count then tests keys.
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
    twobs_last_pass = find_last_pass();
    twobs_weights = weights_of(twobs_last_pass);
  }
}

// Whether the count weighs its pairs: the probe checks the weights only then.
__device__ __forceinline__ bool key_weighed() { return twobs_weights.on; }
// No estimate: nothing to measure.
__device__ __forceinline__ double key_estimate_error(Key) { return 0.0; }

// What the key probe checks on every key: its slot from the edge and, where
// the count weighs it, its weight, against its value's slot.
__device__ __forceinline__ bool key_agrees(Key twobs_k) {
  const unsigned twobs_slot = value_slot(twobs_k);
  const unsigned twobs_counted = twobs_weights.counts_fails ? FAIL : PASS;
  return key_slot(twobs_k) == twobs_slot &&
         (!twobs_weights.on || weigh_key(twobs_k, twobs_weights) == (twobs_slot == twobs_counted ? Key(1) : Key(0)));
}

// A count is a total of one slot: a pair adds 1 when its key passes, else 0
// (an amount, not a slot, so that adding it is one instruction).
[[maybe_unused]] constexpr unsigned SLOTS = 1;
typedef unsigned Tally;            // a thread meets fewer than 2^32 pairs per launch
typedef unsigned long long Total;  // 64-bit totals in shared and global memory

struct Contribution {
  unsigned slot;  // SLOTS: the pair adds nothing
  Tally amount;
};

__device__ __forceinline__ Contribution contribute(const Point& twobs_a, const Point& twobs_b) {
  return {0u, key_slot(twobs_key(twobs_a, twobs_b)) == PASS ? 1u : 0u};
}

// What a thread reads once, after the set-up: the edge and the weights, kept in registers.
struct Setup {
  Key last_pass;
  Weights weights;
  __device__ __forceinline__ Setup() : last_pass(twobs_last_pass), weights(twobs_weights) {}
};

// Sure unless the key is NaN, which is tested on its value.
__device__ __forceinline__ bool contribute_fast(const Point& twobs_a, const Point& twobs_b, const Setup& twobs_s,
                                                Contribution& twobs_c) {
  const Key twobs_k = twobs_key(twobs_a, twobs_b);
  twobs_c = {0u, key_slot_fast(twobs_k, twobs_s.last_pass) == PASS ? 1u : 0u};
  return twobs_k == twobs_k;
}

// The exact answer where contribute_fast was unsure (a NaN key).
__device__ __forceinline__ Contribution contribute_unsure(const Point& twobs_a, const Point& twobs_b) {
  return contribute(twobs_a, twobs_b);
}

// The pair's weight where the weights are on: 1 when it is counted (it
// passes, or it fails where the count counts failures), else 0.
__device__ __forceinline__ Key weigh(const Point& twobs_a, const Point& twobs_b, const Setup& twobs_s) {
  return weigh_key(twobs_key(twobs_a, twobs_b), twobs_s.weights);
}
