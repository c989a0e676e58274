// The explorer's graph view (an anywidget front end): graphviz SVG with pan/zoom through the
// vendored svg-pan-zoom, fit, centre on the change, node search, a minimap, a pinned node, and two
// panels with synced pan/zoom for comparisons, and fused nodes that open into clusters (double-click
// a ⊞ node; click a cluster's ⊟ label to close it; the toolbar expands or collapses all), and scope
// groups that open on a click (an open scope's label closes it). `svgPanZoom` is defined by the
// loader that graph_view.py puts in front of graph_panel.js (Panel and the helpers) and this file.
// `model` is the host box's model (see hosted.py).

class GraphView {
  constructor(model, root) {
    this.model = model;
    this.root = root;
    this.panels = [];
    this.hits = [];
    this.hitIndex = -1;
    this.syncing = false;
    this.dragged = false;
    root.classList.add("migx-gv");
    const bar = el("div", "migx-gv-bar");
    const button = (label, cls, tip, fn) => {
      const b = el("button", "migx-gv-btn " + cls, label);
      b.title = tip;
      b.addEventListener("click", (ev) => { ev.preventDefault(); fn(); });
      bar.appendChild(b);
      return b;
    };
    button("Fit", "migx-gv-fit", "fit the whole graph in the pane", () => this.fit());
    button("Changes", "migx-gv-centre", "centre on what this pass changed", () => this.centre(true));
    button("+", "migx-gv-zoom-in", "zoom in (or scroll)", () => this.driven((p) => p.spz.zoomIn()));
    button("−", "migx-gv-zoom-out", "zoom out (or scroll)", () => this.driven((p) => p.spz.zoomOut()));
    this.clusterButton = button("", "migx-gv-clusters", "draw every fused node as a cluster of its ops, or "
      + "every cluster as one node (one at a time: double-click a ⊞ node, click a cluster's ⊟ label)",
      () => this.requestAll(!this.model.get("all_expanded")));
    this.showClusterState();
    this.search = el("input", "migx-gv-search");
    this.search.type = "search";
    this.search.placeholder = "find: name, op or id (Enter: next)";
    this.search.addEventListener("keydown", (ev) => {
      ev.stopPropagation(); // keep JupyterLab's notebook shortcuts out of the search box
      if (ev.key === "Enter") { ev.preventDefault(); this.find(this.search.value, true); }
    });
    this.search.addEventListener("input", () => this.find(this.search.value, false));
    bar.appendChild(this.search);
    this.hitLabel = el("span", "migx-gv-hits", "");
    bar.appendChild(this.hitLabel);
    this.note = el("span", "migx-gv-note", "");
    bar.appendChild(this.note);
    root.appendChild(bar);
    this.panes = el("div", "migx-gv-panes");
    root.appendChild(this.panes);
    root.addEventListener("mousedown", () => { this.dragged = false; });
    root.addEventListener("mousemove", (ev) => { if (ev.buttons) this.dragged = true; });
    this.observer = new ResizeObserver(() => this.whenVisible());
    this.observer.observe(this.panes);
    this.pendingCentre = true;
    this.build();
  }

  // The pane fills what the notebook shows below the controls once the explorer is scrolled to
  // its top (issue 36: all of it above the fold at 1280x800), between 260 px and `height`. The
  // explorer's header differs per view, so this is measured, not a fixed share of the window.
  canvasHeight() {
    const most = this.model.get("height");
    const ex = this.root.closest(".migx-explorer");
    const port = ex && (ex.closest(".jp-WindowedPanel-outer") || ex.closest(".jp-Notebook"));
    const top = this.panes.getBoundingClientRect().top;
    if (!ex || !port || !this.panes.isConnected || top === 0) {
      return `clamp(260px, calc(100vh - 430px), ${most}px)`;
    }
    const title = this.panels.length > 1 ? 22 : 0;  // compare panels carry a title line
    const room = port.clientHeight - (top - ex.getBoundingClientRect().top) - title - 10;
    return `${Math.round(Math.max(260, Math.min(most, room)))}px`;
  }

  fitHeight() {
    const h = this.canvasHeight();
    this.each((p) => { if (p.canvas.style.height !== h) p.canvas.style.height = h; });
  }
  each(fn) { this.panels.forEach(fn); }

  build() {
    this.each((p) => p.destroy());
    this.panes.innerHTML = "";
    const titles = this.model.get("titles") || [];
    const sources = [this.model.get("svg"), this.model.get("svg_right")].filter((s) => s);
    this.panels = sources.map((s, i) => new Panel(this, s, titles[i] || ""));
    this.panels.forEach((p) => this.panes.appendChild(p.root));
    this.root.classList.toggle("migx-gv-compare", this.panels.length > 1);
    this.hits = [];
    this.hitIndex = -1;
    this.pendingCentre = true;
    this.pendingFocus = this.model.get("focus") || "";
    this.whenVisible();
  }

  showClusterState() {
    this.clusterButton.textContent = this.model.get("all_expanded") ? "Collapse all" : "Expand all";
  }

