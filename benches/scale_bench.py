#!/usr/bin/env python3
"""`toolrun check` and `toolrun run` on very large inputs, with the release binary: wall time and
peak RSS of each process (not run in CI: timings depend on the machine).

    python3 benches/scale_bench.py [SCALE] [--timeout SECONDS] [--only NAME...]

SCALE (default 1) multiplies every input's size, so `0.1` measures a slow build quickly. The
inputs, generated into a temporary folder:

1. `keys`: a spec whose mock result is one mapping of 400,000 keys (6.8 MB), the last key a
   duplicate of the first (so `check` must find it and exits 1), and the same spec without the
   duplicate for `run` (the scripted model calls the mock);
2. `wide`: a table tool over a CSV of 300,000 columns and 3 rows (`run` filters on the last
   column and projects two columns);
3. `long`: a table tool over a 30 MB CSV of 8 columns (`run` filters on a value in the last row);
4. `json`: the same rows as a 30 MB JSON table file (an array of objects), whose parsed rows
   (a JSON object each) take several times the file's size.

Targets (issue 12): 400k keys < 1 s; 300k columns and the 30 MB CSV < 2 s each, with peak RSS
under 4x the file's size.
"""
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
BIN = os.path.join(TARGET, "release", "toolrun")

SPEC_HEAD = """version: 1
name: scale
default_model: scripted
"""


def key_name(i):
    """Short distinct keys (`k` and base 36), so 400,000 of them stay under the 8 MiB spec limit."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        out = digits[i % 36] + out
        i //= 36
        if i == 0:
            return "k" + out


def keys_spec(n, duplicate):
    lines = [SPEC_HEAD, "tools:\n  big:\n    description: Returns one very large mapping for the benchmark.\n",
             "    kind: mock\n    responses:\n      - result:\n"]
    lines.extend(f"          {key_name(i)}: {i % 10}\n" for i in range(n))
    if duplicate:
        lines.append(f"          {key_name(0)}: 0\n")
    lines.append("""limits:
  max_tool_output_chars: 100000000
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{ name: big, arguments: {} }]
          - answer: "last key {{ last.result.%s }}"
""" % key_name(n - 1))
    return "".join(lines)


def table_spec(file, where, columns):
    return SPEC_HEAD + f"""tools:
  table:
    description: Looks rows up in a large generated table.
    kind: table
    file: {file}
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{{ name: table, arguments: {{ where: {where}, columns: {columns} }} }}]
          - answer: "{{{{ last.result }}}}"
