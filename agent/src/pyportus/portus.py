"""pyportus, as ccswitch's agent offers it to an unmodified pyportus algorithm file.

This module exists only inside the agent's embedded interpreter (``agent/src/pyportus/mod.rs``
installs it as ``portus`` and ``pyportus`` in ``sys.modules`` before it imports a
``pyportus:FILE.py[:CLASS]`` target), so it never shadows a real pyportus elsewhere.

What it keeps of pyportus (0.5 and later, as its ``python/`` binding and examples define it):
``AlgBase``; ``start(ipc, alg, debug=False)``, which here registers ``alg`` and returns at
once (the agent owns the connection to the datapath); per flow, ``alg.new_flow(datapath=...,
datapath_info=...)`` returns an object whose ``on_report(r)`` reads the program's ``Report``
fields as attributes and calls ``datapath.update_field(name, value)``,
``datapath.update_fields([(name, value), ...])`` and ``datapath.set_program(name, [(name,
value), ...])``; ``datapath_info`` carries ``sock_id, init_cwnd, mss, src_ip, src_port,
dst_ip, dst_port``; ``try_compile(program)``; ``util.ip_to_str`` / ``util.str_to_ip``.
What ccswitch cannot honour is refused with a message that names it (``REFUSED`` below, and
``start``'s checks). The datapath objects themselves are the agent's (Rust) classes.
"""

import ast
import importlib.util
import inspect
import os
import socket
import struct
import sys
import types

# the agent's classes (agent/src/pyportus/mod.rs)
from _ccswitch_pyportus import DatapathInfo, PyDatapath, PyReport, RefusedByCcswitch, try_compile

__all__ = ["AlgBase", "start", "DatapathInfo", "PyDatapath", "PyReport", "try_compile", "util"]

#: The ``ipc`` values pyportus accepts. The agent reaches the datapath the scheme names
#: (``kernel:`` or ``ovs:``) its own way, so the choice is accepted and has no effect.
IPC_VALUES = ("netlink", "unix", "char")

#: What pyportus had and ccswitch does not offer, with what to do instead.
REFUSED = {
    "GenericCongAvoidBase": "the class-based generic-cong-avoid binding of pyportus before 0.5; "
                            "write a portus.AlgBase with datapath_programs() and new_flow(), or run "
                            "upstream's generic-cong-avoid crate against ccswitch's datapath",
    "connect": "the entry point of pyportus before 0.3; call portus.start(ipc, alg)",
    "start_inner": "pyportus's blocking runner with a socket of its own; ccswitch's agent owns the "
                   "datapath connection: call portus.start(ipc, alg)",
    "checker": "pyportus's source checker; the agent compiles every program of datapath_programs() "
               "when it loads the algorithm and refuses one that does not compile",
}


def __getattr__(name):
    if name in REFUSED:
        raise AttributeError(f"portus.{name} is not offered by ccswitch: {REFUSED[name]}")
    raise AttributeError(f"portus.{name} is not offered by ccswitch's pyportus compatibility "
                         f"(it offers {', '.join(__all__)})")


class AlgBase(object):
    """Base class of a pyportus algorithm: ``datapath_programs(self)`` returns ``{name:
    program}``, ``new_flow(self, datapath, datapath_info)`` returns the flow's object, whose
    ``on_report(self, r)`` the agent calls for each report of the flow's program."""

    @classmethod
    def assert_implements_interface(cls, C):
        check_interface(C)
        return True


def check_interface(C):
    for method, params in (("datapath_programs", ()), ("new_flow", ("datapath", "datapath_info"))):
        f = getattr(C, method, None)
        if not callable(f):
            raise NotImplementedError(f"{C.__name__} does not implement the required method {method}")
        try:
            inspect.signature(f).bind(None, **{p: None for p in params})
        except TypeError:
            raise NameError(f"{C.__name__}.{method} does not match the required parameters "
                            f"(self{''.join(', ' + p for p in params)})") from None


#: Algorithms registered by ``start`` while the agent imports a file.
_started = []


