"""Cell helpers shared by the notebook builders (build_notebooks.py, prototype_fusion.py)."""

from __future__ import annotations

from nbformat.v4 import new_code_cell, new_markdown_cell

YOLO = "yolo"  # the built-in YOLO-style detector every notebook starts from

GPU_CHECK = """from migx_explore import gpu_bridge

NO_GPU = gpu_bridge.unavailable_reason()  # None where a GPU stack is usable
print("GPU:", "available" if NO_GPU is None else f"not available here ({NO_GPU}); GPU cells will skip")"""


def md(text: str):
    return new_markdown_cell(text.strip("\n"))


def code(text: str):
    return new_code_cell(text.strip("\n"))
