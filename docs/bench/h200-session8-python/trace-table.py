import glob, re, statistics, sys
d = sys.argv[1]
first, second, steady = {}, {}, {}
order = []
for f in sorted(glob.glob(f"{d}/wheels-trace-*.err")):
    lines = [l for l in open(f) if l.startswith("TRACE ")]
    for call, line in enumerate(lines):
        marks = [m.split("=") for m in line.split()[1:]]
        for name, us in marks:
            if name not in order:
                order.append(name)
            target = first if call == 0 else second if call == 1 else steady if 2 <= call <= 12 else None
            if target is not None:
                target.setdefault(name, []).append(float(us))
print(f"{'mark':22} {'call0':>10} {'call1 med':>10} {'call1 max':>10} {'steady med':>10}   (us since the mark before)")
for name in order:
    f = statistics.median(first.get(name, [0]))
    s = second.get(name, [0]); t = steady.get(name, [0])
    print(f"{name:22} {f:10.1f} {statistics.median(s):10.1f} {max(s):10.1f} {statistics.median(t):10.1f}")