  // Ask the kernel to redraw with a cluster opened or closed (the drawing comes back as new svg).
  requestCluster(owner, expand) {
    const n = ((this.model.get("cluster_request") || {}).n || 0) + 1;
    this.model.set("cluster_request", { owner, expand, n });
    this.model.save_changes();
  }

  // Ask the kernel to open a scope group of the drawing (or close an open scope's box).
  requestScope(name, expand) {
    const n = ((this.model.get("cluster_request") || {}).n || 0) + 1;
    this.model.set("cluster_request", { scope: name, expand, n });
    this.model.save_changes();
  }

  requestAll(expand) {
    const n = ((this.model.get("cluster_request") || {}).n || 0) + 1;
    this.model.set("cluster_request", { all: expand, n });
    this.model.save_changes();
  }

  // After opening or closing a cluster, show it rather than the pass's change.
  focusTarget(target) {
    this.each((p) => p.refit());
    afterPaint(() => {
      this.syncing = true;
      try { this.each((p) => { const t = p.targets(target); if (t.length) p.focus(t, 1.2); }); }
      finally { this.syncing = false; }
      afterPaint(() => this.report());
    });
  }

  // svg-pan-zoom needs a laid-out SVG: panels start when the pane first has a size.
  whenVisible() {
    this.fitHeight();
    this.reportPane();
    let started = false;
    this.each((p) => { started = p.init() || started; if (p.spz) { p.spz.resize(); } });
    if (!this.panels.length || !this.panels.every((p) => p.spz)) return;
    if (this.pendingCentre || started) {
      this.pendingCentre = false;
      this.applyPin();
      if (this.search.value) this.find(this.search.value, false);
      const focus = this.pendingFocus;
      this.pendingFocus = "";
      if (focus && this.panels.some((p) => p.targets(focus).length)) this.focusTarget(focus);
      else if (this.model.get("auto_centre")) this.centre(false); else this.fit();
    }
  }

  // The pane's size goes to the kernel, which lays a big drawing out to its shape (a change of
  // a few px is not worth a new layout).
  reportPane() {
    if (this.panels.length !== 1) return;
    const c = this.panels[0].canvas, w = c.clientWidth, h = c.clientHeight;
    const old = this.model.get("pane_size") || [];
    if (w > 0 && h > 0 && (old.length !== 2 || Math.abs(old[0] - w) > 30 || Math.abs(old[1] - h) > 30)) {
      this.model.set("pane_size", [w, h]);
      this.model.save_changes();
    }
  }

  // A toolbar move: on one panel when synced (the sync carries it to the others), else on each.
  driven(fn) {
    const live = this.panels.filter((p) => p.spz);
    if (!live.length) return;
    live.forEach((p) => { p.last = this.transformOf(p); });
    if (this.model.get("sync")) fn(live[0]); else live.forEach(fn);
  }

  fit() {
    this.each((p) => p.refit());
    afterPaint(() => this.report());
  }

  centre(user) {
    const main = this.panels[this.panels.length - 1];
    if (!main || !main.spz) return;
    const changed = this.panels.flatMap((p) => p.changed());
    this.each((p) => p.refit());
    if (!changed.length) {
      this.setNote(user ? "nothing changed here: showing the whole graph" : "");
      afterPaint(() => this.report());
      return;
    }
    // svg-pan-zoom applies a move on the next animation frame, and focus() measures nodes on
    // screen: measure after the fit is painted. Each panel centres on its own changed nodes
    // (a compare's two sides differ), with the sync off so one does not undo the other.
    // Measured on screen, so a second look corrects what the first move left out (up to 3).
    const attempt = (left) => {
      this.syncing = true;
      // a panel without changed nodes (e.g. the after side of a dead-code pass) stays fitted
      try { this.each((p) => { if (p.changed().length) p.focus(p.changed(), 1.5); }); }
      finally { this.syncing = false; }
      afterPaint(() => {
        const out = this.panels.some((p) => p.changed().some((n) => !inside(n, p.visibleBox())));
        if (out && left > 0) attempt(left - 1); else this.report();
      });
    };
    afterPaint(() => attempt(2));
  }

  transformOf(p) {
    const z = p.spz.getSizes().realZoom, pan = p.spz.getPan();
    return { s: z, x: pan.x, y: pan.y };
  }

  // Synced panels make the same screen motion: the change of one panel's transform (scale r,
  // shift) is applied to the other, so each keeps its own framing of its own graph.
  changedView(panel) {
    if (!this.syncing && this.model.get("sync") && this.panels.length > 1 && panel.last) {
      const now = this.transformOf(panel), was = panel.last;
      const r = now.s / was.s, dx = now.x - r * was.x, dy = now.y - r * was.y;
      this.syncing = true;
      try {
        for (const p of this.panels) {
          if (p === panel || !p.spz || !p.last) continue;
          const t = p.last, base = t.s / p.spz.getZoom(), z = (r * t.s) / base;
          if (!Number.isFinite(z) || z <= 0 || !p.sized()) continue;  // a hidden or unsized panel
          p.spz.zoom(z);
          p.spz.pan({ x: r * t.x + dx, y: r * t.y + dy });
        }
      } finally { this.syncing = false; }
    }
    if (!this.syncing) this.each((p) => { if (p.spz) p.last = this.transformOf(p); });
    if (!this.frame) {
      this.frame = requestAnimationFrame(() => { this.frame = null; this.report(); });
    }
  }

