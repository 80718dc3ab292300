// twobs probe for {{ problem_name }}: the pair function alone, so that its
// floating-point instructions can be counted in the PTX.
{% include "common/types.cu" %}
{% include "common/snippet.cu" %}

extern "C" __global__ void twobs_probe(const Point* a, const Point* b, Value* out) {
  const unsigned t = threadIdx.x;
{%- if value2 %}
  const Value2 v = {{ snippet.probe }}(a[t], b[t]);
  out[t] = v.{{ value2[0] }} + v.{{ value2[1] }};  // both values, so that neither is left out
{%- else %}
  out[t] = {{ snippet.probe }}(a[t], b[t]);
{%- endif %}
}
