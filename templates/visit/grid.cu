  // The grid (src/index.rs): the block's unit meets the other set's points,
  // in cell order, of the unit's ranges, a tile of B at a time. A tile starts
  // on a multiple of TILE_ALIGN (the input stage's loads are aligned), so it
  // may begin before its range; points before the range are tested out.
  // Step s is the unit's s-th tile over all its ranges in order, so that a
  // launch runs a window of steps and the output can resume at any one.
  // One set, each unordered pair once: the first range is the own row, where
  // own point i meets only the points after it.
  constexpr bool OWN_ROW_AFTER = {{ stage.diagonal }};
  // One set, every ordered pair: a point is not its own partner.
  constexpr bool SKIP_SELF = {{ stage.skip_self }};
  const unsigned from = out.first_step(step_first);
  unsigned range_step = 0;  // the first step of range g
  for (unsigned g = unit.z; g < unit.w && range_step < step_end; ++g) {
    const uint2 range = grid_ranges[g];
    const unsigned base = range.x / TILE_ALIGN * TILE_ALIGN;
    const unsigned count = range.x < range.y ? (range.y - base + B - 1) / B : 0;
    const bool own_row = OWN_ROW_AFTER && g == unit.z;
    for (unsigned k = from > range_step ? from - range_step : 0; k < count && range_step + k < step_end; ++k) {
      const unsigned s = range_step + k;
      out.begin_step(s);
      const unsigned start = base + k * B;
      tiles.load(other, start);
      const unsigned len = umin(B, range.y - start);
      // A tile past every own point needs no order; one apart from them no self test.
      const bool after = own_row && start < own_end;
      const bool self = SKIP_SELF && start < own_end && first < start + len;
      if (all_own_valid && start >= range.x && len == B && !after && !self) {
        tiles.for_each(B, [&](unsigned jl, const Point& q) { offer(start + jl, q, always); });
      } else {
        tiles.for_each(len, [&](unsigned jl, const Point& q) {
          const unsigned j = start + jl;
          const bool in_range = j >= range.x;
          offer(j, q, [&](unsigned r) {
            return in_range && here.valid(r) && (!after || j > here.own(r)) && (!self || j != here.own(r));
          });
        });
      }
      if (out.end_step(s)) return;  // output full: this block resumes at step s
    }
    range_step += count;
  }
