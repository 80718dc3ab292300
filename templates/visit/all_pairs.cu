  // Every block walks all tiles, starting at its own so that blocks spread
  // over memory; a point is not paired with itself.
  const unsigned tiles_total = (other.n + B - 1) / B;
  for (unsigned s = out.first_step(); s < tiles_total; ++s) {
    out.begin_step(s);
    const unsigned tile = (block + s) % tiles_total;
    tiles.load(other, tile * B);
    tiles.for_each(umin(B, other.n - tile * B), [&](unsigned jl, const Point& q) {
      const unsigned j = tile * B + jl;
      out.add(i, own, j, q, own_valid && j != i);
    });
    if (out.end_step(s)) return;  // output full: this block resumes at step s
  }
