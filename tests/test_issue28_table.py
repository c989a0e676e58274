"""benchmarks/issue28_table.py without a GPU: the interleaved rounds and their medians with fake
timers, the selection-aware detector errors, the markdown table, and the script's CLI (--help
and a clear message where torch or CUDA is missing)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import issue28_report as rep  # noqa: E402


class FakeClock:
    """Timers whose samples depend on a shared drift: every call advances time, and a side's
    latency is its base plus the drift at that moment (what interleaving must cancel)."""

    def __init__(self, bases: dict[str, float], drift_per_sample: float = 0.0):
        self.bases, self.drift, self.t, self.calls = bases, drift_per_sample, 0, []

    def timer(self, name: str):
        def run(n: int) -> list[float]:
            self.calls.append((name, n))
            out = []
            for _ in range(n):
                out.append(self.bases[name] + self.drift * self.t)
                self.t += 1
            return out

        return run


def test_interleave_rotates_the_order_and_drops_the_switch_sample():
    clock = FakeClock({"ours": 10.0, "torch_graph": 20.0, "torch_compile": 30.0})
    timers = {n: clock.timer(n) for n in clock.bases}
    samples = rep.interleave(timers, rounds=3, per_round=4, warmup=2, discard=1)
    assert clock.calls[:3] == [("ours", 2), ("torch_graph", 2), ("torch_compile", 2)]  # warm-up
    order = [name for name, n in clock.calls[3:]]
    assert order == [
        *("ours", "torch_graph", "torch_compile"),
        *("torch_graph", "torch_compile", "ours"),
        *("torch_compile", "ours", "torch_graph"),
    ]
    assert all(n == 5 for _, n in clock.calls[3:])  # per_round + the discarded first sample
    assert {k: [len(b) for b in v] for k, v in samples.items()} == {k: [4, 4, 4] for k in timers}


def test_interleaved_ratio_cancels_a_drift_that_separate_phases_would_not():
    """A clock that slows by 0.01 µs a sample: timed one side after the other, the later side
    looks slower; in rotated rounds the ratio of medians stays near the true 1.0."""
    bases = {"ours": 100.0, "torch_compile": 100.0}
    clock = FakeClock(bases, drift_per_sample=0.01)
    separate = {n: float(np.median(clock.timer(n)(500))) for n in bases}
    assert separate["torch_compile"] / separate["ours"] > 1.04
    clock = FakeClock(bases, drift_per_sample=0.01)
    s = rep.summarize(rep.interleave({n: clock.timer(n) for n in bases}, rounds=10, per_round=50, warmup=0))
    assert s["ratio"]["torch_compile"] == pytest.approx(1.0, abs=0.005)
    assert s["rounds"] == 10 and s["per_round"] == 50
    assert s["round_ratio_min"]["torch_compile"] <= 1.0 <= s["round_ratio_max"]["torch_compile"]


def test_summarize_medians_ratios_and_extra_sides():
    samples = {
        "ours": [[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]],
        "ours_step": [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]],
        "torch_graph": [[4.0, 4.0, 4.0], [4.0, 4.0, 4.0]],
        "torch_compile": [[2.0, 4.0, 4.0], [4.0, 4.0, 4.0]],
    }
    s = rep.summarize(samples)
    assert s["median_us"] == {"ours": 2.0, "ours_step": 1.0, "torch_graph": 4.0, "torch_compile": 4.0}
    assert s["ratio"] == {"torch_graph": 0.5, "torch_compile": 0.5}  # ours_step is not a baseline
    assert s["extra_ratio"]["ours_step"] == {"torch_graph": 0.25, "torch_compile": 0.25}
    assert s["p10_us"]["ours"] == pytest.approx(1.5)
    # A part with no torch side (its capture failed) still reports ours' median.
    assert rep.summarize({"ours": [[5.0, 7.0]]})["median_us"] == {"ours": 6.0}


def _detections(rows: list[tuple[float, float, float, float, float, int]]) -> np.ndarray:
    return np.array(rows, np.float32).reshape(1, -1, 6)


def test_detection_errors_see_through_swapped_near_ties():
    want = _detections([(0, 0, 10, 10, 0.9, 1), (50, 50, 60, 60, 0.8000, 2), (100, 100, 120, 120, 0.7999, 2)])
    # Half precision flips the two near-tied detections' order and moves a box by 0.01.
    got = _detections([(0, 0, 10, 10.01, 0.9, 1), (100, 100, 120, 120, 0.7999, 2), (50, 50, 60, 60, 0.8000, 2)])
    d = rep.detection_errors(got, want)
    assert d["position_rel_err"] > 0.3  # row by row, the swap looks like a 50-pixel error
    assert d["sorted_score_err"] == pytest.approx(0.0, abs=1e-6)
    assert d["matched"] == 3 and d["rows"] == 3
    assert d["matched_box_err"] == pytest.approx(0.01 / 120, rel=1e-3)


def test_detection_errors_count_a_different_object_as_unmatched():
    want = _detections([(0, 0, 10, 10, 0.9, 1), (50, 50, 60, 60, 0.8, 2)])
    got = _detections([(0, 0, 10, 10, 0.9, 1), (200, 200, 210, 210, 0.7, 2)])  # another box
    d = rep.detection_errors(got, want)
    assert d["matched"] == 1
    assert d["sorted_score_err"] == pytest.approx(0.1 / 0.9, rel=1e-4)
    relabelled = _detections([(0, 0, 10, 10, 0.9, 3), (50, 50, 60, 60, 0.8, 2)])  # same box, other class
    assert rep.detection_errors(relabelled, want)["matched"] == 1


def _part(ours: float, graph: float, compile_: float, err: float) -> dict:
    samples = {"ours": [[ours]] * 3, "torch_graph": [[graph]] * 3, "torch_compile": [[compile_]] * 3}
    return {
        "ours": {"kernels": 21, "blas_calls": 16, "graph_us": ours + 9},
        "torch": {"kernels": 66},
        "torch_compile": {"kernels": 42},
        "interleaved": rep.summarize(samples),
        "max_rel_err_vs_torch": err,
        "ours_err_vs_torch_fp32": err,
        "torch_err_vs_torch_fp32": 2 * err,
    }


def test_markdown_table_has_every_column_and_explains_the_errors():
    results = {
        "device": "NVIDIA H200",
        "torch": "2.11",
        "rows": {
            "bert": {
                "label": "BERT (h256 L4 seq128)",
                **_part(120.0, 240.0, 150.0, 1e-5),
                "fp16": _part(90, 200, 100, 2e-3),
            },
            "vit": {"label": "ViT", "error": "build: RuntimeError: no transformers"},
            "yolov10n": {
                "label": "yolov10n",
                **_part(1300, 2600, 1400, 700.0),
                "detection": {
                    "ours fp16": {
                        **rep.detection_errors(np.zeros((1, 2, 6)), np.ones((1, 2, 6))),
                        "topk_us": [10.6, 16.3],
                    }
                },
            },
        },
        "elapsed_s": 312.0,
        "phases": "A done at 100 s",
    }
    md = rep.markdown(results)
    assert "NVIDIA H200" in md and "replayed 1 times a round\nfor 3 rounds" in md
    header = next(line for line in md.splitlines() if line.startswith("| row | prec |"))
    for col in (
        "ours graph",
        "torch CUDA graph",
        "torch.compile graph",
        "ours / compile",
        "our kernels+BLAS",
        "ours err",
    ):
        assert col in header
    bert32 = next(line for line in md.splitlines() if line.startswith("| BERT (h256 L4 seq128) | fp32 |"))
    cells = [c.strip() for c in bert32.strip("|").split("|")]
    assert cells[2:8] == ["120.0", "240.0", "150.0", "0.50", "**0.80**", "0.80-0.80"]
    assert cells[8:12] == ["–", "21+16", "66", "42"]
    assert "| BERT (h256 L4 seq128) | fp16 | 90.0 | 200.0 | 100.0 | 0.45 | **0.90** |" in md
    assert "ViT: **failed**: build: RuntimeError: no transformers" in md
    assert "| yolov10n | ours fp16 |" in md and "10.6, 16.3" in md
    assert "sorted score" in md and "element by element" in md and "Run time: 312 s" in md


def test_strip_private_drops_working_entries_at_every_depth():
    row = {"ours": {"graph_us": 1.0, "_program": object()}, "_nets": [1], "fp16": {"torch": {"_replay": 2}}}
    assert rep.strip_private(row) == {"ours": {"graph_us": 1.0}, "fp16": {"torch": {}}}


def test_cli_help_runs_and_a_missing_torch_is_said_plainly(tmp_path):
    script = str(BENCH / "issue28_table.py")
    out = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--rows" in out.stdout and "yolov10n" in out.stdout
    bad = subprocess.run([sys.executable, script, "--rows", "nope"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown rows ['nope']" in bad.stderr
    try:
        import torch

        have_cuda = torch.cuda.is_available()
    except ImportError:
        have_cuda = None
    if have_cuda:
        pytest.skip("this machine has CUDA: the script would run")
    run = subprocess.run(
        [sys.executable, script, "--out", str(tmp_path), "--rows", "bert"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 1
    assert ("no module named torch" if have_cuda is None else "needs a CUDA GPU") in run.stderr
    assert not list(tmp_path.iterdir())  # nothing half-written


class _FakeProgram:
    def __init__(self):
        self.closed = False

    def close(self) -> None:
        self.closed = True


def _fake_torch():
    """The few torch attributes main() and release() touch, for driving the phases on a CPU."""
    import types

    ns = types.SimpleNamespace
    cuda = ns(is_available=lambda: True, get_device_name=lambda: "Fake GPU", empty_cache=lambda: None)
    backends = ns(cuda=ns(matmul=ns(allow_tf32=True)), cudnn=ns(allow_tf32=True, benchmark=False))
    return types.ModuleType("torch"), cuda, backends


def test_main_runs_every_phase_keeps_failed_rows_apart_and_frees_each_row(tmp_path, monkeypatch):
    """main() with fake sides: a row whose build fails, a row whose torch side fails (ours still
    timed), torch.compile skipped past the budget; every program closed, two files written."""
    import types

    import gpu_vs_torch
    import issue28_table as tab

    from migx_explore.gpu import timing

    torch, cuda, backends = _fake_torch()
    torch.cuda, torch.backends, torch.__version__ = cuda, backends, "0.fake"
    monkeypatch.setitem(sys.modules, "torch", torch)
    programs: list[_FakeProgram] = []

    def build_case(name):
        if name == "vit":
            raise RuntimeError("no transformers")
        return tab.Case(None, {}, [("net", None)], [])

    def part(us: float, torch_ok: bool = True) -> dict:
        programs.append(_FakeProgram())
        out = {"ours": {"kernels": 3, "blas_calls": 2, "top_kernels": [], "graph_us": us, "_program": programs[-1]}}
        if torch_ok:
            out["torch"] = {"kernels": 9, "graph_us": 2 * us, "_replay": (types.SimpleNamespace(replay=us), None)}
        return out

    def compare_row(model, feeds, nets, xs, args):
        assert args.keep
        row = part(10.0, torch_ok=True) if len(programs) == 0 else part(10.0, torch_ok=False)
        if "torch" not in row:
            row["error"] = "RuntimeError: capture failed"
        return {**row, "_nets": nets, "_torch_outputs": [np.zeros(1)]}

    def add_fp16(row, model, feeds, nets, xs, args):
        row["fp16"] = part(5.0)
        row["_nets16"] = nets

    def add_compile(row, xs, args):  # pragma: no cover - the budget keeps it from running
        raise AssertionError("compiled past the budget")

    monkeypatch.setattr(tab, "build_case", build_case)
    monkeypatch.setattr(gpu_vs_torch, "compare_row", compare_row)
    monkeypatch.setattr(gpu_vs_torch, "add_fp16", add_fp16)
    monkeypatch.setattr(gpu_vs_torch, "add_compile", add_compile)
    monkeypatch.setattr(gpu_vs_torch, "timed", lambda replay, stream, n: [2.0 * replay] * n)
    monkeypatch.setattr(
        timing, "graph_replay_us", lambda prog, n: [10.0 if len(programs) and prog is programs[0] else 4.0] * n
    )
    tab.main(
        ["--out", str(tmp_path), "--rows", "bert,vit,gpt2", "--rounds", "2", "--per-round", "3", "--budget-s", "0"]
    )

    assert sorted(p.name for p in tmp_path.iterdir()) == ["issue28_table.json", "issue28_table.md"]
    res = json.loads((tmp_path / "issue28_table.json").read_text())
    assert res["device"] == "Fake GPU" and list(res["rows"]) == ["bert", "vit", "gpt2"]
    bert, vit, gpt2 = (res["rows"][n] for n in ("bert", "vit", "gpt2"))
    assert bert["interleaved"]["median_us"] == {"ours": 10.0, "torch_graph": 20.0}
    assert bert["interleaved"]["ratio"] == {"torch_graph": 0.5}
    assert bert["torch_compile"]["error"].startswith("skipped: past --budget-s")
    assert bert["fp16"]["torch_compile"]["error"].startswith("skipped: past --budget-s")
    assert re.search(r"phase C to \d+ s \(last: gpt2\)$", res["phases"])
    assert bert["fp16"]["interleaved"]["median_us"] == {"ours": 4.0, "torch_graph": 10.0}
    assert vit["error"].startswith("build: RuntimeError: no transformers") and "interleaved" not in vit
    assert gpt2["error"] == "RuntimeError: capture failed" and gpt2["interleaved"]["median_us"] == {"ours": 4.0}
    assert all(p.closed for p in programs) and len(programs) == 4
    assert not any(k.startswith("_") for row in res["rows"].values() for k in row)
    md = (tmp_path / "issue28_table.md").read_text()
    assert "| BERT (h256 L4 seq128) | fp32 | 10.0 | 20.0 | – | 0.50 |" in md
    assert "ViT (h192 L4 224): **failed**" in md and "| GPT-2 (d128 L4 seq128) | fp32 | 4.0 |" in md


def test_a_row_without_its_interleaved_phase_shows_the_separate_timings_in_italics():
    from issue28_report import markdown

    part = {
        "ours": {"graph_us": 100.0, "kernels": 3, "blas_calls": 2},
        "torch": {"graph_us": 200.0, "kernels": 9},
        "torch_compile": {"graph_us": 125.0, "kernels": 5},
        "graph_ratio_vs_torch_graph": 0.5,
        "graph_ratio_vs_torch_compile": 0.8,
    }
    text = markdown({"device": "X", "torch": "t", "rows": {"m": dict(part, label="M", fp16=dict(part))}})
    line = next(ln for ln in text.splitlines() if ln.startswith("| M | fp32"))
    assert "| _100.0_ | _200.0_ | _125.0_ | _0.50_ | **_0.80_** |" in line


def test_isolated_rows_run_in_their_own_processes_and_merge(tmp_path):
    """--isolate: one child process per row with the other options passed on; a child that
    writes its table is merged, one that dies is a failed row that says how."""
    import types

    import issue28_table as tab

    calls: list[list[str]] = []

    def run(cmd, **kw):
        calls.append(cmd)
        row = cmd[cmd.index("--rows") + 1]
        sub = Path(cmd[cmd.index("--out") + 1])
        if row == "vit":
            return types.SimpleNamespace(returncode=-11, stdout="", stderr="Segmentation fault")
        sub.mkdir(parents=True)
        part = {"device": "Fake GPU", "torch": "0.fake", "rows": {row: {"label": tab.LABELS[row], "ours": {}}}}
        (sub / "issue28_table.json").write_text(json.dumps(part))
        return types.SimpleNamespace(returncode=0, stdout="", stderr="")

    argv = ["--isolate", "--rows", "bert,vit", "--out", str(tmp_path), "--rounds", "3"]
    res = tab.run_isolated(tab.parse_args(argv), argv, tmp_path, run=run)
    assert [c[c.index("--rows") + 1] for c in calls] == ["bert", "vit"]
    assert all("--isolate" not in c and c.count("--rows") == 1 and "--rounds" in c for c in calls)
    assert res["device"] == "Fake GPU" and res["rows"]["bert"]["label"] == tab.LABELS["bert"]
    assert (
        res["rows"]["vit"]["error"].startswith("process exited -11") and "Segmentation" in res["rows"]["vit"]["error"]
    )
    saved = json.loads((tmp_path / "issue28_table.json").read_text())
    assert list(saved["rows"]) == ["bert", "vit"]
    assert "ViT (h192 L4 224): **failed**" in (tmp_path / "issue28_table.md").read_text()
