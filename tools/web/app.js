// delayq web: the dashboard's only script.  It talks to the JSON API
// (docs/WEB.md) and puts every piece of data into the page as text
// (textContent / text nodes), never as HTML.
'use strict';

const COLORS = { scheduled: '#3b82f6', due: '#f59e0b', inflight: '#10b981', dead: '#ef4444' };
const STATES = ['scheduled', 'due', 'inflight', 'dead'];
// dq_counters' totals, as /api/queues/<q> gives them in "counters"
const COUNTERS = ['delivered', 'acked', 'retried', 'failed'];
const COUNTER_COLORS = { delivered: '#3b82f6', acked: '#10b981', retried: '#f59e0b', failed: '#ef4444' };
let session = null;
let timer = null;
let view = { name: null, state: 'scheduled', offset: 0, count: 50, notice: null };

// ---- DOM helpers -------------------------------------------------------
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids) {
    if (k === null || k === undefined) continue;
    e.appendChild(typeof k === 'string' || typeof k === 'number' ? document.createTextNode(String(k)) : k);
  }
  return e;
}
function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); return e; }
function status(text, err) {
  const s = document.getElementById('status');
  s.textContent = text;
  s.className = err ? 'status err' : 'status';
}

// ---- Names in paths: "~x" + the bytes in hex (docs/WEB.md) ---------------
function hexOf(obj, key) {
  if (obj[key + '_hex']) return obj[key + '_hex'];
  return Array.from(new TextEncoder().encode(obj[key]), b => b.toString(16).padStart(2, '0')).join('');
}
function seg(obj, key) { return '~x' + hexOf(obj, key); }
// The page's own address of a job: #/q/<queue hex>/j/<id hex> (any bytes).
function jobHash(qhex, idhex) { return '#/q/' + qhex + '/j/' + idhex; }
function textHex(s) { return Array.from(new TextEncoder().encode(s), b => b.toString(16).padStart(2, '0')).join(''); }

// ---- API ------------------------------------------------------------------
async function api(method, path) {
  const opts = { method, headers: {}, credentials: 'same-origin' };
  if (method === 'POST') opts.headers['X-CSRF-Token'] = session ? session.csrf : '';
  const r = await fetch(path, opts);
  let body = null;
  try { body = await r.json(); } catch (e) { body = { error: 'bad reply (' + r.status + ')' }; }
  if (r.status === 401) { showLogin(); throw new Error('log in first'); }
  if (!r.ok) {
    const err = new Error((body && body.error) || ('HTTP ' + r.status));
    err.code = body && body.code; err.status = r.status;
    throw err;
  }
  return body;
}

function showLogin() {
  document.getElementById('login').hidden = false;
  clear(document.getElementById('main'));
  if (location.hash === '#login-failed') document.getElementById('login-msg').textContent = 'Wrong token: try again.';
  if (timer) { clearTimeout(timer); timer = null; }
}

// ---- Formatting -----------------------------------------------------------
function dur(ms) {
  const neg = ms < 0; ms = Math.abs(ms);
  if (ms < 1000) return (neg ? '-' : '') + ms + 'ms';
  const units = [[86400, 'd'], [3600, 'h'], [60, 'm'], [1, 's']];
  let s = Math.floor(ms / 1000), out = [];
  for (const [n, u] of units) {
    const v = Math.floor(s / n); s %= n;
    if (v) out.push(v + u); else if (out.length) break;
    if (out.length === 2) break;
  }
  return (neg ? '-' : '') + out.join(' ');
}
function rel(at, now) {
  const d = at - now;
  if (Math.abs(d) < 1000) return 'now';
  return d > 0 ? 'in ' + dur(d) : dur(-d) + ' ago';
}
function iso(ms) { try { return new Date(ms).toISOString().replace('.000', ''); } catch (e) { return String(ms); } }
function payloadText(p) {
  if (p.text !== undefined) return p.text;
  return 'hex: ' + p.hex;
}

