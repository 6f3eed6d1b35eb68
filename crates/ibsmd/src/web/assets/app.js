// ibsm web console: login, the live cluster view, admin actions, tabs.
// Plain JavaScript, no build step. Data comes from /api/* with the API's bearer token
// (kept in sessionStorage: this tab only); the live view is a fetch whose body is read
// as it arrives (server-sent-event framing; EventSource cannot send a header).
'use strict';

const TOKEN_KEY = 'ibsm-token';
// Shared with fabric.js/timeline.js, and read by the browser test.
const ibsm = window.ibsm = { role: null, cluster: null, timeline: [], updates: 0, clockOffset: 0,
  pageId: Math.random().toString(36).slice(2), api, el, text };

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v; else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}
function text(id, s) { document.getElementById(id).textContent = s; }
function stateTag(s) { return el('span', { class: 'state ' + s }, s); }
function authHeaders() {
  const t = sessionStorage.getItem(TOKEN_KEY);
  return t ? { Authorization: 'Bearer ' + t } : {};
}

async function api(path, opts = {}) {
  const r = await fetch(path, { ...opts, headers: { ...authHeaders(), ...(opts.headers || {}) } });
  const body = await r.json().catch(() => ({}));
  if (r.status === 401) { showLogin('The server refused the credentials: ' + (body.error || 'unauthenticated')); }
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function showLogin(why) {
  document.getElementById('login').hidden = false;
  document.getElementById('main').hidden = true;
  document.getElementById('tabs').hidden = true;
  text('login-error', why || '');
}

async function start() {
  let who;
  try { who = await api('/api/whoami'); } catch (e) { return; }
  ibsm.role = who.role;
  document.body.dataset.role = who.role;
  // A verified client certificate may be the whole credential (no token, no form).
  document.body.dataset.certificate = who.certificate ? 'yes' : 'no';
  text('role', who.authenticates ? who.role + (who.certificate ? ' (client certificate)' : '') : 'no authentication');
  document.getElementById('logout').hidden = !who.authenticates || !sessionStorage.getItem(TOKEN_KEY);
  document.getElementById('login').hidden = true;
  document.getElementById('main').hidden = false;
  document.getElementById('tabs').hidden = false;
  for (const th of document.querySelectorAll('.admin-only')) th.hidden = who.role !== 'admin';
  live();
  // #fabric or #timeline opens that tab (links to a view).
  const tab = location.hash.slice(1);
  if (tab === 'fabric' || tab === 'timeline') showTab(tab);
}

// The live stream: reconnects when it ends (the server closes it every few minutes).
let streaming = false;
async function live() {
  if (streaming) return;
  streaming = true;
  while (streaming) {
    try {
      const r = await fetch('/api/stream', { headers: authHeaders() });
      if (r.status === 401) { streaming = false; showLogin('Please sign in.'); break; }
      if (!r.ok) throw new Error(r.statusText);
      setLive(true);
      const reader = r.body.getReader(), dec = new TextDecoder();
      let buf = '', first = true;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const msg = buf.slice(0, i); buf = buf.slice(i + 2);
          for (const line of msg.split('\n')) {
            if (line.startsWith('data: ')) { onMessage(JSON.parse(line.slice(6)), first); first = false; }
          }
        }
      }
    } catch (e) { console.warn('stream', e); }
    setLive(false);
    await new Promise(res => setTimeout(res, 1000));
  }
}
function setLive(on) {
  const b = document.getElementById('live');
  b.textContent = on ? 'live' : 'reconnecting'; b.className = 'badge ' + (on ? 'on' : 'off');
}

function onMessage(m, first) {
  ibsm.cluster = m.cluster;
  // The server's clock at sending (the view's own now_ms is when it last changed).
  if (m.now_ms) ibsm.clockOffset = m.now_ms - Date.now();
  // A new stream starts from the whole last hour again.
  ibsm.timeline = first ? m.timeline : ibsm.timeline.concat(m.timeline);
  ibsm.updates++;
  document.body.dataset.updates = ibsm.updates;
  renderCluster(m.cluster);
  if (window.ibsmTimeline) window.ibsmTimeline.changed();
  if (window.ibsmFabric) window.ibsmFabric.clusterChanged();
}

