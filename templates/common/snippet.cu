// ------------------------------------------------------------------ the pairwise function
{%- if snippet.exclude %}
// <exclude same="{{ snippet.exclude }}"/>: a pair of points with the same {{ snippet.exclude }} adds
// nothing. Its value and key are +infinity, which no bucket, threshold or
// pair test takes (outside the f64 mode's renaming of float, so both stay).
__device__ __forceinline__ bool twobs_excluded(const Point& twobs_a, const Point& twobs_b) {
  return twobs_a.{{ snippet.exclude }} == twobs_b.{{ snippet.exclude }};
}
__device__ __forceinline__ float twobs_excluded_value(float) { return __uint_as_float(0x7f800000u); }
__device__ __forceinline__ double twobs_excluded_value(double) { return __longlong_as_double(0x7ff0000000000000LL); }
{%- endif %}
{%- if f64_mode %}
{% include "cpu/f64_begin.h" %}
{%- endif %}
#line 1 "{{ snippet.file }}"
{{ snippet.text }}
{%- for call in snippet.calls %}
#line {{ call.line }} "{{ snippet.file }}"
{%- if call.excludes %}
__device__ __forceinline__ {{ call.returns }} {{ call.name }}({{ call.params }}) { return twobs_excluded({{ call.args }}) ? twobs_excluded_value({{ call.returns }}(0)) : {{ call.returns }}({{ call.function }}({{ call.args }})); }
{%- else %}
__device__ __forceinline__ {{ call.returns }} {{ call.name }}({{ call.params }}) { return {{ call.function }}({{ call.args }}); }
{%- endif %}
{%- endfor %}
//@@twobs-line-reset
{%- if snippet.point_weights %}
// Each point's weight (--weights): a pair weighs their product, in f64.
__device__ __forceinline__ double twobs_point_weights(const Point& twobs_a, const Point& twobs_b) {
  return twobs_a.twobs_w * twobs_b.twobs_w;
}
{%- endif %}
{%- if f64_mode %}
{% include "cpu/f64_end.h" %}
{%- endif %}
// The calls into the snippet above are rendered at the lines of the functions
// they call, so that a parameter or return type that does not fit is reported there.
