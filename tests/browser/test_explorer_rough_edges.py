"""Issue 23's rough edges in a real JupyterLab + Chromium at 1280x800: the graph pane takes most of
the explorer's width, the "nested passes" label is not clipped, and a corrupt file typed into the
path box gives one error box with one line naming the file (no traceback), replaced on the next
action."""

from __future__ import annotations

from tests.browser.notebook_files import write_notebook

CODE = "import migx_explore\nex = migx_explore.explore('mlp')\nex"


def test_layout_and_errors_at_1280x800(open_notebook, run_all, tmp_path):
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08\x07not an onnx protobuf" * 40)
    src = write_notebook(tmp_path / "rough_edges.ipynb", CODE)
    page = open_notebook(src)
    page.set_viewport_size({"width": 1280, "height": 800})
    run_all(page)
    ex = page.locator(".migx-explorer").first
    ex.locator(".migx-diff-graph svg g.node").first.wait_for(state="visible", timeout=60_000)

    whole, main = ex.bounding_box(), ex.locator(".migx-main").first.bounding_box()
    # issue 23: >= 60% of the width; it was 510 of 848 px (60.1%) in JupyterLab with the file
    # browser open, now the side column gives way (~610 px): a margin keeps the test meaningful
    assert main["width"] >= 0.65 * whole["width"], (main, whole)
    label = ex.locator(".migx-nested").first
    clipped = label.evaluate("e => [...e.querySelectorAll('label, span')].some(l => l.scrollWidth > l.clientWidth + 1)")
    box, stepper = label.bounding_box(), ex.locator(".migx-stepper").first.bounding_box()
    assert not clipped and box["x"] + box["width"] <= stepper["x"] + stepper["width"] + 1

    path = ex.locator(".migx-model-path input, input.migx-model-path").first
    path.fill(str(corrupt))
    path.press("Enter")
    ex.locator("button.migx-load").first.click()
    page.wait_for_function("() => document.querySelectorAll('.migx-explorer .migx-error').length > 0", timeout=30_000)
    page.wait_for_timeout(1500)  # let every callback of the two actions land
    errors = ex.locator(".migx-error")
    assert errors.count() == 1  # one box: the Load replaced the path box's error
    text = errors.first.inner_text().strip()
    assert "corrupt.onnx" in text and "\n" not in text and "Traceback" not in text and "_:" not in text
    assert ex.locator(".migx-error details").count() == 0
    note = ex.locator(".migx-inputs-note").first.inner_text()
    assert "corrupt.onnx" in note and "not a readable ONNX model" in note