function renderCluster(c) {
  const m = c.master || {};
  const none = !m.guid || m.guid === '0x0000000000000000';
  text('master-guid', none ? 'none (masterless)' : m.guid);
  text('master-name', m.name ? '(' + m.name + ')' : '');
  document.body.dataset.master = none ? '' : m.guid;
  const admin = ibsm.role === 'admin';
  const tb = document.querySelector('#instances tbody');
  tb.replaceChildren(...c.instances.map(i => {
    if (!i.running) {
      return el('tr', { 'data-guid': i.guid, 'data-state': 'STOPPED' }, el('td', {}, i.name), el('td', { class: 'guid' }, i.guid),
        el('td', {}, ''), el('td', {}, stateTag('STOPPED')), el('td', { class: 'wrap', colspan: 6 }, i.error || ''),
        ...(admin ? [el('td', {})] : []));
    }
    const raft = i.raft_role ? `${i.raft_role} (term ${i.raft_term})` : '-';
    const replica = i.raft_role ? `applied ${i.applied_index}` + (i.replica_lag ? `, ${i.replica_lag} behind` : ', current') : '-';
    const health = [i.degraded ? 'DEGRADED: ' + i.degraded_reason : 'ok', ...(i.alarms || [])].join('; ');
    const tr = el('tr', { 'data-guid': i.guid, 'data-state': i.state, class: i.state === 'MASTER' ? 'is-master' : '' },
      el('td', {}, i.name), el('td', { class: 'guid' }, i.guid), el('td', {}, i.lid), el('td', {}, stateTag(i.state)),
      el('td', {}, i.priority), el('td', {}, i.act_count), el('td', {}, i.epoch), el('td', {}, raft),
      el('td', {}, replica), el('td', { class: 'wrap' + (i.degraded ? ' error' : '') }, health));
    if (admin) tr.append(el('td', {}, ...actionsFor(i)));
    return tr;
  }));
  const sb = document.querySelector('#sms tbody');
  sb.replaceChildren(...c.sms.map(s => el('tr', { 'data-guid': s.guid, 'data-state': s.state },
    el('td', { class: 'guid' }, s.guid), el('td', {}, s.lid), el('td', {}, stateTag(s.state)), el('td', {}, s.priority),
    el('td', {}, s.act_count), el('td', {}, s.ours ? 'ours: ' + s.ours : (s.trusted ? 'other SM' : 'other SM (untrusted)')),
    el('td', {}, (s.seen_by || []).join(', ')))));
}

// Actions exist in the page only for the admin role; the server refuses them anyway.
function actionsFor(i) {
  const out = [];
  if (i.state === 'MASTER') {
    out.push(el('button', { class: 'action', 'data-action': 'handover', onclick: () =>
      confirmThen(`Hand mastership over from ${i.name} (${i.guid})? Target port GUID (empty: the best standby):`, '',
        v => act({ action: 'handover', sm: i.name, to_guid: v.trim() })) }, 'Handover…'));
    out.push(el('button', { class: 'action', 'data-action': 'sweep', onclick: () =>
      confirmThen(`Run a heavy sweep on ${i.name}?`, null, () => act({ action: 'sweep', sm: i.name, heavy: true })) }, 'Sweep…'));
  }
  out.push(el('button', { class: 'action', 'data-action': 'priority', onclick: () =>
    confirmThen(`New SMInfo priority (0-15) for ${i.name}:`, String(i.priority),
      v => act({ action: 'priority', sm: i.name, priority: Number(v) })) }, 'Priority…'));
  return out;
}

function confirmThen(question, initial, then) {
  const d = document.getElementById('confirm'), input = document.getElementById('confirm-input');
  text('confirm-text', question);
  input.hidden = initial === null; input.value = initial || '';
  d.onclose = () => { if (d.returnValue === 'ok') then(input.value); };
  d.showModal();
}

async function act(body) {
  text('action-result', `${body.action} on ${body.sm}: sent…`);
  try {
    const r = await api('/api/action', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    text('action-result', `${body.action} on ${body.sm}: ${r.outcome}`);
  } catch (e) { text('action-result', `${body.action} on ${body.sm} refused: ${e.message}`); }
}

function showTab(name) {
  history.replaceState(null, '', '#' + name);
  for (const b of document.querySelectorAll('nav .tab')) b.classList.toggle('on', b.dataset.tab === name);
  for (const s of document.querySelectorAll('.tab-body')) s.hidden = s.id !== 'tab-' + name;
  if (name === 'fabric' && window.ibsmFabric) window.ibsmFabric.shown();
  if (name === 'timeline' && window.ibsmTimeline) window.ibsmTimeline.draw();
}
ibsm.showTab = showTab;

document.addEventListener('DOMContentLoaded', () => {
  document.getElementById('login-form').addEventListener('submit', ev => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, document.getElementById('token').value.trim());
    start();
  });
  document.getElementById('logout').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY); location.reload();
  });
  for (const b of document.querySelectorAll('nav .tab')) b.addEventListener('click', () => showTab(b.dataset.tab));
  start();
});
