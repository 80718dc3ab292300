#!/usr/bin/env bash
# A few command lines with --verify on the GPU: a short check of a build on a GPU machine.
export TWOBS_CACHE=/tmp/twobs-cache
for args in "sdh --input uniform:3001" "2pcf --input uniform:100000 --param r=0.05" "selfjoin --input uniform:3001" "knn --input uniform:3001" "rdf --input uniform:2999 --input uniform:1777" "examples/manhattan/manhattan.xml --input clustered:3001"; do
  timeout 120 target/release/twobs run $args --backend cuda --verify --quiet --out /tmp/o.npy --report /tmp/r.json > /tmp/log 2>&1; rc=$?
  echo "rc $rc  $args  $(python3 -c 'import json; r=json.load(open("/tmp/r.json")); print(r["verified"][:70])' 2>/dev/null || tail -c 200 /tmp/log)"
done
