{% include "contribution/threshold_key.cu" %}
// A count by indicators: each pair adds 1 where it is counted and 0 where
// not, one comparison of its key with an edge (one FSET on the GPU, which
// reads one register fewer than a multiply-add of the key). An ordered
// comparison is false for a NaN key, so the NaN keys, which have one value
// (docs/spec.md), must be the ones not counted:
// - where a NaN key passes (the built-ins' do: their map sends NaN to 0), the
//   count counts failures, k >= first_fail, and takes them from the pairs it
//   met;
// - else it counts passes, k <= last_pass.
// Either edge may be NaN (no key fails, no key passes) or infinite (every key
// does), and the comparison is still exactly the key's test.
__shared__ Key twobs_first_fail;
__shared__ bool twobs_counts_fails;

__device__ __forceinline__ void prepare_contribution() {
  if (TWOBS_THREAD == 0) {
    twobs_first_fail = find_first_fail();
    twobs_last_pass = key_before(twobs_first_fail);
    twobs_counts_fails = value_slot(key_infinity(Key(0)) - key_infinity(Key(0))) == PASS;
  }
}

// The pair's indicator: 1 where the count counts the key (FAILS: a failure,
// else a pass), 0 elsewhere and for NaN.
template <bool FAILS>
__device__ __forceinline__ Key key_counted(Key twobs_k, Key twobs_first_fail, Key twobs_last_pass) {
  return (FAILS ? twobs_k >= twobs_first_fail : twobs_k <= twobs_last_pass) ? Key(1) : Key(0);
}

// No estimate: nothing to measure.
__device__ __forceinline__ double key_estimate_error(Key) { return 0.0; }

// What the key probe checks on every key: its slot from the edge, and the
// indicator the count adds, against its value's slot.
__device__ __forceinline__ bool key_agrees(Key twobs_k) {
  const unsigned twobs_slot = value_slot(twobs_k);
  const Key twobs_counted = twobs_counts_fails ? key_counted<true>(twobs_k, twobs_first_fail, twobs_last_pass)
                                               : key_counted<false>(twobs_k, twobs_first_fail, twobs_last_pass);
  const unsigned twobs_counts = twobs_counts_fails ? FAIL : PASS;
  return key_slot(twobs_k) == twobs_slot && twobs_counted == (twobs_slot == twobs_counts ? Key(1) : Key(0));
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

// What a thread reads once, after the set-up: the edges, kept in registers.
struct Setup {
  Key last_pass, first_fail;
  bool counts_fails;
  __device__ __forceinline__ Setup()
      : last_pass(twobs_last_pass), first_fail(twobs_first_fail), counts_fails(twobs_counts_fails) {}
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

// The pair's indicator (key_counted).
template <bool FAILS>
__device__ __forceinline__ Key counted(const Point& twobs_a, const Point& twobs_b, const Setup& twobs_s) {
  return key_counted<FAILS>(twobs_key(twobs_a, twobs_b), twobs_s.first_fail, twobs_s.last_pass);
}
