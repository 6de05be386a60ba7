"""NewReno in Python: the same algorithm as the agent's Rust ``reno``, written against the
simple API (see ``ccswitch.authoring``). Run it with::

    ccswitch-agent --algorithm py:ccswitch.authoring.examples.reno:Reno
    schemes = ["kernel:py:ccswitch.authoring.examples.reno:Reno"]      # in a scenario

The model (RFC 5681, RFC 6582, as Linux's ``tcp_reno_*`` helpers):

- slow start: the window grows by the bytes acknowledged until it reaches ssthresh;
- congestion avoidance: one MSS more per window of data acknowledged (one per RTT);
- the first loss of a congestion event halves the window in whole segments
  (``ssthresh = max(⌊cwnd / MSS⌋ // 2, 2) MSS``, ``cwnd = ssthresh``, as Linux halves
  packets); the bytes the loss's report acknowledges grow the window first, in slow start
  or in avoidance (Linux grew it on each of those ACKs before the loss was seen). The event
  lasts until the data outstanding when the loss was reported has been delivered (NewReno's
  recovery, ending as Linux's does: what was in flight, and the lost segments but the last,
  whose retransmission ends it); the window holds meanwhile, further losses belong to the
  same event (so does one reported at most two segments after the count ran out: a hole in
  the old data, which Linux's Recovery waits for), and the bytes
  acknowledged during it are no credit for congestion avoidance;
- a retransmission timeout sets ssthresh the same way and restarts from one segment (never
  below the 2-segment minimum window), then slow-starts back;
- slow start is the datapath's (``slow_start_in_datapath``), which grows the window on every
  ACK as Linux does; reports come once per RTT throughout.

The agent checks that this class and the Rust ``reno`` produce the same windows report for
report (``agent/src/python.rs``), and ``ccswitch bench authoring`` compares their cost.
"""

from ccswitch.authoring import Algorithm

MIN_CWND_SEGMENTS = 2
LOSS_WINDOW_SEGMENTS = 1
# A loss this many segments past the end of a recovery's count still belongs to it.
HOLE_FOUND_PAST_COUNT_SEGMENTS = 2


class Reno(Algorithm):
    slow_start_in_datapath = True

    def __init__(self) -> None:
        # Bytes acknowledged in congestion avoidance not yet turned into window growth.
        self.ca_acked_bytes = 0
        # Bytes still to be acknowledged before the current recovery episode ends.
        self.recovery_bytes_left = 0

    def on_report(self, flow) -> None:
        mss = flow.mss
        cwnd = flow.cwnd
        acked = flow.acked_bytes
        began_in_recovery = self.recovery_bytes_left > 0
        in_recovery = min(acked, self.recovery_bytes_left)
        self.recovery_bytes_left -= in_recovery

        if flow.timeout:
            self.recovery_bytes_left = 0
            flow.ssthresh = self.reduced_window(cwnd, mss)
            flow.cwnd = max(LOSS_WINDOW_SEGMENTS, MIN_CWND_SEGMENTS) * mss
            self.ca_acked_bytes = 0
            return
        ssthresh = flow.ssthresh
        # What is outstanding now, as Linux's Recovery ends: what is in flight and the lost
        # segments but the last, whose retransmission ends recovery and counts as growth.
        outstanding = max(flow.in_flight + (flow.lost - 1) * mss, 1)
        acked -= in_recovery  # a recovery's ACKs are no credit
        if flow.lost and self.recovery_bytes_left > 0:
            return  # the same event
        if flow.lost and began_in_recovery and acked <= HOLE_FOUND_PAST_COUNT_SEGMENTS * mss:
            # The same event too: a hole in the data outstanding at its start, found once the
            # count ran out by at most two segments. It lasts until this loss's retransmission
            # is delivered.
            self.recovery_bytes_left = outstanding
            return
        if flow.lost:
            # A new congestion event: recover until what is outstanding now is delivered.
            self.recovery_bytes_left = outstanding
            if cwnd < ssthresh:  # the ACKs before the loss grew the window first
                used = min(acked, ssthresh - cwnd)
                cwnd += used
                acked -= used
            if acked > 0 and self.ca_acked_bytes + acked >= cwnd:  # in avoidance too
                cwnd += (self.ca_acked_bytes + acked) // cwnd * mss
            flow.ssthresh = flow.cwnd = self.reduced_window(cwnd, mss)
            self.ca_acked_bytes = 0
            return
        if self.recovery_bytes_left > 0:
            return  # hold the window while recovering

        if cwnd < ssthresh:  # slow start, up to ssthresh
            used = min(acked, ssthresh - cwnd)
            cwnd += used
            acked -= used
        if acked > 0:  # congestion avoidance: one MSS per window acknowledged
            self.ca_acked_bytes += acked
            if self.ca_acked_bytes >= cwnd:
                segments = self.ca_acked_bytes // cwnd
                self.ca_acked_bytes -= segments * cwnd
                cwnd += segments * mss
        flow.cwnd = cwnd

    @staticmethod
    def reduced_window(cwnd: int, mss: int) -> int:
        return max(cwnd // mss // 2 * mss, MIN_CWND_SEGMENTS * mss)
