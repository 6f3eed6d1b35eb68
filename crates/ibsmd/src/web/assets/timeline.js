// ibsm web console: the timeline of the last hour. One lane per SM (its states as
// coloured spans), failovers (red) and handovers (violet, dashed) as vertical marks,
// masterless windows shaded. Drawn from the entries /api/stream sends (window.ibsm);
// a drill's report.json (file picker or dropped on the tab, read in the page) is drawn
// the same way from its wire_changes.
'use strict';

(function () {
  const SPAN_MS = 3600 * 1000, MIN_SPAN_MS = 10 * 1000, LANE = 26, LEFT = 190, TOP = 22;
  const COLOURS = { MASTER: '#15803d', STANDBY: '#2563eb', DISCOVERING: '#ca8a04', NOTACTIVE: '#9ca3af', STOPPED: '#dc2626', 'NO ANSWER': '#dc2626' };
  const NS = 'http://www.w3.org/2000/svg';
  let pending = false;

  function svg(tag, attrs, txt) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (txt !== undefined) e.textContent = txt;
    return e;
  }
  const hhmm = ms => new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });

  function draw() {
    pending = false;
    const box = document.getElementById('timeline');
    if (!box || box.offsetParent === null || !window.ibsm.cluster) return;
    // Now on the server's clock: every SM's last state is drawn up to here.
    const entries = window.ibsm.timeline, now = Date.now() + (window.ibsm.clockOffset || 0);
    // The last hour, or less when the record is younger (a fresh demo fills the width).
    const first = entries.length ? entries[0].at_ms : now;
    const span = Math.min(SPAN_MS, Math.max(MIN_SPAN_MS, (now - first) * 1.15));
    render(entries, now - span, now, box, document.querySelector('#changes tbody'));
  }

  // Entries (the recorder's shape) drawn from `from` to `now` into `box`, the master
  // changes listed in `tb`.
  function render(entries, from, now, box, tb) {
    const span = Math.max(1, now - from), width = Math.max(box.clientWidth - 20, 600), plot = width - LEFT - 10;
    const x = t => LEFT + Math.max(0, (t - from)) / span * plot;
    const lanes = new Map();
    for (const e of entries) if (e.kind === 'state') {
      if (!lanes.has(e.guid)) lanes.set(e.guid, { name: e.name, spans: [] });
      lanes.get(e.guid).spans.push(e);
    }
    const height = TOP + lanes.size * LANE + 30;
    const root = svg('svg', { width, height });
    // Masterless windows: from a `masterless` entry to the next master change.
    let since = null;
    for (const e of entries) {
      if (e.kind === 'masterless') since = e.at_ms;
      else if (since !== null && e.kind !== 'state') {
        root.append(svg('rect', { class: 'masterless', x: x(since), y: TOP - 4, width: Math.max(2, x(e.at_ms) - x(since)), height: lanes.size * LANE + 4 }, ));
        since = null;
      }
    }
    if (since !== null) root.append(svg('rect', { class: 'masterless', x: x(since), y: TOP - 4, width: Math.max(2, x(now) - x(since)), height: lanes.size * LANE + 4 }));
    let row = 0;
    for (const [guid, lane] of lanes) {
      const y = TOP + row * LANE;
      root.append(svg('text', { x: 4, y: y + 14, class: 'lane-label' }, (lane.name ? lane.name + ' ' : '') + guid));
      lane.spans.forEach((e, i) => {
        const end = i + 1 < lane.spans.length ? lane.spans[i + 1].at_ms : now;
        if (end < from) return;
        const r = svg('rect', { x: x(e.at_ms), y, width: Math.max(1, x(end) - x(e.at_ms)), height: LANE - 8, fill: COLOURS[e.to] || '#ccc',
          class: 'span', 'data-guid': guid, 'data-state': e.to });
        if (i + 1 === lane.spans.length) r.dataset.last = 'true';
        r.append(svg('title', {}, `${e.to} from ${hhmm(e.at_ms)}`));
        root.append(r);
      });
      row++;
    }
    for (const e of entries) if (e.kind === 'action') {
      root.append(svg('line', { class: 'action', x1: x(e.at_ms), x2: x(e.at_ms), y1: TOP - 4, y2: TOP + lanes.size * LANE }));
      root.append(svg('text', { x: x(e.at_ms) + 3, y: TOP + lanes.size * LANE + 10 }, e.name));
    }
    for (const e of entries) if (e.kind === 'failover' || e.kind === 'handover') {
      root.append(svg('line', { class: e.kind, x1: x(e.at_ms), x2: x(e.at_ms), y1: 4, y2: TOP + lanes.size * LANE }));
      const left = x(e.at_ms) > width - 70;
      root.append(svg('text', { x: x(e.at_ms) + (left ? -3 : 3), y: 12, 'text-anchor': left ? 'end' : 'start' }, e.kind));
    }
    const step = [1e3, 2e3, 5e3, 10e3, 30e3, 60e3, 300e3, 600e3].find(s => span / s <= 8) || 600e3;
    for (let t = Math.ceil(from / step) * step; t <= now; t += step) {
      root.append(svg('line', { x1: x(t), x2: x(t), y1: TOP - 4, y2: TOP + lanes.size * LANE, stroke: '#e5e7eb' }));
      root.append(svg('text', { x: x(t) - 20, y: height - 8 }, step < 60e3 ? hhmm(t) : hhmm(t).slice(0, 5)));
    }
    box.replaceChildren(root);
    const rows = entries.filter(e => e.kind !== 'state').slice(-50).reverse().map(e => {
      const what = e.kind === 'action' ? `drill cycle ${e.name}` : e.kind === 'masterless' ? `no master (was ${e.from})` :
        `${e.kind}: ${e.name || e.guid} is master` + (e.from && e.from !== '0x0000000000000000' ? ` (was ${e.from})` : '');
      return window.ibsm.el('tr', { 'data-kind': e.kind }, window.ibsm.el('td', {}, hhmm(e.at_ms)), window.ibsm.el('td', {}, what));
    });
    tb.replaceChildren(...rows);
  }

  // A drill's report.json (ibsmctl drill): its `wire_changes` (every SM state the
  // SMInfo poller saw on the wire) as timeline entries. A change of master is a
  // failover when the old master no longer answered SMInfo, else a handover (the
  // live recorder's rule: the old master still runs); each cycle's action is marked.
  function reportEntries(r) {
    const out = [], states = new Map();
    (r.cycles || []).forEach((c, i) => { if (c.action_unix_ms) out.push({ kind: 'action', at_ms: c.action_unix_ms, guid: '', name: `#${i + 1} ${c.action || r.scenario}`, from: '' }); });
    let master = null, last = null;
    const changes = (r.wire_changes || []).slice().sort((a, b) => a.at_unix_ms - b.at_unix_ms);
    for (const c of changes) {
      const at = c.at_unix_ms, to = c.state || 'NO ANSWER';
      out.push({ kind: 'state', at_ms: at, guid: c.name, name: '', to });
      states.set(c.name, to);
      const ms = [...states].filter(([, s]) => s === 'MASTER').map(([n]) => n), m = ms.join(' + ');
      if (m === master) continue;
      if (!m) out.push({ kind: 'masterless', at_ms: at, guid: '', name: '', from: master || 'none' });
      else if (last === null) out.push({ kind: 'master', at_ms: at, guid: m, name: m, from: '' });
      else if (!ms.includes(last)) {
        const kind = states.get(last) === 'NO ANSWER' ? 'failover' : 'handover';
        out.push({ kind, at_ms: at, guid: m, name: m, from: last });
      }
      master = m;
      if (ms.length) last = ms[0];
    }
    return out.sort((a, b) => a.at_ms - b.at_ms);
  }

  function openReport(r) {
    if (!Array.isArray(r.wire_changes)) throw new Error('no wire_changes in this report (a drill from before they were recorded)');
    const entries = reportEntries(r);
    const from = r.wire_from_unix_ms || (entries.length ? entries[0].at_ms : 0);
    const to = r.wire_to_unix_ms || (entries.length ? entries[entries.length - 1].at_ms : from);
    const f = r.failover_ms || {};
    window.ibsm.text('report-title', `Drill report: ${r.scenario}, ${r.cycles_run} cycles, failover ms ` +
      `median ${f.median ?? '-'} max ${f.max ?? '-'}, masterless max ${r.masterless_ms_max} ms, invariants ${r.invariants_ok ? 'ok' : 'BROKEN: ' + (r.broken || []).join('; ')}`);
    document.getElementById('report').hidden = false;
    render(entries, from, to + Math.max(200, (to - from) * 0.02), document.getElementById('report-timeline'), document.querySelector('#report-changes tbody'));
    return entries.length;
  }

  function readFile(file) {
    const fr = new FileReader();
    fr.onload = () => {
      try { openReport(JSON.parse(fr.result)); window.ibsm.text('report-error', ''); }
      catch (e) { window.ibsm.text('report-error', `${file.name}: ${e.message}`); }
    };
    fr.readAsText(file);
  }

  document.addEventListener('DOMContentLoaded', () => {
    document.getElementById('report-file').addEventListener('change', ev => { if (ev.target.files[0]) readFile(ev.target.files[0]); });
    const zone = document.getElementById('tab-timeline');
    zone.addEventListener('dragover', ev => ev.preventDefault());
    zone.addEventListener('drop', ev => { ev.preventDefault(); if (ev.dataTransfer.files[0]) readFile(ev.dataTransfer.files[0]); });
  });

  // At most one redraw a second, whatever the update rate; and once a second while
  // shown, so the last states grow to "now".
  window.ibsmTimeline = { changed() { if (!pending) { pending = true; setTimeout(draw, 1000); } }, draw, openReport };
  setInterval(() => { if (!pending) draw(); }, 1000);
})();
