"""Start Google Model Explorer's local server on 127.0.0.1 with an exported trace, on one pass or
on a pass's before | after pair.

    h = open_in_model_explorer(session)                  # the session's current pass
    h = open_in_model_explorer(session, "fusion.fuse_pointwise_reduce", compare=True)
    h = open_in_model_explorer("out/yolo")               # an exported folder
    h.url; h.stop()

The server runs as a child process (`python -m model_explorer`, the package's own command line;
one server serves every later call of this kernel), and the page opens through URL state Model
Explorer reads itself: the pass's own small collection (views.py), the graph (`uiState`), the
overlays (`nodeData`) and, for compare, two panes with navigation synced by node id, which our
node ids (stable instruction ids) make exact. The pass's change shows on open as node styles of
its before and after graphs; its mapping file (compare/NNN.json) adds Model Explorer's own diff
highlights from the sync menu's "Upload mapping" (Model Explorer reads mappings only there).
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from migx_explore.compiler.errors import MigxError

from .export import COLLECTION, export_trace, load_manifest
from .views import view_collection

if TYPE_CHECKING:
    from ..session import Session

HOST = "127.0.0.1"
OPEN_LAYERS = 3
INSTALL_HINT = "pip install 'migx-explore[model-explorer]' (or: pip install ai-edge-model-explorer)"


def unavailable_reason() -> str | None:
    """Why Model Explorer cannot start here (None when it can)."""
    import importlib.util

    if importlib.util.find_spec("model_explorer") is None:
        return f"Model Explorer is not installed: {INSTALL_HINT}"
    return None


@dataclass
class Server:
    process: subprocess.Popen
    port: int
    log: str

    @property
    def base(self) -> str:
        return f"http://{HOST}:{self.port}"

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()


@dataclass
class Opened:
    url: str
    server: Server
    folder: str
    graph: str
    before: str = ""  # the left pane's graph, for compare
    mapping: str = ""  # the pass's mapping file (absolute), for compare

    def stop(self) -> None:
        self.server.stop()


_server: Server | None = None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def start_server(timeout_s: float = 60.0, port: int | None = None) -> Server:
    """Model Explorer's server on 127.0.0.1 (reused while it runs), with our adapter loaded."""
    global _server
    if _server is not None and _server.alive():
        return _server
    why = unavailable_reason()
    if why:
        raise MigxError(why)
    port = port or _free_port()
    log = os.path.join(tempfile.mkdtemp(prefix="migx-model-explorer-"), "server.log")
    cmd = [
        sys.executable,
        "-m",
        "model_explorer",
        f"--host={HOST}",
        f"--port={port}",
        "--no_open_in_browser",
        "--extensions=migx_explore",
    ]
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    server = Server(proc, port, log)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not server.alive():
            raise MigxError(f"Model Explorer's server exited at start: {_tail(log)}")
        try:
            with urllib.request.urlopen(f"{server.base}/check_health", timeout=2) as r:
                if r.read() == b"model_explorer_ok":
                    _server = server
                    atexit.register(server.stop)  # its own session: it would outlive the kernel
                    return server
        except OSError:
            time.sleep(0.2)
    server.stop()
    raise MigxError(f"Model Explorer's server did not answer within {timeout_s:.0f} s: {_tail(log)}")


