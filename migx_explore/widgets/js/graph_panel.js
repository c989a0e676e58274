// The graph view's panel: one drawing with its pan/zoom (svg-pan-zoom), minimap, regions and
// focus, and the DOM helpers the view shares. graph_view.py loads this file before graph_view.js,
// in one module: `svgPanZoom` comes from the loader in front of both.

const CHANGED = "g.node.st_added, g.node.st_removed, g.node.st_changed";
const READABLE_ZOOM = 0.35; // below this real zoom node labels are too small to read

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function afterPaint(fn) {
  requestAnimationFrame(() => requestAnimationFrame(fn));
}

function unionRect(nodes) {
  let r = null;
  for (const n of nodes) {
    const b = n.getBoundingClientRect();
    if (b.width === 0 && b.height === 0) continue;
    r = r ? { left: Math.min(r.left, b.left), top: Math.min(r.top, b.top),
              right: Math.max(r.right, b.right), bottom: Math.max(r.bottom, b.bottom) }
          : { left: b.left, top: b.top, right: b.right, bottom: b.bottom };
  }
  return r;
}

function inside(node, box) {
  const b = node.getBoundingClientRect();
  return b.left >= box.left - 1 && b.right <= box.right + 1 && b.top >= box.top - 1 && b.bottom <= box.bottom + 1;
}

function nodeText(n) {
  const t = n.querySelector("title");
  const a = n.querySelector("a");
  return ((t ? t.textContent : "") + " " + (a ? a.getAttribute("xlink:title") || a.getAttribute("title") || "" : "")
          + " " + n.textContent).toLowerCase();
}

// The number in a class such as "iid_42" or "owner_42" (null when absent).
function classNumber(e, prefix) {
  for (const c of e.classList) if (c.startsWith(prefix)) return Number(c.slice(prefix.length));
  return null;
}

