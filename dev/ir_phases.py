"""ir_phases.py: how many grid barriers a persistent form of a graph needs at least (lab): the
longest chain of dependent ops that are not views (index, reshape, set_index, const, iota), loops
unrolled, from the IR text that `h3c compile ... --print-ir-after=side-streams` prints to stderr;
and how many such ops one call executes. One kernel an op (an op of several launches adds
phases of its own).
    python3 dev/ir_phases.py IR.txt [GRAPH]            (GRAPH: decode by default)
Found 2026-12-06: M3.1 small's decode graph (batch 1) executes 67 such ops; the longest chain is
46 (dev/persistent-decode.md).
"""
import re
import sys

lines = open(sys.argv[1]).read().split('\n')
graph = sys.argv[2] if len(sys.argv) > 2 else "decode"
# find the graph's lines
start = next(i for i, l in enumerate(lines) if re.match(r'\s*graph @%s\(' % graph, l))
depth = 0; body = []
for l in lines[start:]:
    body.append(l)
    depth += l.count('{') - l.count('}')
    if depth == 0 and len(body) > 1: break
VIEW = {'index', 'reshape', 'set_index', 'const', 'iota'}
op_re = re.compile(r'^\s*((?:%[\w.]+(?:, )?)+) = (\w+)\((.*?)\)')
def parse_block(ls):
    """list of (results, name, operands, attrs, inner lines) at this nesting level"""
    out = []; i = 0
    while i < len(ls):
        l = ls[i]; m = op_re.match(l)
        if not m: i += 1; continue
        res = [r.strip() for r in m.group(1).split(',')]
        name = m.group(2); ops = re.findall(r'%[\w.]+', m.group(3))
        inner = []
        if l.rstrip().endswith('{'):
            d = 1; j = i + 1
            while d > 0:
                d += ls[j].count('{') - ls[j].count('}')
                inner.append(ls[j]); j += 1
            i = j
        else: i += 1
        attrs = l
        out.append((res, name, ops, attrs, inner))
    return out
def run(block, env_level):
    """each value's level: its producer's phase (a view keeps its operand's)"""
    for (res, name, ops, attrs, inner) in block:
        if name == 'loop':
            n = int(re.search(r'count = (\d+)', attrs).group(1))
            # loop-carried: body params map to operands, then yields
            hdr = next(l for l in inner if '^(' in l)
            pnames = re.findall(r'(%[\w.]+):', hdr)
            inner_ops = parse_block(inner)
            yl = [l for l in inner if l.strip().startswith('yield')][-1]
            ys = re.findall(r'%[\w.]+', yl)
            carried = [env_level.get(o, 0) for o in ops]
            for it in range(n):
                env = dict(env_level)
                env[pnames[0]] = 0  # loop counter
                for p, c in zip(pnames[1:], carried): env[p] = c
                run(inner_ops, env)
                carried = [env.get(y, 0) for y in ys]
                env_level.update({k: v for k, v in env.items() if k not in pnames})
            for r, c in zip(res, carried): env_level[r] = c
            continue
        l_in = max([env_level.get(o, 0) for o in ops] + [0])
        l_out = l_in if name in VIEW else l_in + 1
        for r in res: env_level[r] = l_out
    return env_level
block = parse_block(body[1:])
env = run(block, {})
ret = next(l for l in body if l.strip().startswith('return'))
print(graph, 'phases (longest chain of non-view ops):', max(env.get(v, 0) for v in re.findall(r'%[\w.]+', ret)))
# count non-view ops executed
def count(block):
    n = 0
    for (res, name, ops, attrs, inner) in block:
        if name == 'loop':
            n += int(re.search(r'count = (\d+)', attrs).group(1)) * count(parse_block(inner))
        elif name not in VIEW: n += 1
    return n
print('non-view ops executed:', count(block))
