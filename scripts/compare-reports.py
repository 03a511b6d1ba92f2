#!/usr/bin/env python3
"""Compares two `svattn reproduce` outputs table by table, timings aside.

Usage: scripts/compare-reports.py BEFORE_DIR AFTER_DIR E1 E2 ... [REPORT]

Each BEFORE_DIR/<id>.md is compared line by line with AFTER_DIR/<id>.md after masking what a
rerun may change: run times and durations, speed-up ratios, throughput, table columns whose header
names a time or throughput, UTC dates, the output directory and the git commit. Prints, per report, "same" or
the number of differing lines and the first three of them; exits 1 when any differs.
"""
import re, sys
kTimeCols = ('tokens/s', 's / step', 'slowdown', 'forward share', 'time')
def mask_line(t):
    t = t.replace(sys.argv[1], 'OUT').replace(sys.argv[2], 'OUT')
    t = re.sub(r'\b\d+(\.\d+)?(e[-+]?\d+)? ?(s|ms|min|h)\b', 'T', t)
    t = re.sub(r'\d+(\.\d+)?\s?[×x](?![a-z])', 'R×', t)
    t = re.sub(r'\d+(\.\d+)?(e[-+]?\d+)? tokens/s', 'N tokens/s', t)
    t = re.sub(r'`[0-9a-f]{40}(\+dirty)?`', 'COMMIT', t)
    t = re.sub(r'\d{4}-\d{2}-\d{2}T[0-9:]+Z', 'DATE', t)
    return t
def mask(text):
    out, header = [], None
    for line in text.split('\n'):
        if line.startswith('|'):
            cells = re.split(r'(?<!\\)\|', line)
            if header is None:
                header = cells
            elif not set(line) <= set('|-: '):
                cells = [('TIME' if i < len(header) and any(k in header[i] for k in kTimeCols) else c)
                         for i, c in enumerate(cells)]
                line = '|'.join(cells)
        else:
            header = None
        out.append(mask_line(line))
    return out
b, a = sys.argv[1], sys.argv[2]
differs = False
for e in sys.argv[3:]:
    A = mask(open(f'{b}/{e}.md').read()); B = mask(open(f'{a}/{e}.md').read())
    diff = [(x, y) for x, y in zip(A, B) if x != y]
    n = len(diff) + abs(len(A) - len(B))
    differs = differs or n > 0
    print(f'{e}: {"same" if n == 0 else f"{n} lines differ"} ({len(A)} lines, timings masked)')
    for x, y in diff[:3]:
        print('   <', x[:160]); print('   >', y[:160])
sys.exit(1 if differs else 0)
