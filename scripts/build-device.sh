#!/usr/bin/env bash
# Builds what the GPU machine runs (it has no Rust toolchain): the release
# binary, target/release/twobs, and the parity suite, target/release/parity
# (tests/parity.rs). Carry both: `carry: ["target/release/twobs", "target/release/parity"]`.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked
exe=$(cargo test --release --locked --test parity --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "parity":
        print(m["executable"])')
cp "$exe" target/release/parity
ls -l target/release/twobs target/release/parity
