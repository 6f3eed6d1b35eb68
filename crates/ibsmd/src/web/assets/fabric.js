// ibsm web console: the fabric. Nodes in tiers by hop distance from the hosts (a fat
// tree's leaf, spine and core switches); a fabric those tiers do not fit (a cable
// between two switches of one tier: a torus, a ring, an irregular fabric) gets a
// force layout instead (deterministic: seeded start, fixed iterations). Cabled links, the master SM's port ringed, a LID-to-LID route drawn over it; partitions and
// multicast groups below; links not Active drawn apart (dashed orange: Initialize or
// Armed; dotted red: Down, a pulled cable the master saw before). Past 800 nodes the
// server sends an overview instead (web/groups.rs): each tier as at most 40 groups
// (boxes with counts, links between groups summed); a group's members and the search
// (GUID, LID or name) are asked of the server when wanted.
'use strict';

(function () {
  const TIER_GAP = 110, NS = 'http://www.w3.org/2000/svg';
  let topo = null, layout = null, route = null, hits = [];
  const E = (...a) => window.ibsm.el(...a);

  function svg(tag, attrs, txt) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (txt !== undefined) e.textContent = txt;
    return e;
  }
  const lidOf = n => (n.ports.find(p => p.lid) || {}).lid || 0;
  const hasPort = (n, guid) => n.ports.some(p => p.guid === guid);

  // Tiers: hosts (CAs, routers) 0, switches by BFS distance from them.
  function tiers(nodes) {
    const by = new Map(nodes.map(n => [n.guid, n])), level = new Map(), queue = [];
    for (const n of nodes) if (n.type !== 2) { level.set(n.guid, 0); queue.push(n.guid); }
    if (!queue.length && nodes.length) { level.set(nodes[0].guid, 1); queue.push(nodes[0].guid); }
    for (let i = 0; i < queue.length; i++) {
      const n = by.get(queue[i]);
      for (const p of n.ports) if (p.peer && by.has(p.peer) && !level.has(p.peer)) {
        level.set(p.peer, level.get(n.guid) + 1); queue.push(p.peer);
      }
    }
    const top = Math.max(1, ...level.values());
    for (const n of nodes) if (!level.has(n.guid)) level.set(n.guid, top + 1);
    const out = [];
    for (const n of nodes) { const l = level.get(n.guid); (out[l] = out[l] || []).push(n); }
    return out.map(t => t || []);
  }

  // Link state of a cable from its two ports' PortState ('' when unknown): the worst.
  const RANK = { DOWN: 3, INIT: 2, ARMED: 2, ACTIVE_DEFER: 1, ACTIVE: 0, '': 0 };
  const worst = (a, b) => (RANK[a || ''] || 0) >= (RANK[b || ''] || 0) ? (a || '') : b;
  const linkClass = s => s === 'DOWN' ? 'link down' : (s === 'INIT' || s === 'ARMED') ? 'link init' : 'link';

  // Whether the tiers fit a fat tree: no cable between two switches of one tier.
  function tiered(tierList) {
    const level = new Map();
    tierList.forEach((tier, l) => tier.forEach(n => level.set(n.guid, l)));
    for (const tier of tierList) for (const n of tier) if (n.type === 2) {
      for (const p of n.ports) if (p.peer && p.peer !== n.guid && level.get(p.peer) === level.get(n.guid)) return false;
    }
    return true;
  }

  // Fruchterman-Reingold from a seeded start: the same topology is always drawn the
  // same. Iterations shrink with n² (the repulsion pass), so 800 nodes stay well under
  // a second; nodes sorted by GUID so the server's order does not matter.
  // Laid out in a rectangle the shape of the drawing's room (the canvas shows 70vh).
  function forceLayout(all, width) {
    const height = Math.max(300, Math.round(window.innerHeight * 0.7) - 10), aspect = (width - 40) / (height - 60);
    const nodes = [...all].sort((a, b) => a.guid < b.guid ? -1 : a.guid > b.guid ? 1 : 0);
    const n = nodes.length, idx = new Map(nodes.map((x, i) => [x.guid, i]));
    let seed = 0x1b5e;
    const rand = () => { seed = (seed * 1103515245 + 12345) >>> 0; return seed / 4294967296; };
    const x = new Float64Array(n), y = new Float64Array(n);
    for (let i = 0; i < n; i++) { x[i] = rand() * aspect; y[i] = rand(); }
    const edges = [];
    for (const a of nodes) for (const p of a.ports) {
      const j = idx.get(p.peer), i = idx.get(a.guid);
      if (j !== undefined && i < j) edges.push([i, j]);
    }
    const k = Math.sqrt(aspect / Math.max(1, n)), iters = Math.max(40, Math.min(300, Math.floor(2e7 / (n * n + 1))));
    const dx = new Float64Array(n), dy = new Float64Array(n);
    for (let it = 0; it < iters; it++) {
      const temp = 0.1 * Math.sqrt(aspect) * (1 - it / iters) + 0.002;
      dx.fill(0); dy.fill(0);
      for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) {
        let ex = x[i] - x[j], ey = y[i] - y[j], d2 = ex * ex + ey * ey;
        if (d2 < 1e-9) { ex = 1e-3 * (i - j); ey = 1e-3; d2 = ex * ex + ey * ey; }
        const f = k * k / d2;
        dx[i] += ex * f; dy[i] += ey * f; dx[j] -= ex * f; dy[j] -= ey * f;
      }
      for (const [i, j] of edges) {
        const ex = x[i] - x[j], ey = y[i] - y[j], d = Math.sqrt(ex * ex + ey * ey) || 1e-6, f = d / k;
        dx[i] -= ex * f; dy[i] -= ey * f; dx[j] += ex * f; dy[j] += ey * f;
      }
      for (let i = 0; i < n; i++) {
        const d = Math.sqrt(dx[i] * dx[i] + dy[i] * dy[i]) || 1, m = Math.min(d, temp);
        x[i] += dx[i] / d * m; y[i] += dy[i] / d * m;
      }
    }
    const [x0, x1, y0, y1] = [Math.min(...x), Math.max(...x), Math.min(...y), Math.max(...y)];
    const pos = new Map(), boxes = [];
    nodes.forEach((node, i) => {
      const box = { tier: node.type === 2 ? 1 : 0, members: [node], id: 'f' + i,
        x: Math.round(20 + (x[i] - x0) / ((x1 - x0) || 1) * (width - 40)),
        y: Math.round(30 + (y[i] - y0) / ((y1 - y0) || 1) * (height - 60)) };
      boxes.push(box); pos.set(node.guid, box);
    });
    return { boxes, pos, height, iterations: iters };
  }

  // Every node drawn (at most FULL_MAX: the server sends an overview past that).
  function computeLayout(t) {
    const all = t.nodes, tierList = tiers(all), order = new Map();
    if (!tiered(tierList)) {
      const room = Math.max(900, document.getElementById('topo').clientWidth - 20);
      const f = forceLayout(all, room);
      return { aggregate: false, force: true, boxes: f.boxes, pos: f.pos, links: cables(all, f.pos), width: room, height: f.height, tiers: 0, iterations: f.iterations };
    }
    // Order: tier 1 by GUID, hosts under their first switch, upper tiers by the mean
    // position of their neighbours below (one barycentre pass).
    (tierList[1] || []).sort((a, b) => a.guid < b.guid ? -1 : 1).forEach((n, i) => order.set(n.guid, i));
    const mean = n => { const v = n.ports.filter(p => order.has(p.peer)).map(p => order.get(p.peer)); return v.length ? v.reduce((a, b) => a + b) / v.length : 1e9; };
    tierList[0].sort((a, b) => mean(a) - mean(b)).forEach((n, i) => order.set(n.guid, i));
    for (let l = 2; l < tierList.length; l++) tierList[l].sort((a, b) => mean(a) - mean(b)).forEach((n, i) => order.set(n.guid, i));
    const boxes = [], pos = new Map(), widest = Math.max(...tierList.map(x => x.length));
    const room = Math.max(900, document.getElementById('topo').clientWidth - 20);
    const width = Math.max(room, Math.min(widest, 400) * 22);
    tierList.forEach((tier, l) => {
      const y = 30 + (tierList.length - 1 - l) * TIER_GAP;
      tier.forEach((n, g) => {
        const box = { tier: l, members: [n], x: 20 + (g + 0.5) * (width - 40) / tier.length, y, id: `t${l}g${g}` };
        boxes.push(box); pos.set(n.guid, box);
      });
    });
    return { aggregate: false, boxes, pos, links: cables(all, pos), width, height: 60 + (tierList.length - 1) * TIER_GAP, tiers: tierList.length };
  }

  // The cables between drawn nodes, each once, with the worse of its two port states.
  function cables(all, pos) {
    const links = new Map();
    for (const n of all) for (const p of n.ports) if (p.peer && pos.has(p.peer)) {
      const a = pos.get(n.guid), b = pos.get(p.peer);
      if (a === b) continue;
      const key = a.id < b.id ? `${a.id}|${b.id}|${p.num}` : `${b.id}|${a.id}|${p.peer_port}`;
      const k = links.get(key) || { a, b, n: 1, state: '' };
      k.state = worst(k.state, p.state); links.set(key, k);
    }
    return [...links.values()];
  }

  // The server's overview of a large fabric: groups per tier, links between groups summed.
  function groupLayout(t) {
    const byTier = [];
    for (const g of t.groups) (byTier[g.tier] = byTier[g.tier] || []).push(g);
    const room = Math.max(900, document.getElementById('topo').clientWidth - 20), boxes = [];
    byTier.forEach((gs, l) => (gs || []).forEach((g, i) => boxes[g.id] = {
      tier: l, group: g, members: [], x: 20 + (i + 0.5) * (room - 40) / gs.length,
      y: 30 + (byTier.length - 1 - l) * TIER_GAP, id: 'g' + g.id }));
    const links = t.group_links.map(([a, b, n, down]) => ({ a: boxes[a], b: boxes[b], n, down, state: down ? 'DOWN' : '' }));
    return { aggregate: true, boxes, pos: new Map(), links, width: room, height: 60 + (byTier.length - 1) * TIER_GAP, tiers: byTier.length };
  }

  function masterNode() {
    const m = window.ibsm.cluster && window.ibsm.cluster.master && window.ibsm.cluster.master.guid;
    return topo && !topo.aggregate && m ? topo.nodes.find(n => hasPort(n, m)) : null;
  }

  function draw() {
    const box = document.getElementById('topo');
    if (!layout) { box.replaceChildren(); return; }
    const root = svg('svg', { width: layout.width, height: layout.height, id: 'topo-svg', 'data-mode': layout.aggregate ? 'groups' : 'nodes',
      'data-layout': layout.aggregate ? 'groups' : layout.force ? 'force' : 'tiers' });
    for (const l of layout.links) {
      const line = svg('line', { class: linkClass(l.state), x1: l.a.x, y1: l.a.y, x2: l.b.x, y2: l.b.y });
      if (l.state) line.dataset.state = l.state;
      if (layout.aggregate) {
        line.setAttribute('stroke-width', Math.min(8, 1 + Math.log2(l.n)));
        line.append(svg('title', {}, `${l.n} links` + (l.down ? `, ${l.down} not Active` : '')));
      } else if (l.state && l.state !== 'ACTIVE') line.append(svg('title', {}, 'link ' + l.state));
      root.append(line);
    }
    if (route && route.length > 1) {
      root.append(svg('polyline', { class: 'link route', fill: 'none', points: route.map(b => `${b.x},${b.y}`).join(' ') }));
    }
    const master = masterNode(), masterBox = layout.aggregate ? masterGroup : master && layout.pos.get(master.guid);
    const hitBoxes = new Set(layout.aggregate ? hits.map(h => layout.boxes[h.group]) : hits.map(n => layout.pos.get(n.guid)));
    for (const b of layout.boxes) {
      if (!b) continue;
      const cls = [];
      if (hitBoxes.has(b) || (route || []).includes(b)) cls.push('hit');
      if (b === masterBox) cls.push('master-port');
      let shape;
      if (layout.aggregate) {
        const g = b.group, sw = g.switches > 0;
        shape = svg('rect', { class: 'group ' + cls.join(' '), x: b.x - 13, y: b.y - 9, width: 26, height: 18, rx: 3 });
        root.append(svg('text', { x: b.x - 10, y: b.y + 22 }, String(g.count)));
        shape.append(svg('title', {}, `tier ${g.tier}: ${g.count} ${sw ? 'switches' : 'hosts'} (LIDs ${g.lid_min}-${g.lid_max}), ${g.first} … ${g.last}; click for the members`));
        shape.dataset.group = g.id;
        shape.addEventListener('click', () => members(g.id));
      } else {
        const n = b.members[0];
        if (n.type === 2) {
          shape = svg('rect', { class: 'sw ' + cls.join(' '), x: b.x - 8, y: b.y - 6, width: 16, height: 12 });
          if (layout.boxes.length < 200) root.append(svg('text', { x: b.x - 8, y: b.y - 9 }, String(lidOf(n))));
        } else {
          shape = svg('circle', { class: 'ca ' + cls.join(' '), cx: b.x, cy: b.y, r: 5 });
        }
        shape.append(svg('title', {}, `${n.desc}\n${n.guid}\nLID ${lidOf(n)}, ${n.ports.filter(p => p.peer).length} links`));
        shape.dataset.guid = n.guid;
      }
      root.append(shape);
    }
    if (masterBox) {
      // Beside a node; above a group (its count is below it).
      const at = layout.aggregate ? { x: masterBox.x - 24, y: masterBox.y - 13 } : { x: masterBox.x + 8, y: masterBox.y + 16 };
      root.append(svg('text', { ...at, 'font-weight': 'bold' }, 'master SM'));
    }
    box.replaceChildren(root);
  }

  // One group's members (an overview's box clicked), as a table under the drawing.
  async function members(id) {
    try {
      const g = await window.ibsm.api(`/api/fabric/group?id=${id}`);
      const rows = g.nodes.slice(0, 300).map(n => E('tr', {}, E('td', {}, n.desc), E('td', { class: 'guid' }, n.guid),
        E('td', {}, 'LID ' + lidOf(n)), E('td', {}, n.ports.filter(p => p.peer).length + ' links' +
          (n.ports.some(p => p.state && p.state !== 'ACTIVE') ? ', some not Active' : ''))));
      document.getElementById('group-members').replaceChildren(E('h3', {}, `group ${id} (tier ${g.tier}): ${g.count} nodes` + (g.count > 300 ? ', first 300 shown' : '')), E('table', {}, ...rows));
    } catch (e) { window.ibsm.text('group-members', 'group: ' + e.message); }
  }

  let masterGroup = null;
  async function locateMaster() {
    const m = window.ibsm.cluster && window.ibsm.cluster.master && window.ibsm.cluster.master.guid;
    masterGroup = null;
    if (!topo || !topo.aggregate || !m || /^0x0+$/.test(m)) return;
    try {
      const r = await window.ibsm.api(`/api/fabric/search?q=${encodeURIComponent(m)}`);
      if (r.hits.length) masterGroup = layout.boxes[r.hits[0].group] || null;
    } catch (e) { console.warn(e); }
  }

  // What the drawing holds: the far end of a pulled cable (no longer reached, so not in
  // the server's counts of the sweep) is drawn, so it is counted, and said apart.
  function counts(t) {
    if (t.aggregate) return `${t.switches} switches, ${t.cas} CAs, ${t.links} links`;
    const of = ty => t.nodes.filter(n => n.type === ty).length, gone = t.nodes.filter(n => n.unreached).length;
    return `${of(2)} switches, ${of(1)} CAs` + (of(3) ? `, ${of(3)} routers` : '') + `, ${layout.links.length} links` +
      (gone ? ` (${gone} beyond a down cable, as last seen)` : '');
  }

  // Draw a topology as /api/fabric/topology answers it (every node, or the overview).
  function show(t) {
    topo = t; layout = t.aggregate ? groupLayout(t) : computeLayout(t); route = null; hits = [];
    window.ibsm.text('topo-summary', counts(t) + '; ' + (layout.force ? 'not a fat tree: force layout' : `${layout.tiers} tiers`) +
      (t.aggregate ? `; ${t.node_count} nodes in ${t.groups.length} groups: search, or click a group` : '') + ` (from ${t.sm}, ${t.source})`);
    window.ibsm.text('route-result', '');
    document.getElementById('group-members').replaceChildren();
    draw();
    if (t.aggregate) locateMaster().then(draw);
    return layout;
  }

  async function load() {
    const t0 = performance.now();
    try {
      show(await window.ibsm.api('/api/fabric/topology'));
      window.ibsmFabric.firstPaintMs = Math.round(performance.now() - t0);
    } catch (e) { window.ibsm.text('topo-summary', 'topology: ' + e.message); topo = layout = null; draw(); }
    tables();
  }

  async function tables() {
    try {
      const p = await window.ibsm.api('/api/fabric/partitions');
      const none = [E('tr', {}, E('td', { colspan: 4, class: 'note' }, 'none but the default partition (0x7fff)'))];
      document.querySelector('#partitions tbody').replaceChildren(...(p.partitions.length ? [] : none), ...p.partitions.map(x =>
        E('tr', {}, E('td', {}, x.name), E('td', {}, x.p_key), E('td', {}, x.members.length + x.groups.length ? `${x.members.length} ports ${x.groups.join(' ')}` : 'none'), E('td', {}, x.ipoib ? 'yes' : 'no'))));
      const g = await window.ibsm.api('/api/fabric/groups');
      const noGroup = [E('tr', {}, E('td', { colspan: 4, class: 'note' }, 'none'))];
      document.querySelector('#groups tbody').replaceChildren(...(g.groups.length ? [] : noGroup), ...g.groups.map(x =>
        E('tr', {}, E('td', { class: 'guid' }, x.mgid), E('td', {}, '0x' + x.mlid.toString(16)), E('td', {}, x.p_key), E('td', {}, x.members.length))));
    } catch (e) { console.warn(e); }
  }

  let searchSeq = 0;
  async function search(q) {
    q = q.trim().toLowerCase();
    hits = [];
    let total = 0;
    const seq = ++searchSeq;
    if (q && topo && topo.aggregate) {
      // The server searches the whole fabric; the page holds only the overview.
      try {
        const r = await window.ibsm.api(`/api/fabric/search?q=${encodeURIComponent(q)}`);
        if (seq !== searchSeq) return;
        hits = r.hits; total = r.total;
      } catch (e) { console.warn(e); }
    } else if (q && topo) {
      const lid = /^(0x[0-9a-f]+|\d+)$/.test(q) ? Number(q) : NaN;
      const hex = q.replace(/^0x/, '');
      const all = topo.nodes.filter(n => n.desc.toLowerCase().includes(q) || n.guid.includes(hex) ||
        n.ports.some(p => p.guid.includes(hex) || p.lid === lid));
      total = all.length;
      hits = all.slice(0, 30);
    }
    const row = h => topo.aggregate
      ? E('tr', {}, E('td', {}, h.desc), E('td', { class: 'guid' }, h.guid), E('td', {}, 'LID ' + h.lid), E('td', {}, `tier ${h.tier}, group ${h.group}`))
      : E('tr', {}, E('td', {}, h.desc), E('td', { class: 'guid' }, h.guid), E('td', {}, 'LID ' + lidOf(h)), E('td', {}, layout.force ? '' : 'tier ' + ((layout.pos.get(h.guid) || {}).tier)));
    document.getElementById('search-results').replaceChildren(...(q ? [E('table', {}, ...hits.map(row)), E('p', { class: 'note' }, `${total} found (at most 30 shown)`)] : []));
    draw();
  }

  async function trace() {
    const src = document.getElementById('route-src').value.trim(), dst = document.getElementById('route-dst').value.trim();
    try {
      const r = await window.ibsm.api(`/api/fabric/route?src=${encodeURIComponent(src)}&dst=${encodeURIComponent(dst)}`);
      if (layout && layout.aggregate) {
        route = (r.groups || []).filter(g => g !== null).map(g => layout.boxes[g]).filter(Boolean);
      } else {
        const ends = [r.src_port, r.dst_port].map(g => topo && topo.nodes.find(n => hasPort(n, g)));
        const guids = [ends[0] && ends[0].guid, ...r.hops.map(h => h.guid), ends[1] && ends[1].guid].filter(Boolean);
        route = layout ? guids.map(g => layout.pos.get(g)).filter(Boolean) : null;
      }
      window.ibsm.text('route-result', `LID ${r.src_lid} → ${r.dst_lid}: ` + r.hops.map(h => `${h.desc || h.guid} (in ${h.in_port}, out ${h.out_port})`).join(' → '));
    } catch (e) { route = null; window.ibsm.text('route-result', 'route: ' + e.message); }
    draw();
  }

  let loaded = false, lastMaster = null;
  window.ibsmFabric = {
    shown() { if (!loaded) { loaded = true; load(); } },
    clusterChanged() {
      const m = window.ibsm.cluster.master.guid;
      if (layout && m !== lastMaster) { lastMaster = m; if (topo.aggregate) locateMaster().then(draw); else draw(); }
    },
    load, search, trace, topo: () => topo,
    // Draw a topology given as /api/fabric/topology answers it (tests, saved views).
    show,
  };
  document.addEventListener('DOMContentLoaded', () => {
    document.getElementById('topo-refresh').addEventListener('click', load);
    document.getElementById('search').addEventListener('input', ev => search(ev.target.value));
    document.getElementById('route-go').addEventListener('click', trace);
  });
})();
