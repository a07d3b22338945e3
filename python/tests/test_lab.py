"""The laboratory from Python: the command line's JSON reports as dicts, its errors as
exceptions."""

import pytest

import hetla


def test_info_names_the_topology_and_backends():
    info = hetla.info(clusters="2x1")
    assert info["cpus"] >= 1
    assert "faer" in str(info["backends"]).lower()
    assert info["clusters"]


def test_bound_and_simulate_return_the_cli_keys():
    b = hetla.bound(platform="sirocco", clusters="2x10", gpus=4, n=9600, tile=960)
    for key in ("cp_ms", "area_ms", "mixed_ms", "n", "tile", "tasks"):
        assert key in b
    assert b["n"] == 9600 and b["mixed_ms"] >= b["cp_ms"] > 0
    s = hetla.simulate(platform="sirocco", clusters="2x10", gpus=4, n=9600, tile=960)
    assert isinstance(s, dict)
    text = str(s)
    assert "mixed" in text
    # a simulation never beats its own lower bound
    flat = _numbers(s)
    assert any("makespan" in k or k.endswith("_ms") for k in flat)


def _numbers(d, prefix=""):
    out = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(_numbers(v, f"{prefix}{k}."))
    elif isinstance(d, (int, float)):
        out[prefix.rstrip(".")] = d
    return out


def test_simulate_lu_and_qr():
    for f in ("lu", "qr"):
        s = hetla.simulate(platform="sirocco", clusters="2x10", n=4800, tile=960, factorization=f)
        assert isinstance(s, dict)


def test_sweep_returns_rows(tmp_path):
    out = hetla.sweep(platform="sirocco", clusters=["20x1", "2x10"], gpus=[0, 1],
                      n="4800:9600:4800", tile=960, out=str(tmp_path / "sweep"))
    try:
        import pandas

        assert isinstance(out, pandas.DataFrame)
        assert len(out) == 8
    except ImportError:
        assert isinstance(out, dict)
    assert (tmp_path / "sweep" / "results.csv").exists()


def test_tune_finds_the_papers_knl_configuration():
    t = hetla.tune(platform="knl", n=34560, show=2)
    assert (t["pick"]["clusters"], t["pick"]["tile"]) == ("4x16", 2880)
    assert len(t["runners_up"]) == 2
    assert t["pick"]["bounds"]["mixed_ms"] <= t["pick"]["predicted_ms"]
    with pytest.raises(ValueError, match="verify"):
        hetla.tune(platform="knl", n=34560, verify=1)


def test_bad_options_are_valueerror():
    with pytest.raises(ValueError, match="unexpected argument|--bogus"):
        hetla.simulate(bogus=3)
    with pytest.raises(ValueError):
        hetla.bound(platform="sirocco", clusters="2x10", n=9600, tile=0)
    with pytest.raises(ValueError):
        hetla.simulate(platform="no-such-machine", n=100)


def test_cli_runs_any_command():
    reports = hetla.cli("batch", count=50, n=16)
    assert len(reports) == 1 and reports[0]["count"] == 50
