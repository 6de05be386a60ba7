"""A Reno-like algorithm with its own datapath program, written for pyportus (upstream's
shape). The program grows the window per ACK (slow start below Control.ssthresh, one MSS per
window above it) and reports per RTT or at once on loss; the flow object answers the first
loss of a window by halving it and setting ssthresh, and a timeout by restarting from two
segments. Two programs: the flow starts in slow start, and changes program the first time it
sees congestion (set_program), the way pyportus algorithms change phases."""
import pyportus as portus

GROWTH = """
    (def (Report
            (volatile acked 0)
            (volatile loss 0)
            (volatile timeout false)
            (volatile inflight 0)
            (cwnd 0))
        (Control.ssthresh {ssthresh})
        (Control.mss 1448))
    (when true
        (:= Report.acked (+ Report.acked Ack.bytes_acked))
        (:= Report.loss (+ Report.loss Ack.lost_pkts_sample))
        (:= Report.timeout Flow.was_timeout)
        (:= Report.inflight Flow.bytes_in_flight)
        (fallthrough))
    (when (< Cwnd Control.ssthresh)
        (:= Cwnd (+ Cwnd Ack.bytes_acked))
        (fallthrough))
    (when (> (+ Cwnd 1) Control.ssthresh)
        (:= Cwnd (+ Cwnd (/ (* Control.mss Ack.bytes_acked) Cwnd)))
        (fallthrough))
    (when true
        (:= Report.cwnd Cwnd)
        (fallthrough))
    (when (|| Report.timeout (> Report.loss 0))
        (report)
        (:= Micros 0))
    (when (> Micros Flow.rtt_sample_us)
        (report)
        (:= Micros 0))
"""


class RenoLikeFlow:
    def __init__(self, datapath, datapath_info):
        self.datapath = datapath
        self.mss = datapath_info.mss
        self.recovery_left = 0
        self.datapath.set_program("slow_start", [("Cwnd", datapath_info.init_cwnd), ("Control.mss", self.mss)])

    def on_report(self, r):
        self.recovery_left = max(0, self.recovery_left - r.acked)
        if r.timeout:
            self.recovery_left = 0
            ssthresh = max(r.cwnd // 2, 2 * self.mss)
            self.datapath.set_program("slow_start", [("Cwnd", 2 * self.mss), ("Control.ssthresh", ssthresh),
                                                     ("Control.mss", self.mss)])
        elif r.loss > 0 and self.recovery_left == 0:
            self.recovery_left = max(r.inflight, r.cwnd)
            ssthresh = max(r.cwnd // 2, 2 * self.mss)
            self.datapath.set_program("congestion_avoidance", [("Cwnd", ssthresh), ("Control.ssthresh", ssthresh),
                                                               ("Control.mss", self.mss)])


class RenoLike(portus.AlgBase):
    def datapath_programs(self):
        return {
            "slow_start": GROWTH.format(ssthresh=2**31 - 1),
            "congestion_avoidance": GROWTH.format(ssthresh=0),
        }

    def new_flow(self, datapath, datapath_info):
        return RenoLikeFlow(datapath, datapath_info)


portus.start("unix", RenoLike())
