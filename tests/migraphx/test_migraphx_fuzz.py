"""Robustness of the MIGraphX log reader: valid logs of every period (migraphx_logs.py) and a
hand-written develop-2026 compile of mlp (mlp_log.py), cut at lines and mutated (lines deleted,
duplicated, swapped, cut short; byte garbage; CRLF; tabs; huge lines). Every outcome is a trace or
a one-line MigxError, never a traceback; a cut log's complete passes agree with the full log's,
and where it stops inside a pass it says so.

The default run cuts at every 9th line and reads 60 seeded mutants (huge lines up to 100 kB);
`-m slow` cuts at every line and reads 1,200 mutants (huge lines up to 1 MB). A failure names its case (period, cut or seed and mutation)."""

from __future__ import annotations

import random

import pytest

import tests.migraphx.migraphx_logs as L
import tests.migraphx.mlp_log as M
from migx_explore.cli import main as cli
from migx_explore.compiler.errors import MigxError
from migx_explore.migraphx import read_log

MUTATIONS = ("delete", "duplicate", "swap", "cut_line", "garbage", "bytes", "crlf", "tabs", "huge")


def _texts() -> dict[str, str]:
    out = {p: L.log(p, times=p in ("rocm6.0", "develop2026")) for p in L.PERIODS}
    out["mlp"] = M.log()
    return out


def _read_or_refuse(text: str, case: str):
    """The log read, or None for a one-line refusal; anything else fails naming the case."""
    try:
        log = read_log(text, text=True)
    except MigxError as e:
        assert "\n" not in str(e) and str(e), case
        return None
    log.summary()
    for r in log.trace.records:  # every snapshot prints: the views all start from it
        if r.after is not None:
            assert r.after.text, case
    assert log.trace.final.text, case
    return log


def _full(text: str) -> list[tuple[str, bool, str]]:
    return [(r.path, r.changed, r.after.text) for r in read_log(text, text=True).trace.records]


def _check_cuts(name: str, text: str, step: int) -> None:
    full = _full(text)
    lines = text.splitlines(keepends=True)
    for cut in range(1, len(lines), step):
        case = f"{name} cut after line {cut}"
        log = _read_or_refuse("".join(lines[:cut]), case)
        if log is None or log.kind != "trace":
            continue
        recs = log.trace.records
        for k, r in enumerate(recs):
            if r.status == "failed":
                continue
            assert k < len(full), f"{case}: {r.path} is not in the full log"
            assert (r.path, r.changed, r.after.text) == full[k], f"{case}: {r.path} differs from the full log"
        if any(r.status == "failed" for r in recs):
            assert any("stops at line" in n for n in log.read.notes), f"{case}: no note of where it stops"


@pytest.mark.parametrize("name", [*L.PERIODS, "mlp"])
def test_a_log_cut_anywhere_keeps_what_it_holds(name):
    _check_cuts(name, _texts()[name], 9)


@pytest.mark.slow
@pytest.mark.parametrize("name", [*L.PERIODS, "mlp"])
def test_a_log_cut_at_every_line_keeps_what_it_holds(name):
    _check_cuts(name, _texts()[name], 1)


def mutate(text: str, kind: str, rng: random.Random, huge: tuple[int, ...] = (10**4, 10**5)) -> str:
    """`text` with one kind of damage a real log can carry (`huge`: the lengths a huge line may add)."""
    ls = text.splitlines(keepends=True)
    if kind == "delete":
        for _ in range(rng.randint(1, 5)):
            ls.pop(rng.randrange(len(ls)))
    elif kind == "duplicate":
        for _ in range(rng.randint(1, 5)):
            j = rng.randrange(len(ls))
            ls.insert(j, ls[j])
    elif kind == "swap":
        i, j = rng.randrange(len(ls)), rng.randrange(len(ls))
        ls[i], ls[j] = ls[j], ls[i]
    elif kind == "cut_line":
        j = rng.randrange(len(ls))
        c = rng.randrange(len(ls[j]) + 1)
        ls[j] = ls[j][:c] + ls[j][c + rng.randint(1, 10) :]
    elif kind == "garbage":
        j = rng.randrange(len(ls))
        ls.insert(j, "".join(chr(rng.randrange(1, 0x2FF)) for _ in range(rng.randint(1, 80))) + "\n")
    elif kind == "bytes":
        b = bytearray("".join(ls).encode())
        for _ in range(rng.randint(1, 20)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return b.decode("utf-8", "replace")
    elif kind == "crlf":
        return "".join(ls).replace("\n", "\r\n")
    elif kind == "tabs":
        ls = [s.replace(" ", "\t", rng.randint(0, 3)) for s in ls]
    elif kind == "huge":
        j = rng.randrange(len(ls))
        ls[j] = ls[j].rstrip("\n") + "x" * rng.choice(huge) + "\n"
    return "".join(ls)


def _check_mutants(start: int, count: int, huge: tuple[int, ...] = (10**4, 10**5)) -> None:
    texts = _texts()
    names = sorted(texts)
    for seed in range(start, start + count):
        rng = random.Random(seed)
        name, kind = names[seed % len(names)], MUTATIONS[seed % len(MUTATIONS)]
        _read_or_refuse(mutate(texts[name], kind, rng, huge), f"{name} seed {seed} {kind}")


def test_mutated_logs_read_or_refuse_in_one_line():
    _check_mutants(0, 60)


@pytest.mark.slow
@pytest.mark.parametrize("start", range(60, 1260, 200))
def test_many_mutated_logs_read_or_refuse_in_one_line(start):
    _check_mutants(start, 200, (10**4, 10**6))


def test_crlf_and_tabs_read_as_the_clean_log():
    text = L.log("rocm5.6")
    clean = _full(text)
    assert _full(text.replace("\n", "\r\n")) == clean
    tabbed = "\n".join(s.replace(" = ", "\t=\t", 1) if s.startswith("@") else s for s in text.splitlines())
    log = read_log(tabbed, text=True)
    assert [r.path for r in log.trace.records] == [p for p, _, _ in clean]


@pytest.mark.parametrize(
    "content,rc,message",
    [
        (b"\x82\xa7version\x08\x00\x00modules", 2, "cannot read"),  # not text: tried as ONNX, refused
        (b"no program in here\njust words\n", 2, "error:"),
        ("\ufeff" + L.log("rocm6.0"), 0, ""),  # a UTF-8 BOM
        (L.log("rocm6.0").encode("utf-16"), 0, ""),  # PowerShell's `>` writes UTF-16
        (L.log("develop2026")[:-2000], 1, ""),  # truncated: the trace ends in a failed record
    ],
)
def test_cli_reads_or_refuses_in_one_line(tmp_path, capsys, content, rc, message):
    path = tmp_path / "log.txt"
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    assert cli(["trace", str(path), "--out", str(tmp_path / "out")]) == rc
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if message:
        assert message in err and len([s for s in err.splitlines() if s.strip()]) == 1, err
    assert cli(["read", str(path)]) == (2 if message else 0)
    assert "Traceback" not in capsys.readouterr().err