"""


def write_wide_csv(path, columns):
    with open(path, "w") as f:
        f.write(",".join(f"c{i}" for i in range(columns)) + "\n")
        for row in range(3):
            f.write(",".join(f"r{row}v{i}" for i in range(columns)) + "\n")


def write_rows(path, target_bytes, head, row, tail=""):
    """Writes `head`, then `row(i)` for i = 0, 1, ... until the file reaches `target_bytes`, then
    `tail`; returns how many rows."""
    rows = 0
    with open(path, "w") as f:
        f.write(head)
        size = len(head)
        while size < target_bytes:
            line = row(rows)
            f.write(line)
            size += len(line)
            rows += 1
        f.write(tail)
    return rows


def write_long_csv(path, target_bytes):
    return write_rows(path, target_bytes, "id,name,email,team,city,salary,active,note\n", lambda i: (
        f"{i},Person {i},person{i}@example.com,team{i % 97},City {i % 1013},"
        f"{50000 + i % 70000}.50,{'true' if i % 3 else 'false'},note number {i} of the table\n"))


def write_long_json(path, target_bytes):
    return write_rows(path, target_bytes, "[\n", lambda i: (
        f'{"," if i else ""}{{"id": {i}, "name": "Person {i}", "email": "person{i}@example.com", '
        f'"team": "team{i % 97}", "salary": {50000 + i % 70000}.5, "active": {"true" if i % 3 else "false"}}}\n'), "]\n")


def measure(args, cwd, timeout, expect_rc):
    """Wall seconds, CPU seconds and peak RSS (MiB) of one process. Measured by `/usr/bin/time`,
    whose child starts from a small process: a child forked from this Python process would count
    Python's own memory in its peak."""
    env = dict(os.environ, TOOLRUN_CACHE_DIR="off", NO_COLOR="1")
    timed = ["/usr/bin/time", "-f", "\n%M %U %S"] + args
    start = time.perf_counter()
    try:
        out = subprocess.run(timed, cwd=cwd, env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, None, None, f"timed out after {timeout:.0f} s"
    elapsed = time.perf_counter() - start
    err = out.stderr.decode()
    err, _, stats = err.rstrip().rpartition("\n")
    err = "\n".join(l for l in err.splitlines() if not l.startswith("Command exited with"))
    peak_kb, user, system = stats.split()
    cpu = float(user) + float(system)
    rss = int(peak_kb) / 1024
    if out.returncode != expect_rc:
        return elapsed, cpu, rss, f"exit {out.returncode}, expected {expect_rc}: {err[:300]}"
    lines = (out.stdout.decode().strip() or err.strip()).splitlines()
    return elapsed, cpu, rss, (lines[-1] if lines else "")[:80]


def report(label, size, result):
    elapsed, cpu, rss, note = result
    if elapsed is None:
        print(f"{label:<34} {'-':>8} {'-':>8} {'-':>10} {'-':>7}  {note}")
    else:
        ratio = rss * 1024 * 1024 / size
        print(f"{label:<34} {elapsed:7.2f}s {cpu:7.2f}s {rss:6.1f} MiB {ratio:6.2f}x  {note}")
    sys.stdout.flush()


def main():
    args = sys.argv[1:]
    scale, timeout, only = 1.0, 600.0, None
    while args:
        a = args.pop(0)
        if a == "--timeout":
            timeout = float(args.pop(0))
        elif a == "--only":
            only = args
            args = []
        else:
            scale = float(a)
    if not os.environ.get("NO_BUILD"): subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path", os.path.join(ROOT, "Cargo.toml")],
                   check=True)
    with tempfile.TemporaryDirectory() as work:
        print(f"{'input':<34} {'wall':>8} {'CPU':>8} {'peak RSS':>10} {'/file':>7}  last line of output")
        if only is None or "keys" in only:
            n = int(400_000 * scale)
            dup = os.path.join(work, "keys_dup.yaml")
            ok = os.path.join(work, "keys.yaml")
            with open(dup, "w") as f:
                f.write(keys_spec(n, True))
            with open(ok, "w") as f:
                f.write(keys_spec(n, False))
            size = os.path.getsize(dup)
            report(f"check, {n:,} keys + duplicate", size, measure([BIN, "check", dup], work, timeout, 1))
            report(f"run, {n:,} keys", size,
                   measure([BIN, "run", ok, "--query", "q"], work, timeout, 0))
        if only is None or "wide" in only:
            cols = int(300_000 * scale)
            csv = os.path.join(work, "wide.csv")
            write_wide_csv(csv, cols)
            spec = os.path.join(work, "wide.yaml")
            with open(spec, "w") as f:
                f.write(table_spec("wide.csv", f"{{ c{cols - 1}: r2v{cols - 1} }}", f"[c0, c{cols - 1}]"))
            size = os.path.getsize(csv)
            report(f"check, CSV of {cols:,} columns", size, measure([BIN, "check", spec], work, timeout, 0))
            report(f"run, CSV of {cols:,} columns", size,
                   measure([BIN, "run", spec, "--query", "q"], work, timeout, 0))
        for name, ext, write, kind in (("long", "csv", write_long_csv, "CSV"), ("json", "json", write_long_json, "JSON")):
            if only is not None and name not in only:
                continue
            table = f"{name}.{ext}"
            rows = write(os.path.join(work, table), int(30_000_000 * scale))
            spec = os.path.join(work, f"{name}.yaml")
            with open(spec, "w") as f:
                f.write(table_spec(table, f"{{ email: person{rows - 1}@example.com }}", "[id, name]"))
            size = os.path.getsize(os.path.join(work, table))
            mb = size / 1e6
            report(f"check, {mb:.0f} MB {kind} ({rows:,} rows)", size, measure([BIN, "check", spec], work, timeout, 0))
            report(f"run, {mb:.0f} MB {kind}", size, measure([BIN, "run", spec, "--query", "q"], work, timeout, 0))

if __name__ == "__main__":
    main()
