        // Shuffled tiles have no random access: walk the tile and keep j > t.
        tiles.for_each(len, [&](unsigned jl, const Point& q) {
#pragma unroll
          for (unsigned r = 0; r < R; ++r) {
            if (r == u) out.add(r, here.own(r), own[r], start + jl, q, here.valid(r) && jl > t);
          }
        });
