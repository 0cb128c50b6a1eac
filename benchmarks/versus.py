"""Two commits of mcptasks side by side: `engine.py` and `http.py` on each, taking turns, in one run.

    python benchmarks/versus.py aa2338b                 # that commit against this working tree
    python benchmarks/versus.py aa2338b HEAD --rounds 5
    python benchmarks/versus.py aa2338b --quick         # a smoke run

Each side is a source tree: a commit exported with `git archive` into a temporary directory, or
this working tree (the default new side). Its benchmarks run with that tree first on `PYTHONPATH`
(checked: the child imports `mcptasks` from it), in the same virtualenv, so only mcptasks differs.
The sides take turns round by round (A B, then B A, ...), so a machine whose load drifts during the
run weighs on both alike. Printed per figure: the median of each side over the rounds and the ratio
new / old of the medians, with the lowest and highest ratio of a single round. A ratio above 1 means
the new side is faster (these are all rates). The creates per CPU-second count only the
benchmark's own CPU time: on a machine busy with other work, trust them over the rates.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# (figure key in the benchmark's JSON, label): rates, higher is better
ENGINE_FIGURES = [
    ("creates_k1", "engine: creates/s, call_tool, K=1"),
    ("creates_k64", "engine: creates/s, call_tool, K=64"),
    ("sustained_k64", "engine: create+complete/s, K=64"),
    ("creates_start_k64", "engine: creates/s, engine.start, K=64"),
    ("gets_k1", "engine: tasks/get/s, K=1"),
    ("gets_k64", "engine: tasks/get/s, K=64"),
]
# The same creates per second of the process's own CPU time: what another process on the machine
# takes from the benchmark stays out of them, so they hold on a loaded machine where rates swing.
ENGINE_CPU_FIGURES = [
    ("cpu_creates_k1", "engine: creates per CPU-s, call_tool, K=1"),
    ("cpu_creates_k64", "engine: creates per CPU-s, call_tool, K=64"),
    ("cpu_creates_start_k64", "engine: creates per CPU-s, engine.start, K=64"),
]
HTTP_FIGURES = [
    ("create_per_s", "http: task create/s"),
    ("get_per_s", "http: tasks/get/s"),
    ("update_per_s", "http: tasks/update/s"),
    ("plain_per_s", "http: plain tools/call/s"),
]


@dataclass
class Side:
    """One source tree and what its benchmarks measured, round by round."""

    name: str
    tree: Path
    figures: dict[str, list[float]] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.tree), env.get("PYTHONPATH", "")]))
        return env

    def check_import(self) -> None:
        found = subprocess.run(
            [sys.executable, "-c", "import mcptasks; print(mcptasks.__file__)"],
            env=self.env(),
            capture_output=True,
            text=True,
            check=True,
            cwd=self.tree,
        ).stdout.strip()
        if not Path(found).resolve().is_relative_to(self.tree.resolve()):
            raise SystemExit(f"{self.name}: mcptasks was imported from {found}, not from {self.tree}")

    def record(self, key: str, value: float | None) -> None:
        if value is not None:
            self.figures.setdefault(key, []).append(float(value))


@contextmanager
def exported(ref: str) -> Iterator[Path]:
    """The tree of commit `ref`, exported into a temporary directory."""
    with tempfile.TemporaryDirectory(prefix="mcptasks-versus-") as scratch:
        archive = Path(scratch) / "tree.tar"
        subprocess.run(["git", "archive", "--format=tar", "-o", str(archive), ref], cwd=ROOT, check=True)
        tree = Path(scratch) / "tree"
        with tarfile.open(archive) as tar:
            tar.extractall(tree, filter="data") if sys.version_info >= (3, 12) else tar.extractall(tree)
        yield tree


def run_engine(side: Side, args: argparse.Namespace, out: Path) -> None:
    command = [sys.executable, str(side.tree / "benchmarks" / "engine.py"), "--store", "memory"]
    command += ["--bench", "creates", "--bench", "gets", "--json", str(out)]
    if args.quick:
        command.append("--quick")
    subprocess.run(command, env=side.env(), cwd=side.tree, check=True, stdout=subprocess.DEVNULL)
    payload = json.loads(out.read_text())
    rows = {row["key"]: row["value"] for row in payload["rows"]}
    for key, _ in ENGINE_FIGURES:
        side.record(key, rows.get(key))
    creates = payload.get("results", {}).get("memory", {}).get("creates", {})
    for key, _ in ENGINE_CPU_FIGURES:
        side.record(key, creates.get(key))


def run_http(side: Side, args: argparse.Namespace, out: Path) -> None:
    command = [sys.executable, str(side.tree / "benchmarks" / "http.py"), "--modes", "on", "--json", str(out)]
    command += ["--n", str(200 if args.quick else args.n)]
    subprocess.run(command, env=side.env(), cwd=side.tree, check=True, stdout=subprocess.DEVNULL)
    measured: Mapping[str, Any] = json.loads(out.read_text())["modes"]["on"]
    for key, _ in HTTP_FIGURES:
        side.record(key, measured.get(key))


def report(old: Side, new: Side, figures: list[tuple[str, str]]) -> None:
    print(f"{'':42} {old.name:>12} {new.name:>12} {'new/old':>8} {'rounds':>14}")
    for key, label in figures:
        before, after = old.figures.get(key, []), new.figures.get(key, [])
        if not before or not after:
            print(f"{label:42} {'-':>12} {'-':>12}")
            continue
        ratio = statistics.median(after) / statistics.median(before)
        rounds = [a / b for a, b in zip(after, before, strict=False)]
        print(
            f"{label:42} {statistics.median(before):12,.0f} {statistics.median(after):12,.0f} "
            f"{ratio:8.3f} {min(rounds):6.3f}-{max(rounds):.3f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("old", help="the old commit (any git ref)")
    parser.add_argument("new", nargs="?", help="the new commit (default: this working tree)")
    parser.add_argument("--rounds", type=int, default=3, help="turns per side (default 3)")
    parser.add_argument("--n", type=int, default=1000, help="http.py samples per figure (default 1000)")
    parser.add_argument("--quick", action="store_true", help="small sizes, one round: a smoke run")
    parser.add_argument("--skip-http", action="store_true", help="only the in-process engine benchmark")
    args = parser.parse_args(argv)
    rounds = 1 if args.quick else args.rounds
    with exported(args.old) as old_tree, _new_tree(args.new) as new_tree:
        old, new = Side(args.old, old_tree), Side(args.new or "this tree", new_tree)
        for side in (old, new):
            side.check_import()
        with tempfile.TemporaryDirectory(prefix="mcptasks-versus-out-") as scratch:
            out = Path(scratch) / "figures.json"
            for turn in range(rounds):
                for side in (old, new) if turn % 2 == 0 else (new, old):
                    print(f"round {turn + 1}/{rounds}: {side.name}", file=sys.stderr, flush=True)
                    run_engine(side, args, out)
                    if not args.skip_http:
                        run_http(side, args, out)
    print(f"\n{rounds} round(s), sides taking turns; 1-min load now {os.getloadavg()[0]:.1f}\n")
    report(old, new, ENGINE_FIGURES + ENGINE_CPU_FIGURES + ([] if args.skip_http else HTTP_FIGURES))
    return 0


@contextmanager
def _new_tree(ref: str | None) -> Iterator[Path]:
    if ref is None:
        yield ROOT
    else:
        with exported(ref) as tree:
            yield tree


if __name__ == "__main__":
    sys.exit(main())