function matches(n, q) {
  const t = n.querySelector("title");
  const id = q.replace(/^[#@i]/, "");
  if (/^\d+$/.test(id)) return !!t && t.textContent.trim() === "i" + id || n.classList.contains("iid_" + id);
  return nodeText(n).includes(q);
}

// The graphviz name of a node or cluster (its <title>), "" when it has none.
function titleOf(g) {
  const t = g && g.querySelector(":scope > title");
  return t ? t.textContent.trim() : "";
}

class Panel {
  constructor(view, markup, title) {
    this.view = view;
    this.root = el("div", "migx-gv-panel");
    if (title) this.root.appendChild(el("div", "migx-gv-title", title));
    this.canvas = el("div", "migx-gv-canvas");
    this.canvas.style.height = view.canvasHeight();
    this.root.appendChild(this.canvas);
    this.canvas.innerHTML = markup;
    this.svg = this.canvas.querySelector("svg");
    this.spz = null;
    this.mini = null;
    if (!this.svg) return;
    const vb = (this.svg.getAttribute("viewBox") || "0 0 100 100").split(/[\s,]+/).map(Number);
    this.vb = { x: vb[0], y: vb[1], w: vb[2], h: vb[3] };
    this.svg.removeAttribute("width");
    this.svg.removeAttribute("height");
    this.svg.style.width = "100%";
    this.svg.style.height = "100%";
    this.markup = markup;
    this.svg.addEventListener("click", (ev) => {
      if (this.view.dragged || !ev.target.closest) return;
      const n = ev.target.closest("g.node");
      if (!n) {
        // a click on a cluster's label (its ⊟ control) collapses that cluster; on an open
        // scope's label, closes the scope
        const c = ev.target.closest("g.cluster");
        const label = c && ev.target.closest("text");
        const owner = label ? classNumber(c, "owner_") : null;
        const name = label ? titleOf(c) : "";
        if (owner !== null) this.view.requestCluster(owner, false);
        else if (name.startsWith("cluster_scope_")) this.view.requestScope(name, false);
        return;
      }
      const t = titleOf(n);
      // a collapsed scope group opens (Model Explorer's layers); any other node is pinned
      if (n.classList.contains("op_scope") && t.startsWith("scope_")) this.view.requestScope(t, true);
      else if (t) this.view.pin(t);
    });
    this.svg.addEventListener("dblclick", (ev) => {
      if (!ev.target.closest) return;
      const n = ev.target.closest("g.node");
      const c = n ? null : ev.target.closest("g.cluster");
      const owner = n && n.classList.contains("kind_fused") ? classNumber(n, "iid_") : c ? classNumber(c, "owner_") : null;
      if (owner === null) return;
      ev.preventDefault();
      this.view.requestCluster(owner, !!n);
    });
  }

  // The elements a focus target names: "owner_42" a cluster, "cluster_scope_x" a scope's box,
  // "i42" a node.
  targets(target) {
    if (!this.svg || !target) return [];
    if (target.startsWith("owner_")) return [...this.svg.querySelectorAll("g.cluster." + target)];
    if (target.startsWith("cluster_")) return [...this.svg.querySelectorAll("g.cluster")].filter((c) => titleOf(c) === target);
    return [...this.svg.querySelectorAll("g.node")].filter((n) => {
      const t = n.querySelector("title");
      return t && t.textContent.trim().replace(/^(ca_|cb_|b_|a_)/, "") === target;
    });
  }

  ready() {
    return this.svg && this.canvas.clientWidth > 0 && this.canvas.clientHeight > 0;
  }

  init() {
    if (this.spz || !this.ready()) return false;
    const v = this.view;
    this.spz = svgPanZoom(this.svg, {
      zoomEnabled: true, panEnabled: true, controlIconsEnabled: false, dblClickZoomEnabled: false,
      mouseWheelZoomEnabled: true, preventMouseEventsDefault: true, zoomScaleSensitivity: 0.25,
      minZoom: 0.01, maxZoom: 40, fit: true, center: true,
      onZoom: () => v.changedView(this), onPan: () => v.changedView(this),
    });
    this.addMinimap();
    return true;
  }

  addMinimap() {
    const box = el("div", "migx-gv-minimap");
    box.title = "overview: click to move there";
    const img = el("img", "migx-gv-minimap-img");
    img.src = "data:image/svg+xml," + encodeURIComponent(this.markup);
    img.alt = "overview";
    const frame = el("div", "migx-gv-minimap-view");
    box.appendChild(img);
    box.appendChild(frame);
    this.canvas.appendChild(box);
    this.mini = { box, img, frame, marks: [] };
    box.addEventListener("click", (ev) => {
      const s = this.miniScale();
      const r = box.getBoundingClientRect();
      const ux = this.vb.x + (ev.clientX - r.left - s.ox) / s.k;
      const uy = this.vb.y + (ev.clientY - r.top - s.oy) / s.k;
      const z = this.spz.getSizes().realZoom;
      this.spz.pan({ x: this.canvas.clientWidth / 2 - (ux - this.vb.x) * z,
                     y: this.canvas.clientHeight / 2 - (uy - this.vb.y) * z });
      ev.stopPropagation();
    });
    this.updateMinimap();
    this.markRegions();
  }

  // The change regions (the `regions` trait: instruction ids per region) as boxes on the
  // minimap, the current one (`region_index`) stronger. Boxes are kept in drawing units, which
  // no pan or zoom changes; updateMinimap places them.
  markRegions() {
    if (!this.mini || !this.spz || !this.sized()) return;
    this.mini.marks.forEach((m) => m.el.remove());
    this.mini.marks = [];
    const regions = this.view.model.get("regions") || [];
    const current = this.view.model.get("region_index");
    if (!regions.length) return;
    const byId = new Map();
    for (const n of this.svg.querySelectorAll("g.node")) {
      const i = classNumber(n, "iid_");
      if (i === null) continue;
      if (!byId.has(i)) byId.set(i, []);
      byId.get(i).push(n);
    }
    const c = this.canvas.getBoundingClientRect(), pan = this.spz.getPan(), z = this.spz.getSizes().realZoom;
    regions.forEach((ids, k) => {
      const r = unionRect(ids.flatMap((i) => byId.get(i) || []));
      if (!r) return;
      const box = { x: (r.left - c.left - pan.x) / z, y: (r.top - c.top - pan.y) / z,
                    w: (r.right - r.left) / z, h: (r.bottom - r.top) / z };
      const mark = el("div", "migx-gv-minimap-region" + (k === current ? " migx-gv-minimap-current" : ""));
      mark.title = `change region ${k + 1} of ${regions.length}`;
      mark.dataset.region = String(k);
      this.mini.box.insertBefore(mark, this.mini.frame);
      this.mini.marks.push({ el: mark, box });
    });
    this.view.root.dataset.regionMarks = String(this.view.panels.reduce((t, p) => t + (p.mini ? p.mini.marks.length : 0), 0));
    this.updateMinimap();
  }

  miniScale() {
    const bw = this.mini.box.clientWidth, bh = this.mini.box.clientHeight;
    const k = Math.min(bw / this.vb.w, bh / this.vb.h);
    return { k, ox: (bw - this.vb.w * k) / 2, oy: (bh - this.vb.h * k) / 2 };
  }

  updateMinimap() {
    if (!this.mini || !this.spz) return;
    const s = this.miniScale();
    const pan = this.spz.getPan(), z = this.spz.getSizes().realZoom;
    const x0 = -pan.x / z, y0 = -pan.y / z;
    const w = this.canvas.clientWidth / z, h = this.canvas.clientHeight / z;
    const f = this.mini.frame.style;
    f.left = s.ox + x0 * s.k + "px";
    f.top = s.oy + y0 * s.k + "px";
    f.width = Math.max(w * s.k, 2) + "px";
    f.height = Math.max(h * s.k, 2) + "px";
    for (const m of this.mini.marks) {  // at least 4 px, so a one-node region still shows
      const mw = Math.max(m.box.w * s.k, 4), mh = Math.max(m.box.h * s.k, 4);
      const ms = m.el.style;
      ms.left = s.ox + m.box.x * s.k + (m.box.w * s.k - mw) / 2 + "px";
      ms.top = s.oy + m.box.y * s.k + (m.box.h * s.k - mh) / 2 + "px";
      ms.width = mw + "px";
      ms.height = mh + "px";
    }
  }

  // Whether the pane has a size: while it is hidden (another view shown, a relayout) every zoom
  // svg-pan-zoom would compute divides by zero, and a non-finite scale throws.
  sized() {
    const c = this.canvas.getBoundingClientRect();
    return c.width > 0 && c.height > 0;
  }

  // The whole graph, fitted and centred in the pane (when the pane has a size).
  refit() {
    if (!this.spz || !this.sized()) return;
    this.spz.resize(); this.spz.fit(); this.spz.center();
  }

  // Zoom and pan so `nodes` fill most of the pane (never past natural size x maxZoom).
  focus(nodes, maxZoom) {
    if (!this.spz || !this.sized()) return false;
    const r = unionRect(nodes);
    if (!r) return false;
    // The rects are as painted, but svg-pan-zoom paints a move on the next frame and may hold a
    // newer transform (a resize, a fit) than the one on screen: read the nodes' place in drawing
    // units through the painted transform, then set an absolute zoom and pan (a relative move
    // mixing the two states once left a comparison's panel panned far off its drawing).
    const vp = this.svg.querySelector(".svg-pan-zoom_viewport");
    const m = vp && vp.transform.baseVal.numberOfItems ? vp.transform.baseVal.consolidate().matrix : null;
    const s = this.svg.getBoundingClientRect();
    const zNow = m ? m.a : this.spz.getSizes().realZoom;
    const pan = m ? { x: m.e, y: m.f } : this.spz.getPan();
    const x0 = (r.left - s.left - pan.x) / zNow, x1 = (r.right - s.left - pan.x) / zNow;
    const y0 = (r.top - s.top - pan.y) / zNow, y1 = (r.bottom - s.top - pan.y) / zNow;
    const w = Math.max(x1 - x0, 1e-3), h = Math.max(y1 - y0, 1e-3);
    const z = Math.min(0.88 * s.width / w, 0.88 * s.height / h, maxZoom);
    const base = this.spz.getSizes().realZoom / this.spz.getZoom();
    if (!Number.isFinite(z) || z <= 0 || !Number.isFinite(base) || base <= 0) return false;
    this.spz.zoom(z / base);
    this.spz.pan({ x: s.width / 2 - (x0 + x1) / 2 * z, y: s.height / 2 - (y0 + y1) / 2 * z });
    return true;
  }

  changed() {
    return this.svg ? [...this.svg.querySelectorAll(CHANGED)] : [];
  }

  visibleBox() {
    return this.canvas.getBoundingClientRect();
  }

  destroy() {
    if (this.spz) this.spz.destroy();
    this.spz = null;
  }
}
