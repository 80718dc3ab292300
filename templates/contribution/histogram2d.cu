// A 2-D histogram: the pair function returns two values (Value2, a member
// per <axis>), and each is bucketed exactly as a 1-D histogram buckets its
// value (contribution/bucket.cu): linear axes by floor((v - LO) * SCALE) in
// Value arithmetic, log-spaced ones by their edges (f32 values: from the
// value's bits and a table, contribution/bucket_table.cu). Cell (i, j) is
// slot i * BINS_1 + j; a pair outside either axis (or NaN) adds nothing.
{%- for axis in stage.axes %}
{%- set k = loop.index0 %}

// Axis {{ k }}, `{{ axis.name }}`: {{ axis.bins }} buckets{% if axis.log %}, log-spaced{% endif %}.
[[maybe_unused]] constexpr unsigned BINS_{{ k }} = {{ axis.bins }};
[[maybe_unused]] constexpr Value LO_{{ k }} = {{ axis.lo }};
[[maybe_unused]] constexpr Value SCALE_{{ k }} = {{ axis.scale }};
{%- if axis.log and axis.log.table %}
{%- set t = axis.log.table %}
{% include "contribution/bucket_table.cu" %}
// The edges' table: {{ t.cells }} cells of the bits of a value, {{ 23 - t.shift }} mantissa bits
// each, over the edges {% for e in t.thresholds %}{{ e }}{% if not loop.last %}, {% endif %}{% endfor %}.
__device__ const unsigned TWOBS_TABLE_{{ k }}[{{ t.cells }} + 1] = {
  {%- for e in t.entries %}{{ e }}{% if not loop.last %}, {% endif %}{% endfor -%}
};
__shared__ unsigned twobs_table_{{ k }}[({{ t.cells }} + 1) * {{ t.copies }}];
__constant__ unsigned TWOBS_TABLE_SHIFT_{{ k }} = {{ t.shift }}, TWOBS_TABLE_STRIDE_{{ k }} = {{ t.copies }} * 4;

__device__ __forceinline__ void prepare_buckets_{{ k }}() {
  prepare_table<{{ t.cells }}, {{ t.copies }}>(twobs_table_{{ k }}, TWOBS_TABLE_{{ k }});
}

// The bucket from the value's bits: exactly the edges' (one threshold a cell).
__device__ __forceinline__ unsigned bucket_of_{{ k }}(Value v) {
  return table_slot<{{ t.shift }}, {{ t.origin }}, {{ t.cells }}, {{ t.copies }}>(twobs_table_{{ k }}, v, TWOBS_TABLE_SHIFT_{{ k }},
                                                                      TWOBS_TABLE_STRIDE_{{ k }});
}
{%- elif axis.log %}
__device__ const Value TWOBS_LOG_EDGES_{{ k }}[BINS_{{ k }} + 1] = {
  {%- for e in axis.log.edges %}{{ e }}{% if not loop.last %}, {% endif %}{% endfor -%}
};
__shared__ Value twobs_bucket_edges_{{ k }}[BINS_{{ k }} + 1];

__device__ __forceinline__ void prepare_buckets_{{ k }}() {
  for (unsigned twobs_j = TWOBS_THREAD; twobs_j <= BINS_{{ k }}; twobs_j += TWOBS_THREADS) {
    twobs_bucket_edges_{{ k }}[twobs_j] = TWOBS_LOG_EDGES_{{ k }}[twobs_j];
  }
}

// A guess from the logarithm (possibly a bucket off), then the edges make it exact.
__device__ __forceinline__ unsigned bucket_of_{{ k }}(Value v) {
  if (!(v >= twobs_bucket_edges_{{ k }}[0] && v < twobs_bucket_edges_{{ k }}[BINS_{{ k }}])) return BINS_{{ k }};
  float twobs_x = logf(static_cast<float>(v / LO_{{ k }})) * {{ axis.log.scale }};
  twobs_x = fminf(fmaxf(twobs_x, 0.0f), static_cast<float>(BINS_{{ k }} - 1));  // a NaN guess becomes 0
  int b = __float_as_int(twobs_x + 12582912.0f) - 0x4B400000;                  // round(x), as guess_index
  while (b > 0 && v < twobs_bucket_edges_{{ k }}[b]) --b;
  while (b + 1 < static_cast<int>(BINS_{{ k }}) && v >= twobs_bucket_edges_{{ k }}[b + 1]) ++b;
  return static_cast<unsigned>(b);
}
{%- else %}
__device__ __forceinline__ void prepare_buckets_{{ k }}() {}

// Below min is tested on the value: a product that underflows to -0 would pass x >= 0.
__device__ __forceinline__ unsigned bucket_of_{{ k }}(Value v) {
  const Value x = (v - LO_{{ k }}) * SCALE_{{ k }};
  return (v >= LO_{{ k }} && x < Value(BINS_{{ k }})) ? static_cast<unsigned>(x) : BINS_{{ k }};
}
{%- endif %}
{%- endfor %}

[[maybe_unused]] constexpr unsigned SLOTS = BINS_0 * BINS_1;
{%- if stage.amount %}
typedef double Tally;  // each pair adds {{ stage.amount }}, in f64
typedef double Total;
{%- else %}
typedef unsigned Tally;            // a thread meets fewer than 2^32 pairs per launch
typedef unsigned long long Total;  // 64-bit totals in shared and global memory
{%- endif %}

struct Contribution {
  unsigned slot;  // SLOTS: the pair adds nothing
  Tally amount;
};

__device__ __forceinline__ Contribution contribute(const Point& twobs_a, const Point& twobs_b) {
  const Value2 twobs_v = twobs_pair(twobs_a, twobs_b);
  const unsigned twobs_i = bucket_of_0(twobs_v.{{ stage.axes[0].name }});
  const unsigned twobs_j = bucket_of_1(twobs_v.{{ stage.axes[1].name }});
  const unsigned twobs_slot = twobs_i < BINS_0 && twobs_j < BINS_1 ? twobs_i * BINS_1 + twobs_j : SLOTS;
  return {twobs_slot, {% if stage.amount %}{{ stage.amount }}{% else %}1u{% endif %}};
}

// Each value is tested as it is; log-spaced axes load their edges.
__device__ __forceinline__ void prepare_contribution() {
  prepare_buckets_0();
  prepare_buckets_1();
}
{% include "contribution/exact.cu" %}
