// The report page: the pipeline tree, one pass at a time (stats, rewrite summary, numeric check,
// graph diff, text diff), and tabs for GPU timing and how to reproduce. Runs after the explorer's
// graph view code (same module), whose GraphView it drives with a small local model in place of
// the notebook kernel: expand / collapse swap between the two pre-drawn variants of a pass.
(() => {
  const DATA = JSON.parse(document.getElementById("migx-report-data").textContent);
  const rows = DATA.passes;
  const $ = (sel, root) => (root || document).querySelector(sel);
  const mk = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  };

  // ---- compressed blobs: inflated on demand, once ------------------------------------------------
  const blobCache = new Map();
  function loadBlob(i) {
    if (!blobCache.has(i)) {
      const node = document.getElementById("migx-blob-" + i);
      if (!node) return Promise.resolve(null);
      blobCache.set(i, (async () => {
        if (typeof DecompressionStream === "undefined") {
          throw new Error("this browser has no DecompressionStream (needs Chrome 80+, Firefox 113+, Safari 16.4+)");
        }
        const bin = atob(node.textContent.trim());
        const bytes = new Uint8Array(bin.length);
        for (let k = 0; k < bin.length; k++) bytes[k] = bin.charCodeAt(k);
        const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
        return JSON.parse(await new Response(stream).text());
      })());
    }
    return blobCache.get(i);
  }

  // ---- a local stand-in for the anywidget model the graph view talks to ---------------------------
  function localModel(init) {
    const state = { ...init }, handlers = {};
    return {
      get: (k) => state[k],
      set: (k, v) => {
        const old = state[k];
        state[k] = v;
        if (old !== v) (handlers["change:" + k] || []).forEach((f) => f());
      },
      on: (ev, f) => { (handlers[ev] = handlers[ev] || []).push(f); },
      save_changes: () => {},
    };
  }

  const model = localModel({
    svg: "", svg_right: "", titles: [], height: 700, auto_centre: true, sync: true, pinned: "", search: "",
    search_hits: 0, view_state: {}, cluster_request: {}, all_expanded: false, focus: "", command: {},
  });
  let view = null;
  function graphView() {
    if (view) return view;
    view = new GraphView(model, $(".rep-graph-view"));
    model.on("change:svg", () => view.build());
    model.on("change:pinned", () => view.applyPin());
    model.on("change:all_expanded", () => view.showClusterState());
    model.on("change:command", () => view.message(model.get("command") || {}));
    model.on("change:cluster_request", () => {
      const req = model.get("cluster_request") || {};
      if ("scope" in req) { showScope(req.scope); return; } // a scope group: found in the scope tree
      const expand = "all" in req ? !!req.all : !!req.expand;
      const focus = req.owner === undefined ? "" : (expand ? "owner_" + req.owner : "i" + req.owner);
      showVariant(expand ? "expanded" : "collapsed", focus);
    });
    return view;
  }

  // ---- state ---------------------------------------------------------------------------------------
  let current = -1;
  let graph = null; // the current pass's {default, collapsed, expanded?}
  let variant = "collapsed";
  let region = -1;
  let rewrite = null; // {row, k}: the rewrite instance shown
  let payload = null; // the current pass's inflated blob

  function showVariant(which, focus) {
    if (!graph) return;
    const note = $(".rep-graph-note");
    if (!graph[which]) {
      note.textContent = graph.trimmed === which
        ? `no ${which} drawing stored for this pass (left out to keep the report small)`
        : which === "expanded" ? "no fused module in this drawing to open" : "";
      which = graph.default;
    } else note.textContent = "";
    variant = which;
    region = -1;
    rewrite = null;
    const v = graphView();
    model.set("focus", focus || "");
    model.set("all_expanded", which === "expanded");
    model.set("svg", graph[which].svg);
    v.showClusterState();
    updateRegions();
  }

  function regionsOf() { return (graph && payload && payload.regions) || []; }

  // The nodes showing these instructions in the drawing shown: "i<id>", or the fused / summary
  // node that holds the id.
  function namesOf(ids) {
    const alias = (graph && graph[variant] && graph[variant].alias) || {};
    return [...new Set(ids.map((i) => alias[i] || "i" + i))];
  }

  function updateRegions() {
    const regs = regionsOf();
    const box = $(".rep-regions");
    box.style.display = regs.length ? "" : "none";
    $(".rep-region-label").textContent = region < 0
      ? `the change in ${regs.length} stop${regs.length === 1 ? "" : "s"} (its regions, big ones in parts): press Next region`
      : `${regs[region].label}` + (regs[region].missing ? " — not in this drawing (cut to the change)" : "")
        + ` [stop ${region + 1} / ${regs.length}]`;
  }

  // Mark and centre on the nodes named (titles "i<id>"); returns how many the drawing has.
  function focusNames(names) {
    if (!view) return 0;
    let found = 0;
    view.each((p) => {
      if (!p.svg) return;
      p.svg.querySelectorAll(".rep-in-region").forEach((n) => n.classList.remove("rep-in-region"));
      p.hitNodes = [...new Set(names.flatMap((n) => p.targets(n)))];
      p.hitNodes.forEach((n) => n.classList.add("rep-in-region"));
      found += p.hitNodes.length;
    });
    if (!found) return 0;
    view.each((p) => { if (p.spz) { p.spz.resize(); p.spz.fit(); p.spz.center(); } });
    afterPaint(() => {
      view.syncing = true;
      try { view.each((p) => { if (p.hitNodes && p.hitNodes.length) p.focus(p.hitNodes, 1.5); }); }
      finally { view.syncing = false; }
      // the view's own note would count the rest of the change as off-screen: that is the point
      afterPaint(() => { view.report(); view.setNote("showing one place of the change (Changes: all of it)"); });
    });
    return found;
  }

  function gotoRegion(k) {
    const regs = regionsOf();
    if (!regs.length || !view) return;
    // an instance drawing is on screen (a big pass opens on one): regions are in the pass's graph
    // (focus once the graph is laid out, or the focus lands on the replaced drawing's geometry)
    if (rewrite && rewrite.k === -1 && graph) {
      showVariant(variant, "");
      afterPaint(() => gotoRegion(k));
      return;
    }
    region = ((k % regs.length) + regs.length) % regs.length;
    rewrite = null;
    regs[region].missing = !focusNames(namesOf(regs[region].ids));
    updateRegions();
  }

  // A rewrite row of the summary: each click shows its next instance that the drawing holds.
  function gotoRewrite(row) {
    const drawn = payload && payload.instances && payload.instances[row];
    const first = !rewrite || rewrite.row !== row;
    if (drawn && first && view) {
      // the row's first instance, drawn before | after as the explorer's Rewrites view draws it
      document.querySelectorAll(".rep-rewrites li").forEach((li, k) => li.classList.toggle("rep-rw-current", k === row));
      rewrite = { row, k: -1 };
      region = -1;
      model.set("focus", "");
      model.set("svg", drawn.svg);
      const r = rows[current].rewrites[row];
      $(".rep-region-label").textContent = `${r.label}: ${drawn.label} · ${drawn.where} (click it again: in the pass's graph)`;
      return;
    }
    if (drawn && rewrite && rewrite.k === -1 && graph) showVariant(variant, "");
    const all = (payload && payload.rewrite_ids && payload.rewrite_ids[row]) || [];
    const r = rows[current].rewrites[row];
    const start = rewrite && rewrite.row === row ? rewrite.k + 1 : 0;
    document.querySelectorAll(".rep-rewrites li").forEach((li, k) => li.classList.toggle("rep-rw-current", k === row));
    for (let t = 0; t < all.length; t++) {
      const k = (start + t) % all.length;
      if (focusNames(namesOf(all[k]))) {
        rewrite = { row, k };
        region = -1;
        $(".rep-region-label").textContent = `${r.label}: instance ${k + 1} / ${r.count} (click it again for the next)`;
        return;
      }
    }
    $(".rep-region-label").textContent = `${r.label}: no instance of it is in this drawing (big graphs are cut to the change)`;
  }

  // ---- the scope tree of the pass (the explorer's, every level stored): rows fold and unfold, a
  // click on a scope with rewrites shows the first rewrite instance drawn there ----------------------
  let scopeOpen = new Set();
  function scopeRows() { return (payload && payload.scopes) || []; }
  function buildScopes() {
    const box = $(".rep-scopes");
    box.innerHTML = "";
    const all = scopeRows();
    $(".rep-scopes-section").style.display = all.length ? "" : "none";
    const tops = all.filter((r) => r[1] === 0);
    scopeOpen = new Set();
    // a lone top scope (every op of a BERT export under /bert) says nothing: open it, as the explorer does
    for (let lone = tops.length === 1 ? tops[0] : null; lone && lone[2];) {
      scopeOpen.add(lone[0]);
      const kids = all.filter((r) => r[1] === lone[1] + 1 && r[0].startsWith(lone[0] + "/"));
      lone = kids.length === 1 ? kids[0] : null;
    }
    all.forEach(([scope, depth, kids, badge]) => {
      const row = mk("div", "rep-scope-row" + (badge ? " rep-scope-changed" : ""));
      row.dataset.scope = scope;
      row.style.paddingLeft = `${depth * 12}px`;
      row.title = `/${scope}: ${badge} rewrite instance${badge === 1 ? "" : "s"} in this pass`;
      row.addEventListener("click", () => scopeClicked(scope, kids, badge));
      box.appendChild(row);
    });
    paintScopes();
  }
  function paintScopes() {
    document.querySelectorAll(".rep-scope-row").forEach((row) => {
      const scope = row.dataset.scope, r = scopeRows().find((x) => x[0] === scope);
      const parts = scope.split("/");
      const shown = parts.slice(0, -1).every((_, k) => scopeOpen.has(parts.slice(0, k + 1).join("/")));
      row.style.display = shown ? "" : "none";
      row.classList.toggle("rep-scope-open", scopeOpen.has(scope));
      row.textContent = (r[2] ? (scopeOpen.has(scope) ? "▾ " : "▸ ") : "\u00a0\u00a0") + parts[parts.length - 1]
        + (r[3] ? ` · ${r[3]}` : "");
    });
  }
  function scopeClicked(scope, kids, badge) {
    if (kids) { if (scopeOpen.has(scope)) scopeOpen.delete(scope); else scopeOpen.add(scope); }
    paintScopes();
    const drawn = (payload && payload.instances) || [];
    const k = badge ? drawn.findIndex((d) => (d.label + " ").includes("/" + scope + " ") || (d.label + " ").includes("/" + scope + "/")) : -1;
    if (k >= 0) { rewrite = null; gotoRewrite(k); }
  }
  // A scope group clicked in the drawing: open the tree down to it and mark it.
  function showScope(name) {
    const want = name.replace(/^(cluster_)?scope_/, "");
    const r = scopeRows().find((x) => x[4] === want);
    if (!r) return;
    const parts = r[0].split("/");
    parts.forEach((_, k) => scopeOpen.add(parts.slice(0, k + 1).join("/")));
    paintScopes();
    document.querySelectorAll(".rep-scope-row").forEach((row) => row.classList.toggle("rep-scope-current", row.dataset.scope === r[0]));
  }

  // ---- the tree ------------------------------------------------------------------------------------
  function numBadge(r) {
    const s = r.numeric.state;
    if (s === "ok") return mk("span", "rep-num rep-num-ok", "✓ num");
    if (s === "bad") return mk("span", "rep-num rep-num-bad", "✗ num");
    if (s === "note") return mk("span", "rep-num rep-num-note", "num n/a");
    return null;
  }

  function buildTree() {
    const tree = $(".rep-tree");
    const byPipeline = new Map(DATA.pipelines.map((p) => [p.name, []]));
    for (const r of rows) {
      if (!byPipeline.has(r.pipeline)) byPipeline.set(r.pipeline, []);
      byPipeline.get(r.pipeline).push(r);
    }
    const plInfo = new Map(DATA.pipelines.map((p) => [p.name, p]));
    for (const [name, rs] of byPipeline) {
      if (!rs.length && !plInfo.has(name)) continue;
      const info = plInfo.get(name) || { enabled: true };
      const box = mk("div", "rep-pipeline");
      box.dataset.pipeline = name;
      const head = mk("div", "rep-pipeline-head" + (info.enabled ? "" : " rep-pl-off"), name + " ");
      const tops = rs.filter((r) => r.depth === 0);
      const counts = `${tops.length} passes, ${tops.filter((r) => r.changed).length} changed`
        + (tops.some((r) => r.status === "disabled") ? `, ${tops.filter((r) => r.status === "disabled").length} off` : "");
      head.appendChild(mk("span", "rep-pl-counts", info.enabled ? counts : "disabled"));
      head.title = "fold / unfold";
      head.addEventListener("click", () => box.classList.toggle("rep-folded"));
      box.appendChild(head);
      for (const r of rs) {
        const cls = ["rep-row", r.changed ? "rep-changed" : "", r.noop ? "rep-noop" : "",
          r.status === "disabled" ? "rep-disabled" : "", r.status === "failed" ? "rep-failed" : "",
          r.user ? "rep-user" : ""].filter(Boolean).join(" ");
        const row = mk("div", cls);
        row.dataset.i = r.i;
        row.dataset.path = r.path;
        row.style.paddingLeft = 8 + 16 * r.depth + "px";
        row.title = r.path + (r.reason ? ` — ${r.reason}` : "") + (r.noop ? " (no change)" : "");
        row.appendChild(mk("span", "rep-idx", r.i + 1));
        row.appendChild(mk("span", "rep-name", r.depth ? r.path.split("/").pop() : r.name));
        row.appendChild(mk("span", "rep-sum", r.changed ? r.summary : (r.status === "ok" ? "" : r.status)));
        const b = numBadge(r);
        if (b) row.appendChild(b);
        row.addEventListener("click", () => select(r.i));
        box.appendChild(row);
      }
      tree.appendChild(box);
    }
    const filter = $(".rep-filter");
    filter.addEventListener("input", () => {
      const q = filter.value.trim().toLowerCase();
      document.querySelectorAll(".rep-row").forEach((row) => {
        row.classList.toggle("rep-filtered", !!q && !row.dataset.path.toLowerCase().includes(q));
      });
    });
    $(".rep-hide-noop-box").addEventListener("change", (ev) => tree.classList.toggle("rep-hide-noop", ev.target.checked));
  }

  // ---- the metrics strip: instructions and launches after each top-level pass, click to go there ----
  function buildMetrics() {
    const box = $(".rep-metrics");
    const tops = rows.filter((r) => r.depth === 0);
    if (!box || tops.length < 2) return;
    const W = 360, H = 74, pad = 4;
    const ins = tops.map((r) => r.stats.instructions[1]), lau = tops.map((r) => r.stats.launches[1]);
    const max = Math.max(...ins, ...lau, 1);
    const x = (k) => pad + (k * (W - 2 * pad)) / (tops.length - 1);
    const y = (v) => H - pad - (v / max) * (H - 2 * pad - 10);
    const line = (vals) => vals.map((v, k) => `${k ? "L" : "M"}${x(k).toFixed(1)},${y(v).toFixed(1)}`).join("");
    const NS = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("class", "rep-metrics-svg");
    const path = (d, cls) => { const p = document.createElementNS(NS, "path"); p.setAttribute("d", d); p.setAttribute("class", cls); svg.appendChild(p); };
    path(line(ins), "rep-m-ins");
    path(line(lau), "rep-m-launch");
    tops.forEach((r, k) => {
      if (!r.changed) return;
      const c = document.createElementNS(NS, "circle");
      c.setAttribute("cx", x(k)); c.setAttribute("cy", y(ins[k])); c.setAttribute("r", 2.6);
      c.setAttribute("class", "rep-m-dot");
      c.dataset.i = r.i;
      const t = document.createElementNS(NS, "title");
      t.textContent = `${r.i + 1}. ${r.path}: ${r.stats.instructions[0]} → ${r.stats.instructions[1]} instructions, `
        + `${r.stats.launches[0]} → ${r.stats.launches[1]} launches`;
      c.appendChild(t);
      c.addEventListener("click", () => select(r.i));
      svg.appendChild(c);
    });
    const legend = mk("div", "rep-metrics-legend");
    legend.innerHTML = '<span class="rep-m-ins-key">━ instructions</span> <span class="rep-m-launch-key">━ kernel launches</span>'
      + " after each pass (dots: passes that changed the IR; click one)";
    box.appendChild(svg);
    box.appendChild(legend);
  }

  // ---- one pass ------------------------------------------------------------------------------------
  function stat(value, label) {
    const s = mk("div", "rep-stat");
    s.appendChild(mk("b", "", value));
    s.appendChild(mk("span", "", label));
    return s;
  }

  function textDiff(pre, text, limit) {
    pre.innerHTML = "";
    if (!text) { pre.textContent = "No change: the IR after this pass is identical."; return; }
    const lines = text.split("\n");
    const frag = document.createDocumentFragment();
    for (const line of lines.slice(0, limit)) {
      const cls = line.startsWith("+") && !line.startsWith("+++") ? "add"
        : line.startsWith("-") && !line.startsWith("---") ? "del" : line.startsWith("@@") ? "hunk" : "";
      if (cls) frag.appendChild(mk("span", cls, line || " "));
      else frag.appendChild(document.createTextNode(line + "\n"));
    }
    pre.appendChild(frag);
    if (lines.length > limit) {
      const more = mk("button", "rep-more", `show ${lines.length - limit} more lines`);
      more.addEventListener("click", () => textDiff(pre, text, Infinity));
      pre.appendChild(more);
    }
  }

  function select(i, fromHash) {
    const r = rows[i];
    if (!r) return;
    current = i;
    document.querySelectorAll(".rep-row.rep-current").forEach((e) => e.classList.remove("rep-current"));
    const row = document.querySelector(`.rep-row[data-i="${i}"]`);
    document.querySelectorAll(".rep-m-dot").forEach((c) => c.classList.toggle("rep-m-current", Number(c.dataset.i) === i));
    if (row) {
      row.classList.add("rep-current");
      row.closest(".rep-pipeline").classList.remove("rep-folded");
      row.scrollIntoView({ block: "nearest" });
    }
    if (!fromHash) history.replaceState(null, "", "#pass-" + (i + 1));
    const art = $(".rep-pass");
    art.dataset.i = i;
    $(".rep-pass-title").textContent = `${i + 1}. ${r.path}`;
    const badges = $(".rep-pass-badges");
    badges.innerHTML = "";
    const kind = r.status !== "ok" ? r.status : r.changed ? "changed" : "noop";
    badges.appendChild(mk("span", "rep-badge rep-b-" + kind, kind === "noop" ? "no change" : kind));
    badges.appendChild(mk("span", "rep-badge", `${r.time_ms.toFixed(2)} ms`));
    if (r.user) badges.appendChild(mk("span", "rep-badge", "user pass"));
    $(".rep-reason").textContent = r.reason ? (r.status === "disabled" ? "disabled: " : "") + r.reason : "";
    const opts = Object.entries(r.options || {});
    $(".rep-options").textContent = opts.length ? "options: " + opts.map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ") : "";
    const st = r.stats, stats = $(".rep-stats");
    stats.innerHTML = "";
    stats.appendChild(stat(`${st.instructions[0]} → ${st.instructions[1]}`, "instructions"));
    stats.appendChild(stat(`${st.launches[0]} → ${st.launches[1]}`, "kernel launches"));
    stats.appendChild(stat(`+${st.added} −${st.removed} ~${st.changed}`, "added / removed / changed"));
    stats.appendChild(stat(`${st.modules[0]} → ${st.modules[1]}`, "modules"));
    stats.appendChild(stat(String(st.matches), "rule matches"));
    stats.appendChild(stat(`${r.time_ms.toFixed(2)} ms`, "pass time"));
    const ops = $(".rep-ops");
    ops.innerHTML = "";
    for (const [op, d] of r.ops) ops.appendChild(mk("span", "rep-op " + (d > 0 ? "rep-plus" : "rep-minus"), `${op} ${d > 0 ? "+" : ""}${d}`));
    const rw = $(".rep-rewrites");
    rw.innerHTML = "";
    r.rewrites.forEach((row, k) => {
      const li = mk("li", "rep-rw-" + row.kind, row.label);
      li.title = "show it in the graph (again: the next instance)";
      li.addEventListener("click", () => gotoRewrite(k));
      rw.appendChild(li);
    });
    $(".rep-rewrites-section").style.display = r.rewrites.length ? "" : "none";
    const num = $(".rep-numeric");
    num.className = "rep-numeric rep-num-" + r.numeric.state;
    num.textContent = (r.numeric.state === "ok" ? "within tolerance: " : r.numeric.state === "bad" ? "TOLERANCE BROKEN: " : "")
      + r.numeric.text;
    const files = $(".rep-files");
    files.innerHTML = "";
    for (const f of (DATA.files || {})[i] || []) {
      const a = mk("a", "", f);
      a.href = f;
      files.appendChild(a);
    }
    const hasBlob = !!document.getElementById("migx-blob-" + i);
    $(".rep-graph-section").style.display = hasBlob && DATA.graphs ? "" : "none";
    $(".rep-text-section").style.display = hasBlob ? "" : "none";
    $(".rep-unchanged").textContent = hasBlob ? "" : (r.status === "ok"
      ? "This pass left the IR unchanged: nothing to draw." : `This pass did not run (${r.status}).`);
    graph = null;
    payload = null;
    rewrite = null;
    $(".rep-scopes-section").style.display = "none";
    if (!hasBlob) return;
    $(".rep-textdiff").textContent = "inflating…";
    loadBlob(i).then((p) => {
      if (current !== i) return;
      payload = p;
      textDiff($(".rep-textdiff"), payload.text, 2500);
      buildScopes();
      if (!DATA.graphs) return;
      $(".rep-graph-error").textContent = payload.graph_error ? "could not draw this pass: " + payload.graph_error : "";
      graph = payload.graph || null;
      if (graph) {
        showVariant(graph.default || "collapsed", "");
        // a pass whose change does not read as one drawing opens on its first rewrite instance
        if (payload.instances && payload.instances.length && payload.first_view === "summary") gotoRewrite(0);
      } else { model.set("svg", ""); updateRegions(); } // nothing drawn: never the previous pass's picture
    }).catch((e) => { $(".rep-textdiff").textContent = "cannot read this pass's data: " + e.message; });
  }

  function visibleRows() {
    return [...document.querySelectorAll(".rep-row")].filter((r) => r.offsetParent !== null);
  }

  function step(delta, changedOnly) {
    const vis = visibleRows().filter((r) => !changedOnly || r.classList.contains("rep-changed"));
    const k = vis.findIndex((r) => Number(r.dataset.i) === current);
    const next = vis[k < 0 ? 0 : Math.min(Math.max(k + delta, 0), vis.length - 1)];
    if (next) select(Number(next.dataset.i));
  }

  // ---- tabs, keys, start ---------------------------------------------------------------------------
  function tab(name) {
    document.querySelectorAll(".rep-tab").forEach((t) => t.classList.toggle("rep-active", t.dataset.tab === name));
    document.querySelectorAll(".rep-body").forEach((b) => b.classList.toggle("rep-active", b.id === "rep-tab-" + name));
    if (name === "passes" && view) view.whenVisible();
  }

  document.querySelectorAll(".rep-tab").forEach((t) => t.addEventListener("click", () => tab(t.dataset.tab)));
  $(".rep-prev").addEventListener("click", () => step(-1));
  $(".rep-next").addEventListener("click", () => step(1));
  $(".rep-next-changed").addEventListener("click", () => step(1, true));
  $(".rep-region-prev").addEventListener("click", () => gotoRegion(region - 1));
  $(".rep-region-next").addEventListener("click", () => gotoRegion(region + 1));
  document.addEventListener("keydown", (ev) => {
    if (ev.target.closest && ev.target.closest("input, textarea")) return;
    if (ev.key === "ArrowDown" || ev.key === "j") { ev.preventDefault(); step(1); }
    else if (ev.key === "ArrowUp" || ev.key === "k") { ev.preventDefault(); step(-1); }
    else if (ev.key === "n") step(1, true);
    else if (ev.key === "]" || ev.key === "r") gotoRegion(region + 1); // [ and ]: as in the explorer
    else if (ev.key === "[") gotoRegion(region - 1);
  });
  buildTree();
  buildMetrics();
  const fromHash = /^#pass-(\d+)$/.exec(location.hash);
  const firstChanged = rows.find((r) => r.changed && r.depth === 0);
  const start = fromHash ? Number(fromHash[1]) - 1 : (firstChanged ? firstChanged.i : 0);
  select(start, !!fromHash);
  document.body.dataset.ready = "1";
})();
