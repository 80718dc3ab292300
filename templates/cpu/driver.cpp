// twobs CPU driver for {{ problem_name }} ({{ origin }}){% if f64_mode %}, f64 mode{% endif %}.
// Generated; compiled with the host C++ compiler and loaded by the runner.
{% include "cpu/prelude.h" %}
{% include "common/types.cu" %}

// ------------------------------------------------------------------ the pairwise function
{% if f64_mode %}{% include "cpu/f64_begin.h" %}{% endif %}
#line 1 "{{ snippet.file }}"
{{ snippet.text }}
//@@twobs-line-reset
{% if f64_mode %}{% include "cpu/f64_end.h" %}{% endif %}
{% include "common/contribution.cu" %}

// ------------------------------------------------------------------ driver: {{ plan.visit }}
// Each component of a set is its own array, as on the GPU.
struct TwobsSet {
  const void* const* columns;
  uint64_t n;
};

static inline Point load_point(const TwobsSet* s, uint64_t i) {
  Point p;
{%- for c in components %}
  p{{ c.member }} = static_cast<const {{ c.ctype }}*>(s->columns[{{ loop.index0 }}])[i];
{%- endfor %}
  return p;
}

// Calls f(j, value) for every partner j of row i, in the pair order of the GPU kernel.
template <class F>
static inline void for_partners(const TwobsSet* a, const TwobsSet* b, uint64_t i, F&& f) {
  const Point own = load_point(a, i);
{%- if plan.visit == "lower_triangle" %}
  (void)b;
  for (uint64_t j = i + 1; j < a->n; ++j) f(j, {{ snippet.function }}(own, load_point(a, j)));
{%- elif plan.visit == "all_pairs" %}
  (void)b;
  for (uint64_t j = 0; j < a->n; ++j) {
    if (j != i) f(j, {{ snippet.function }}(own, load_point(a, j)));
  }
{%- else %}
  for (uint64_t j = 0; j < b->n; ++j) f(j, {{ snippet.function }}(own, load_point(b, j)));
{%- endif %}
}

extern "C" {
{%- if output.kind == "count" or output.kind == "histogram" %}
// Adds the rows [begin, end) into slots[SLOTS].
void twobs_rows(const TwobsSet* a, const TwobsSet* b, uint64_t begin, uint64_t end, uint64_t* slots) {
  for (uint64_t i = begin; i < end; ++i) {
    for_partners(a, b, i, [&](uint64_t, Value v) {
      const int s = slot_of(v);
      if (s >= 0) ++slots[s];
    });
  }
}
{%- elif output.kind == "sum" %}
// Adds the pair values of rows [begin, end) to *sum.
void twobs_rows(const TwobsSet* a, const TwobsSet* b, uint64_t begin, uint64_t end, double* sum) {
  double acc = 0.0;
  for (uint64_t i = begin; i < end; ++i) {
    for_partners(a, b, i, [&](uint64_t, Value v) { acc += static_cast<double>(v); });
  }
  *sum += acc;
}
{%- elif output.kind == "pairs" %}
// Writes the passing pairs of rows [begin, end) as (i, j) while they fit
// `capacity`; returns how many there are.
uint64_t twobs_rows(const TwobsSet* a, const TwobsSet* b, uint64_t begin, uint64_t end, uint32_t* out, uint64_t capacity) {
  uint64_t m = 0;
  for (uint64_t i = begin; i < end; ++i) {
    for_partners(a, b, i, [&](uint64_t j, Value v) {
      if (passes(v)) {
        if (m < capacity) {
          out[2 * m] = static_cast<uint32_t>(i);
          out[2 * m + 1] = static_cast<uint32_t>(j);
        }
        ++m;
      }
    });
  }
  return m;
}
{%- elif output.kind == "knn" %}
// Writes the K best of each row of [begin, end) to values and ids, row i at (i - begin) * K.
void twobs_rows(const TwobsSet* a, const TwobsSet* b, uint64_t begin, uint64_t end, double* values, uint32_t* ids) {
  for (uint64_t i = begin; i < end; ++i) {
    TopK top;
    for_partners(a, b, i, [&](uint64_t j, Value v) { top.offer(v, static_cast<unsigned>(j)); });
    for (unsigned k = 0; k < K; ++k) {
      values[(i - begin) * K + k] = static_cast<double>(top.best[k]);
      ids[(i - begin) * K + k] = top.index[k];
    }
  }
}
{%- endif %}
}
