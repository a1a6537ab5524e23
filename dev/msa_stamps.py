#!/usr/bin/env python3
"""msa_stamps.py: the phases of the decode top-k and attention kernels, from the "LAB" lines of
a build with dev/msa_stamps.patch, against the kernels' CUPTI start and end (lab).

  dev/msa_stamps.py STDOUT.txt TIMELINE.tsv

One kernel instance = the LAB lines of one kind whose first stamp falls inside one CUPTI
record of that kernel (h3cu_topks / h3cu_kvattm). Per instance, every stamp is taken from the
record's start; printed: the medians over instances of each block's stamps, and the record's
end. All in microseconds. Lines that fall in no record (2026-12-07: the stamped launches were
not the traced graph's) are grouped by their first stamps (within 40 us) and taken from the
instance's earliest block start instead; the duration column is then the last stamp.
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
    stamps = collections.defaultdict(list)  # (kind, (start, end)) -> [(role, {name: ns})]
    loose = collections.defaultdict(list)  # kind -> lines in no CUPTI record
    for line in open(out):
        m = LINE.search(line)
        if not m:
            continue
        role, rest = m.group(1), dict(kv.split("=") for kv in m.group(2).split())
        kind = "att" if role == "att" else "topk"
        first = int(rest["in"])
        hit = [r for r in recs[kind] if r[0] - 2000 <= first <= r[1]]
        if hit:
            stamps[(kind, hit[0])].append((role, rest))
        else:
            loose[kind].append((role, rest))
    for kind, lines in loose.items():  # instances by proximity, from their earliest start
        lines.sort(key=lambda rl: int(rl[1]["in"]))
        group = []
        for role, rest in lines + [(None, None)]:
            if group and (rest is None or int(rest["in"]) - int(group[0][1]["in"]) > 40000):
                t0 = int(group[0][1]["in"])
                t1 = max(int(v) for _, r in group for k, v in r.items() if k not in ("p", "s", "kind"))
                stamps[(kind, (t0, t1))] += group
                group = []
            if rest is not None:
                group.append((role, rest))
    if not stamps:
        sys.exit("no LAB line of h3cu_topks / h3cu_kvattm")
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
        print(f"== {kind}: {n} instances, duration median {statistics.median(ends):.2f} us (CUPTI record, or last stamp)")
        order = collections.OrderedDict()
        for (role, s, name), v in sorted(table.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            order.setdefault((role, s), []).append((statistics.median(v), name))
        for (role, s), items in order.items():
            items.sort()
            print(f"  {role:9s} s={s:3d}  " + "  ".join(f"{name} {t:6.2f}" for t, name in items))


if __name__ == "__main__":
    main()
