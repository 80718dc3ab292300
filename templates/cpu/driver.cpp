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

[[maybe_unused]] constexpr bool TWOBS_UNORDERED = {{ unordered }};  // a pair is (min, max), not (own, other)
// ------------------------------------------------------------------ the pairs: {{ names.visit }}
{{ fragments.visit }}
// ------------------------------------------------------------------ the output
{{ fragments.output }}
}  // namespace twobs_generated
