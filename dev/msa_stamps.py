#!/usr/bin/env python3
"""msa_stamps.py: the phases of the decode top-k and attention kernels, from the "LAB" lines of
a build with dev/msa_stamps.patch, against the kernels' CUPTI start and end (lab).

  dev/msa_stamps.py STDOUT.txt TIMELINE.tsv

One kernel instance = the LAB lines of one kind whose first stamp falls inside one CUPTI
record of that kernel (h3cu_topks / h3cu_kvattm). Per instance, every stamp is taken from the
record's start; printed: the medians over instances of each block's stamps, and the record's
end. All in microseconds.
"""
import collections
import re
import statistics
import sys

LINE = re.compile(r"LAB (topk-last|topk|att) (.*)")


def main():
    out, tsv = sys.argv[1], sys.argv[2]
    recs = collections.defaultdict(list)  # kernel kind -> [(start, end)]
    for line in open(tsv):
        f = line.split("\t")
        if f[0] != "K":
            continue
        kind = "topk" if "h3cu_topks" in f[8] else "att" if "h3cu_kvattm" in f[8] else None
        if kind:
            recs[kind].append((int(f[1]), int(f[2])))
    stamps = collections.defaultdict(list)  # (kind, instance start) -> [(role, {name: ns})]
    for line in open(out):
        m = LINE.search(line)
        if not m:
            continue
        role, rest = m.group(1), dict(kv.split("=") for kv in m.group(2).split())
        kind = "att" if role == "att" else "topk"
        first = int(rest["in"])
        hit = [r for r in recs[kind] if r[0] - 2000 <= first <= r[1]]
        if not hit:
            continue
        stamps[(kind, hit[0])].append((role, rest))
    if not stamps:
        sys.exit("no LAB line inside a CUPTI record of h3cu_topks / h3cu_kvattm")
    for kind in ("topk", "att"):
        table = collections.defaultdict(list)  # (role, s, stamp) -> offsets
        ends, n = [], 0
        for (k, (start, end)), lines in stamps.items():
            if k != kind:
                continue
            n += 1
            ends.append((end - start) / 1e3)
            for role, rest in lines:
                for name, v in rest.items():
                    if name in ("p", "s", "kind"):
                        continue
                    table[(role, int(rest["s"]), name)].append((int(v) - start) / 1e3)
        if not n:
            continue
        print(f"== {kind}: {n} instances, CUPTI duration median {statistics.median(ends):.2f} us")
        order = collections.OrderedDict()
        for (role, s, name), v in sorted(table.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            order.setdefault((role, s), []).append((statistics.median(v), name))
        for (role, s), items in order.items():
            items.sort()
            print(f"  {role:9s} s={s:3d}  " + "  ".join(f"{name} {t:6.2f}" for t, name in items))


if __name__ == "__main__":
    main()
