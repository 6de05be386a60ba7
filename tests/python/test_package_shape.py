"""The package's roles as its imports say them: experiments/ runs experiments and never imports
analysis/ (the commands in commands/ compose the two; analysis/ may read experiments/)."""

import ast
import os

PACKAGE = os.path.join(os.path.dirname(__file__), "..", "..", "python", "ccswitch")


def imported_modules(path: str, module: str):
    """The absolute names of every module the file imports, relative imports resolved
    against `module` (the file's own dotted name), with the line of each."""
    package = module.rsplit(".", 1)[0] if not path.endswith("__init__.py") else module
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[:len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
            yield name, node.lineno
            for a in node.names:  # `from .. import analysis`
                yield f"{name}.{a.name}", node.lineno


def test_no_module_under_experiments_imports_analysis():
    root = os.path.join(PACKAGE, "experiments")
    files = sorted(f for f in os.listdir(root) if f.endswith(".py"))
    assert "runner.py" in files
    offending = []
    for f in files:
        module = "ccswitch.experiments." + f[:-3]
        for name, line in imported_modules(os.path.join(root, f), module):
            if name == "ccswitch.analysis" or name.startswith("ccswitch.analysis."):
                offending.append(f"experiments/{f}:{line} imports {name}")
    assert not offending, "\n".join(offending)


def test_the_check_sees_relative_and_absolute_imports(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("from ..analysis import handover\nfrom .. import analysis\nimport ccswitch.analysis.plots\n")
    names = [n for n, _ in imported_modules(str(p), "ccswitch.experiments.m")]
    assert "ccswitch.analysis.handover" in names
    assert "ccswitch.analysis" in names
    assert "ccswitch.analysis.plots" in names
