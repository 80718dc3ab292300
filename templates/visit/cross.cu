  // Every block walks all tiles of the other set, starting at its own so that
  // blocks spread over memory.
  const unsigned tiles_total = (other.n + B - 1) / B;
  for (unsigned s = out.first_step(); s < tiles_total; ++s) {
    out.begin_step(s);
    const unsigned tile = (block + s) % tiles_total;
    tiles.load(other, tile * B);
    tiles.for_each(umin(B, other.n - tile * B), [&](unsigned jl, const Point& q) {
      out.add(i, own, tile * B + jl, q, own_valid);
    });
    if (out.end_step(s)) return;  // output full: this block resumes at step s
  }