  // The note says where the change is relative to the view, the minimap follows the view.
  report() {
    this.each((p) => { p.updateMinimap(); if (p.spz) p.last = this.transformOf(p); });
    let total = 0, shown = 0, zoom = 1;
    for (const p of this.panels) {
      if (!p.spz) continue;
      const box = p.visibleBox();
      const ch = p.changed();
      total += ch.length;
      shown += ch.filter((n) => inside(n, box)).length;
      zoom = p.spz.getSizes().realZoom;
    }
    let text = "";
    if (total && shown < total) {
      text = `${total - shown} of ${total} changed nodes are off-screen: press Changes`;
    } else if (total && zoom < READABLE_ZOOM) {
      text = `the change spans the graph: zoomed out to show all ${total} changed nodes (scroll to zoom in)`;
    } else if (total) {
      text = `${total} changed node${total === 1 ? "" : "s"} in view`;
    }
    this.setNote(text);
    const state = { zoom, changed: total, changed_in_view: shown };
    this.root.dataset.zoom = zoom.toFixed(4);
    this.root.dataset.changedInView = `${shown}/${total}`;
    const old = this.model.get("view_state") || {};
    if (old.changed !== total || old.changed_in_view !== shown || Math.abs((old.zoom || 0) - zoom) > 1e-3) {
      this.model.set("view_state", state);
      this.model.save_changes();
    }
  }

  setNote(text) {
    this.note.textContent = text;
    this.note.classList.toggle("migx-gv-offscreen", text.includes("off-screen"));
  }

  find(query, next) {
    const q = (query || "").trim().toLowerCase();
    this.each((p) => p.svg && p.svg.querySelectorAll(".migx-gv-hit, .migx-gv-hit-current").forEach(
      (n) => n.classList.remove("migx-gv-hit", "migx-gv-hit-current")));
    if (!q) {
      this.hits = [];
      this.hitLabel.textContent = "";
      this.syncSearch(q, 0);
      return;
    }
    const hits = [];
    this.each((p) => p.svg && p.svg.querySelectorAll("g.node").forEach((n) => {
      if (matches(n, q)) { n.classList.add("migx-gv-hit"); hits.push([p, n]); }
    }));
    const same = this.hits.length === hits.length && this.hits.every((h, i) => h[1] === hits[i][1]);
    this.hits = hits;
    this.hitIndex = !hits.length ? -1 : (same && next ? (this.hitIndex + 1) % hits.length : 0);
    this.hitLabel.textContent = hits.length ? `${this.hitIndex + 1} / ${hits.length}` : "no match";
    if (hits.length) {
      const [p, n] = hits[this.hitIndex];
      n.classList.add("migx-gv-hit-current");
      p.focus([n], 1.5);
      afterPaint(() => this.report());
    }
    this.syncSearch(q, hits.length);
  }

  syncSearch(q, n) {
    if (this.model.get("search") !== q || this.model.get("search_hits") !== n) {
      this.model.set("search", q);
      this.model.set("search_hits", n);
      this.model.save_changes();
    }
  }

  pin(title) {
    this.model.set("pinned", this.model.get("pinned") === title ? "" : title);
    this.model.save_changes();
    this.applyPin();
  }

  applyPin() {
    const title = this.model.get("pinned");
    this.each((p) => p.svg && p.svg.querySelectorAll("g.node").forEach((n) => {
      const t = n.querySelector("title");
      n.classList.toggle("migx-gv-pinned", !!title && !!t && t.textContent.trim() === title);
    }));
  }

  message(msg) {
    if (msg.cmd === "fit") this.fit();
    else if (msg.cmd === "centre") this.centre(true);
    else if (msg.cmd === "find") { this.search.value = msg.query || ""; this.find(this.search.value, !!msg.next); }
  }
}

function render({ model, el: root }) {
  const view = new GraphView(model, root);
  const rebuild = () => view.build();
  model.on("change:svg", rebuild);
  model.on("change:svg_right", rebuild);
  model.on("change:titles", rebuild);
  model.on("change:pinned", () => view.applyPin());
  model.on("change:all_expanded", () => view.showClusterState());
  const marks = () => view.each((p) => p.markRegions());
  model.on("change:regions", marks);
  model.on("change:region_index", marks);
  model.on("change:height", () => view.whenVisible());
  const resized = () => view.whenVisible();
  window.addEventListener("resize", resized);
  model.on("change:command", () => view.message(model.get("command") || {}));
  return () => { window.removeEventListener("resize", resized); view.observer.disconnect(); view.each((p) => p.destroy()); };
}
// (the module's export is added by hosted.py: render runs against the host box's model)
