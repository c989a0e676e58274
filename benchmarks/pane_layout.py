"""The "whole change" drawing of big passes against the graph pane's shape (issue 22 follow-up).

For each pass: the drawing's aspect ratio (width / height), the label size at fit-to-pane
(10 pt labels scaled by min(pane_w / w, pane_h / h)) and the zoom needed for 10 px labels,
for the pane the explorer has at 1280 x 800 (render.pane_layout.DEFAULT_PANE). Run from the repo root:

    python benchmarks/pane_layout.py

"dot" is the drawing as before (dot's own layout), "pane" the drawing laid out to the pane
(render.pane_layout); both come from this tree in one run.
"""

from __future__ import annotations

import re
import sys
import time

from migx_explore.render.model import Clusters
from migx_explore.render.pane_layout import DEFAULT_PANE
from migx_explore.session import Session
from migx_explore.widgets import content

PASSES = (
    ("yolov8", "fusion.fuse_pointwise_reduce"),
    ("yolov8", "required.simplify_reshapes"),
    ("bert_encoder", "fusion.fuse_pointwise_reduce"),
    ("bert_encoder", "required.simplify_reshapes"),
)
PANE = DEFAULT_PANE
LABEL_PT = 10.0  # the node label font size in drawing units
READ_PX = 10.0


def measure(svg: str) -> tuple[float, float, float, float, float]:
    m = re.search(r'viewBox="([-\d.]+) ([-\d.]+) ([\d.]+) ([\d.]+)"', svg)
    w, h = float(m.group(3)), float(m.group(4))
    fit = min(PANE[0] / w, PANE[1] / h)
    return w, h, w / h, LABEL_PT * fit, READ_PX / (LABEL_PT * fit)


def main() -> None:
    sessions: dict[str, Session] = {}
    print(
        f"{'model':13s} {'pass':30s} {'layout':7s} {'w':>6s} {'h':>6s} {'aspect':>7s} {'font px':>8s} "
        f"{'zoom':>6s} {'s':>5s}"
    )
    for model, path in PASSES:
        s = sessions.get(model) or sessions.setdefault(model, Session.from_model(model, numeric=False))
        try:
            s.goto(path)
        except Exception as e:  # noqa: BLE001 - a pass a model's pipeline lacks
            print(f"{model:13s} {path:32s} skipped: {e}")
            continue
        if not s.current.changed:
            print(f"{model:13s} {path:32s} no change")
            continue
        for name, extra in (("dot", {}), ("pane", {"pane": PANE})):  # before: dot's strip; after: folded
            t = time.perf_counter()
            svg = content.current_graph(s, "diff", expand=Clusters(), region=None, **extra)
            dt = time.perf_counter() - t
            w, h, aspect, px, zoom = measure(svg)
            print(f"{model:13s} {path:30s} {name:7s} {w:6.0f} {h:6.0f} {aspect:7.3f} {px:8.2f} {zoom:6.2f} {dt:5.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
