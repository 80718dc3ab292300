{{ header }}
{% include "common/types.cu" %}
// ------------------------------------------------------------------ the pairwise function
#line 1 "{{ snippet.file }}"
{{ snippet.text }}
//@@twobs-line-reset
__device__ __forceinline__ Value pair_value(const Point& twobs_a, const Point& twobs_b) {
  return {{ snippet.function }}(twobs_a, twobs_b);
}
// ------------------------------------------------------------------ launch shape
constexpr unsigned B = {{ block_size }};  // threads per block = points per tile
[[maybe_unused]] constexpr unsigned TILE_BYTES = {{ tile_bytes }};  // the input tile's shared memory; the output's follows
[[maybe_unused]] constexpr bool UNORDERED_PAIRS = {{ unordered }};  // a pair is (min, max), not (own, other)
[[maybe_unused]] constexpr unsigned FULL_WARP = 0xffffffffu;

__device__ __forceinline__ unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }

// A point set: one array per component (SoA), each padded to a multiple of
// 1024 elements so that whole tiles and 16-byte loads stay in bounds.
struct Set {
{%- for c in components %}
  const {{ c.ctype }}* {{ c.name }};
{%- endfor %}
  unsigned n;
};

__device__ __forceinline__ Point load_point(const Set& s, unsigned i) {
  Point p;
{%- for c in components %}
  p{{ c.member }} = s.{{ c.name }}[i];
{%- endfor %}
  return p;
}

// What the output stage learns about its thread.
struct Here {
  unsigned i;                // the own point's index in set A's block
  bool own_valid;            // i < a.n
  unsigned a_offset;         // whole-input index of A's first point
  unsigned other_offset;     // likewise for the other set
  unsigned char* output_smem;  // the output's shared memory, after the input tile
};

// ------------------------------------------------------------------ what a pair contributes: {{ names.kind }}
{{ fragments.contribution }}
// ------------------------------------------------------------------ input stage: {{ names.input }}
{{ fragments.input }}
// ------------------------------------------------------------------ output stage: {{ names.output }}
{{ fragments.output }}
// ------------------------------------------------------------------ kernel: {{ names.visit }}
extern "C" __global__ void __launch_bounds__(B) {{ kernel_name }}(
{%- for p in kernel_params %}
    {{ p.ctype }} {{ p.name }}{% if not loop.last %},{% endif %}
{%- endfor %}) {
  extern __shared__ __align__(16) unsigned char smem[];
  const Set a = { {% for c in components %}a_{{ c.name }}, {% endfor %}n_a };
{%- if two_sets %}
  const Set other = { {% for c in components %}b_{{ c.name }}, {% endfor %}n_b };
{%- else %}
  const Set& other = a;
{%- endif %}
  const unsigned t = threadIdx.x;
  const unsigned block = blockIdx.x;
  const unsigned i = block * B + t;
  const bool own_valid = i < a.n;
  const Point own = load_point(a, i);  // rows past n are padding: loaded, never counted
  const Here here = {i, own_valid, a_offset, other_offset, smem + TILE_BYTES};
  Output out({% for name in output_args %}{{ name }}, {% endfor %}here);
  Tiles tiles(smem);
{{ fragments.visit }}
  out.finish(here);
}
