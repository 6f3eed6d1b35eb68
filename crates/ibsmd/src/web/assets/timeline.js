// ibsm web console: the timeline of the last hour. One lane per SM (its states as
// coloured spans), failovers (red) and handovers (violet, dashed) as vertical marks,
// masterless windows shaded. Drawn from the entries /api/stream sends (window.ibsm).
'use strict';

(function () {
  const SPAN_MS = 3600 * 1000, MIN_SPAN_MS = 10 * 1000, LANE = 26, LEFT = 190, TOP = 22;
  const COLOURS = { MASTER: '#15803d', STANDBY: '#2563eb', DISCOVERING: '#ca8a04', NOTACTIVE: '#9ca3af', STOPPED: '#dc2626' };
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
    const from = now - span, width = Math.max(box.clientWidth - 20, 600), plot = width - LEFT - 10;
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
    const tb = document.querySelector('#changes tbody');
    const rows = entries.filter(e => e.kind !== 'state').slice(-50).reverse().map(e => {
      const what = e.kind === 'masterless' ? `no master (was ${e.from})` :
        `${e.kind}: ${e.name || e.guid} is master` + (e.from !== '0x0000000000000000' ? ` (was ${e.from})` : '');
      return window.ibsm.el('tr', { 'data-kind': e.kind }, window.ibsm.el('td', {}, hhmm(e.at_ms)), window.ibsm.el('td', {}, what));
    });
    tb.replaceChildren(...rows);
  }

  // At most one redraw a second, whatever the update rate; and once a second while
  // shown, so the last states grow to "now".
  window.ibsmTimeline = { changed() { if (!pending) { pending = true; setTimeout(draw, 1000); } }, draw };
  setInterval(() => { if (!pending) draw(); }, 1000);
})();
