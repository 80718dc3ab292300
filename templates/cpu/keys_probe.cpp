// twobs CPU key probe for {{ problem_name }}: the slot each key gets from the
// key edges (and a count's indicator), against the slot of its value.
{% include "cpu/prelude.h" %}
#define TWOBS_THREAD 0u
#define TWOBS_THREADS 1u
{% include "common/types.cu" %}
{% include "common/snippet.cu" %}
namespace twobs_generated {  // no name of the user's can clash with what follows

{{ fragments.contribution }}

static void check(unsigned long long r, uint64_t* mismatches, uint64_t* first_bad, double* worst) {
  const Key k = key_of_rank(r, Key(0));
  if (!key_agrees(k)) {
    ++*mismatches;
    if (r < *first_bad) *first_bad = r;
  }
  *worst = std::max(*worst, key_estimate_error(k));
}

// Checks `count` keys of ranks first, first + stride, ..., and every key within
// `around` ranks of each edge, of the infinities and of the zeros; returns how
// many keys it checked (a key in two windows counts twice, as does its
// mismatch), and sets `worst_estimate_error` to a histogram's estimate's
// largest relative error.
extern "C" uint64_t twobs_check_keys(uint64_t first, uint64_t count, uint64_t stride, uint64_t around,
                                     uint64_t* mismatches, uint64_t* first_bad, double* worst_estimate_error) {
  prepare_contribution();
  uint64_t checked = 0;
  for (uint64_t s = 0; s < count; ++s, ++checked) check(first + s * stride, mismatches, first_bad, worst_estimate_error);
  // Around each edge, and around the infinities and zeros, where the
  // edges of maps that pass everything, nothing or one sign lie.
  const Key inf = key_infinity(Key(0));
  const Key landmarks[] = {-inf, -Key(0), Key(0), inf};
  for (unsigned e = 0; e < key_edges() + 4; ++e) {
    const Key at_key = e < key_edges() ? key_edge(e) : landmarks[e - key_edges()];
    if (at_key != at_key) continue;  // no key passes: nothing to look around
    const unsigned long long at = key_rank(at_key);
    for (unsigned long long r = at > around ? at - around : 0; r <= at + around; ++r, ++checked) {
      check(r, mismatches, first_bad, worst_estimate_error);
    }
  }
  return checked;
}
}  // namespace twobs_generated
