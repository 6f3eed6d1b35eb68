// ibsm web console: the fabric. Nodes in tiers by hop distance from the hosts (a fat
// tree's leaf, spine and core switches; any other graph layered the same way), cabled
// links, the master SM's port ringed, a LID-to-LID route drawn over it; partitions and
// multicast groups below. Past FULL_MAX nodes each tier is drawn as groups (boxes with
// counts, links between groups summed) and search finds a node by GUID, LID or name.
'use strict';

(function () {
  const FULL_MAX = 800, GROUPS_PER_TIER = 40, TIER_GAP = 110, NS = 'http://www.w3.org/2000/svg';
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

  function computeLayout(t) {
    const all = t.nodes, tierList = tiers(all), order = new Map();
    // Order: tier 1 by GUID, hosts under their first switch, upper tiers by the mean
    // position of their neighbours below (one barycentre pass).
    (tierList[1] || []).sort((a, b) => a.guid < b.guid ? -1 : 1).forEach((n, i) => order.set(n.guid, i));
    const mean = n => { const v = n.ports.filter(p => order.has(p.peer)).map(p => order.get(p.peer)); return v.length ? v.reduce((a, b) => a + b) / v.length : 1e9; };
    tierList[0].sort((a, b) => mean(a) - mean(b)).forEach((n, i) => order.set(n.guid, i));
    for (let l = 2; l < tierList.length; l++) tierList[l].sort((a, b) => mean(a) - mean(b)).forEach((n, i) => order.set(n.guid, i));
    const aggregate = all.length > FULL_MAX;
    const boxes = [], pos = new Map(), widest = Math.max(...tierList.map(x => x.length));
    const room = Math.max(900, document.getElementById('topo').clientWidth - 20);
    const width = aggregate ? room : Math.max(room, Math.min(widest, 400) * 22);
    tierList.forEach((tier, l) => {
      const y = 30 + (tierList.length - 1 - l) * TIER_GAP;
      const per = aggregate ? Math.ceil(tier.length / GROUPS_PER_TIER) : 1;
      const count = Math.ceil(tier.length / per);
      for (let g = 0; g < count; g++) {
        const members = tier.slice(g * per, (g + 1) * per);
        const box = { tier: l, members, x: 20 + (g + 0.5) * (width - 40) / count, y, id: `t${l}g${g}` };
        boxes.push(box);
        for (const n of members) pos.set(n.guid, box);
      }
    });
    const links = new Map();
    for (const n of all) for (const p of n.ports) if (p.peer && pos.has(p.peer)) {
      const a = pos.get(n.guid), b = pos.get(p.peer);
      if (a === b) continue;
      const key = a.id < b.id ? a.id + '|' + b.id : b.id + '|' + a.id;
      const k = links.get(key) || { a, b, n: 0 }; k.n++; links.set(key, k);
    }
    return { aggregate, boxes, pos, links: [...links.values()], width, height: 60 + (tierList.length - 1) * TIER_GAP, tiers: tierList.length };
  }

  function masterNode() {
    const m = window.ibsm.cluster && window.ibsm.cluster.master && window.ibsm.cluster.master.guid;
    return topo && m ? topo.nodes.find(n => hasPort(n, m)) : null;
  }

  function draw() {
    const box = document.getElementById('topo');
    if (!layout) { box.replaceChildren(); return; }
    const root = svg('svg', { width: layout.width, height: layout.height, id: 'topo-svg' });
    for (const l of layout.links) {
      const line = svg('line', { class: 'link', x1: l.a.x, y1: l.a.y, x2: l.b.x, y2: l.b.y });
      if (layout.aggregate) line.setAttribute('stroke-width', Math.min(8, 1 + Math.log2(l.n)));
      root.append(line);
    }
    if (route && route.length > 1) {
      root.append(svg('polyline', { class: 'link route', fill: 'none', points: route.map(b => `${b.x},${b.y}`).join(' ') }));
    }
    const master = masterNode(), masterBox = master && layout.pos.get(master.guid);
    const hitBoxes = new Set(hits.map(n => layout.pos.get(n.guid)));
    for (const b of layout.boxes) {
      const n = b.members[0], sw = n.type === 2, cls = [];
      if (hitBoxes.has(b) || (route || []).includes(b)) cls.push('hit');
      if (b === masterBox) cls.push('master-port');
      let shape;
      if (layout.aggregate) {
        shape = svg('rect', { class: 'group ' + cls.join(' '), x: b.x - 13, y: b.y - 9, width: 26, height: 18, rx: 3 });
        root.append(svg('text', { x: b.x - 10, y: b.y + 22 }, String(b.members.length)));
      } else if (sw) {
        shape = svg('rect', { class: 'sw ' + cls.join(' '), x: b.x - 8, y: b.y - 6, width: 16, height: 12 });
        if (layout.boxes.length < 200) root.append(svg('text', { x: b.x - 8, y: b.y - 9 }, String(lidOf(n))));
      } else {
        shape = svg('circle', { class: 'ca ' + cls.join(' '), cx: b.x, cy: b.y, r: 5 });
      }
      const label = layout.aggregate ? `tier ${b.tier}: ${b.members.length} ${sw ? 'switches' : 'hosts'} (LIDs ${Math.min(...b.members.map(lidOf))}-${Math.max(...b.members.map(lidOf))})`
        : `${n.desc}\n${n.guid}\nLID ${lidOf(n)}, ${n.ports.filter(p => p.peer).length} links`;
      shape.append(svg('title', {}, label));
      shape.dataset.guid = n.guid;
      root.append(shape);
    }
    if (masterBox) root.append(svg('text', { x: masterBox.x + 8, y: masterBox.y + 16, 'font-weight': 'bold' }, 'master SM'));
    box.replaceChildren(root);
  }

  // Draw a topology as /api/fabric/topology answers it.
  function show(t) {
    topo = t; layout = computeLayout(t); route = null; hits = [];
    window.ibsm.text('topo-summary', `${t.switches} switches, ${t.cas} CAs, ${t.links} links; ${layout.tiers} tiers` +
      (layout.aggregate ? `; grouped (more than ${FULL_MAX} nodes): search to find one` : '') + ` (from ${t.sm}, ${t.source})`);
    window.ibsm.text('route-result', '');
    draw();
    return layout;
  }

  async function load() {
    try {
      show(await window.ibsm.api('/api/fabric/topology'));
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

  function search(q) {
    q = q.trim().toLowerCase();
    hits = [];
    if (q && topo) {
      const lid = /^(0x[0-9a-f]+|\d+)$/.test(q) ? Number(q) : NaN;
      const hex = q.replace(/^0x/, '');
      hits = topo.nodes.filter(n => n.desc.toLowerCase().includes(q) || n.guid.includes(hex) ||
        n.ports.some(p => p.guid.includes(hex) || p.lid === lid)).slice(0, 30);
    }
    document.getElementById('search-results').replaceChildren(...(q ? [E('table', {}, ...hits.map(n =>
      E('tr', {}, E('td', {}, n.desc), E('td', { class: 'guid' }, n.guid), E('td', {}, 'LID ' + lidOf(n)),
        E('td', {}, 'tier ' + ((layout.pos.get(n.guid) || {}).tier))))), E('p', { class: 'note' }, `${hits.length} found (at most 30 shown)`)] : []));
    draw();
  }

  async function trace() {
    const src = document.getElementById('route-src').value.trim(), dst = document.getElementById('route-dst').value.trim();
    try {
      const r = await window.ibsm.api(`/api/fabric/route?src=${encodeURIComponent(src)}&dst=${encodeURIComponent(dst)}`);
      const ends = [r.src_port, r.dst_port].map(g => topo && topo.nodes.find(n => hasPort(n, g)));
      const guids = [ends[0] && ends[0].guid, ...r.hops.map(h => h.guid), ends[1] && ends[1].guid].filter(Boolean);
      route = layout ? guids.map(g => layout.pos.get(g)).filter(Boolean) : null;
      window.ibsm.text('route-result', `LID ${r.src_lid} → ${r.dst_lid}: ` + r.hops.map(h => `${h.desc || h.guid} (in ${h.in_port}, out ${h.out_port})`).join(' → '));
    } catch (e) { route = null; window.ibsm.text('route-result', 'route: ' + e.message); }
    draw();
  }

  let loaded = false, lastMaster = null;
  window.ibsmFabric = {
    shown() { if (!loaded) { loaded = true; load(); } },
    clusterChanged() {
      const m = window.ibsm.cluster.master.guid;
      if (layout && m !== lastMaster) { lastMaster = m; draw(); }
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