// ---- Charts (canvas, drawn by hand) ---------------------------------------
function setupCanvas(c) {
  const dpr = window.devicePixelRatio || 1;
  const w = c.clientWidth || 600, h = c.clientHeight || 180;
  c.width = w * dpr; c.height = h * dpr;
  const g = c.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  g.font = '11px system-ui, sans-serif';
  return { g, w, h };
}
function niceMax(v) {
  // a maximum of 4 equal steps, each 1, 2 or 5 times a power of ten
  if (v <= 4) return 4;
  const raw = v / 4, p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return 4 * m * p;
  return 40 * p;
}
function axes(g, w, h, max, left, bottom) {
  g.strokeStyle = '#dde1e8'; g.fillStyle = '#6b7385'; g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = 8 + (h - bottom - 8) * (1 - i / 4);
    g.beginPath(); g.moveTo(left, y); g.lineTo(w - 4, y); g.stroke();
    g.textAlign = 'right'; g.textBaseline = 'middle';
    g.fillText(String(Math.round(max * i / 4)), left - 4, y);
  }
}
// Stacked bars: labels[i], series [{name, color, values[i]}].
function barChart(c, labels, series) {
  const { g, w, h } = setupCanvas(c);
  const left = 44, bottom = 22, n = labels.length;
  let max = 0;
  for (let i = 0; i < n; i++) max = Math.max(max, series.reduce((a, s) => a + s.values[i], 0));
  max = niceMax(max);
  axes(g, w, h, max, left, bottom);
  const slot = (w - left - 8) / Math.max(n, 1), bw = Math.max(2, slot * 0.7);
  for (let i = 0; i < n; i++) {
    let y = h - bottom;
    const x = left + i * slot + (slot - bw) / 2;
    for (const s of series) {
      const bh = (h - bottom - 8) * s.values[i] / max;
      g.fillStyle = s.color; g.fillRect(x, y - bh, bw, bh); y -= bh;
    }
    g.fillStyle = '#6b7385'; g.textAlign = 'center'; g.textBaseline = 'top';
    let lab = labels[i];
    if (lab.length > 14) lab = lab.slice(0, 13) + '…';
    g.fillText(lab, x + bw / 2, h - bottom + 5);
  }
}
// Lines over time: points [[t, v...]], series [{name, color, index}].
function lineChart(c, points, series) {
  const { g, w, h } = setupCanvas(c);
  const left = 44, bottom = 22;
  if (points.length < 2) {
    g.fillStyle = '#6b7385'; g.textAlign = 'center'; g.textBaseline = 'middle';
    g.fillText('collecting samples (one every 5 s while this queue is watched)', w / 2, h / 2);
    return;
  }
  let max = 0;
  for (const p of points) for (const s of series) max = Math.max(max, p[s.index]);
  max = niceMax(max);
  axes(g, w, h, max, left, bottom);
  const t0 = points[0][0], t1 = points[points.length - 1][0];
  const X = t => left + (w - left - 8) * (t - t0) / Math.max(1, t1 - t0);
  const Y = v => 8 + (h - bottom - 8) * (1 - v / max);
  for (const s of series) {
    g.strokeStyle = s.color; g.lineWidth = 2; g.beginPath();
    points.forEach((p, i) => (i ? g.lineTo(X(p[0]), Y(p[s.index])) : g.moveTo(X(p[0]), Y(p[s.index]))));
    g.stroke();
  }
  g.fillStyle = '#6b7385'; g.textBaseline = 'top';
  g.textAlign = 'left'; g.fillText(new Date(t0).toLocaleTimeString(), left, h - bottom + 5);
  g.textAlign = 'right'; g.fillText(new Date(t1).toLocaleTimeString(), w - 8, h - bottom + 5);
}
function legend(names) {
  return el('div', { class: 'legend' }, ...names.map(n => el('span', {}, el('i', { class: 'sw-' + n }), n)));
}
// The card of the counters: totals as text, and their growth per minute
// (rates.series) as lines; a hint instead when no client counts.
function countersCard(info) {
  const k = info.counters || {}, r = info.rates;
  const card = el('div', { class: 'card', id: 'counters-card' }, el('h2', {}, 'Deliveries, acks, retries and failures per minute'));
  if (!COUNTERS.some(n => k[n] > 0)) {
    card.append(el('p', { class: 'muted', id: 'counters' },
      'no counters: start producers and consumers with DQ_OPT_COUNTERS (URI clients: see docs)'));
    return { card, draw() {} };
  }
  const canvas = el('canvas', { id: 'counter-rates' });
  const perMin = r.window_ms ? '; over the last ' + dur(r.window_ms) + ': ' +
    COUNTERS.map(n => n + ' ' + r[n + '_per_min'] + '/min').join(', ') : '';
  card.append(el('div', { class: 'legend' }, ...COUNTERS.map(n => el('span', {}, el('i', { class: 'sw-' + n }), n))), canvas,
    el('p', { class: 'muted', id: 'counters' }, 'totals: ' + COUNTERS.map(n => n + ' ' + k[n]).join(', ') + perMin));
  return { card, draw() {
    lineChart(canvas, r.series || [], COUNTERS.map((n, i) => ({ name: n, color: COUNTER_COLORS[n], index: i + 1 })));
  } };
}

