"""A planted ordering dependency for the ordering study (tests/explorer/test_study.py).

`recompute_shared_kernels` gives every extra user of a fused pointwise kernel its own copy of the
kernel (recompute rather than keep the value live: a real scheduling trade-off, meaning
unchanged). It only sees fused kernels, so it depends on running after fuse_pointwise_reduce:
placed right after it, it adds launches; moved one step earlier, before the fusion, it finds
nothing to copy. It lives in an importable module so the study's Dask workers can unpickle it.
"""

from __future__ import annotations

from migx_explore.compiler.ir import Module

NAME = "recompute_shared_kernels"


def recompute_shared_kernels(module: Module) -> bool:
    if module.name != "main":
        return False
    changed = False
    for ins in list(module):
        if ins.name != "pointwise" or ins.shape.is_tuple:
            continue
        for user in [u for u in ins.outputs if not u.is_return()][1:]:
            copy = module.insert_instruction(user, ins.op, ins.inputs, ins.module_inputs)
            module.replace_instruction(user, inputs=[copy if i is ins else i for i in user.inputs])
            changed = True
    return changed
