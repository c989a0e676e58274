"""One CLI voice (issue 39): the same option names in every verb, help on every option, quiet
means quiet, no raw reprs, headed blocks, silent broken pipes, one warning where there were many,
close-name hints, the fake backend named in what it produced, and a user's bad file never called
an internal error."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from migx_explore.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent


def _cli(*args: str, env: dict[str, str] | None = None, shell: str | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    cmd = shell if shell is not None else [sys.executable, "-m", "migx_explore", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=e, cwd=ROOT, shell=shell is not None, timeout=600)


def _verbs(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                for inner, subsub in _verbs(sub):
                    yield f"{name} {inner}", subsub


def test_every_option_has_help() -> None:
    missing = [
        f"{verb} {'/'.join(a.option_strings)}"
        for verb, p in _verbs(build_parser())
        for a in p._actions
        if a.option_strings and not a.help and a.dest != "help"
    ]
    assert not missing, "options without help: " + ", ".join(missing)


def test_compile_mode_is_one_name_and_old_spellings_still_work() -> None:
    parser = build_parser()
    for verb in ("trace", "verify", "passes", "waterfall", "perf", "compile", "report"):
        sub = dict(_verbs(parser))[verb]
        flags = {f for a in sub._actions for f in a.option_strings if a.help != argparse.SUPPRESS}
        assert "--compile-mode" in flags, verb
        assert "--mode" not in flags and "--mode-timing" not in flags, verb
    assert parser.parse_args(["trace", "yolo", "--out", "x", "--mode", "eager"]).compile_mode == "eager"
    assert parser.parse_args(["waterfall", "yolo", "--mode-timing", "graph"]).exec_mode == "graph"
    assert parser.parse_args(["perf", "yolo", "--mode", "graph"]).exec_mode == "graph"
    assert parser.parse_args(["perf", "yolo"]).compile_mode == "balanced"
    assert not re.search(r"--mode\b(?![-s])", _cli("waterfall", "--help").stdout)


def test_passes_summary_and_no_raw_reprs() -> None:
    done = _cli("passes")
    assert done.returncode == 0
    last = [ln for ln in done.stdout.splitlines() if "entries:" in ln][-1]
    assert re.fullmatch(r"\d+ entries: \d+ \w+(, \d+ \w+)*", last), last
    assert "<function" not in done.stdout and not re.search(r"0x[0-9a-f]{6,}", done.stdout)
    assert "keep_whole=one_launch" in done.stdout


def test_broken_pipe_is_silent() -> None:
    done = _cli(shell=f"{sys.executable} -m migx_explore passes | head -1")
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_trace_quiet_and_headed(tmp_path: Path) -> None:
    quiet = _cli("trace", "yolo", "--out", str(tmp_path / "q"), "-q")
    assert quiet.returncode == 0, quiet.stderr
    assert len(quiet.stdout.splitlines()) <= 3 and "wrote" in quiet.stdout, quiet.stdout
    assert quiet.stderr == ""
    loud = _cli("trace", "yolo", "--out", str(tmp_path / "l"))
    lines = loud.stdout.splitlines()
    first_alike = next(i for i, ln in enumerate(lines) if "× 2 like this" in ln)
    assert "alike submodules" in "\n".join(lines[first_alike - 3 : first_alike]), loud.stdout
    assert any(ln.startswith("passes that changed the program") for ln in lines)


def test_study_help_names_only_its_own_options() -> None:
    assert "--inputs" not in _cli("study", "order", "--help").stdout


def test_one_warning_for_unfixed_symbolic_dims() -> None:
    done = _cli("read", "gpt2_decode")
    warned = [ln for ln in done.stderr.splitlines() if "warning" in ln]
    assert len(warned) == 1 and "P=1" in warned[0] and "T=1" in warned[0], done.stderr


def test_op_paths_unknown_op_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "migx_explore.gpu.op_paths", "sigmod"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "did you mean sigmoid" in done.stderr


def test_unknown_model_suggests_close_names(capsys) -> None:
    assert main(["read", "resnet_blok"]) == 2
    assert "did you mean resnet_block" in capsys.readouterr().err


def test_fake_backend_is_named_in_its_results() -> None:
    fake = {"MIGX_GPU_BACKEND": "fake"}
    run = _cli("run", "mlp", "--target", "gpu", env=fake)
    assert run.returncode == 0 and "MIGX_GPU_BACKEND=fake" in run.stdout, run.stdout + run.stderr
    ref = _cli("run", "mlp", env=fake)
    assert "fake" not in ref.stdout  # the reference evaluator's result is not the fake backend's
    verify = _cli("verify", "mlp", "--gpu", env=fake)
    assert verify.returncode == 0 and "fake backend" in verify.stdout, verify.stdout + verify.stderr
    assert "OK: every GPU value agrees" not in verify.stdout


def test_worker_counts_read_as_english(monkeypatch) -> None:
    pytest.importorskip("dask.distributed")
    import dask.distributed as dd

    from migx_explore.sweep import Sweeper

    monkeypatch.setattr(dd, "LocalCluster", lambda **kw: object())
    monkeypatch.setattr(dd, "Client", lambda cluster: object())
    sw = Sweeper(workers=1)
    sw._start(5)
    assert sw.where == "local Dask cluster (1 worker process)"


def test_gpus_without_a_gpu_warns(monkeypatch) -> None:
    pytest.importorskip("dask.distributed")
    import dask.distributed as dd

    from migx_explore import sweep

    monkeypatch.delenv("MIGX_GPU_BACKEND", raising=False)
    monkeypatch.setattr(sweep, "_gpu_cluster", sweep._gpu_cluster)
    monkeypatch.setattr(dd, "SpecCluster", lambda **kw: object())
    monkeypatch.setitem(sys.modules, "dask_cuda", None)
    from migx_explore.gpu_bridge import unavailable_reason

    if unavailable_reason() is None:
        pytest.skip("this machine has a GPU")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sweep._gpu_cluster(2)
    assert any("--gpus 2" in str(w.message) and "no usable GPU" in str(w.message) for w in caught)


def test_a_bad_model_file_is_the_users_error_in_the_widget(tmp_path: Path) -> None:
    pytest.importorskip("ipywidgets")
    from migx_explore.errors import describe_error
    from migx_explore.widgets._common import ErrorBox
    from migx_explore.widgets.picker import ModelPicker

    bad = tmp_path / "notes.onnx"
    bad.write_text("not a model")
    box = ErrorBox()
    picker = ModelPicker(box, lambda s: None)
    with pytest.raises(Exception) as err:
        picker._path_changed({"new": str(bad)})
    assert describe_error(err.value).known
    box.show(err.value, "path")
    assert "internal error" not in box.widget.value and "not a readable ONNX model" in box.widget.value
    # and a bug of ours stays one
    box.show(KeyError("x"), "path")
    assert "internal error" in box.widget.value


def test_progress_lines_off_a_terminal_and_silence_when_quiet(monkeypatch) -> None:
    import io
    import time as _time

    from migx_explore.cli import _options

    monkeypatch.setattr(_options, "SHOW_AFTER_S", 0.0)
    monkeypatch.setattr(_options, "LINE_EVERY_S", 0.05)
    out = io.StringIO()
    with _options.Progress("verifying mlp", stream=out) as p:
        for k in range(1, 4):
            p(k, 3, f"pass {k}")
            _time.sleep(0.06)
    lines = out.getvalue().splitlines()
    assert lines and all(ln.startswith("migx-explore: verifying mlp") for ln in lines) and "\r" not in out.getvalue()
    quiet = io.StringIO()
    with _options.Progress("verifying mlp", quiet=True, stream=quiet) as p:
        p(1, 3, "pass 1")
    assert quiet.getvalue() == ""


def test_perf_columns_line_up_on_the_fake_backend() -> None:
    done = _cli("perf", "mlp", "--iters", "3", "--warmup", "1", env={"MIGX_GPU_BACKEND": "fake"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    top = lines.index("timing per mode:")
    table = lines[top + 1 : top + 4]  # header, eager, graph
    assert table[0].startswith("mode") and len({len(ln) for ln in table}) == 1, "\n".join(table)
    assert "1 kernel," in done.stdout and "MIGX_GPU_BACKEND=fake" in done.stdout


def test_a_mistyped_option_is_refused_by_its_verb_with_the_closest_name() -> None:
    done = _cli("perf", "mlp", "--itres", "3")
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 2 and last.startswith("migx-explore perf: error: unrecognized arguments: --itres 3"), last
    assert "did you mean --iters?" in last, last
    nested = _cli("study", "order", "mlp", "--bogus")
    assert nested.stderr.strip().splitlines()[-1].startswith("migx-explore study order: error:"), nested.stderr


def test_a_mistyped_choice_gets_the_closest_one() -> None:
    verb = _cli("trce", "yolo")
    assert verb.returncode == 2 and "did you mean trace?" in verb.stderr, verb.stderr
    mode = _cli("passes", "--compile-mode", "balancd")
    assert "did you mean balanced?" in mode.stderr, mode.stderr
    keys = _cli("keys", "lst")
    assert "argument ACTION: invalid choice" in keys.stderr and "did you mean list?" in keys.stderr, keys.stderr