def start(ipc, alg, debug=False, **options):
    """Register ``alg`` for the agent and return (pyportus's own start blocks and serves)."""
    if options:
        raise RefusedByCcswitch(
            f"portus.start: {', '.join(sorted(options))} not offered by ccswitch "
            "(pyportus 0.5 and later take start(ipc, alg); ccswitch's agent owns the datapath connection)")
    if ipc not in IPC_VALUES:
        raise ValueError(f"ipc must be one of ({'|'.join(IPC_VALUES)}): {ipc!r}")
    if isinstance(alg, type):
        raise RefusedByCcswitch(
            f"portus.start(ipc, {alg.__name__}): a class is pyportus's API before 0.5; ccswitch takes "
            f"pyportus 0.5's: an instance of a portus.AlgBase subclass, e.g. portus.start(ipc, {alg.__name__}())")
    cls = alg.__class__
    if not issubclass(cls, AlgBase):
        raise Exception(cls.__name__ + " must be a subclass of portus.AlgBase")
    check_interface(cls)
    _started.append(alg)


class util(object):
    """pyportus's ``util``: IPv4 addresses between dotted strings and the integers of
    ``datapath_info`` (network order)."""

    @staticmethod
    def ip_to_str(ip):
        return struct.unpack("!I", socket.inet_aton(ip))[0]

    @staticmethod
    def str_to_ip(s):
        return socket.inet_ntoa(struct.pack("!I", s))


def _calls_datapath_install(source, filename):
    """Lines where the source calls ``<...>datapath.install(...)``, pyportus's API before 0.4."""
    lines = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "install":
            owner = node.func.value
            name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", None)
            if name == "datapath":
                lines.append(node.lineno)
    return lines


def _load(path, class_name):
    """Import the algorithm file at ``path`` (its ``portus.start`` registers, never blocks) and
    return ``(alg, programs)``: the registered instance of ``class_name`` (or of the one class
    the file started when ``class_name`` is None; an instance made with ``class_name()`` when
    the file started none of it) and its ``datapath_programs()`` as a dict."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    install = _calls_datapath_install(source, path)
    if install:
        raise RefusedByCcswitch(
            f"{path}, line {install[0]}: datapath.install(program) is pyportus's API before 0.4, not "
            "offered by ccswitch: return the programs from datapath_programs() and choose one with "
            "datapath.set_program(name, fields)")
    stem = os.path.splitext(os.path.basename(path))[0]
    module_name = f"pyportus_algorithm_{stem}"
    n = 1
    while module_name in sys.modules:
        n += 1
        module_name = f"pyportus_algorithm_{stem}_{n}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    del _started[:]
    try:
        spec.loader.exec_module(module)
        started = list(_started)
    except BaseException:
        del sys.modules[module_name]
        raise
    finally:
        del _started[:]
    if class_name is None:
        if len(started) != 1:
            what = "no algorithm" if not started else \
                f"{len(started)} algorithms ({', '.join(type(a).__name__ for a in started)})"
            raise RefusedByCcswitch(f"{path} started {what} with portus.start(...); name the class: "
                                    f"pyportus:{path}:CLASS")
        alg = started[0]
    else:
        alg = next((a for a in started if type(a).__name__ == class_name), None)
        if alg is None:
            cls = getattr(module, class_name, None)
            if not isinstance(cls, type):
                raise RefusedByCcswitch(f"cannot find class {class_name} in {path}")
            if not issubclass(cls, AlgBase):
                raise RefusedByCcswitch(f"{class_name} in {path} must be a subclass of portus.AlgBase")
            check_interface(cls)
            alg = cls()
    programs = alg.datapath_programs()
    if not isinstance(programs, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in programs.items()):
        raise TypeError(f"{type(alg).__name__}.datapath_programs() must return a dict of string -> string")
    if not programs:
        raise ValueError(f"{type(alg).__name__}.datapath_programs() must return at least one program")
    return alg, programs


# `import pyportus as portus`, `import portus`, `from pyportus import util` all find this module.
sys.modules.setdefault("pyportus", sys.modules[__name__])
sys.modules.setdefault("portus.util", util)
sys.modules.setdefault("pyportus.util", util)
