"""A constant window, written for pyportus (upstream's shape: a flow class, a portus.AlgBase
subclass, portus.start at module level). ccswitch's tests run this file unmodified."""
import sys

import pyportus as portus

WINDOW_SEGMENTS = 64


class ConstCwndFlow:
    def __init__(self, datapath, datapath_info):
        self.datapath = datapath
        self.datapath_info = datapath_info
        self.cwnd = WINDOW_SEGMENTS * datapath_info.mss
        self.datapath.set_program("per_rtt", [("Cwnd", self.cwnd)])

    def on_report(self, r):
        if r.loss > 0:
            sys.stderr.write(f"const: {r.loss} lost, window kept at {self.cwnd}\n")
        self.datapath.update_field("Cwnd", self.cwnd)


class ConstCwnd(portus.AlgBase):
    def datapath_programs(self):
        return {
            "per_rtt": """
                (def (Report
                    (volatile acked 0)
                    (volatile loss 0)
                    (volatile rtt 0)))
                (when true
                    (:= Report.acked (+ Report.acked Ack.bytes_acked))
                    (:= Report.loss (+ Report.loss Ack.lost_pkts_sample))
                    (:= Report.rtt Flow.rtt_sample_us)
                    (fallthrough))
                (when (> Micros Flow.rtt_sample_us)
                    (report)
                    (:= Micros 0))
            """,
        }

    def new_flow(self, datapath, datapath_info):
        return ConstCwndFlow(datapath, datapath_info)


portus.start("unix", ConstCwnd())