// The card of the queue's settings (dq_config_get), read-only: a setting
// that is not set falls back to each client's option, or to no limit.
const SETTINGS = [
  ['max_attempts', 'max attempts', v => String(v), 'client option (DQ_OPT_MAX_ATTEMPTS), else unlimited'],
  ['lease_ms', 'lease', v => dur(v), 'client option (DQ_OPT_LEASE_MS, 30s)'],
  ['backoff', 'retry backoff', v => v, 'none: a retry waits what the nack says'],
  ['backoff_base_ms', 'backoff base', v => dur(v), '1s'],
  ['backoff_cap_ms', 'backoff cap', v => dur(v), 'none'],
  ['backoff_jitter', 'backoff jitter', v => v + '%', '0%'],
  ['dead_max', 'dead jobs kept (at most)', v => String(v), 'no limit'],
  ['dead_ttl_ms', 'dead jobs kept (for)', v => dur(v), 'forever'],
  ['expired', 'expired jobs', v => v === 'drop' ? 'deleted' : 'dead-lettered', 'dead-lettered'],
  ['rate_max', 'rate limit', null, 'none'],
  ['layout', 'layout of pending jobs', v => v, 'client option (DQ_OPT_LAYOUT), else default'],
];
function settingsCard(st) {
  st = st || {};
  const rows = [];
  for (const [key, label, fmt, dflt] of SETTINGS) {
    if (key === 'rate_max') {
      const on = st.rate_max !== null && st.rate_max !== undefined;
      rows.push(el('tr', { 'data-setting': 'rate' }, el('th', {}, label),
        el('td', { class: on ? '' : 'muted' }, on ? st.rate_max + ' deliveries per ' + dur(st.rate_window_ms) : 'not set: ' + dflt)));
      continue;
    }
    const v = st[key], on = v !== null && v !== undefined;
    rows.push(el('tr', { 'data-setting': key }, el('th', {}, label),
      el('td', { class: on ? '' : 'muted' }, on ? fmt(v) : 'not set: ' + dflt)));
  }
  return el('div', { class: 'card', id: 'settings-card' }, el('h2', {}, 'Settings'),
    el('table', { class: 'settings' }, el('tbody', {}, ...rows)),
    el('p', { class: 'muted' }, 'Read-only here; change them with `delayq config` or dq_config_set.'));
}

// The card of the queue's tenant groups (dq_group_stats): the first ten
// in turn order, with their jobs due, due later and in flight; none when
// the queue has no groups.
function groupsCard(groups) {
  if (!groups || !groups.length) return null;
  const rows = groups.map(g => el('tr', { 'data-group': g.group },
    el('td', { class: g.group ? '' : 'muted' }, g.group || '(none)'),
    el('td', {}, String(g.due)), el('td', {}, String(g.later)), el('td', {}, String(g.inflight))));
  return el('div', { class: 'card', id: 'groups-card' }, el('h2', {}, 'Tenant groups'),
    el('table', { class: 'settings' },
      el('thead', {}, el('tr', {}, el('th', {}, 'group'), el('th', {}, 'due'), el('th', {}, 'later'), el('th', {}, 'in flight'))),
      el('tbody', {}, ...rows)),
    el('p', { class: 'muted' }, 'In flight is counted per group only with a group limit (group_inflight_max).'));
}

