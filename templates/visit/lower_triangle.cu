  // Circulant pairing of spans of B x R points: block b meets the spans
  // b+1 .. b+M/2 (mod M), so every unordered pair of spans is visited once and
  // every block does the same work; the last step pairs the block's own points
  // with each other. A step loads the span's R tiles in turn.
  const unsigned span = B * R;
  const unsigned spans = (a.n + span - 1) / span;
  const unsigned offdiag = (spans - 1) / 2 + ((spans % 2 == 0 && block < spans / 2) ? 1 : 0);
  const unsigned steps = offdiag + 1;
  for (unsigned s = out.first_step(step_first); s < umin(steps, step_end); ++s) {
    out.begin_step(s);
    const bool diagonal = s == offdiag;
    const unsigned partner = diagonal ? block : (block + 1 + s) % spans;
#pragma unroll 1
    for (unsigned u = 0; u < R; ++u) {  // not unrolled: own[] is indexed by the unrolled r only
      const unsigned start = partner * span + u * B;
      if (start >= a.n) break;  // the same in every thread
      tiles.load(a, start);
      const unsigned len = umin(B, a.n - start);
      if (!diagonal) {
        if (all_own_valid && len == B) {
          tiles.for_each(B, [&](unsigned jl, const Point& q) { offer(start + jl, q, always); });
        } else {
          tiles.for_each(len, [&](unsigned jl, const Point& q) { offer(start + jl, q, own_valid); });
        }
      } else {
        // Own rows before u meet the whole tile, row u meets it by the diagonal
        // pattern, rows after u come later (the pair is met from their side).
        if (u > 0) {
          tiles.for_each(len, [&](unsigned jl, const Point& q) {
            offer(start + jl, q, [&](unsigned r) { return r < u && here.valid(r); });
          });
        }
{{ stage.diagonal }}
      }
    }
    if (out.end_step(s)) return;  // output full: this block resumes at step s
  }
