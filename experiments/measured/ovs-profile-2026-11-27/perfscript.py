"""Reading `perf script` output: its samples, each a list of lines (the first names the task,
the rest are the stack, innermost first), from DIR/NAME or DIR/NAME.xz."""
import lzma
from pathlib import Path


def lines(here: Path, name: str):
    path = here / name
    return open(path) if path.exists() else lzma.open(f"{path}.xz", "rt")


def samples(here: Path, name: str = "script.txt"):
    out, cur = [], []
    for line in lines(here, name):
        if not line.strip():
            if cur:
                out.append(cur)
            cur = []
        else:
            cur.append(line.rstrip())
    if cur:
        out.append(cur)
    return out
