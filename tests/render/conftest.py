"""Fixtures for render tests."""

from __future__ import annotations

import pytest

from migx_explore.compiler.pass_infra import PassManager
from migx_explore.render.synthetic import FuseBiasRelu, conv_chain


@pytest.fixture
def fused_trace():
    """A 3-block conv chain and the trace of fusing every add+relu into a pointwise module."""
    return PassManager().run(conv_chain(3), [FuseBiasRelu()])


@pytest.fixture(scope="session")
def big_trace():
    """~2,000 instructions (340 conv blocks) with one block fused: a local change on a big graph."""
    return PassManager(validate=False).run(conv_chain(340), [FuseBiasRelu(limit=1)])