// ---- Overview -------------------------------------------------------------
async function overview() {
  const main = document.getElementById('main');
  document.getElementById('crumb').textContent = 'queues';
  let data;
  try { data = await api('GET', '/api/queues'); } catch (e) { status(e.message, true); return schedule(overview, 3000); }
  status('updated ' + new Date().toLocaleTimeString());
  const rows = data.queues.map(q => el('tr', { class: 'queue-row', 'data-queue': q.name },
    el('td', {}, el('a', { class: 'id', href: '#/q/' + hexOf(q, 'name') }, q.name),
      q.partitioned ? el('span', { class: 'tag' }, 'partitioned') : null),
    ...STATES.map(s => el('td', { class: 'num c-' + s }, String(q[s]))),
    el('td', { class: 'num' }, q.next_due_ms < 0 ? '-' : q.next_due_ms === 0 ? 'now' : 'in ' + dur(q.next_due_ms))));
  const canvas = el('canvas', { id: 'overview-chart' });
  clear(main).append(
    el('div', { class: 'card' }, el('h2', {}, 'Jobs per queue'), legend(STATES), canvas),
    el('div', { class: 'card' },
      el('h2', {}, 'Queues (' + data.queues.length + ')' + (data.complete ? '' : ' — partial list')),
      data.queues.length ? el('table', { id: 'queues' },
        el('thead', {}, el('tr', {}, el('th', {}, 'queue'), ...STATES.map(s => el('th', { class: 'num' }, s)), el('th', { class: 'num' }, 'next due'))),
        el('tbody', {}, ...rows)) : el('p', { class: 'muted' }, 'No queue in namespace ' + session.namespace + ' yet.')));
  const top = data.queues.slice().sort((a, b) => (b.scheduled + b.due + b.inflight + b.dead) - (a.scheduled + a.due + a.inflight + a.dead)).slice(0, 24);
  barChart(canvas, top.map(q => q.name), STATES.map(s => ({ name: s, color: COLORS[s], values: top.map(q => q[s]) })));
  schedule(overview, 2000);
}

