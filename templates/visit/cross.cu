  // Every block walks all tiles of the other set, starting at its own so that
  // blocks spread over memory.
  const unsigned tiles_total = (other.n + B - 1) / B;
  for (unsigned s = out.first_step(step_first); s < umin(tiles_total, step_end); ++s) {
    out.begin_step(s);
    const unsigned tile = (block * R + s) % tiles_total;
    tiles.load(other, tile * B);
    const unsigned len = umin(B, other.n - tile * B);
    if (all_own_valid && len == B) {
      tiles.for_each(B, [&](unsigned jl, const Point& q) { offer(tile * B + jl, q, always); });
    } else {
      tiles.for_each(len, [&](unsigned jl, const Point& q) { offer(tile * B + jl, q, own_valid); });
    }
    if (out.end_step(s)) return;  // output full: this block resumes at step s
  }
