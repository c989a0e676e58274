"""The GPU pipelines name their passes by string; a typo must fail loudly, listing what exists."""

import pytest

from migx_explore.compiler.errors import MigxError
from migx_explore.gpu import pipelines
from migx_explore.gpu.pipelines import CompileOptions, PendingPass, gpu_pipelines


def test_an_unknown_pass_name_fails_listing_the_known_passes():
    with pytest.raises(MigxError) as err:
        pipelines._p("simplfy_reshapes")
    msg = str(err.value)
    assert "unknown pass 'simplfy_reshapes'" in msg
    assert "did you mean simplify_reshapes" in msg and "lowering" in msg


def test_an_unknown_option_fails_listing_the_pass_options():
    with pytest.raises(MigxError) as err:
        pipelines._p("lowering", ofload_copy=True)
    assert "ofload_copy" in str(err.value) and "offload_copy" in str(err.value)


def test_a_typo_in_a_pipeline_builder_fails_at_the_import_time_check(monkeypatch):
    original = pipelines._fusion
    monkeypatch.setitem(
        pipelines._BUILDERS, "fusion", (lambda o: original(o) + [pipelines._p("fuse_pointwse")], "typo")
    )
    with pytest.raises(MigxError, match="fuse_pointwse"):
        pipelines._check_every_configuration()


@pytest.mark.parametrize("mode", ["eager", "balanced", "max"])
def test_no_entry_is_a_placeholder(mode):
    from migx_explore.gpu.migraphx_catalogue import LATEST, mode_catalogue

    entries = [e for pl in gpu_pipelines(CompileOptions(mode=mode)) for e in pl.entries]
    assert len(entries) >= len(mode_catalogue(LATEST, mode)) >= 79  # MIGraphX's own count for the mode
    assert not [e.name for e in entries if isinstance(e.pass_, PendingPass)]