def _tail(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [x.strip() for x in f.read().splitlines() if x.strip()]
        return lines[-1] if lines else "(no output)"
    except OSError:
        return "(no log)"


def page_url(
    base: str,
    folder: str,
    graph: str,
    *,
    before: str = "",
    overlays: list[str] | None = None,
    label: str = "",
    layers: list[str] | None = None,
    layers_before: list[str] | None = None,
    collection: str = "",
) -> str:
    """The Model Explorer address that opens `graph` of an exported folder (and `before` beside
    it, navigation synced by node id); `overlays` are node-data files to load; `collection` a
    collection file other than the folder's whole one (a pass's view, views.py)."""
    collection = os.path.abspath(collection or os.path.join(folder, COLLECTION))

    def pane(gid: str, width: float, selected: bool, open_layers: list[str] | None) -> dict[str, Any]:
        return {
            "deepestExpandedGroupNodeIds": list(open_layers or []),
            "selectedNodeId": "",
            "selectedGraphId": gid,
            "selectedCollectionLabel": label,
            "widthFraction": width,
            "selected": selected,
        }

    panes = (
        [pane(before, 0.5, False, layers_before), pane(graph, 0.5, True, layers)]
        if before
        else [pane(graph, 1, True, layers)]
    )
    data: dict[str, Any] = {"models": [{"url": collection}], "uiState": {"paneStates": panes}}
    if overlays:
        data["nodeData"] = [os.path.abspath(p) for p in overlays]
        data["nodeDataTargets"] = [label] * len(overlays)  # Model Explorer matches the collection label
    if before:
        data["sync"] = {"mode": "match_node_id"}
    return f"{base}/?data={urllib.parse.quote(json.dumps(data))}"


ENDS = ("input", "final")  # `where` for the program before every pass, and after the last


def open_in_model_explorer(
    source: Session | str,
    where: str | int | None = None,
    *,
    compare: bool = False,
    folder: str | None = None,
    browser: bool = True,
    overlay: str | list[str] | None = None,
) -> Opened:
    """Open a pass in Model Explorer: `source` is a Session (exported first, into `folder` or a
    temporary folder; a later call on the same trace reuses that export) or an exported folder;
    `where` a pass path or record index, or "input" / "final" (default: the session's current
    pass, or the folder's last pass); `compare` shows before | after, what the pass removed red
    on the left and what it made green (changed amber) on the right; `overlay` names node-data
    files to load ("provenance", "gpu_time_us", "numeric_error", a list of them, or "all")."""
    why = unavailable_reason()
    if why:
        raise MigxError(why)
    folder, manifest, entry = _resolve(source, where, folder)
    graph = entry["graph"] if entry else manifest[where if where in ENDS else "final"]
    before = entry["before"] if (entry and compare) else ""
    overlays = _overlays(folder, manifest, overlay)
    # the pass's own small collection: Model Explorer parses a collection whole before drawing
    name = os.path.splitext(os.path.basename(entry["mapping"]))[0] if entry else str(where or "final")
    view = view_collection(folder, manifest["collection"], [entry["before"], graph] if entry else [graph], name)
    server = start_server()
    url = page_url(
        server.base,
        folder,
        graph,
        before=before,
        overlays=overlays,
        label=manifest["label"],
        collection=view,
        # a few changed layers open: the rest stay folded, so the graph fits at a readable scale
        layers=entry["layers_after"][:OPEN_LAYERS] if entry else None,
        layers_before=entry["layers_before"][:OPEN_LAYERS] if (entry and compare) else None,
    )
    if browser:
        import webbrowser

        webbrowser.open_new_tab(url)
    mapping = os.path.abspath(os.path.join(folder, entry["mapping"])) if (entry and compare) else ""
    return Opened(url, server, folder, graph, before, mapping)


def _overlays(folder: str, manifest: dict[str, Any], overlay: str | list[str] | None) -> list[str]:
    """The node-data files named by `overlay`: one name, a list of names, or "all" (every one
    the export has)."""
    have = manifest["node_data"]
    names = list(have) if overlay == "all" else [overlay] if isinstance(overlay, str) else list(overlay or [])
    missing = [n for n in names if n not in have]
    if missing:
        listed = ", ".join(have) or "none"
        raise MigxError(f"{folder}: no overlay {missing[0]!r} in this export (it has: {listed})")
    return [os.path.join(folder, have[n]) for n in names]


def _resolve(
    source: Session | str, where: str | int | None, folder: str | None
) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
    """The exported folder, its index and the pass entry to open (None: the input or final)."""
    if isinstance(source, (str, os.PathLike)):
        folder = os.fspath(source)
        manifest = load_manifest(folder)
        if where in ENDS:
            return folder, manifest, None
        if where is None:
            return folder, manifest, (manifest["passes"] or [None])[-1]
        rec_index = _find(manifest, where)
    elif where in ENDS:
        folder = _exported(source, None, folder)
        return folder, load_manifest(folder), None
    else:
        rec_index = source.record(where).index
        folder = _exported(source, rec_index, folder)
        manifest = load_manifest(folder)
    entry = next((p for p in manifest["passes"] if p["index"] == rec_index), None)
    if entry is None:
        raise MigxError(f"{folder}: record {rec_index} has no graph in this export")
    return folder, manifest, entry


# Session exports by trace: a second click on the same trace opens the folder already written.
_exports: dict[int, tuple[Any, Any, str, frozenset[int]]] = {}


def _exported(session: Session, index: int | None, folder: str | None) -> str:
    """A folder holding the session's trace exported with record `index` in it: the one written
    for an earlier call on the same trace (and the same timing), else a new export."""
    from .. import gpu_bridge
    from .export import exported_records

    trace, timing = session.trace, gpu_bridge.session_timing(session)
    hit = _exports.get(id(trace))
    fresh = hit is None or hit[0] is not trace or hit[1] is not timing
    if folder is None and not fresh and (index is None or index in hit[3]):
        if os.path.isfile(os.path.join(hit[2], COLLECTION)):
            return hit[2]
    folder = folder or tempfile.mkdtemp(prefix=f"migx-{_safe(session.name)}-")
    extra = [] if index is None else [index]
    export_trace(session, folder, records=extra)
    done = frozenset(r.index for r in exported_records(trace, extra))
    if len(_exports) >= 4:  # each entry holds a whole trace alive: keep the latest few
        _exports.pop(next(iter(_exports)))
    _exports[id(trace)] = (trace, timing, folder, done)
    return folder


def _find(manifest: dict[str, Any], where: str | int) -> int:
    for p in manifest["passes"]:
        if where == p["index"] or where == p["path"] or (isinstance(where, str) and p["path"].endswith(where)):
            return p["index"]
    paths = ", ".join(p["path"] for p in manifest["passes"][:4])
    raise MigxError(f"no pass {where!r} in this export (e.g. {paths})")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:40]


__all__ = ["HOST", "Opened", "Server", "open_in_model_explorer", "page_url", "start_server", "unavailable_reason"]
