// tracetorch's HTML report (report/html_report.h): draws the page from the JSON document in
// <script id="tt-data">. Every string from a trace reaches the page through textContent or an
// attribute set by the DOM, never through HTML parsing. The layer tree and the layer table are
// virtual lists: only the rows in view exist, so a 10,000-layer trace opens and filters at once.
'use strict';
(function () {
  const DATA = JSON.parse(document.getElementById('tt-data').textContent);
  const ROW = 24;  // Row height in px (--row in report.css).
  const SEVERITY_RANK = {critical: 0, warning: 1, info: 2};
  const charts = [];
  const api = {charts: charts, lists: {}};
  window.ttReport = api;

  // ---- DOM and formatting helpers ---------------------------------------------------------------
  function el(tag, props, children) {
    const e = document.createElement(tag);
    if (props) {
      for (const k of Object.keys(props)) {
        if (k === 'text') e.textContent = props[k];
        else if (k === 'cls') e.className = props[k];
        else if (k.startsWith('on')) e.addEventListener(k.slice(2), props[k]);
        else e.setAttribute(k, props[k]);
      }
    }
    for (const c of children || []) if (c != null) e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    return e;
  }
  function card(title, id) {
    const s = el('section', {cls: 'card', id: id});
    if (title) s.appendChild(el('h2', {text: title}));
    document.getElementById('tt-main').appendChild(s);
    return s;
  }
  const isNum = (v) => typeof v === 'number' && isFinite(v);
  function fmtMs(v) {
    if (!isNum(v)) return '–';
    if (v >= 100) return v.toFixed(1) + 'ms';
    if (v >= 10) return v.toFixed(2) + 'ms';
    return v.toPrecision(3) + 'ms';
  }
  function fmtNum(v) {
    if (!isNum(v)) return '–';
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(2);
    return v.toPrecision(4).replace(/\.?0+$/, '');
  }
  function fmtBytes(v) {
    if (!isNum(v)) return '–';
    const a = Math.abs(v);
    if (a < 1024) return v + 'B';
    if (a < 1048576) return (v / 1024).toFixed(1) + 'KiB';
    if (a < 1073741824) return (v / 1048576).toFixed(2) + 'MiB';
    return (v / 1073741824).toFixed(2) + 'GiB';
  }
  function fmtCount(v) {
    if (!isNum(v)) return '–';
    if (v >= 1e9) return (v / 1e9).toFixed(1) + 'B';
    if (v >= 1e6) return (v / 1e6).toFixed(1) + 'M';
    if (v >= 1e3) return (v / 1e3).toFixed(1) + 'K';
    return String(v);
  }
  function fmtChange(b, c) {
    if (!isNum(b) || !isNum(c) || b === 0) return {text: '–', cls: ''};
    const r = (c - b) / Math.abs(b);
    return {text: (r >= 0 ? '+' : '') + (r * 100).toFixed(1) + '%', cls: r > 0 ? 'up' : r < 0 ? 'down' : '', value: r};
  }
  function metaList(pairs) {
    const dl = el('dl', {cls: 'meta'});
    for (const [k, v] of pairs) dl.appendChild(el('div', null, [el('dt', {text: k}), el('dd', {text: v == null || v === '' ? '–' : String(v)})]));
    return dl;
  }
  // A case-insensitive substring, or a glob when it has * or ? ('*' also matches '.').
  function nameMatcher(text) {
    const t = text.trim().toLowerCase();
    if (!t) return null;
    if (!/[*?]/.test(t)) return (s) => s.toLowerCase().includes(t);
    const re = new RegExp('^' + t.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.') + '$');
    return (s) => re.test(s.toLowerCase());
  }
  function debounce(fn, ms) {
    let t = 0;
    return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
  }

  // ---- Charts (Chart.js, inlined) ---------------------------------------------------------------
  Chart.defaults.animation = false;
  Chart.defaults.font.size = 11;
  Chart.defaults.maintainAspectRatio = false;
  function chartBox(parent, title, tall) {
    const box = el('div', {cls: 'chart-box' + (tall ? ' tall' : '')});
    const canvas = el('canvas', {'aria-label': title, role: 'img'});
    box.appendChild(canvas);
    parent.appendChild(box);
    return canvas;
  }
  function lineChart(canvas, title, steps, series, yLabel) {
    const datasets = series.map((s) => ({
      label: s.label, data: steps.map((x, i) => ({x: x, y: isNum(s.values[i]) ? s.values[i] : null})),
      borderColor: s.color, backgroundColor: s.color, pointRadius: steps.length > 80 ? 0 : 2,
      borderWidth: 1.5, spanGaps: false, stepped: s.stepped || false,
    }));
    const c = new Chart(canvas, {
      type: 'line', data: {datasets: datasets},
      options: {parsing: false, normalized: true,
        plugins: {title: {display: true, text: title}, legend: {display: series.length > 1}},
        scales: {x: {type: 'linear', title: {display: true, text: 'step'}},
                 y: {title: {display: !!yLabel, text: yLabel || ''}}}},
    });
    charts.push(c);
    return c;
  }
  function barChart(canvas, title, labels, values, color) {
    const c = new Chart(canvas, {
      type: 'bar', data: {labels: labels, datasets: [{label: title, data: values, backgroundColor: color}]},
      options: {indexAxis: 'y', plugins: {title: {display: true, text: title}, legend: {display: false}},
        scales: {y: {ticks: {autoSkip: false}}}},
    });
    charts.push(c);
    return c;
  }
  // Per-step charts of one layer: latency, activation std, gradient norm, NaN/Inf. `sides`: one
  // {label, color, h} per history (a trace has one, a diff two).
  function historyCharts(parent, name, sides) {
    for (const c of charts.splice(api.historyChartStart || 0)) c.destroy();
    parent.textContent = '';
    const present = sides.filter((s) => s.h);
    if (!present.length) {
      parent.appendChild(el('p', {cls: 'note', text: 'No per-step history for ' + name + '.'}));
      return;
    }
    const grid = el('div', {cls: 'charts'});
    parent.appendChild(grid);
    const metrics = [['latency_ms', 'Forward latency (ms)', 'ms'], ['output_std', 'Activation std', ''],
                     ['grad_norm', 'Gradient norm', ''], ['non_finite', 'NaN/Inf in the step (1 = yes)', '']];
    for (const [key, title, unit] of metrics) {
      const steps = [];
      for (const s of present) for (const x of s.h.steps) steps.push(x);
      const all = Array.from(new Set(steps)).sort((a, b) => a - b);
      const series = present.map((s) => {
        const byStep = new Map(s.h.steps.map((x, i) => [x, s.h[key][i]]));
        return {label: s.label, color: s.color, stepped: key === 'non_finite', values: all.map((x) => byStep.get(x))};
      });
      lineChart(chartBox(grid, title + ' — ' + name), title + ' — ' + name, all, series, unit);
    }
  }

  // ---- A virtual list: only the rows in view are in the DOM -------------------------------------
  function VirtualList(parent, rowClass, renderRow, onClick) {
    const box = el('div', {cls: 'vlist'});
    const spacer = el('div', {cls: 'spacer'});
    box.appendChild(spacer);
    parent.appendChild(box);
    let items = [];
    let selected = null;
    const draw = () => {
      const first = Math.max(0, Math.floor(box.scrollTop / ROW) - 8);
      const last = Math.min(items.length, first + Math.ceil((box.clientHeight || 20 * ROW) / ROW) + 16);
      spacer.textContent = '';
      for (let i = first; i < last; ++i) {
        const row = el('div', {cls: 'vrow ' + rowClass + (items[i] === selected ? ' selected' : '')});
        row.style.top = (i * ROW) + 'px';
        renderRow(row, items[i]);
        const item = items[i];
        row.addEventListener('click', (ev) => onClick(item, ev));
        spacer.appendChild(row);
      }
    };
    box.addEventListener('scroll', () => requestAnimationFrame(draw));
    return {
      set(next) {
        items = next;
        spacer.style.height = (items.length * ROW) + 'px';
        box.style.height = Math.max(3, Math.min(items.length + 1, 20)) * ROW + 'px';
        draw();
      },
      select(item) { selected = item; draw(); },
      redraw: draw,
      size: () => items.length,
      rendered: () => spacer.children.length,
      scrollTo(item) {
        const i = items.indexOf(item);
        if (i >= 0) box.scrollTop = Math.max(0, i * ROW - 4 * ROW);
        draw();
      },
    };
  }
  function cell(row, text, cls, title) {
    const s = el('span', {cls: cls || '', text: text});
    if (title) s.title = title;
    row.appendChild(s);
    return s;
  }

  // ---- The anomalies, NaN origin first ----------------------------------------------------------
  function anomalyOrder(list, origin) {
    return list.map((a, i) => [a, i]).sort((x, y) => {
      const xo = origin && x[0].layer === origin ? 0 : 1;
      const yo = origin && y[0].layer === origin ? 0 : 1;
      if (xo !== yo) return xo - yo;
      const xs = SEVERITY_RANK[x[0].severity] ?? 3, ys = SEVERITY_RANK[y[0].severity] ?? 3;
      return xs !== ys ? xs - ys : x[1] - y[1];
    }).map((p) => p[0]);
  }
  function anomalyTable(parent, list, onLayer) {
    const LIMIT = 1000;
    const table = el('table', {cls: 'list', id: 'anomalies'});
    table.appendChild(el('tr', null, [el('th', {text: 'Severity'}), el('th', {text: 'Type'}), el('th', {text: 'Layer'}), el('th', {text: 'Message'})]));
    for (const a of list.slice(0, LIMIT)) {
      table.appendChild(el('tr', {cls: 'clickable', onclick: () => onLayer(a.layer)}, [
        el('td', {cls: 'sev-' + a.severity, text: a.severity}), el('td', {text: a.type}),
        el('td', {cls: 'mono', text: a.layer}), el('td', {text: a.message})]));
    }
    parent.appendChild(table);
    if (list.length > LIMIT) parent.appendChild(el('p', {cls: 'note', text: (list.length - LIMIT) + ' more not shown.'}));
  }

  // ---- The layer tree ---------------------------------------------------------------------------
  // Nodes from dotted full names; a missing parent (a ModuleList that never ran forward) becomes a
  // node of its own without values.
  function buildTree(L) {
    const n = L.name.length;
    const nodes = [];
    const byName = new Map();
    const roots = [];
    const make = (full, index) => {
      const node = {full: full, index: index, children: [], parent: null, order: nodes.length,
                    depth: 0, open: false, label: full.slice(full.lastIndexOf('.') + 1) || full};
      nodes.push(node);
      byName.set(full, node);
      return node;
    };
    for (let i = 0; i < n; ++i) make(L.name[i], i);
    const attach = (node) => {
      const dot = node.full.lastIndexOf('.');
      if (dot < 0) { roots.push(node); return; }
      const pname = node.full.slice(0, dot);
      let p = byName.get(pname);
      if (!p) { p = make(pname, -1); attach(p); }
      node.parent = p;
      p.children.push(node);
    };
    for (const node of nodes.slice()) attach(node);
    // Execution order within siblings: a parent's first appearance is after its children's, so
    // order children by their position in the record (the order they first completed).
    const setDepth = (list, d) => { for (const x of list) { x.depth = d; setDepth(x.children, d + 1); } };
    setDepth(roots, 0);
    for (const x of nodes) if (x.depth < 1) x.open = true;
    return {nodes: nodes, roots: roots, byName: byName};
  }

  function traceReport(T) {
    const L = T.layers;
    const n = L.name.length;
    const val = (key, node) => (node.index >= 0 ? L[key][node.index] : null);
    const origin = T.nan_origin ? T.nan_origin.layer : null;

    // Summary.
    const summary = card('Model', 'summary');
    let params = 0;
    for (let i = 0; i < n; ++i) params += L.params[i] || 0;
    const counts = {critical: 0, warning: 0, info: 0};
    for (const a of T.anomalies) counts[a.severity] = (counts[a.severity] || 0) + 1;
    summary.appendChild(metaList([
      ['Model', T.meta.model], ['Source', T.source], ['Layers', n.toLocaleString()],
      ['Parameters (direct, summed)', fmtCount(params)], ['Total time', fmtMs(T.meta.total_time_ms)],
      ['Device', T.meta.device], ['PyTorch', T.meta.pytorch], ['Python', T.meta.python],
      ['CUDA', T.meta.cuda_available ? T.meta.cuda : 'not available'], ['Platform', T.meta.platform],
      ['Anomalies', counts.critical + ' critical, ' + counts.warning + ' warning, ' + counts.info + ' info'],
      ['Per-step history', T.history ? Object.keys(T.history).length + ' layers' : 'none in this trace'],
    ]));

    if (T.nan_origin) {
      const o = T.nan_origin;
      const b = el('div', {cls: 'banner nan', id: 'nan-origin'}, [
        el('h2', {text: (o.kind === 'inf' ? 'Inf' : 'NaN') + ' origin: ' + o.layer + ' at step ' + o.step}),
        o.op ? el('div', {cls: 'detail', text: 'op ' + o.op + ' (' + o.op_func + ') in module ' + o.op_module}) : null]);
      summary.after(b);
    }

    const anomalies = card('Anomalies (' + T.anomalies.length + ')', 'anomalies-card');
    if (!T.anomalies.length) anomalies.appendChild(el('p', {cls: 'note', text: 'No anomalies.'}));
    else anomalyTable(anomalies, anomalyOrder(T.anomalies, origin), (name) => selectLayer(name, true));

    // Charts: the slowest layers, then the selected layer's history.
    const chartsCard = card('Charts', 'charts');
    // Leaf layers only: a container's latency holds its children's.
    const parents = new Set();
    for (const name of L.name) for (let d = name.lastIndexOf('.'); d > 0; d = name.lastIndexOf('.', d - 1)) parents.add(name.slice(0, d));
    const top = [];
    for (let i = 0; i < n; ++i) if (isNum(L.lat[i]) && !parents.has(L.name[i])) top.push(i);
    top.sort((a, b) => L.lat[b] - L.lat[a]);
    const grid = el('div', {cls: 'charts'});
    chartsCard.appendChild(grid);
    if (top.length) {
      const shown = top.slice(0, 15);
      barChart(chartBox(grid, 'Slowest layers', true), 'Slowest leaf layers: mean forward latency (ms)',
               shown.map((i) => L.name[i]), shown.map((i) => L.lat[i]), '#3f6fd8');
    }
    const memTop = [];
    for (let i = 0; i < n; ++i) if (isNum(L.mem[i])) memTop.push(i);
    if (memTop.length) {
      memTop.sort((a, b) => Math.abs(L.mem[b]) - Math.abs(L.mem[a]));
      const shown = memTop.slice(0, 15);
      barChart(chartBox(grid, 'Memory', true), 'Largest forward memory deltas (bytes)',
               shown.map((i) => L.name[i]), shown.map((i) => L.mem[i]), '#8e44ad');
    }
    if (!top.length && !memTop.length) grid.appendChild(el('p', {cls: 'note', text: 'No latency or memory values in this trace.'}));
    const historyTitle = el('h2', {text: 'Per-step history'});
    const historyBox = el('div', {id: 'history'});
    chartsCard.appendChild(historyTitle);
    chartsCard.appendChild(historyBox);
    api.historyChartStart = charts.length;
    if (!T.history) {
      historyBox.appendChild(el('p', {cls: 'note', text: 'This trace holds no per-step history (a trace file never does). ' +
        'A tracetorchd session has one: tracetorch report --remote [ADDR] SESSION -o report.html.'}));
    }

    // The tree.
    const treeCard = card('Layers', 'layers');
    const tree = buildTree(L);
    const types = Array.from(new Set(L.type)).sort();
    const search = el('input', {type: 'search', id: 'filter-name', placeholder: 'Filter by name (substring or glob)'});
    const typeSel = el('select', {id: 'filter-type'}, [el('option', {value: '', text: 'All types'})]);
    for (const t of types) typeSel.appendChild(el('option', {value: t, text: t}));
    const sortSel = el('select', {id: 'sort'});
    for (const [v, t] of [['order', 'Execution order'], ['lat', 'Latency'], ['mem', 'Memory'], ['grad', 'Gradient norm'],
                          ['std', 'Activation std'], ['nan', 'NaN/Inf count']]) sortSel.appendChild(el('option', {value: v, text: 'Sort: ' + t}));
    const count = el('span', {cls: 'count', id: 'tree-count'});
    const expandAll = el('button', {text: 'Expand all', id: 'expand-all'});
    const collapseAll = el('button', {text: 'Collapse all', id: 'collapse-all'});
    treeCard.appendChild(el('div', {cls: 'toolbar'}, [search, typeSel, sortSel, expandAll, collapseAll, count]));
    const head = el('div', {cls: 'vhead tree-head'});
    for (const [t, c] of [['Layer', ''], ['Type', ''], ['Latency', 'num'], ['Bwd latency', 'num'], ['Memory', 'num'],
                          ['Grad norm', 'num'], ['NaN/Inf', 'num'], ['Act. std', 'num']]) cell(head, t, c);
    treeCard.appendChild(head);
    let selectedNode = null;
    const list = VirtualList(treeCard, 'tree-row', (row, node) => {
      const name = el('span');
      name.style.paddingLeft = (6 + node.depth * 16) + 'px';
      name.appendChild(el('span', {cls: 'toggle', text: node.children.length ? (node.open ? '▾' : '▸') : ''}));
      name.appendChild(el('span', {cls: node.index < 0 ? 'synthetic' : '', text: node.label}));
      name.title = node.full;
      row.appendChild(name);
      cell(row, node.index >= 0 ? L.type[node.index] : '(container)', 'type');
      cell(row, fmtMs(val('lat', node)), 'num');
      cell(row, fmtMs(val('bwd', node)), 'num');
      cell(row, fmtBytes(val('mem', node)), 'num');
      cell(row, fmtNum(val('grad', node)), 'num');
      const bad = (val('nan', node) || 0) + (val('inf', node) || 0);
      const flags = val('flags', node) || 0;
      cell(row, node.index < 0 ? '' : bad ? String(bad) : (flags & 7) ? 'yes' : '0', 'num' + ((bad || (flags & 7)) ? ' nonfinite' : ''));
      cell(row, fmtNum(val('std', node)), 'num');
    }, (node, ev) => {
      if (ev.target.classList.contains('toggle') && node.children.length) {
        node.open = !node.open;
        refresh();
      }
      selectNode(node);
    });
    api.lists.tree = list;

    const sortKey = {order: null, lat: 'lat', mem: 'mem', grad: 'grad', std: 'std', nan: 'nan'};
    function sortedChildren(children) {
      const key = sortKey[sortSel.value];
      if (!key) return children;
      const v = (x) => {
        if (x.index < 0) return -Infinity;
        const y = key === 'nan' ? (L.nan[x.index] || 0) + (L.inf[x.index] || 0) : L[key][x.index];
        return isNum(y) ? (key === 'mem' ? Math.abs(y) : y) : -Infinity;
      };
      return children.slice().sort((a, b) => v(b) - v(a) || a.order - b.order);
    }
    function refresh() {
      const match = nameMatcher(search.value);
      const type = typeSel.value;
      const filtering = !!match || !!type;
      let matched = 0;
      // Which nodes are shown under a filter: those that match, and their ancestors.
      const keep = filtering ? new Uint8Array(tree.nodes.length) : null;
      if (filtering) {
        for (const node of tree.nodes) {
          const ok = (!match || match(node.full)) && (!type || (node.index >= 0 && L.type[node.index] === type));
          if (!ok) continue;
          ++matched;
          for (let p = node; p && !keep[p.order]; p = p.parent) keep[p.order] = 1;
        }
      }
      const rows = [];
      const walk = (children) => {
        for (const node of sortedChildren(children)) {
          if (keep && !keep[node.order]) continue;
          rows.push(node);
          if (filtering || node.open) walk(node.children);
        }
      };
      walk(tree.roots);
      list.set(rows);
      count.textContent = filtering ? matched.toLocaleString() + ' of ' + n.toLocaleString() + ' layers match'
                                    : rows.length.toLocaleString() + ' rows shown, ' + n.toLocaleString() + ' layers';
    }
    search.addEventListener('input', debounce(refresh, 120));
    typeSel.addEventListener('change', refresh);
    sortSel.addEventListener('change', refresh);
    expandAll.addEventListener('click', () => { for (const x of tree.nodes) x.open = true; refresh(); });
    collapseAll.addEventListener('click', () => { for (const x of tree.nodes) x.open = x.depth < 1 ? true : false; refresh(); });
    refresh();

    function selectNode(node) {
      selectedNode = node;
      list.select(node);
      if (!T.history) return;
      historyCharts(historyBox, node.full, [{label: 'this run', color: '#3f6fd8', h: T.history[node.full]}]);
      historyTitle.textContent = 'Per-step history: ' + node.full;
    }
    function selectLayer(name, scroll) {
      const node = tree.byName.get(name);
      if (!node) return;
      for (let p = node.parent; p; p = p.parent) p.open = true;
      refresh();
      selectNode(node);
      if (scroll) { list.scrollTo(node); document.getElementById('charts').scrollIntoView(); }
    }
    api.selectLayer = selectLayer;
    // The first layer to show: the NaN origin, else the slowest layer with history, else the slowest.
    let first = origin && tree.byName.has(origin) ? origin : null;
    if (!first && T.history) first = top.map((i) => L.name[i]).find((x) => T.history[x]) || Object.keys(T.history)[0];
    if (!first && top.length) first = L.name[top[0]];
    if (first && tree.byName.has(first)) selectLayer(first, false);
    else if (T.history) historyCharts(historyBox, first || '', []);

    if (T.op_graph_svg || T.op_graph_error) {
      const g = card('Op graph' + (T.op_graph_step != null ? ' of step ' + T.op_graph_step : ''), 'op-graph');
      if (T.op_graph_error) g.appendChild(el('p', {cls: 'note', text: 'The op graph could not be drawn: ' + T.op_graph_error}));
      else opGraph(g, T.op_graph_svg, T.op_graph_origin_op || '');
      const o = T.nan_origin;
      if (o && T.op_graph_step != null && o.step !== T.op_graph_step) {
        g.insertBefore(el('p', {cls: 'note', text: 'This graph is of step ' + T.op_graph_step + ', where the op recorder first saw a non-finite value (' +
          (T.op_graph_origin_op || 'no op') + '); the layer-level origin above is at step ' + o.step + '.'}), g.children[1]);
      }
    }
  }

  // The op graph as an image (an image never runs script), its NaN-origin op outlined in orange.
  function opGraph(parent, svgText, originOp) {
    const doc = new DOMParser().parseFromString(svgText, 'image/svg+xml');
    let marked = false;
    if (originOp) {
      for (const g of doc.querySelectorAll('g.node')) {
        const texts = Array.from(g.querySelectorAll('text')).map((t) => t.textContent);
        // The op's own node, or the collapsed box whose mark names it ("Inf 66 in masked_fill_1_18").
        if (!texts.some((t) => t === originOp || t.endsWith(' in ' + originOp))) continue;
        for (const shape of g.querySelectorAll('polygon, ellipse, path')) {
          shape.setAttribute('stroke', '#ff6d00');
          shape.setAttribute('stroke-width', '4');
        }
        marked = true;
      }
    }
    parent.appendChild(el('p', {cls: 'note', text: marked ? 'The op where the first non-finite value appeared (' + originOp + ') is outlined in orange; NaN/Inf outputs are marked red.'
                                                           : 'NaN/Inf outputs are marked red.'}));
    const blob = new Blob([new XMLSerializer().serializeToString(doc)], {type: 'image/svg+xml'});
    const img = el('img', {alt: 'op graph', id: 'op-graph-img'});
    img.src = URL.createObjectURL(blob);
    parent.appendChild(el('div', {cls: 'graph'}, [img]));
  }

  // ---- A diff -----------------------------------------------------------------------------------
  function diffReport(D) {
    const main = document.getElementById('tt-main');
    const bad = D.exit_status !== 0;
    main.appendChild(el('div', {cls: 'banner ' + (bad ? 'verdict-bad' : 'verdict-good'), id: 'verdict'}, [
      el('h2', {text: (bad ? 'Regressions found' : 'No regressions') + ' — exit status ' + D.exit_status}),
      el('div', {cls: 'detail', text: D.critical + ' critical, ' + D.warning + ' warning, ' + D.info + ' info'})]));
    const sides = card('Compared', 'sides');
    sides.appendChild(metaList([
      ['Baseline', D.baseline.description], ['Baseline model', D.baseline.model],
      ['Current', D.current.description], ['Current model', D.current.model],
      ['Thresholds', 'latency ' + (D.thresholds.latency * 100).toFixed(0) + '%, gradient norm ' + (D.thresholds.grad_norm * 100).toFixed(0) +
                     '%, activation std ' + (D.thresholds.std * 100).toFixed(0) + '%'],
      ['Per-step history', (D.history_baseline ? 'baseline' : 'no baseline') + ', ' + (D.history_current ? 'current' : 'no current')],
    ]));

    const changes = card('Changes (' + D.entries.length + ')', 'changes');
    if (!D.entries.length) changes.appendChild(el('p', {cls: 'note', text: 'No changes beyond the thresholds.'}));
    for (const sev of ['critical', 'warning', 'info']) {
      const group = D.entries.filter((e) => e.severity === sev);
      if (!group.length) continue;
      const det = el('details', {id: 'changes-' + sev});
      if (sev !== 'info' || group.length < 50) det.open = true;
      det.appendChild(el('summary', null, [el('span', {cls: 'pill ' + sev, text: sev}), group.length + ' ' + (group.length === 1 ? 'entry' : 'entries')]));
      const table = el('table', {cls: 'list'});
      table.appendChild(el('tr', null, [el('th', {text: 'Kind'}), el('th', {text: 'Layer'}), el('th', {text: 'Message'})]));
      for (const e of group.slice(0, 2000)) {
        table.appendChild(el('tr', {cls: 'clickable', onclick: () => selectLayer(e.layer, true)}, [
          el('td', {text: e.kind}), el('td', {cls: 'mono', text: e.layer}), el('td', {text: e.message})]));
      }
      det.appendChild(table);
      if (group.length > 2000) det.appendChild(el('p', {cls: 'note', text: (group.length - 2000) + ' more not shown.'}));
      changes.appendChild(det);
    }

    const hasHistory = !!(D.history_baseline || D.history_current);
    const chartsCard = card('Per-step history', 'charts');
    const historyBox = el('div', {id: 'history'});
    chartsCard.appendChild(historyBox);
    api.historyChartStart = charts.length;
    if (!hasHistory) {
      historyBox.appendChild(el('p', {cls: 'note', text: 'Neither side holds per-step history (trace files do not; tracetorchd sessions and baselines made from them do: tracetorch diff --remote ... --html).'}));
    }

    // Layers side by side.
    const L = D.layers;
    const n = L.name.length;
    const layersCard = card('Layers side by side', 'layers');
    const search = el('input', {type: 'search', id: 'filter-name', placeholder: 'Filter by name (substring or glob)'});
    const onlyChanged = el('input', {type: 'checkbox', id: 'only-changed'});
    const sortSel = el('select', {id: 'sort'});
    for (const [v, t] of [['order', 'Baseline order'], ['lat', 'Latency change'], ['std', 'Std change'], ['grad', 'Gradient norm change']]) {
      sortSel.appendChild(el('option', {value: v, text: 'Sort: ' + t}));
    }
    const count = el('span', {cls: 'count', id: 'tree-count'});
    layersCard.appendChild(el('div', {cls: 'toolbar'}, [search, el('label', null, [onlyChanged, ' only layers with an entry']), sortSel, count]));
    const head = el('div', {cls: 'vhead diff-head'});
    for (const [t, c] of [['Layer', ''], ['Type', ''], ['Latency B', 'num'], ['Latency C', 'num'], ['Δ', 'num'], ['Std B', 'num'],
                          ['Std C', 'num'], ['Δ', 'num'], ['Grad B', 'num'], ['Grad C', 'num'], ['Status', '']]) cell(head, t, c);
    layersCard.appendChild(head);
    const entryLayers = new Map();
    for (const e of D.entries) if (!entryLayers.has(e.layer) || SEVERITY_RANK[e.severity] < SEVERITY_RANK[entryLayers.get(e.layer)]) entryLayers.set(e.layer, e.severity);
    const list = VirtualList(layersCard, 'diff-row', (row, i) => {
      cell(row, L.name[i], 'mono', L.name[i]);
      cell(row, L.type[i], 'type');
      cell(row, fmtMs(L.b_lat[i]), 'num');
      cell(row, fmtMs(L.c_lat[i]), 'num');
      const dl = fmtChange(L.b_lat[i], L.c_lat[i]);
      cell(row, dl.text, 'num ' + dl.cls);
      cell(row, fmtNum(L.b_std[i]), 'num');
      cell(row, fmtNum(L.c_std[i]), 'num');
      const ds = fmtChange(L.b_std[i], L.c_std[i]);
      cell(row, ds.text, 'num ' + ds.cls);
      cell(row, fmtNum(L.b_grad[i]), 'num');
      cell(row, fmtNum(L.c_grad[i]), 'num');
      const sev = entryLayers.get(L.name[i]);
      cell(row, L.status[i] !== 'both' ? L.status[i] : sev || 'unchanged', sev ? 'sev-' + sev : '');
    }, (i) => { list.select(i); showHistory(L.name[i]); });
    api.lists.layers = list;
    const change = (b, c) => { const x = fmtChange(b, c).value; return isNum(x) ? Math.abs(x) : -1; };
    function refresh() {
      const match = nameMatcher(search.value);
      const rows = [];
      for (let i = 0; i < n; ++i) {
        if (match && !match(L.name[i])) continue;
        if (onlyChanged.checked && !entryLayers.has(L.name[i])) continue;
        rows.push(i);
      }
      const key = sortSel.value;
      if (key !== 'order') rows.sort((a, b) => change(L['b_' + key][b], L['c_' + key][b]) - change(L['b_' + key][a], L['c_' + key][a]) || a - b);
      list.set(rows);
      count.textContent = rows.length.toLocaleString() + ' of ' + n.toLocaleString() + ' layers';
    }
    search.addEventListener('input', debounce(refresh, 120));
    onlyChanged.addEventListener('change', refresh);
    sortSel.addEventListener('change', refresh);
    refresh();

    function showHistory(name) {
      if (!hasHistory) return;
      chartsCard.firstChild.textContent = 'Per-step history: ' + name;
      historyCharts(historyBox, name, [
        {label: 'baseline', color: '#8a94a6', h: D.history_baseline && D.history_baseline[name]},
        {label: 'current', color: '#d84315', h: D.history_current && D.history_current[name]}]);
    }
    function selectLayer(name, scroll) {
      const i = L.name.indexOf(name);
      if (i >= 0) { list.select(i); if (scroll) list.scrollTo(i); }
      showHistory(name);
      if (scroll) chartsCard.scrollIntoView();
    }
    api.selectLayer = selectLayer;
    // First chart: the first regression's layer that has history on both sides, else any with some.
    const both = (x) => D.history_baseline && D.history_current && D.history_baseline[x] && D.history_current[x];
    const some = (x) => (D.history_baseline && D.history_baseline[x]) || (D.history_current && D.history_current[x]);
    let first = D.entries.map((e) => e.layer).find(both) || L.name.find(both) || D.entries.map((e) => e.layer).find(some) || L.name.find(some);
    if (first) selectLayer(first, false);
  }

  document.title = DATA.title;
  document.getElementById('tt-title').textContent = DATA.title;
  document.getElementById('tt-sub').textContent = DATA.subtitle;
  if (DATA.kind === 'diff') diffReport(DATA.diff);
  else traceReport(DATA.trace);
  document.getElementById('tt-footer').textContent = 'Written by ' + DATA.generator + '. Self-contained: charts by Chart.js ' + Chart.version + ' (MIT), inlined.';
  api.ready = true;
})();
