"""Regenerate the diff images under docs/images/ (python benchmarks/make_docs_images.py).

fuse_pointwise_*.png: what fuse_pointwise does to the first Conv+SiLU blocks of the built-in
YOLO-style model (falls back to a synthetic conv+bias+SiLU stack when migx_explore.models is not
available). find_conv_conv_1x1_*.png: simplify_algebra's find_conv_conv_1x1 folding a 3x3 conv
and a 1x1 conv into one. Each is drawn as the merged diff and as before/after side by side.
Exits non-zero, naming what is missing, if a pass it needs is not registered.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from migx_explore.compiler.ir import Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.pass_infra import PassManager, PassRecord, make_pass, pass_registry
from migx_explore.compiler.shape import Shape
from migx_explore.render import diff_graph, side_by_side, write_graph

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "images")


def conv_silu_stack(blocks: int = 3, channels: int = 8, size: int = 16) -> Program:
    """YOLO's `Conv` module after batch-norm folding: conv + bias, then SiLU = x * sigmoid(x)."""
    p = Program()
    m = p.main
    x = m.add_parameter("images", Shape.of("float32", (1, 3, size, size)))
    rng = np.random.default_rng(0)
    cin = 3
    for _ in range(blocks):
        w = m.add_literal(rng.standard_normal((channels, cin, 3, 3)).astype(np.float32))
        b = m.add_literal(rng.standard_normal((channels,)).astype(np.float32))
        y = m.add_instruction(Op("convolution", padding=(1, 1)), [x, w])
        bb = m.add_instruction(Op("broadcast", axis=1, out_lens=y.shape.lens), [b])
        y = m.add_instruction(Op("add"), [y, bb])
        x = m.add_instruction(Op("mul"), [y, m.add_instruction(Op("sigmoid"), [y])])
        cin = channels
    m.add_return([x])
    return p


def conv_conv_1x1_program(bias: bool) -> Program:
    """A 3x3 conv (optionally + bias) feeding a 1x1 conv (a channel projection), then ReLU."""
    p = Program()
    m = p.main
    rng = np.random.default_rng(1)
    x = m.add_parameter("x", Shape.of("float32", (1, 16, 32, 32)))
    w1 = m.add_literal(rng.standard_normal((32, 16, 3, 3)).astype(np.float32))
    w2 = m.add_literal(rng.standard_normal((8, 32, 1, 1)).astype(np.float32))
    y = m.add_instruction(Op("convolution", padding=(1, 1)), [x, w1])
    if bias:
        b1 = m.add_literal(rng.standard_normal((32,)).astype(np.float32))
        bb = m.add_instruction(Op("broadcast", axis=1, out_lens=y.shape.lens), [b1])
        y = m.add_instruction(Op("add"), [y, bb])
    c2 = m.add_instruction(Op("convolution"), [y, w2])
    m.add_return([m.add_instruction(Op("relu"), [c2])])
    return p


def first_changes(rec: PassRecord, count: int) -> list[int]:
    """Ids of the first `count` new main-module instructions, to centre a drawing on them."""
    added = [r.id for r in rec.after.module().instrs if r.id in rec.diff.added]
    return added[:count]


def write_pair(rec: PassRecord, stem: str, title: str, **kw) -> list[str]:
    paths = [os.path.join(OUT, f"{stem}_diff.png"), os.path.join(OUT, f"{stem}_side_by_side.png")]
    write_graph(diff_graph(rec.before, rec.after, rec.diff, title=title, **kw), paths[0])
    write_graph(side_by_side(rec.before, rec.after, rec.diff, title=title, **kw), paths[1])
    return paths


def fuse_pointwise_images() -> list[str]:
    try:
        from migx_explore.models import load

        program, source = load("yolo"), "the YOLO-style model"
    except ImportError:
        program, source = conv_silu_stack(), "a conv+bias+SiLU stack"
    rec = PassManager().run(program, [make_pass("fuse_pointwise")]).records[0]
    focus = first_changes(rec, 2)
    title = f"fuse_pointwise on {source}: first blocks ({rec.diff.summary()} over the whole model)"
    return write_pair(rec, "fuse_pointwise", title, focus_ids=focus, focus=1, expand=True)


def conv_conv_1x1_images() -> list[str]:
    paths = []
    # The bias-free pair shows the rule alone; with a bias, the whole pass also moves the bias
    # behind the fused conv (find_conv_add, then find_conv_broadcast_input turns W2 . b into a dot).
    for bias, stem, what in (
        (False, "find_conv_conv_1x1", "3x3 conv then 1x1 conv"),
        (True, "find_conv_conv_1x1_bias", "3x3 conv + bias then 1x1 conv"),
    ):
        rec = PassManager().run(conv_conv_1x1_program(bias), [make_pass("simplify_algebra")]).records[0]
        if not rec.changed:
            raise SystemExit("simplify_algebra did not fold the conv pair (find_conv_conv_1x1 missing?)")
        title = f"simplify_algebra (find_conv_conv_1x1): {what} ({rec.diff.summary()})"
        paths += write_pair(rec, stem, title)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("which", nargs="*", default=["fuse_pointwise", "simplify_algebra"])
    args = ap.parse_args()
    missing = [p for p in args.which if p not in pass_registry()]
    if missing:
        sys.exit(f"passes not registered yet: {', '.join(missing)}")
    makers = {"fuse_pointwise": fuse_pointwise_images, "simplify_algebra": conv_conv_1x1_images}
    for name in args.which:
        for path in makers[name]():
            print(path)


if __name__ == "__main__":
    main()
