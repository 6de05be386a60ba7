"""Writing a congestion-control algorithm in Python.

A Python algorithm is a class with an ``on_report(self, flow)`` method. The agent runs it in
an interpreter embedded in ``ccswitch-agent`` (no rebuild), loaded by dotted path::

    ccswitch-agent --algorithm py:mypkg.mymod:MyAlgorithm
    schemes = ["kernel:py:mypkg.mymod:MyAlgorithm"]        # in a scenario file

The module must be importable by the agent: from ``PYTHONPATH``, from the ``site-packages`` of
the venv in ``VIRTUAL_ENV``, or (under ``ccswitch run``) from the scenario file's directory.
``ccswitch run`` passes all of these to the agents it starts.

One instance is created per flow, so instance attributes are per-flow state. The agent calls
``on_report(flow)`` once per report of the datapath: once per RTT by default, after every ACK
or every fixed period if the algorithm asks (``reporting``), and at once on a loss or a
timeout. Whatever the method sets on ``flow`` is applied when it returns. If it raises, the
agent keeps the flow's window as it was and the flow goes on; it logs the first five
tracebacks of each flow in full (then one line per 1000) and counts every exception, and
``ccswitch run`` reports the count per transfer and per scheme (``ok (73 on_report
errors)``), so a class that always raises does not pass for a working one. Before a run,
``ccswitch run`` imports and instantiates each ``py:`` class once in a trial agent (with the
scenario's directory on PYTHONPATH), so an import error stops the run before any transfer;
``on_report`` itself first runs in the first transfer.

The ``flow`` object (``ccswitch.agent.Flow``, provided by the agent). Windows are in bytes,
times in microseconds, rates in bytes per second.

This report's measurement:
    ``acked_bytes``    bytes newly acknowledged
    ``lost``           packets newly marked lost;  ``is_loss()``: a loss or a timeout
    ``timeout``        the retransmission timer fired (bool)
    ``ecn``            packets whose ACK carried ECN-Echo
    ``in_flight``      bytes in flight at the last ACK
    ``rtt_us``         latest RTT sample (also ``crtt_us``, "current RTT")
    ``delivery_rate``  delivery rate of this report (also ``bw``)
    ``now_us``         datapath clock

The flow's state (shared by every algorithm, kept across algorithm handovers):
    ``min_rtt_us``, ``srtt_us`` (RFC 6298), ``max_bw`` (largest delivery rate), ``mss``,
    ``cwnd``, ``ssthresh``, ``rate`` (pacing rate or None), ``in_slow_start`` (cwnd <
    ssthresh), ``in_recovery`` (a recovery episode started by ``classify()``),
    ``reporting`` ("per_rtt", "per_ack" or a period in µs).

What the algorithm sets (ints or floats; floats are rounded):
    ``flow.cwnd = bytes`` or ``set_cwnd(bytes)``, ``flow.ssthresh = bytes`` or
    ``set_ssthresh(bytes)``, ``flow.rate = bytes_per_s`` or ``set_rate(bytes_per_s)`` (None:
    leave pacing to the datapath), ``set_period_us(us)``, ``set_report_per_ack()``,
    ``set_report_per_rtt()``.

What the agent refuses or abandons (the flow then keeps the window it had before the call, as
if the call had not happened, and the events file counts it):
    a window outside 2 segments .. 65535 * 2**14 bytes (the largest TCP window) or a rate
    outside 2 segments per second .. 10**12 bytes/s, NaN, infinity, negative or 0: the setter
    raises ``ValueError`` at that line, and the call is discarded even if the algorithm catches
    it (``python_bad_values``); an exception (``on_report_errors``); a callback still running
    after its time budget (``ccswitch-agent --python-budget-ms``, 20 ms by default), which is
    interrupted with ``CallbackTimeout`` (a ``BaseException``) and its flow's reports answered
    without Python for 200 ms, doubling with each overrun in a row up to 10 s
    (``python_timeouts``, ``python_skipped``).

Optional helper: ``classify()`` runs the control flow the Rust loss-based algorithms share
(timeout, first loss of a congestion event, hold while recovering, slow start) and returns
``("timeout" | "congestion" | "hold" | "avoidance", bytes_for_congestion_avoidance)``; with
``"congestion"`` the bytes are those acknowledged before the loss that slow start did not
take, to grow by before the cut (Linux grew the window on each of those ACKs).

Mystique's names (its Table III) are aliases with the same units: ``getCRTT()``,
``getMinRTT()``, ``getSRTT()``, ``getCBW()``, ``getMaxBW()``, ``getCwnd()``, ``isLoss()``,
``setCwnd(bytes)``, ``setRate(bytes_per_s)``, ``setPeriod(us)``.

See ``ccswitch/authoring/examples/reno.py`` for a complete algorithm (NewReno).

The full API: datapath programs
-------------------------------
A class that declares ``datapath_programs()`` (derive from ``ProgramAlgorithm``) brings its
own programs in CCP's datapath language, as CCP's algorithms do: the datapath folds every
ACK into the program's ``Report`` registers, sets ``Cwnd`` and ``Rate`` per ACK if the
program says so, and sends a report when the program calls ``(report)``. Loaded the same
way (``py:MODULE:CLASS``), one instance per flow. The agent compiles every program with the
compiler of its Rust algorithms when it loads the class (a program that does not compile
stops the agent at start, naming it) and the datapath runs them: in BPF's interpreter on the
kernel datapath, in the shim on the ovs datapath.

- ``datapath_programs(self)``: ``{name: program_source}``; a new flow runs the first.
- ``on_create(self, flow)`` (optional): set the flow's initial window, rate or control
  registers, or choose another program.
- ``on_report(self, flow, report)``: called for each report of the flow's program; the
  program's ``Report`` fields are attributes of ``report`` (``report.acked``; an unknown
  name raises AttributeError listing the fields).

``flow`` (the agent's ``Datapath``): ``update_field(name, value)``, ``update_fields([(name,
value), ...])``, ``set_program(name, [(name, value), ...])`` (registers of the new program
start afresh), and ``mss``, ``init_cwnd``, ``sock_id``, ``program`` (the flow's program's
name), ``info`` (``sock_id, init_cwnd, mss, src_ip, src_port, dst_ip, dst_port``). A name is
``"Cwnd"`` (bytes), ``"Rate"`` (bytes/s) or a control register of the flow's program
(``"Control.ssthresh"`` or ``"ssthresh"``); an unknown name raises at the call. What a
callback set is sent to the datapath when it returns, as one message. Callbacks run under the
same guard as the simple API's: if one raises, runs past its time budget, or sets a window
(below 1 segment, NaN, negative, beyond TCP's largest), a rate or a register (negative, NaN)
the agent refuses (ValueError at the call), it is logged and counted (``on_report_errors``,
``python_timeouts``, ``python_bad_values``) and everything it set is dropped.
Such algorithms run their own programs, so the selector cannot hand their flows to another
algorithm.

See ``ccswitch/authoring/examples/reno_datapath.py`` for a complete algorithm: Reno whose
window grows per ACK in the datapath, the agent only answering losses (the same algorithm as
the agent's Rust ``reno-datapath``).

pyportus algorithms
-------------------
An algorithm file written for pyportus (CCP's Python binding: a ``portus.AlgBase`` subclass
with ``datapath_programs()`` and ``new_flow(datapath, datapath_info)``, started with
``portus.start("unix", alg)``) runs unmodified::

    ccswitch-agent --algorithm pyportus:path/to/aimd.py:AIMD
    schemes = ["kernel:pyportus:aimd.py:AIMD", "ovs:pyportus:aimd.py:AIMD"]   # in a scenario

``pyportus:FILE.py`` alone takes the algorithm the file starts. A relative FILE is looked
for in the agent's current directory, then on its ``sys.path`` (under ``ccswitch run``, the
scenario's directory first). Inside the agent, ``import portus`` and ``import pyportus``
give ccswitch's compatibility module, whose ``portus.start(...)`` registers the algorithm
and returns; nothing of it exists outside the agent's interpreter. What ccswitch cannot
honour is refused when the agent loads the file, naming it: ``GenericCongAvoidBase``,
``connect``, ``start_inner`` (pyportus's runner), ``datapath.install(...)`` (pyportus before
0.4), a class instead of an instance given to ``start``, options of ``start`` other than
``debug``. Differences: the ``ipc`` argument is accepted and has no effect (the scheme
names the datapath); a flow whose ``new_flow`` chose no program runs the first one (pyportus
would leave it without reports); what a callback asked is sent when it returns, and dropped
if it raises (pyportus sends each call at once); values may be floats (rounded) and rates
beyond 2**32 - 1.
"""