// ---- One queue ------------------------------------------------------------
async function queuePage(hex) {
  const main = document.getElementById('main');
  const q = { name: null, name_hex: hex };
  const path = '/api/queues/~x' + hex;
  let info, jobs;
  try {
    info = await api('GET', path);
    jobs = await api('GET', path + '/jobs?state=' + view.state + '&offset=' + view.offset + '&count=' + view.count);
  } catch (e) { status(e.message, true); return schedule(() => queuePage(hex), 3000); }
  q.name = info.name;
  status('updated ' + new Date().toLocaleTimeString());
  document.getElementById('crumb').textContent = '› ' + info.name;
  const ro = session.read_only;
  const tiles = el('div', { class: 'tiles' }, ...STATES.map(s =>
    el('div', { class: 'tile ' + s, id: 'tile-' + s }, el('div', { class: 'v' }, String(info.stats[s])), el('div', { class: 'k' }, s))),
    el('div', { class: 'tile' }, el('div', { class: 'v' }, info.stats.next_due_ms < 0 ? '-' : info.stats.next_due_ms === 0 ? 'now' : dur(info.stats.next_due_ms)), el('div', { class: 'k' }, 'next due')));
  const hist = el('canvas', { id: 'histogram' });
  const lines = el('canvas', { id: 'samples' });
  const r = info.rates;
  const ratesText = r.window_ms ? 'over the last ' + dur(r.window_ms) + ': ' +
    STATES.map(s => s + ' ' + (r[s + '_per_min'] >= 0 ? '+' : '') + r[s + '_per_min'] + '/min').join(', ') +
    '; died ' + r.died_per_min + '/min' : 'no rates yet: samples are taken every 5 s while the queue is watched';

  const counters = countersCard(info);
  const tabs = el('div', { class: 'tabs' }, ...['scheduled', 'inflight', 'dead'].map(s =>
    el('button', { class: s === view.state ? 'on' : '', 'data-state': s, onclick: () => { view.state = s; view.offset = 0; queuePage(hex); } }, s)));
  const actions = el('div', { class: 'row' });
  const requeueAll = () => act('Requeue up to 1000 dead jobs of ' + info.name + '?', path + '/dead/requeue-all', hex, 'requeue');
  const purgeAll = () => act('Delete up to 1000 dead jobs of ' + info.name + ' for good?', path + '/dead/purge', hex, 'purge');
  if (view.state === 'dead' && !ro) {
    actions.append(
      el('button', { id: 'requeue-all', onclick: requeueAll }, 'Requeue all'),
      el('button', { id: 'purge-all', class: 'danger', onclick: purgeAll }, 'Purge all'));
  }
  // what the last requeue/purge-all did; a call moves at most 1000 jobs,
  // so while dead jobs are left the operator is told and may go again
  const n = view.notice;
  const notice = n && view.state === 'dead' ? el('div', { class: 'notice' + (n.more ? ' more' : ''), id: 'bulk-notice' },
    el('span', {}, n.text),
    n.more && !ro ? el('button', { id: 'bulk-again', class: n.kind === 'purge' ? 'danger' : '', onclick: n.kind === 'purge' ? purgeAll : requeueAll },
      n.kind === 'purge' ? 'Purge the next 1000' : 'Requeue the next 1000') : null,
    el('button', { class: 'link', onclick: () => { view.notice = null; queuePage(hex); } }, 'dismiss')) : null;
  const head = el('tr', {}, el('th', {}, 'id'), el('th', {}, view.state === 'inflight' ? 'lease ends' : view.state === 'dead' ? 'died' : 'due'),
    el('th', { class: 'num' }, 'attempt'), el('th', { class: 'num' }, 'priority'), el('th', {}, 'group'), el('th', {}, 'payload'),
    view.state === 'dead' ? el('th', {}, 'last error') : null, el('th', {}, ''));
  const body = el('tbody', {}, ...jobs.jobs.map(j => {
    const jpath = path + '/jobs/' + seg(j, 'id');
    const jhash = jobHash(hex, hexOf(j, 'id'));
    const btns = el('td', {});
    if (!ro && view.state === 'scheduled')
      btns.append(el('button', { class: 'promote', title: 'make it due now, keeping payload, attempts and options', onclick: () => act('Run job ' + j.id + ' now?', jpath + '/promote', hex) }, 'run now'), ' ');
    if (!ro && view.state === 'scheduled')
      btns.append(el('button', { class: 'danger', onclick: () => act('Cancel job ' + j.id + '?', jpath + '/cancel', hex) }, 'cancel'));
    if (!ro && view.state === 'dead') {
      btns.append(el('button', { class: 'requeue', onclick: () => act('Requeue dead job ' + j.id + '?', path + '/dead/' + seg(j, 'id') + '/requeue', hex) }, 'requeue'), ' ',
        el('button', { class: 'danger', onclick: () => act('Delete dead job ' + j.id + ' for good?', path + '/dead/' + seg(j, 'id') + '/purge', hex) }, 'purge'));
    }
    const t = view.state === 'inflight' && j.lease_deadline_ms ? j.lease_deadline_ms : j.due_ms;
    return el('tr', { class: 'job-row', 'data-id': j.id },
      el('td', {}, el('a', { class: 'id', href: jhash }, j.id)),
      el('td', { title: iso(t) }, rel(t, jobs.now_ms)),
      el('td', { class: 'num' }, String(j.attempt)),
      el('td', { class: 'num prio' }, j.priority ? String(j.priority) : ''),
      el('td', { class: 'group' }, j.group || ''),
      el('td', { class: 'payload' }, payloadText(j.payload), j.truncated ? el('span', { class: 'muted' }, ' … (' + j.size + ' bytes)') : null),
      view.state === 'dead' ? el('td', { class: 'payload last-error' }, j.last_error ? payloadText(j.last_error) : '') : null,
      btns);
  }));
  const pager = el('div', { class: 'row' },
    el('button', { disabled: view.offset === 0 ? '' : null, onclick: () => { view.offset = Math.max(0, view.offset - view.count); queuePage(hex); } }, '‹ newer'),
    el('span', { class: 'muted' }, jobs.jobs.length ? (view.offset + 1) + '–' + (view.offset + jobs.jobs.length) + ' of ' + jobs.total : 'no ' + view.state + ' jobs'),
    el('button', { disabled: jobs.more ? null : '', onclick: () => { view.offset += view.count; queuePage(hex); } }, 'older ›'));
  jobBox(hex, true);
  clear(main).append(
    el('div', { class: 'card' }, el('h2', { id: 'queue-name' }, info.name), tiles),
    el('div', { class: 'card' }, el('h2', {}, 'When scheduled jobs fall due' + (info.histogram.complete ? '' : ' (first ' + info.histogram.jobs + ' jobs)')), hist,
      el('p', { class: 'muted', id: 'histogram-total' }, info.histogram.jobs + ' pending jobs')),
    counters.card,
    el('div', { class: 'card' }, el('h2', {}, 'Counts over time'), legend(STATES), lines, el('p', { class: 'muted', id: 'rates' }, ratesText)),
    settingsCard(info.settings),
    ...[groupsCard(info.groups)].filter(Boolean),
    el('div', { class: 'card' }, el('h2', {}, 'Jobs'), tabs, actions, notice, el('table', { id: 'jobs' }, el('thead', {}, head), body), pager));
  barChart(hist, info.histogram.buckets.map(b => b.label), [{ name: 'jobs', color: COLORS.scheduled, values: info.histogram.buckets.map(b => b.jobs) }]);
  lineChart(lines, info.samples, STATES.map((s, i) => ({ name: s, color: COLORS[s], index: i + 1 })));
  counters.draw();
  schedule(() => queuePage(hex), 3000);
}

