  // The block's own points: grid unit unit_first + block, a run of A's points
  // in cell order [unit.x, unit.y), to meet the other set's points in the
  // ranges [unit.z, unit.w) of grid_ranges.
  const uint4 unit = grid_units[unit_first + block];
  const unsigned first = unit.x;
  const unsigned own_end = unit.y;
