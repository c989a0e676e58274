"""`migx-explore generate` and decode.generate_from_session on the reference evaluator."""

from __future__ import annotations

from migx_explore.cli import main
from migx_explore.decode import generate, generate_from_session
from migx_explore.session import Session


def test_generate_cli_on_the_reference(capsys):
    assert main(["generate", "gpt2_decode", "--steps", "5", "--prompt", "5,17,99,3"]) == 0
    out = capsys.readouterr().out
    tokens = generate("gpt2_decode", [5, 17, 99, 3], 5).tokens
    assert f"tokens: {','.join(map(str, tokens))}" in out and "5 steps" in out


def test_generate_refuses_a_model_without_a_kv_cache(capsys):
    assert main(["generate", "mlp", "--steps", "2"]) == 2
    assert "needs a KV-cache model" in capsys.readouterr().err


def test_generate_refuses_a_bad_prompt(capsys):
    assert main(["generate", "gpt2_decode", "--prompt", "a,b"]) == 2
    assert "--prompt 'a,b'" in capsys.readouterr().err


def test_session_generate_uses_its_model():
    s = Session.from_model("gpt2_decode", input_dims={"P": 0, "T": 4}, include_backend=False)
    assert generate_from_session(s, [5, 17, 99, 3], 3).tokens == generate("gpt2_decode", [5, 17, 99, 3], 3).tokens


def test_generate_refuses_more_steps_than_the_cache_holds(capsys):
    assert main(["generate", "gpt2_decode", "--steps", "40", "--max-len", "32"]) == 2
    assert "need 43 cache rows, but the cache holds 32" in capsys.readouterr().err
