import collections
from fractions import Fraction

import pytest

from ccswitch.experiments import traces
from ccswitch.cli import main


def per_second_counts(stamps, period):
    """Opportunities in each whole second [k*1000+1, (k+1)*1000] of one period."""
    counts = collections.Counter((t - 1) // 1000 for t in stamps)
    return [counts.get(k, 0) for k in range(period // 1000)]


@pytest.mark.parametrize("mbps", [24, 48, 6, 12, 10, 1.5, 0.5, 100, 7.3])
def test_constant_rate_per_second_within_one_packet(mbps):
    stamps, period = traces.constant_trace(mbps, 1000)
    expected_per_s = Fraction(str(mbps)) * 1_000_000 / (1500 * 8)
    assert period % 1000 == 0
    for count in per_second_counts(stamps, period):
        assert abs(count - expected_per_s) <= 1, (mbps, count, float(expected_per_s))


@pytest.mark.parametrize("mbps", [24, 10, 0.01, 7.3, 33.333])
def test_constant_rate_exact_on_average(mbps):
    stamps, period = traces.constant_trace(mbps, 1000)
    assert stamps[-1] == period  # mahimahi repeats with the last timestamp as period
    assert Fraction(len(stamps) * 12, period) == Fraction(str(mbps))
    assert traces.average_mbps(stamps) == pytest.approx(mbps, rel=1e-12)


def test_constant_24mbps_is_two_per_ms():
    stamps, period = traces.constant_trace(24, 1000)
    assert period == 1000 and len(stamps) == 2000
    assert collections.Counter(stamps) == {t: 2 for t in range(1, 1001)}


def test_timestamps_monotonic_and_positive():
    for stamps, _ in (traces.constant_trace(13, 1000), traces.step_trace("24:5000,6:5000,48:5000"),
                      traces.step_trace("0.7:333,90:17,3:1000")):
        assert stamps[0] >= 1
        assert all(a <= b for a, b in zip(stamps, stamps[1:]))


def test_step_trace_rates_per_segment():
    stamps, period = traces.step_trace("24:5000,6:5000,48:5000")
    assert period == 15000 and stamps[-1] == 15000
    counts = per_second_counts(stamps, period)
    expected = [2000] * 5 + [500] * 5 + [4000] * 5
    assert all(abs(c - e) <= 1 for c, e in zip(counts, expected)), counts
    assert len(stamps) == 5 * 2000 + 5 * 500 + 5 * 4000


def test_write_and_read_roundtrip(tmp_path):
    stamps, _ = traces.constant_trace(24, 1000)
    p = tmp_path / "t.trace"
    traces.write_trace(p, stamps)
    assert traces.read_trace(p) == stamps
    assert p.read_text().splitlines()[:3] == ["1", "1", "2"]


@pytest.mark.parametrize("spec, fragment", [
    ("", "empty"),
    ("24", "expected MBPS:MS"),
    ("24:5000,", "expected MBPS:MS"),
    ("24:5000,x:100", "not a number"),
    ("24:5000,0:100", "must be > 0"),
    ("-3:100", "must be > 0"),
    ("24:0", "duration must be > 0"),
    ("24:1.5", "integer number of ms"),
    ("24:5000:7", "expected MBPS:MS"),
])
def test_bad_steps(spec, fragment):
    with pytest.raises(traces.TraceError, match=fragment):
        traces.step_trace(spec)


@pytest.mark.parametrize("mbps", [0, -1, "abc", "nan"])
def test_bad_constant_rate(mbps):
    with pytest.raises(traces.TraceError):
        traces.constant_trace(mbps, 1000)


def test_cli_constant(tmp_path, capsys):
    out = tmp_path / "c.trace"
    assert main(["trace", "constant", "--mbps", "24", "--duration-ms", "1000", "-o", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 2000
    assert "2000 opportunities" in capsys.readouterr().err


def test_cli_step(tmp_path):
    out = tmp_path / "s.trace"
    assert main(["trace", "step", "--steps", "24:5000,6:5000,48:5000", "-o", str(out)]) == 0
    assert traces.read_trace(out)[-1] == 15000


@pytest.mark.parametrize("argv, fragment", [
    (["trace", "constant", "--mbps", "0", "-o", "X"], "rate must be > 0"),
    (["trace", "constant", "--mbps", "-5", "-o", "X"], "rate must be > 0"),
    (["trace", "constant", "--mbps", "24", "--duration-ms", "-1", "-o", "X"], "duration must be > 0"),
    (["trace", "step", "--steps", "24:5000;6:5000", "-o", "X"], "steps item 1"),
])
def test_cli_errors_exit_2_with_message(tmp_path, capsys, argv, fragment):
    argv = [a if a != "X" else str(tmp_path / "x") for a in argv]
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert fragment in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
