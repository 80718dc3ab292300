  // Every block walks all tiles, starting at its own so that blocks spread
  // over memory; a point is not paired with itself, so tiles that overlap the
  // block's own points test j != i.
  const unsigned tiles_total = (other.n + B - 1) / B;
  for (unsigned s = out.first_step(step_first); s < umin(tiles_total, step_end); ++s) {
    out.begin_step(s);
    const unsigned tile = (block * R + s) % tiles_total;
    const unsigned start = tile * B;
    tiles.load(other, start);
    const unsigned len = umin(B, other.n - start);
    const bool overlaps = start < first + B * R && first < start + B;
    if (all_own_valid && len == B && !overlaps) {
      tiles.for_each(B, [&](unsigned jl, const Point& q) { offer(start + jl, q, always); });
    } else {
      tiles.for_each(len, [&](unsigned jl, const Point& q) {
        const unsigned j = start + jl;
        offer(j, q, [&](unsigned r) { return here.valid(r) && here.own(r) != j; });
      });
    }
    if (out.end_step(s)) return;  // output full: this block resumes at step s
  }