async function act(question, path, hex, kind) {
  if (!window.confirm(question)) return;
  try {
    const r = await api('POST', path);
    const done = Object.entries(r).filter(([k]) => k !== 'more' && k !== 'dead_left').map(([k, v]) => k + ' ' + v).join(', ');
    status(done);
    if (kind) {
      const left = r.dead_left !== undefined ? r.dead_left + ' dead jobs left' : 'more dead jobs left';
      view.notice = { kind, more: !!r.more,
        text: done + (r.more ? '; ' + left + ' (one call moves at most 1000): go again' : '; no dead jobs left') + '.' };
    }
  } catch (e) { status(e.message, true); }
  queuePage(hex);
}

// ---- Open a job by id: a box shown on queue and job pages ----------------
// It lives outside #main (which every refresh rebuilds), so what is typed
// into it survives the refreshes.
function jobBox(qhex, show) {
  const f = document.getElementById('job-open');
  f.hidden = !show;
  f.dataset.queue = qhex || '';
}
function openJob(ev) {
  ev.preventDefault();
  const f = document.getElementById('job-open'), v = document.getElementById('job-id-input').value;
  if (!v || !f.dataset.queue) return;
  location.hash = jobHash(f.dataset.queue, textHex(v));
}

// ---- One job: its own page, from dq_get ------------------------------------
async function jobPage(qhex, idhex) {
  const main = document.getElementById('main');
  const qpath = '/api/queues/~x' + qhex;
  jobBox(qhex, true);
  let r;
  try { r = await api('GET', qpath + '/jobs/~x' + idhex); } catch (e) {
    if (e.status === 404) {
      status('updated ' + new Date().toLocaleTimeString());
      clear(main).append(el('div', { class: 'card', id: 'job-missing' },
        el('h2', {}, 'No such job'),
        el('p', {}, 'No pending, in-flight or dead job has this id (it may have been acked, canceled or purged).'),
        el('p', {}, el('a', { href: '#/q/' + qhex }, '‹ back to the queue'))));
      return schedule(() => jobPage(qhex, idhex), 3000);
    }
    status(e.message, true); return schedule(() => jobPage(qhex, idhex), 3000);
  }
  status('updated ' + new Date().toLocaleTimeString());
  const j = r.job, now = r.now_ms;
  document.getElementById('crumb').textContent = '› ' + r.queue + ' › job ' + j.id;
  const when = (t) => t ? iso(t) + ' (' + rel(t, now) + ')' : '-';
  const row = (key, label, value, cls) => el('tr', { 'data-field': key }, el('th', {}, label), el('td', { class: cls || '' }, value));
  const timeLabel = j.state === 'dead' ? 'died' : j.state === 'inflight' ? 'due again (lease ends)' : 'due';
  clear(main).append(el('div', { class: 'card', id: 'job-page' },
    el('p', {}, el('a', { id: 'job-back', href: '#/q/' + qhex }, '‹ ' + r.queue)),
    el('h2', {}, 'Job ', el('span', { class: 'id', id: 'job-id' }, j.id)),
    el('table', { class: 'fields' }, el('tbody', {},
      row('state', 'state', j.state, 'state-' + j.state),
      row('due', timeLabel, when(j.due_ms)),
      row('attempt', 'attempts', String(j.attempt)),
      row('lease', 'lease deadline', j.lease_deadline_ms ? when(j.lease_deadline_ms) + (j.lease_deadline_ms < now ? ', ran out' : '') : '-'),
      row('repeat', 'repeats', j.repeat === null ? 'no' : j.repeat),
      row('group', 'group', j.group === null ? 'none' : j.group, j.group === null ? 'muted' : ''),
      row('priority', 'priority', String(j.priority || 0)),
      j.followup_ms ? row('followup', 'follow-up queued', 'runs after this delivery is acked, due ' + when(j.followup_ms) + ' at the earliest', 'followup') : null,
      row('last-error', 'last error', j.last_error ? payloadText(j.last_error) : 'none', 'payload'),
      j.last_error ? row('failed', 'failed at', when(j.failed_ms)) : null,
      row('size', 'payload', j.size + ' bytes' + (j.payload.hex !== undefined ? ', shown in hex (not printable UTF-8)' : '') + (j.truncated ? ', truncated' : '')))),
    el('pre', { class: 'full', id: 'job-payload' }, payloadText(j.payload))));
  schedule(() => jobPage(qhex, idhex), 3000);
}

