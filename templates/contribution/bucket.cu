[[maybe_unused]] constexpr unsigned SLOTS = {{ stage.bins }};
[[maybe_unused]] constexpr Value LO = {{ stage.lo }};
[[maybe_unused]] constexpr Value SCALE = {{ stage.scale }};

// The nearest whole number to x in [0, SLOTS - 1], without a conversion instruction.
__device__ __forceinline__ int guess_index(float x) {
  x = fminf(fmaxf(x, 0.0f), static_cast<float>(SLOTS - 1));  // a NaN guess becomes 0
  return __float_as_int(x + 12582912.0f) - 0x4B400000;        // 1.5 x 2^23: the low bits are round(x)
}
__device__ __forceinline__ int guess_index(double x) {
  return static_cast<int>(fmin(fmax(x, 0.0), static_cast<double>(SLOTS - 1)));
}
{%- if stage.log %}

// Log-spaced buckets: bucket k holds EDGES[k] <= v < EDGES[k + 1], the edges
// min (max / min)^(k / bins) computed in f64 on the host and rounded once;
// values outside [min, max) and NaN fall in no bucket (SLOTS). The table is copied to
// shared memory, where threads read different edges at once.
__device__ const Value TWOBS_LOG_EDGES[SLOTS + 1] = {
  {%- for e in stage.log.edges %}{{ e }}{% if not loop.last %}, {% endif %}{% endfor -%}
};
__shared__ Value twobs_bucket_edges[SLOTS + 1];

{%- if stage.log.table %}
{%- set t = stage.log.table %}
{% include "contribution/bucket_table.cu" %}
// The edges' table: {{ t.cells }} cells of the bits of a value, {{ 23 - t.shift }} mantissa bits each.
__device__ const unsigned TWOBS_VALUE_TABLE[{{ t.cells }} + 1] = {
  {%- for e in t.entries %}{{ e }}{% if not loop.last %}, {% endif %}{% endfor -%}
};
__shared__ unsigned twobs_value_table[({{ t.cells }} + 1) * {{ t.copies }}];
__constant__ unsigned TWOBS_VALUE_TABLE_SHIFT = {{ t.shift }}, TWOBS_VALUE_TABLE_STRIDE = {{ t.copies }} * 4;
{%- endif %}

__device__ __forceinline__ void prepare_buckets() {
  for (unsigned twobs_j = TWOBS_THREAD; twobs_j <= SLOTS; twobs_j += TWOBS_THREADS) {
    twobs_bucket_edges[twobs_j] = TWOBS_LOG_EDGES[twobs_j];
  }
{%- if stage.log.table %}
  prepare_table<{{ t.cells }}, {{ t.copies }}>(twobs_value_table, TWOBS_VALUE_TABLE);
{%- endif %}
}
{%- if stage.log.table %}

// The bucket from the value's bits and the table: exactly the edges' (one
// threshold a cell, compared on the bits).
__device__ __forceinline__ unsigned bucket_of(Value v) {
  return table_slot<{{ t.shift }}, {{ t.origin }}, {{ t.cells }}, {{ t.copies }}>(twobs_value_table, v, TWOBS_VALUE_TABLE_SHIFT,
                                                                          TWOBS_VALUE_TABLE_STRIDE);
}
{%- else %}

__device__ __forceinline__ unsigned bucket_of(Value v) {
  if (!(v >= twobs_bucket_edges[0] && v < twobs_bucket_edges[SLOTS])) return SLOTS;
  // A guess from the logarithm (either backend's logf, possibly a bucket
  // off), then the edges make it exact.
  int b = guess_index(logf(static_cast<float>(v / LO)) * {{ stage.log.scale }});
  while (b > 0 && v < twobs_bucket_edges[b]) --b;
  while (b + 1 < static_cast<int>(SLOTS) && v >= twobs_bucket_edges[b + 1]) ++b;
  return static_cast<unsigned>(b);
}
{%- endif %}
{%- else %}

// bucket = floor((v - LO) * SCALE) in Value arithmetic, SCALE = bins / (max - min)
// rounded once on the host; values outside [min, max) and NaN fall in no
// bucket (SLOTS). Below min is tested on the value: a product that
// underflows to -0 (SCALE < 1) would pass x >= 0.
__device__ __forceinline__ void prepare_buckets() {}

__device__ __forceinline__ unsigned bucket_of(Value v) {
  const Value x = (v - LO) * SCALE;
  return (v >= LO && x < Value(SLOTS)) ? static_cast<unsigned>(x) : SLOTS;
}
{%- endif %}
