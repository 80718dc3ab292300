// twobs key probe for {{ problem_name }}: the slot each key gets from the key
// edges (and a count's indicator), against the slot of its value, for keys of
// the given ranks.
{% include "common/types.cu" %}
{% include "common/snippet.cu" %}
namespace twobs_generated {  // no name of the user's can clash with what follows
constexpr unsigned B = 256;
#define TWOBS_THREAD threadIdx.x
#define TWOBS_THREADS B

{{ fragments.contribution }}

// Checks the keys of ranks first, first + 1, ... first + count - 1 (every
// bit pattern, NaNs included, where the ranks cover 2^32), and measures a
// histogram's estimate on them.
extern "C" __global__ void __launch_bounds__(B) twobs_check_keys(unsigned long long first, unsigned long long count,
                                                                 unsigned long long* mismatches,
                                                                 unsigned long long* first_bad,
                                                                 unsigned long long* worst_estimate_error) {
  prepare_contribution();
  __syncthreads();
  unsigned long long found = 0, bad = ~0ull;
  double worst = 0.0;  // the estimate's largest relative error: its bits order as it does
  const unsigned long long step = static_cast<unsigned long long>(gridDim.x) * B;
  for (unsigned long long r = first + static_cast<unsigned long long>(blockIdx.x) * B + threadIdx.x; r < first + count;
       r += step) {
    const Key k = key_of_rank(r, Key(0));
    if (!key_agrees(k)) {
      ++found;
      bad = bad < r ? bad : r;
    }
    worst = fmax(worst, key_estimate_error(k));
  }
  if (worst > 0.0) atomicMax(worst_estimate_error, static_cast<unsigned long long>(__double_as_longlong(worst)));
  if (found != 0) {
    atomicAdd(mismatches, found);
    atomicMin(first_bad, bad);
  }
}
}  // namespace twobs_generated
