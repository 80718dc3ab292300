// twobs probe for {{ problem_name }}: the pair function alone, so that its
// floating-point instructions can be counted in the PTX.
{% include "common/types.cu" %}
{% include "common/snippet.cu" %}

extern "C" __global__ void twobs_probe(const Point* a, const Point* b, Value* out) {
  const unsigned t = threadIdx.x;
  out[t] = {{ snippet.probe }}(a[t], b[t]);
}
