      // Shuffled tiles have no random access: walk the tile and keep j > t.
      tiles.for_each(len, [&](unsigned jl, const Point& q) {
        out.add(i, own, block * B + jl, q, own_valid && jl > t);
      });
