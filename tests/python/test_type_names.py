"""DESIGN.md decision 12: no two types share a name. Every struct, enum, union, trait and type
alias declared in the project's Rust sources (tests included) must have a name of its own, so
that a name met in a log, a profile or a review says which type it is."""

import collections
import os
import re
import subprocess

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
DECLARATION = re.compile(r"^\s*(?:pub(?:\([a-z:]+\))?\s+)?(?:struct|enum|union|trait|type)\s+([A-Z][A-Za-z0-9_]*)", re.M)


def declarations(files):
    """{name: [path:line, ...]} of every type declared in `files` ({path: text})."""
    found = collections.defaultdict(list)
    for path, text in files.items():
        for m in DECLARATION.finditer(text):
            found[m.group(1)].append(f"{path}:{text.count(chr(10), 0, m.start()) + 1}")
    return found


def shared_names(files):
    return {name: places for name, places in declarations(files).items() if len(places) > 1}


def test_no_two_rust_types_share_a_name():
    paths = subprocess.run(["git", "ls-files", "*.rs"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    assert len(paths) > 50
    files = {p: open(os.path.join(ROOT, p), encoding="utf-8").read() for p in paths}
    shared = shared_names(files)
    assert not shared, "\n".join(f"{name}: {', '.join(places)}" for name, places in sorted(shared.items()))


def test_the_check_sees_every_kind_of_declaration():
    files = {
        "a.rs": "pub struct Flow {\n}\nenum Mode { A }\n",
        "b.rs": "mod x {\n    pub(crate) struct Flow;\n    trait Mode {}\n}\ntype Alone = u32;\n",
        "c.rs": "// struct Flow in a comment is not a declaration\nfn f() -> Flow { todo!() }\n",
    }
    assert shared_names(files) == {"Flow": ["a.rs:1", "b.rs:2"], "Mode": ["a.rs:3", "b.rs:3"]}
