#!/usr/bin/env python3
"""Conversations (issue 33 §5): a 20-turn conversation replayed from its fixture, next to 20
single-turn runs replayed from theirs. The target: the conversation costs no more than the 20
single runs. (Not run in CI: timings depend on the machine; nothing here asserts a time.)

    python3 benches/conversation_replay.py [RUNS] [TURNS]
    TOOLRUN_BIN=target/debug/toolrun python3 benches/conversation_replay.py   # a binary already built

Records one fixture of a TURNS-turn test (default 20; each turn a tool call and an answer) and
TURNS fixtures of one-turn tests asking the same questions, then replays the conversation and the
single runs RUNS times each (default 7), interleaved so a busy neighbour slows both alike, and
prints the median wall and CPU time (user + system) of each. Each side is one `toolrun replay`
process, so process start-up counts once on both.
"""
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
BIN = os.environ.get("TOOLRUN_BIN") or os.path.join(TARGET, "release", "toolrun")
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
TURNS = int(sys.argv[2]) if len(sys.argv) > 2 else 20

SPEC = """version: 1
name: conversation_bench
tools:
  get_stock_price:
    description: Returns the simulated current price for a ticker symbol.
    kind: mock
    input: { type: object, properties: { ticker: { type: string } }, required: [ticker] }
    responses:
      - result: 178.15
limits: { max_steps: 100, max_tool_calls: 100 }   # counted over the whole conversation
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{ name: get_stock_price, arguments: { ticker: "T{{ turn }}" } }]
          - answer: "Turn {{ turn }}: the price is {{ last.result }}."
tests:
"""


def spec_text(turns):
    out = [SPEC]
    out.append("  - name: conversation\n    fixture: fixtures/conversation.json\n    turns:\n")
    for i in range(1, turns + 1):
        out.append(f"      - query: What is the price of T{i}?\n")
    for i in range(1, turns + 1):
        out.append(f"  - name: single_{i}\n    fixture: fixtures/single_{i}.json\n")
        out.append(f"    query: What is the price of T{i}?\n")
    return "".join(out)


def timed(cmd, cwd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main():
    if not os.path.exists(BIN):
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, check=True)
    work = tempfile.mkdtemp(prefix="toolrun-conversation-bench-")
    try:
        with open(os.path.join(work, "spec.yaml"), "w") as f:
            f.write(spec_text(TURNS))
        subprocess.run([BIN, "test", "spec.yaml", "--record", "missing"], cwd=work, check=True,
                       stdout=subprocess.DEVNULL)
        conversation = [BIN, "replay", "--root", ".", "fixtures/conversation.json"]
        singles = [BIN, "replay", "--root", "."] + [f"fixtures/single_{i}.json" for i in range(1, TURNS + 1)]
        results = {"conversation": [], "singles": []}
        for _ in range(RUNS):
            results["conversation"].append(timed(conversation, work))
            results["singles"].append(timed(singles, work))
        for name, label in [("conversation", f"1 conversation of {TURNS} turns"),
                            ("singles", f"{TURNS} single-turn fixtures")]:
            wall = statistics.median(w for w, _ in results[name])
            cpu = statistics.median(c for _, c in results[name])
            print(f"{label:>32}: median wall {wall * 1000:8.1f} ms, cpu {cpu * 1000:8.1f} ms")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
