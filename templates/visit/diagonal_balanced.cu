        // Load-balanced pairing (section 3.4.1): thread t meets (t + d) % B for
        // d = 1..B/2; at d = B/2 only the lower half, so each pair is met once.
#pragma unroll
        for (unsigned r = 0; r < R; ++r) {
          if (r != u) continue;
#pragma unroll 4
          for (unsigned d = 1; d <= B / 2; ++d) {
            const unsigned jl = (t + d) & (B - 1);
            const bool valid = here.valid(r) && jl < len && (d < B / 2 || t < B / 2);
            out.add(r, here.own(r), own[r], start + jl, tiles.at(jl), valid);
          }
        }
