// twobs CPU driver for {{ problem_name }} ({{ origin }}){% if f64_mode %}, f64 mode{% endif %}.
// Generated; compiled with the host C++ compiler and loaded by the runner.
{% include "cpu/prelude.h" %}
#define TWOBS_THREAD 0u  // one host thread sets up its own copy of the shared state
#define TWOBS_THREADS 1u
{% include "common/types.cu" %}

{% include "common/snippet.cu" %}
namespace twobs_generated {  // no name of the user's can clash with what follows

// ------------------------------------------------------------------ what a pair contributes: {{ names.kind }}
{{ fragments.contribution }}
// The contribution's set-up, once per host thread: it depends on constants only.
static inline void twobs_prepare() {
  static thread_local bool prepared = false;
  if (!prepared) {
    prepare_contribution();
    prepared = true;
  }
}
// ------------------------------------------------------------------ the points
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

// A set's columns as typed pointers, read once before a loop over a run of
// points: the loop then reads plain arrays, and the compiler vectorises it.
struct TwobsColumns {
{%- for c in components %}
  const {{ c.ctype }}* __restrict__ c{{ loop.index0 }};
{%- endfor %}
};
[[maybe_unused]] static inline TwobsColumns columns_of(const TwobsSet* s) {
  return {
{%- for c in components %}static_cast<const {{ c.ctype }}*>(s->columns[{{ loop.index0 }}]){% if not loop.last %}, {% endif %}{%- endfor %}};
}
[[maybe_unused]] static inline Point load_point(const TwobsColumns& s, uint64_t i) {
  Point p;
{%- for c in components %}
  p{{ c.member }} = s.c{{ loop.index0 }}[i];
{%- endfor %}
  return p;
}

[[maybe_unused]] constexpr bool TWOBS_UNORDERED = {{ unordered }};  // a pair is (min, max), not (own, other)
// ------------------------------------------------------------------ the pairs: {{ names.visit }}
{{ fragments.visit }}
// ------------------------------------------------------------------ the output
{{ fragments.output }}
// ------------------------------------------------------------------ one pair at a time
// Pair k is point pairs[2k] of set a with point pairs[2k + 1] of set b, alone
// (the promise check, src/verify.rs): its value, whether it adds to the
// output, and where the spec declares a key map, the key, map(key), and
// whether that is the value bit for bit (or both NaN). Numbers go out as doubles.
extern "C" void twobs_pairs_alone(const TwobsSet* a, const TwobsSet* b, const uint32_t* pairs, uint64_t n,
                                  double* value, uint8_t* adds, double* key, double* mapped, uint8_t* same) {
  twobs_prepare();
  for (uint64_t k = 0; k < n; ++k) {
    const Point p = load_point(a, pairs[2 * k]), q = load_point(b, pairs[2 * k + 1]);
{%- if value2 %}
    // A 2-D histogram's pair: its first value stands for it in messages.
    const Value v = twobs_pair(p, q).{{ value2[0] }};
{%- else %}
    const Value v = twobs_pair(p, q);
{%- endif %}
    value[k] = static_cast<double>(v);
    adds[k] = twobs_adds(p, q);
{%- if snippet.key_map %}
    const Value kv = twobs_key(p, q), m = twobs_map(kv);
    key[k] = static_cast<double>(kv);
    mapped[k] = static_cast<double>(m);
    same[k] = memcmp(&v, &m, sizeof v) == 0 || (v != v && m != m);
{%- else %}
    key[k] = mapped[k] = value[k];
    same[k] = 1;
{%- endif %}
{%- if snippet.exclude %}
    // An excluded pair calls neither of the snippet's functions: it promises nothing.
    if (twobs_excluded(p, q)) same[k] = 1;
{%- endif %}
  }
}
{%- for p in params %}{% if p.run_time %}
// The box read at run time (params::{{ p.name }}): its twelve numbers in
// RunTimeBox's order, each already of the box's type. The runner sets it
// before each run, one run at a time in a process (src/backend/mod.rs).
extern "C" void twobs_use_box(const double* v) {
  using T = decltype(params::{{ p.name }}.lx);
  T* numbers[12] = {&params::{{ p.name }}.lx, &params::{{ p.name }}.ly, &params::{{ p.name }}.lz,
                    &params::{{ p.name }}.xy, &params::{{ p.name }}.xz, &params::{{ p.name }}.yz,
                    &params::{{ p.name }}.per_lx, &params::{{ p.name }}.per_ly, &params::{{ p.name }}.per_lz,
                    &params::{{ p.name }}.xy_ly, &params::{{ p.name }}.xz_lz, &params::{{ p.name }}.yz_lz};
  for (int k = 0; k < 12; ++k) *numbers[k] = static_cast<T>(v[k]);
}
{%- endif %}{% endfor %}
}  // namespace twobs_generated
