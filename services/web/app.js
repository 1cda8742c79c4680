// The recoverd dashboard: plain JavaScript, no framework and no remote
// origin (the daemon's Content-Security-Policy forbids both).
//
// Data comes from the daemon's own JSON API (/api/v1, protobuf JSON: int64
// fields arrive as strings) and live updates from its server-sent events
// (/api/v1/watch). The watch is read with fetch() rather than EventSource
// because EventSource cannot send the Authorization header a token needs.
//
// Every text from the daemon goes into the page with textContent, never as
// HTML: job ids, names and messages are client input.
'use strict';

(function () {
  const TOKEN_KEY = 'recoverd.token';
  const MAX_INCIDENTS = 50;
  const POLL_MS = 15000;

  const state = {
    token: sessionStorage.getItem(TOKEN_KEY) || '',
    job: '',
    jobs: [],
    watch: null,
    retryMs: 1000,
    refreshTimer: 0,
    incidentsTimer: 0,
    needToken: false,
    events: 0,
  };

  // -- helpers --------------------------------------------------------------

  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, ...children) {
    const x = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') x.className = v;
      else if (k === 'text') x.textContent = v;
      else x.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children) {
      if (c === undefined || c === null || c === false) continue;
      x.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return x;
  }

  // int64 fields are strings in protobuf JSON; absent fields are defaults.
  const num = (x) => (x === undefined || x === null || x === '' ? 0 : Number(x));

  function fmtDuration(ms) {
    ms = num(ms);
    if (ms < 1000) return Math.round(ms) + ' ms';
    const s = ms / 1000;
    if (s < 60) return s.toFixed(s < 10 ? 2 : 1) + ' s';
    const m = Math.floor(s / 60);
    if (m < 60) return m + 'm ' + String(Math.floor(s % 60)).padStart(2, '0') + 's';
    const h = Math.floor(m / 60);
    return h + 'h ' + String(m % 60).padStart(2, '0') + 'm';
  }

  function fmtTime(ms) {
    ms = num(ms);
    if (!ms) return '—';
    return new Date(ms).toISOString().replace('T', ' ').slice(0, 19) + 'Z';
  }

  function fmtAgo(ms) {
    ms = num(ms);
    if (!ms) return '—';
    const d = Date.now() - ms;
    return d < 0 ? fmtTime(ms) : fmtDuration(d) + ' ago';
  }

  // A CSS class fragment from a daemon value (only [a-z0-9-]).
  const slug = (x) => String(x || '').toLowerCase().replace(/[^a-z0-9]+/g, '-');

  // Green for an outcome that kept the job training, red for one that did
  // not; the daemon's outcome texts are open-ended, so by their words.
  function outcomeClass(outcome) {
    const o = String(outcome || '').toLowerCase();
    if (/success|finish|succeed/.test(o)) return 'badge-good';
    if (/kill|fail|fallback|exit|abort|timeout|deleted/.test(o)) return 'badge-bad';
    return 'badge-outcome';
  }

  function badge(text, kind) {
    return el('span', { class: 'badge ' + (kind || 'badge-' + slug(text)), text: text || '—' });
  }

  function showError(id, message) {
    const p = $(id);
    p.textContent = message || '';
    p.hidden = !message;
  }

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  function headers(extra) {
    const h = Object.assign({ Accept: 'application/json' }, extra || {});
    if (state.token) h.Authorization = 'Bearer ' + state.token;
    return h;
  }

  // GETs an API path; resolves with its JSON, rejects with an ApiError.
  async function api(path) {
    let res;
    try {
      res = await fetch(path, { headers: headers(), cache: 'no-store' });
    } catch (e) {
      throw new ApiError(0, 'recoverd is not reachable');
    }
    let body = null;
    try {
      body = await res.json();
    } catch (e) {
      body = null;
    }
    if (!res.ok) {
      const msg = body && body.error && body.error.message
        ? body.error.message : res.status + ' ' + res.statusText;
      if (res.status === 401) askToken(msg);
      throw new ApiError(res.status, msg);
    }
    return body || {};
  }

  // -- access ---------------------------------------------------------------

  // The fragment: #job=ID opens a job, #token=T signs in (then the token is
  // taken out of the address bar so it is not bookmarked or shared).
  function readFragment() {
    const params = new URLSearchParams(location.hash.slice(1));
    if (params.has('token')) {
      state.token = params.get('token');
      sessionStorage.setItem(TOKEN_KEY, state.token);
      params.delete('token');
      const rest = params.toString();
      history.replaceState(null, '', rest ? '#' + rest : location.pathname + location.search);
    }
    state.job = params.get('job') || '';
  }

  function askToken(why) {
    if (state.needToken) return;
    state.needToken = true;
    stopWatch();
    $('login').hidden = false;
    $('login-why').textContent = state.token
      ? 'The token was refused: ' + why
      : 'This daemon checks access: give a bearer token of a viewer, operator or platform identity.';
    setLive('signed-out', 'not signed in');
    $('token').focus();
  }

  function onLogin(ev) {
    ev.preventDefault();
    state.token = $('token').value.trim();
    $('token').value = '';
    sessionStorage.setItem(TOKEN_KEY, state.token);
    state.needToken = false;
    $('login').hidden = true;
    refreshAll();
    startWatch();
  }

  // -- jobs -----------------------------------------------------------------

  function flowText(f) {
    if (!f) return '—';
    return f.kind + ' · ' + f.state + ' · ' + fmtDuration(f.durationMs);
  }

  function jobRow(j) {
    const selected = j.jobId === state.job;
    const link = el('a', { href: '#job=' + encodeURIComponent(j.jobId), text: j.jobId });
    const who = el('td', { class: 'job-id' }, link);
    if (j.name && j.name !== j.jobId) who.append(el('div', { class: 'muted small', text: j.name }));
    const last = j.lastIncident;
    const outcome = last
      ? el('span', {}, badge(last.outcome || '—', outcomeClass(last.outcome)),
        ' ', el('span', { class: 'muted small', text: fmtDuration(last.durationMs) }))
      : '—';
    const flow = j.activeFlow
      ? el('span', { class: 'running' }, flowText(j.activeFlow)) : '—';
    return el('tr', {
      'data-job': j.jobId,
      'data-state': j.recoveryState || '',
      'data-health': j.healthState || '',
      class: selected ? 'selected' : '',
      'aria-selected': selected ? 'true' : 'false',
    },
    who,
    el('td', { text: j.namespace || '—' }),
    el('td', {}, badge(j.recoveryState || 'INIT', j.recoveryState === 'INIT' || !j.recoveryState ? 'badge-idle' : 'badge-busy')),
    el('td', {}, badge(j.healthState || '—')),
    el('td', {}, flow),
    el('td', {}, outcome),
    el('td', { class: 'num', text: num(j.flows) }),
    el('td', { class: 'small', title: fmtTime(j.updatedAtMs), text: fmtAgo(j.updatedAtMs) }));
  }

  function renderJobs() {
    const body = $('jobs').tBodies[0];
    body.replaceChildren(...state.jobs.map(jobRow));
    $('jobs-count').textContent = state.jobs.length ? '(' + state.jobs.length + ')' : '';
    $('jobs-empty').hidden = state.jobs.length > 0;
  }

  async function loadJobs() {
    try {
      const x = await api('/api/v1/jobs');
      state.jobs = x.jobs || [];
      showError('jobs-error', '');
      renderJobs();
    } catch (e) {
      showError('jobs-error', 'Cannot list jobs: ' + e.message);
    }
  }

  // -- incidents ------------------------------------------------------------

  function phaseBar(inc) {
    const phases = inc.phases || [];
    const lastSince = phases.length ? num(phases[phases.length - 1].sinceStartMs) : 0;
    const total = Math.max(num(inc.durationMs), lastSince, 1);
    const label = phases.map((p) => p.name + ' ' + fmtDuration(p.durationMs)).join(', ');
    const bar = el('div', { class: 'bar', role: 'img', 'aria-label': 'phases: ' + (label || 'none') });
    for (const p of phases) {
      const d = num(p.durationMs);
      const seg = el('div', {
        class: 'phase phase-' + slug(p.name),
        'data-phase': p.name,
        'data-duration-ms': d,
        title: p.name + ': ' + fmtDuration(d) + ' (at +' + fmtDuration(p.sinceStartMs) + ', event ' + p.seq + ')',
      }, el('span', { class: 'phase-name', text: p.name }), el('span', { class: 'phase-ms', text: fmtDuration(d) }));
      seg.style.width = (100 * d / total).toFixed(3) + '%';
      bar.append(seg);
    }
    if (inc.active && total > lastSince) {
      const rest = el('div', { class: 'phase-rest', title: 'running' });
      rest.style.width = (100 * (total - lastSince) / total).toFixed(3) + '%';
      bar.append(rest);
    }
    return bar;
  }

  function attributionText(a) {
    if (!a || !a.source) return '';
    let s = a.source;
    if (a.node) s += ' on ' + a.node;
    if (a.device) s += ' device ' + a.device;
    const extra = [];
    if (a.codes && a.codes.length) extra.push('codes ' + a.codes.join(', '));
    if (a.level) extra.push('level ' + a.level);
    return extra.length ? s + ' (' + extra.join('; ') + ')' : s;
  }

  function incidentItem(inc) {
    const facts = el('dl', { class: 'facts' });
    const fact = (name, value) => {
      if (value === '' || value === undefined || value === null) return;
      facts.append(el('div', {}, el('dt', { text: name }), el('dd', { text: value })));
    };
    fact('started', fmtTime(inc.startedMs));
    fact('duration', fmtDuration(inc.durationMs));
    fact('strategy', (inc.strategies || []).join(' → ') || inc.strategy || '');
    fact('fault ranks', (inc.faultRanks || []).join(', '));
    if (inc.timeLostMs !== undefined) {
      const by = Object.entries(inc.lostByPhase || {})
        .map(([k, v]) => k + ' ' + fmtDuration(v)).join(', ');
      fact('time lost', fmtDuration(inc.timeLostMs) + (by ? ' (' + by + ')' : ''));
    }
    fact('cause', attributionText(inc.attribution));
    fact('events', inc.firstSeq + '–' + inc.lastSeq + ', ' + num(inc.steps) + ' steps');
    const head = el('div', { class: 'incident-head' },
      badge(inc.kind, 'badge-kind'), ' ',
      inc.active ? badge('running · ' + inc.state, 'badge-busy')
        : badge(inc.outcome || '—', outcomeClass(inc.outcome)));
    const legend = el('ol', { class: 'legend' }, ...(inc.phases || []).map((p) =>
      el('li', { class: 'phase-label phase-' + slug(p.name) },
        el('span', { class: 'swatch', 'aria-hidden': 'true' }),
        p.name + ' ', el('strong', { text: fmtDuration(p.durationMs) }),
        el('span', { class: 'muted', text: ' at +' + fmtDuration(p.sinceStartMs) }))));
    return el('li', {
      class: 'incident' + (inc.active ? ' active' : ''),
      'data-uuid': inc.uuid || '',
      'data-kind': inc.kind || '',
      'data-outcome': inc.outcome || '',
    }, head, phaseBar(inc), legend, facts);
  }

  async function loadIncidents() {
    const job = state.job;
    $('job').hidden = !job;
    if (!job) return;
    $('job-title').textContent = 'Incidents of ' + job;
    try {
      const x = await api('/api/v1/jobs/' + encodeURIComponent(job) + '/incidents');
      if (job !== state.job) return;
      const all = x.incidents || [];
      // Newest first: the last incident is what an operator looks for.
      const shown = all.slice(-MAX_INCIDENTS).reverse();
      $('incidents').replaceChildren(...shown.map(incidentItem));
      $('incidents-empty').hidden = all.length > 0;
      $('job-summary').textContent = all.length > shown.length
        ? 'the last ' + shown.length + ' of ' + all.length + ' incidents, newest first'
        : all.length + (all.length === 1 ? ' incident' : ' incidents') + ', newest first';
      showError('incidents-error', '');
    } catch (e) {
      if (job !== state.job) return;
      $('incidents').replaceChildren();
      $('job-summary').textContent = '';
      showError('incidents-error', 'Cannot list incidents: ' + e.message);
    }
  }

  // -- fleet panels (their endpoints may be absent on older daemons) --------

  function unavailable(body, e) {
    const text = e.status === 404 || e.status === 501
      ? 'not available on this daemon'
      : 'cannot load: ' + e.message;
    body.replaceChildren(el('p', { class: 'muted unavailable', text }));
  }

  function tile(name, value, key) {
    return el('div', { class: 'tile', 'data-stat': key },
      el('div', { class: 'tile-value', text: value }), el('div', { class: 'tile-name', text: name }));
  }

  // Fills a fleet panel with what `render` makes of `path`'s answer.
  async function loadPanel(id, path, render) {
    const body = $(id);
    let x;
    try {
      x = await api(path);
    } catch (e) {
      return unavailable(body, e);
    }
    body.replaceChildren(...render(x));
  }

  function renderStats(x) {
    const f = x.fleet || {};
    const ettr = f.ettr === undefined ? '—' : (100 * Number(f.ettr)).toFixed(2) + ' %';
    const parts = [el('div', { class: 'tiles' },
      tile('goodput (ETTR)', ettr, 'ettr'),
      tile('incidents', num(f.incidents), 'incidents'),
      tile('MTTR', fmtDuration(f.mttrMs), 'mttr'),
      tile('time lost', fmtDuration(f.timeLostMs), 'time-lost'))];
    const causes = Object.entries(f.byCause || {}).sort((a, b) => num(b[1]) - num(a[1]));
    if (causes.length) {
      parts.push(el('p', { class: 'causes' }, 'by cause: ',
        ...causes.map(([k, v]) => el('span', { class: 'badge badge-cause', 'data-cause': k, text: k + ' ' + num(v) }))));
    }
    const jobs = (x.jobs || []).slice().sort((a, b) => num(b.timeLostMs) - num(a.timeLostMs));
    if (jobs.length) {
      parts.push(el('table', { class: 'compact' },
        el('thead', {}, el('tr', {}, ...['Job', 'Incidents', 'MTTR', 'ETTR', 'Time lost'].map((t) => el('th', { scope: 'col', text: t })))),
        el('tbody', {}, ...jobs.slice(0, 20).map((j) => el('tr', { 'data-job': j.jobId },
          el('td', { text: j.jobId }), el('td', { class: 'num', text: num(j.incidents) }),
          el('td', { class: 'num', text: fmtDuration(j.mttrMs) }),
          el('td', { class: 'num', text: j.ettr === undefined ? '—' : (100 * Number(j.ettr)).toFixed(2) + ' %' }),
          el('td', { class: 'num', text: fmtDuration(j.timeLostMs) }))))));
    }
    return parts;
  }

  function renderNodes(x) {
    const threshold = Number(x.threshold || 0);
    const nodes = (x.nodes || []).slice().sort((a, b) =>
      (b.quarantined === true) - (a.quarantined === true) || Number(b.score || 0) - Number(a.score || 0));
    const parts = [el('p', { class: 'muted small', text:
      'quarantine at score ' + (threshold ? threshold.toFixed(2) : '—')
      + (x.halfLifeMs ? '; faults count half after ' + fmtDuration(x.halfLifeMs) : '') })];
    if (!nodes.length) {
      parts.push(el('p', { class: 'muted', text: 'No node has a fault on record.' }));
      return parts;
    }
    parts.push(el('table', { class: 'compact' },
      el('thead', {}, el('tr', {}, ...['Node', 'Score', 'Faults', 'Stress failures', 'Last fault', 'Status'].map((t) => el('th', { scope: 'col', text: t })))),
      el('tbody', {}, ...nodes.map((n) => {
        const score = Number(n.score || 0);
        const meter = el('span', { class: 'meter', 'aria-hidden': 'true' }, el('span', {}));
        meter.firstChild.style.width = Math.min(100, threshold ? 100 * score / threshold : 0).toFixed(1) + '%';
        return el('tr', { 'data-node': n.node, class: n.quarantined ? 'quarantined' : '' },
          el('td', { text: n.node }),
          el('td', { class: 'num' }, score.toFixed(2), ' ', meter),
          el('td', { class: 'num', text: num(n.faults) }),
          el('td', { class: 'num', text: num(n.stressFailures) }),
          el('td', { class: 'small', title: fmtTime(n.lastFaultMs) },
            fmtAgo(n.lastFaultMs), n.lastJobId ? el('div', { class: 'muted', text: n.lastJobId }) : null),
          el('td', {}, n.quarantined
            ? badge('quarantined: ' + (n.reason || '?'), 'badge-bad')
            : badge('ok', 'badge-good')));
      }))));
    return parts;
  }

  const loadStats = () => loadPanel('stats-body', '/api/v1/stats', renderStats);
  const loadNodes = () => loadPanel('nodes-body', '/api/v1/nodes', renderNodes);

  // -- refreshing -----------------------------------------------------------

  function refreshAll() {
    loadJobs();
    loadIncidents();
    loadStats();
    loadNodes();
  }

  // Events come in bursts (one recovery is dozens): coalesce them.
  function scheduleRefresh(jobId) {
    if (!state.refreshTimer) {
      state.refreshTimer = setTimeout(() => {
        state.refreshTimer = 0;
        loadJobs();
        loadStats();
        loadNodes();
      }, 300);
    }
    if (state.job && jobId === state.job && !state.incidentsTimer) {
      state.incidentsTimer = setTimeout(() => {
        state.incidentsTimer = 0;
        loadIncidents();
      }, 300);
    }
  }

  // -- the live watch (server-sent events over fetch) -----------------------

  function setLive(kind, text) {
    const p = $('live');
    p.dataset.state = kind;
    p.textContent = text;
  }

  function stopWatch() {
    if (state.watch) state.watch.abort();
    state.watch = null;
  }

  function dispatch(block) {
    let event = 'message';
    const data = [];
    for (const line of block.split('\n')) {
      if (line.startsWith('event:')) event = line.slice(6).trim();
      else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
    }
    if (!data.length) return;
    if (event === 'event') {
      let rec = {};
      try {
        rec = JSON.parse(data.join('\n'));
      } catch (e) {
        rec = {};
      }
      state.events += 1;
      $('live').dataset.events = String(state.events);
      $('live').title = state.events + ' events received';
      scheduleRefresh(rec.jobId || '');
    } else if (event === 'error') {
      setLive('error', 'watch ended by recoverd');
    }
  }

  async function watch(ctl) {
    const res = await fetch('/api/v1/watch', { headers: headers({ Accept: 'text/event-stream' }), cache: 'no-store', signal: ctl.signal });
    if (res.status === 401) {
      askToken('the watch needs a token');
      return false;
    }
    if (!res.ok || !res.body) throw new Error('watch answered ' + res.status);
    setLive('live', 'live');
    state.retryMs = 1000;
    // Whatever happened before the watch was open (at the start too: the
    // first load may have raced the watch's first events).
    refreshAll();
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
      let cut;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        dispatch(buffer.slice(0, cut));
        buffer = buffer.slice(cut + 2);
      }
    }
    return true;
  }

  function startWatch() {
    stopWatch();
    const ctl = new AbortController();
    state.watch = ctl;
    watch(ctl).then((again) => again, () => true).then((again) => {
      if (ctl.signal.aborted || !again || state.watch !== ctl) return;
      state.watch = null;
      const wait = state.retryMs;
      state.retryMs = Math.min(state.retryMs * 2, 15000);
      setLive('reconnecting', 'reconnecting in ' + Math.round(wait / 1000) + ' s');
      setTimeout(() => {
        if (!state.watch && !state.needToken) startWatch();
      }, wait);
    });
  }

  // -- start ----------------------------------------------------------------

  function start() {
    readFragment();
    $('login-form').addEventListener('submit', onLogin);
    // A click anywhere on a job's row opens it, as its link does.
    $('jobs').tBodies[0].addEventListener('click', (ev) => {
      const row = ev.target.closest('tr[data-job]');
      if (!row || ev.target.closest('a')) return;
      location.hash = 'job=' + encodeURIComponent(row.dataset.job);
    });
    window.addEventListener('hashchange', () => {
      readFragment();
      renderJobs();
      loadIncidents();
    });
    refreshAll();
    startWatch();
    // Fleet panels have no events of their own, and "updated … ago" ages.
    setInterval(() => {
      if (!state.needToken) refreshAll();
    }, POLL_MS);
  }

  start();
})();
