// ------------------------------------------------------------------ the pairwise function
{%- if f64_mode %}
{% include "cpu/f64_begin.h" %}
{%- endif %}
#line 1 "{{ snippet.file }}"
{{ snippet.text }}
{%- for call in snippet.calls %}
#line {{ call.line }} "{{ snippet.file }}"
__device__ __forceinline__ {{ call.returns }} {{ call.name }}({{ call.params }}) { return {{ call.function }}({{ call.args }}); }
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
