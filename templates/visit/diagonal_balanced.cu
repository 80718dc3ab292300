      // Load-balanced pairing (section 3.4.1): thread t meets (t + d) % B for d = 1..B/2;
      // at d = B/2 only the lower half, so each pair is met once.
      for (unsigned d = 1; d <= B / 2; ++d) {
        const unsigned jl = (t + d) & (B - 1);
        const bool valid = own_valid && jl < len && (d < B / 2 || t < B / 2);
        out.add(i, own, block * B + jl, tiles.at(jl), valid);
      }
