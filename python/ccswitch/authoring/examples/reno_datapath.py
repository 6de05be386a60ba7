"""Reno with its per-ACK growth in the datapath program: the example of the full API (see
``ccswitch.authoring``), the same algorithm as the agent's Rust ``reno-datapath``. Run it with::

    ccswitch-agent --algorithm py:ccswitch.authoring.examples.reno_datapath:RenoDatapath
    schemes = ["kernel:py:ccswitch.authoring.examples.reno_datapath:RenoDatapath"]   # in a scenario

CCP's own first example (Narayan et al., SIGCOMM 2018, §4). The program grows the window on
every ACK, in the datapath: by the bytes acknowledged below ``Control.ssthresh`` (slow
start), by one MSS per window acknowledged above it (congestion avoidance). It reports once
per RTT, and at once on a loss or a timeout. The agent only answers congestion: the first
loss of an event halves the window and sets ``ssthresh``; a timeout sets ``ssthresh`` the
same way and restarts from one segment. Recovery lasts, as NewReno's (RFC 6582), until the
data in flight at the loss has been acknowledged; meanwhile ``Control.hold`` stops the
program's growth and further losses belong to the same event.

The agent checks that this class and the Rust ``reno-datapath`` answer every report alike
(``agent/src/pyportus/tests.rs``), and ``ccswitch bench authoring`` compares their cost.
"""

from ccswitch.authoring import ProgramAlgorithm

#: Immediates of CCP programs stay below 2**31: "no threshold yet".
NO_SSTHRESH_BYTES = 2**31 - 1
MIN_CWND_SEGMENTS = 2
INIT_CWND_SEGMENTS = 10

PROGRAM = f"""
(def (Report
        (volatile acked 0)
        (volatile lost 0)
        (volatile timeout false)
        (volatile rtt 0)
        (volatile inflight 0)
        (volatile now 0)
        (cwnd 0))
    (Control.ssthresh {NO_SSTHRESH_BYTES})
    (Control.mss 1448)
    (Control.hold 0))
(when true
    (:= Report.acked (+ Report.acked Ack.bytes_acked))
    (:= Report.lost (+ Report.lost Ack.lost_pkts_sample))
    (:= Report.timeout Flow.was_timeout)
    (:= Report.rtt Flow.rtt_sample_us)
    (:= Report.inflight Flow.bytes_in_flight)
    (:= Report.now Ack.now)
    (fallthrough))
(when (&& (== Control.hold 0) (< Cwnd Control.ssthresh))
    (:= Cwnd (+ Cwnd Ack.bytes_acked))
    (fallthrough))
(when (&& (== Control.hold 0) (> (+ Cwnd 1) Control.ssthresh))
    (:= Cwnd (+ Cwnd (/ (* Control.mss Ack.bytes_acked) Cwnd)))
    (fallthrough))
(when true
    (:= Report.cwnd Cwnd)
    (fallthrough))
(when (|| Report.timeout (> Report.lost 0))
    (report)
    (:= Micros 0))
(when (> Micros Flow.rtt_sample_us)
    (report)
    (:= Micros 0))
"""


class RenoDatapath(ProgramAlgorithm):
    def datapath_programs(self):
        return {"reno": PROGRAM}

    def on_create(self, flow):
        self.mss = flow.mss
        # Bytes still to be acknowledged before the current recovery episode ends.
        self.recovery_bytes_left = 0
        cwnd = max(INIT_CWND_SEGMENTS, MIN_CWND_SEGMENTS) * self.mss
        flow.update_fields([("Control.mss", self.mss), ("Cwnd", cwnd)])

    def on_report(self, flow, report):
        mss = self.mss
        cwnd = max(report.cwnd, MIN_CWND_SEGMENTS * mss)  # the datapath's, grown per ACK
        was_recovering = self.recovery_bytes_left > 0
        self.recovery_bytes_left -= min(self.recovery_bytes_left, report.acked)
        if report.timeout:
            self.recovery_bytes_left = 0
            ssthresh = max(cwnd // 2, MIN_CWND_SEGMENTS * mss)
            cwnd = mss
        elif report.lost and self.recovery_bytes_left == 0:
            # A new congestion event: recover until what is outstanding now is delivered, as
            # Linux's Recovery ends (the agent's FlowState::classify counts it the same way).
            self.recovery_bytes_left = max(report.inflight + (report.lost - 1) * mss, 1)
            ssthresh = cwnd = max(cwnd // 2, MIN_CWND_SEGMENTS * mss)
        else:
            # The datapath grows the window itself; the agent only steps in on congestion.
            if was_recovering and self.recovery_bytes_left == 0:
                flow.update_field("Control.hold", 0)
            return
        flow.update_fields([
            ("Control.ssthresh", min(ssthresh, NO_SSTHRESH_BYTES)),
            ("Control.hold", int(self.recovery_bytes_left > 0)),
            ("Cwnd", cwnd),
        ])
