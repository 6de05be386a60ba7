import json
import os

import pytest

from ccswitch.experiments import results


def sample_rows():
    return [
        {"client": "c", "scheme": "native:cubic", "repetition": 1, "file_bytes": 1000, "tct_s": 0.5, "ttfb_s": 0.1,
         "connect_s": 0.05, "bytes": 1000, "http_code": 200, "sha256_ok": True, "cc_observed": "cubic",
         "started_at": "2024-01-01T00:00:00.000+00:00", "wall_s": 0.7, "error": None},
        {"client": "c", "scheme": "ccswitch:reno", "repetition": 1, "file_bytes": 1000, "tct_s": None, "ttfb_s": None,
         "connect_s": None, "bytes": None, "http_code": None, "sha256_ok": False, "cc_observed": None,
         "started_at": "2024-01-01T00:00:01.000+00:00", "wall_s": 150.0, "error": "timeout"},
    ]


def test_parquet_roundtrip(tmp_path):
    p = tmp_path / "transfers.parquet"
    results.write_transfers_parquet(p, sample_rows())
    back = results.read_transfers_parquet(p)
    assert back == sample_rows()
    assert sorted(os.listdir(tmp_path)) == ["transfers.parquet"]


def test_parquet_columns_are_the_documented_ones(tmp_path):
    import pyarrow.parquet as pq

    p = tmp_path / "t.parquet"
    results.write_transfers_parquet(p, [])
    names = pq.read_schema(p).names
    for required in ("client", "scheme", "repetition", "file_bytes", "tct_s", "ttfb_s", "bytes",
                     "sha256_ok", "started_at", "error"):
        assert required in names


def test_failed_write_leaves_nothing(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    p = tmp_path / "transfers.parquet"

    def half_write(table, where):
        with open(where, "wb") as f:
            f.write(b"PAR1 half")
        raise KeyboardInterrupt  # an interrupted write

    monkeypatch.setattr(pq, "write_table", half_write)
    with pytest.raises(KeyboardInterrupt):
        results.write_transfers_parquet(p, sample_rows())
    assert os.listdir(tmp_path) == []


def test_failed_write_keeps_previous_file(tmp_path):
    p = tmp_path / "summary.json"
    results.write_json_atomic(p, {"a": 1})
    with pytest.raises(ValueError):
        results.write_json_atomic(p, {"a": float("nan")})  # not valid JSON: refused
    assert json.loads(p.read_text()) == {"a": 1}
    assert os.listdir(tmp_path) == ["summary.json"]


def test_atomic_path_renames_only_on_success(tmp_path):
    p = tmp_path / "x.txt"
    with pytest.raises(RuntimeError):
        with results.atomic_path(p) as tmp:
            open(tmp, "w").write("partial")
            raise RuntimeError("boom")
    assert not p.exists() and os.listdir(tmp_path) == []
    with results.atomic_path(p) as tmp:
        open(tmp, "w").write("done")
    assert p.read_text() == "done"


def test_jsonl_log(tmp_path):
    p = tmp_path / "t.jsonl"
    log = results.JsonlLog(p)
    for r in sample_rows():
        log.append(r)
    log.close()
    assert [json.loads(l) for l in p.read_text().splitlines()] == sample_rows()


def test_plot(tmp_path):
    p = tmp_path / "tct.png"
    rows = sample_rows() + [dict(sample_rows()[0], tct_s=0.6, repetition=2)]
    results.plot_tct(p, rows, ["c"], ["native:cubic", "ccswitch:reno"], title="t")
    assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
