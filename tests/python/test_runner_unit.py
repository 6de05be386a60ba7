from ccswitch.experiments import runner
from ccswitch.experiments.scenario import loads_scenario

SC = """
name = "u"
schemes = ["native:reno"]
[[clients]]
name = "a"
delay_ms = 25
loss_downlink = 0.01
link = { mbps = 24 }
queue_packets = 100
file_bytes = 10
[[clients]]
name = "b"
link = { mbps = 24 }
file_bytes = 10
"""


def test_mahimahi_command():
    sc = loads_scenario(SC, check_files=False)
    a, b = sc.clients
    assert runner.mahimahi_command(a, "U", "D") == [
        "mm-delay", "25", "mm-loss", "downlink", "0.01", "mm-link", "U", "D",
        "--uplink-queue=droptail", "--uplink-queue-args=packets=100",
        "--downlink-queue=droptail", "--downlink-queue-args=packets=100"]
    assert runner.mahimahi_command(b, "U", "D") == ["mm-link", "U", "D"]


def test_curl_command_ignores_proxies():
    cmd = runner.curl_command("http://198.18.0.2:8080/f", "/tmp/o", 120)
    assert cmd[:4] == ["curl", "-sS", "--noproxy", "*"] and "--max-time" in cmd and cmd[-1].endswith("/f")


def test_parse_curl_output():
    out = "noise\nCCSWITCH-CURL 3.912 0.101 0.051 10485760 200\n"
    assert runner.parse_curl_output(out) == {"tct_s": 3.912, "ttfb_s": 0.101, "connect_s": 0.051,
                                             "bytes": 10485760, "http_code": 200}
    assert runner.parse_curl_output("") is None
    assert runner.parse_curl_output("CCSWITCH-CURL 1 2") is None


def test_parse_ss_cc():
    text = ("ESTAB 0 0 198.18.0.2:8080 198.18.0.1:40000\n"
            "\t cubic wscale:7,7 rto:204 rtt:3.1/1.5 mss:1448 cwnd:10\n")
    assert runner.parse_ss_cc(text) == "cubic"
    assert runner.parse_ss_cc("0 0 a:1 b:2\n\t ccswitch wscale:7,7 rto:201\n") == "ccswitch"
    assert runner.parse_ss_cc("") is None