// ---- Routing --------------------------------------------------------------
function schedule(fn, ms) { if (timer) clearTimeout(timer); timer = setTimeout(fn, ms); }
function route() {
  if (timer) { clearTimeout(timer); timer = null; }
  const m = /^#\/q\/([0-9a-f]+)$/.exec(location.hash);
  const mj = /^#\/q\/([0-9a-f]+)\/j\/([0-9a-f]+)$/.exec(location.hash);
  if (mj) {
    jobPage(mj[1], mj[2]);
  } else if (m) {
    if (view.name !== m[1]) view = { name: m[1], state: 'scheduled', offset: 0, count: 50, notice: null };
    queuePage(m[1]);
  } else {
    jobBox(null, false);
    overview();
  }
}

async function start() {
  try {
    session = await api('GET', '/api/session');
  } catch (e) { if (document.getElementById('login').hidden) status(e.message, true); return; }
  document.getElementById('foot').textContent = 'namespace ' + session.namespace + ' · libdelayq ' + session.version +
    (session.read_only ? ' · read-only' : '') + (session.auth === 'token' ? ' · logged in' : '');
  window.addEventListener('hashchange', route);
  document.getElementById('job-open').addEventListener('submit', openJob);
  route();
}
document.addEventListener('DOMContentLoaded', start);
