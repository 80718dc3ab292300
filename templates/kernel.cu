{{ header }}
{% include "common/types.cu" %}
// ------------------------------------------------------------------ the pairwise function
#line 1 "{{ snippet.file }}"
{{ snippet.text }}
//@@twobs-line-reset
// ------------------------------------------------------------------ launch shape
constexpr unsigned B = {{ plan.block_size }};  // threads per block = points per tile
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

{% include "common/contribution.cu" %}
{% if output.stage == "register" or output.stage == "register_sum" -%}
// Sum of v over the block; the result is valid in thread 0.
template <class T>
__device__ __forceinline__ T block_sum(T v) {
  __shared__ T warp_sums[B / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(FULL_WARP, v, o);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = v;
  __syncthreads();
  v = threadIdx.x < B / 32 ? warp_sums[threadIdx.x] : T(0);
  if (threadIdx.x < 32) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(FULL_WARP, v, o);
  }
  __syncthreads();
  return v;
}
{% endif -%}

// ------------------------------------------------------------------ input stage: {{ plan.input_cache }}
{% if plan.input_cache == "register_shm" %}{% include "input/register_shm.cu" %}{% endif -%}
{% if plan.input_cache == "register_roc" %}{% include "input/register_roc.cu" %}{% endif -%}
{% if plan.input_cache == "shuffle" %}{% include "input/shuffle.cu" %}{% endif -%}
{% if plan.input_cache == "naive" %}{% include "input/naive.cu" %}{% endif %}
// ------------------------------------------------------------------ output stage: {{ plan.output }}
{% if output.stage == "register" %}{% include "output/register.cu" %}{% endif -%}
{% if output.stage == "register_sum" %}{% include "output/register_sum.cu" %}{% endif -%}
{% if output.stage == "privatized" %}{% include "output/privatized.cu" %}{% endif -%}
{% if output.stage == "global" %}{% include "output/global.cu" %}{% endif -%}
{% if output.stage == "dob" %}{% include "output/dob.cu" %}{% endif -%}
{% if output.stage == "topk" %}{% include "output/topk.cu" %}{% endif %}
// ------------------------------------------------------------------ kernel: {{ plan.visit }}
extern "C" __global__ void __launch_bounds__(B) {{ kernel_name }}(
{%- for c in components %}
    const {{ c.ctype }}* a_{{ c.name }},
{%- endfor %}
    unsigned n_a,
{%- if sets == 2 %}
{%- for c in components %}
    const {{ c.ctype }}* b_{{ c.name }},
{%- endfor %}
    unsigned n_b,
{%- endif %}
    unsigned a_offset,      // index of A's first point in the whole input (results use whole-input indices)
    unsigned other_offset,  // likewise for the other set
{%- if output.stage == "dob" %}
    uint2* pool, uint2* page_owner, unsigned* page_fill, unsigned* next_page, unsigned num_pages,
    unsigned* resume, unsigned* overflow) {
{%- elif output.stage == "topk" %}
    Value* out_value, unsigned* out_index) {
{%- elif output.stage == "register_sum" %}
    double* result) {
{%- else %}
    unsigned long long* result) {
{%- endif %}
  extern __shared__ __align__(16) unsigned char smem[];
  const Set a = { {% for c in components %}a_{{ c.name }}, {% endfor %}n_a };
{%- if sets == 2 %}
  const Set other = { {% for c in components %}b_{{ c.name }}, {% endfor %}n_b };
{%- else %}
  const Set& other = a;
{%- endif %}
  const unsigned t = threadIdx.x;
  const unsigned block = blockIdx.x;
  const unsigned i = block * B + t;
  const bool own_valid = i < a.n;
  const Point own = load_point(a, i);  // rows past n are padding: loaded, never counted
{%- if output.stage == "dob" %}
  Output out(pool, page_owner, page_fill, next_page, num_pages, resume, overflow, a_offset, other_offset, smem);
{%- elif output.stage == "topk" %}
  Output out(out_value, out_index, other_offset, i, own_valid, smem);
{%- else %}
  Output out(result, smem);
{%- endif %}
  Tiles tiles(smem);
  const unsigned tiles_total = (other.n + B - 1) / B;
{%- if plan.visit == "lower_triangle" %}
  // Circulant tile pairing: block b meets tiles b+1 .. b+M/2 (mod M), so every
  // unordered pair of tiles is visited once and every block does the same work;
  // the last step pairs the block's own points with each other.
  const unsigned offdiag = (tiles_total - 1) / 2 + ((tiles_total % 2 == 0 && block < tiles_total / 2) ? 1 : 0);
  const unsigned steps = offdiag + 1;
{%- else %}
  // Every block walks all tiles, starting at its own so that blocks spread over memory.
  const unsigned steps = tiles_total;
{%- endif %}
  for (unsigned s = out.first_step(); s < steps; ++s) {
    out.begin_step(s);
{%- if plan.visit == "lower_triangle" %}
    if (s < offdiag) {
      const unsigned tile = (block + 1 + s) % tiles_total;
      tiles.load(other, tile * B);
      tiles.for_each(umin(B, other.n - tile * B), [&](unsigned jl, const Point& q) {
        out.add(i, tile * B + jl, {{ snippet.function }}(own, q), own_valid);
      });
    } else {
      tiles.load(a, block * B);
      const unsigned len = umin(B, a.n - block * B);
{%- if plan.intra_block == "balanced" %}
      // Load-balanced pairing (section 3.4.1): thread t meets (t + d) % B for d = 1..B/2;
      // at d = B/2 only the lower half, so each pair is met once.
      for (unsigned d = 1; d <= B / 2; ++d) {
        const unsigned jl = (t + d) & (B - 1);
        const bool valid = own_valid && jl < len && (d < B / 2 || t < B / 2);
        out.add(i, block * B + jl, {{ snippet.function }}(own, tiles.at(jl)), valid);
      }
{%- else %}
      tiles.for_each(len, [&](unsigned jl, const Point& q) {
        out.add(i, block * B + jl, {{ snippet.function }}(own, q), own_valid && jl > t);
      });
{%- endif %}
    }
{%- else %}
    const unsigned tile = (block + s) % tiles_total;
    tiles.load(other, tile * B);
    tiles.for_each(umin(B, other.n - tile * B), [&](unsigned jl, const Point& q) {
      const unsigned j = tile * B + jl;
      out.add(i, j, {{ snippet.function }}(own, q), own_valid{% if plan.visit == "all_pairs" %} && j != i{% endif %});
    });
{%- endif %}
    if (out.end_step(s)) return;  // output full: this block resumes at step s
  }
  out.finish(i, own_valid);
}