from __future__ import annotations

from typing import Optional, Union

#: Values of ``Algorithm.reporting``.
PER_RTT = "per_rtt"
PER_ACK = "per_ack"


class Algorithm:
    """Base class of Python congestion-control algorithms (optional: the agent only needs
    ``on_report``; ``name`` and ``reporting`` have defaults).

    - ``name``: how the agent's logs name the algorithm; the class name unless overridden.
    - ``reporting``: how often to be called at first: ``PER_RTT`` (default), ``PER_ACK``, or
      an int period in µs. ``flow.set_period_us(...)`` etc. change it later.
    - ``slow_start_in_datapath``: ``True`` if the algorithm slow-starts as Linux does (the
      window grows by every byte acknowledged while it is below ``ssthresh``): the datapath
      then grows the window on each ACK between reports, from the window the latest report's
      answer set, up to ``ssthresh``, and the next report's ``flow.cwnd`` is the window the
      algorithm's own slow start would reach. ``False`` by default: the window moves only
      with the algorithm's answers.
    - ``on_report(flow)``: called per report; read the measurement from ``flow`` and set the
      window (and, if the algorithm paces, the rate) on it.
    """

    reporting: Optional[Union[str, int]] = PER_RTT
    slow_start_in_datapath: bool = False

    @property
    def name(self) -> str:
        return type(self).__name__

    def on_report(self, flow) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement on_report(self, flow)")


class ProgramAlgorithm:
    """Base class of full-API Python algorithms, which bring their own datapath programs
    (optional: the agent needs ``datapath_programs`` and ``on_report``). One instance per
    flow; see the module's documentation.

    - ``datapath_programs()``: ``{name: source}`` in CCP's datapath language; the first is
      the program a new flow runs.
    - ``on_create(flow)``: the flow is new; set its window (``flow.update_field("Cwnd",
      bytes)``), control registers, or another program (``flow.set_program(name, fields)``).
    - ``on_report(flow, report)``: one report of the flow's program; its ``Report`` fields
      are attributes of ``report``.
    """

    @property
    def name(self) -> str:
        return type(self).__name__

    def datapath_programs(self) -> dict:
        raise NotImplementedError(f"{type(self).__name__} must implement datapath_programs(self)")

    def on_create(self, flow) -> None:
        pass

    def on_report(self, flow, report) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement on_report(self, flow, report)")
