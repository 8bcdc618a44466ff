// report.js: draws report.html from the JSON beside it. No library, no build step.
//
// Structure (top to bottom):
//   1. Helpers: el()/svgEl() build nodes, formatters, safeHref(), the data loaders.
//   2. Overview: header, counts, shards, combine report, pictures (timeline, pass rate,
//      cost and turns per task, history trend), the task table with its filters.
//   3. Task view: one task's detail (check, diff, transcript, repeats, files).
//   4. Routing (location.hash = '#' + encodeURIComponent(task id)), keyboard, start-up.
//
// Safety rule: every string from the data (task ids, model, tool and check text, file names) is
// untrusted. It only ever reaches the page through textContent, createTextNode or setAttribute on
// inert attributes (class, title, data-*, aria-*). No markup is ever built from a string (the page's
// Trusted Types policy makes innerHTML and its kin throw anyway). The only href taken from the
// data is a task's artifact path, and only when safeHref() finds it relative.
//
// Hooks for tests (stable). The overview stays in the DOM (hidden) while a task is open: scope
// task queries to #task-view.
//   html[data-ready="1"]            set once the first render is done; html[data-render-ms] its time
//   #fatal                          a visible error (another format, unreadable data, a script error)
//   #overview, #run-header          the overview and its header ([data-field=run-id|exit|cost|...])
//   #jump button[data-target=ID]    buttons that scroll to the overview's sections (#task-jump: the task's)
//   #counts [data-count=K]          K in total passed failed not_judged cached carried flaky,
//                                   status:<status>; the number is in .count-value
//   #shards li[data-shard]          the shards of a merged run
//   #combine                        the combine report ([data-field=applied|conflicts|...])
//   #timeline svg.timeline[data-mode=attempts|packed]   the timeline; #timeline-mode-attempts,
//                                   #timeline-mode-packed switch it (aria-pressed); #timeline-show-all;
//                                   g.lane[data-task-id][data-attempt][data-group] one attempt's bar,
//                                   its rect.ph[data-phase]; g.lane.setup[data-setup] a setup's bar
//   #setups [data-setup=N]          the setup commands (.setup-output)
//   #pass-rate [data-group=K]       the stacked pass-rate bar's segments and their legend
//   #cost-chart, #turns-chart       g.bar-row[data-task-id]; g.bar-rest (the rest summarised)
//   #history-trend                  the trend charts (svg.trend[data-metric=pass-rate|cost])
//   #task-table                     th button[data-sort=id|status|reason|tags|model|turns|cost|duration]
//                                   (th[aria-sort]); tbody tr[data-task-id][data-status][data-group];
//                                   td.col-KEY; .hist-dot[data-group] (.now = this run);
//                                   .flip[data-flip=flipped|newly-failing]
//   #filter-group (values '', g:passed, g:failed, g:not_judged, f:cached, f:carried, f:flaky,
//                 f:repaired, f:changed, f:newly-failing) #filter-status #filter-tag
//                 #filter-provider #filter-text (input event)
//   #table-summary                  "N matching tasks"; #table-more the "show more" button
//   #task-view[data-task-id]        the task's own view ([data-missing] for an unknown id);
//                                   #task-back the link back; h1 .task-id; .task-reason; .task-error
//   .status-badge[data-status]      a status word
//   .check-output[data-phase=before|round-N|after|combine]   check outputs (pre); in any output,
//                                   span.ansi.ansi-fg-N / .ansi-bg-N / .ansi-bold … its terminal colours
//   #history-trend li[data-run] .refused-count[data-refused]   protected writes refused per run;
//                                   .hist-dot[data-refused] the same per task and run
//   .diff-file[data-file] .diff-add .diff-del .diff-hunk .diff-meta .diff-ctx   the diff
//   #diff-cut                       the note that the diff was cut
//   .msg.msg-user .msg.msg-assistant .msg-system .msg-text .reasoning   the transcript
//   .tool-call[data-call-id][data-tool] (.refused, .net-refused) .tool-args .tool-result (.is-error)
//   #network-denied li[data-host], #protected li, #protected-refused li, #kept-ignored li, #repeats tr[data-repeat],
//   #files a (unsafe paths: .unsafe-path, not links), #answer, #attempts
'use strict';

/* ---------- 1. Helpers ---------- */

const SVG_NS = 'http://www.w3.org/2000/svg';
const GROUPS = ['passed', 'failed', 'not_judged'];
const GROUP_LABEL = { passed: 'passed', failed: 'failed', not_judged: 'not judged' };
const PHASES = ['prepare', 'agent', 'check', 'repair'];
// Table rows drawn at a time (then "show more"): laying the table out is the largest cost of a
// 1,000-task page's first paint, and 100 rows take half as long as 200.
const PAGE_ROWS = 100;
const TIMELINE_LANES = 150;

// One element: attrs holds attributes, except `text` (textContent), `cls` (class) and `on*`
// functions (listeners). Children are nodes or strings (made text nodes).
function el(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

function svgEl(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

function build(node, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'text') node.textContent = String(value);
    else if (key === 'cls') node.setAttribute('class', value);
    else if (key.startsWith('on') && typeof value === 'function') node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === 'string' || typeof child === 'number' ? document.createTextNode(String(child)) : child);
  }
  return node;
}

function pad2(n) {
  return String(n).padStart(2, '0');
}

// 850 ms, 4.2 s, 42 s, 1 m 05 s, 1 h 02 m.
function fmtDuration(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 999.5) return Math.round(ms) + ' ms';
  const s = ms / 1000;
  if (s < 9.95) return s.toFixed(1) + ' s';
  const total = Math.round(s);
  if (total < 60) return total + ' s';
  if (total < 3600) return Math.floor(total / 60) + ' m ' + pad2(total % 60) + ' s';
  return Math.floor(total / 3600) + ' h ' + pad2(Math.floor((total % 3600) / 60)) + ' m';
}

function fmtCost(usd) {
  if (usd === null || usd === undefined) return '—';
  if (usd === 0) return '$0';
  if (Math.abs(usd) < 0.0001) return '$' + usd.toPrecision(2);
  return '$' + (Math.abs(usd) >= 1 ? usd.toFixed(2) : usd.toFixed(4));
}

function fmtTokens(n) {
  if (n === null || n === undefined) return '—';
  if (n < 1000) return String(n);
  if (n < 999950) return (n / 1000).toFixed(n < 9995 ? 2 : 1).replace(/\.?0+$/, '') + 'k';
  return (n / 1e6).toFixed(2).replace(/\.?0+$/, '') + 'M';
}

function fmtPct(part, whole) {
  if (!whole) return '0%';
  const p = (100 * part) / whole;
  return (p === 100 || p === 0 || p >= 10 ? Math.round(p) : p.toFixed(1)) + '%';
}

function fmtTime(rfc3339) {
  const d = new Date(rfc3339);
  if (isNaN(d.getTime())) return String(rfc3339);
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC').replace(/Z$/, ' UTC');
}

// An artifact path usable as an href: relative, no scheme (no ':' before the first '/'),
// not protocol-relative, no backslashes.
function safeHref(path) {
  if (typeof path !== 'string' || path === '') return null;
  const slash = path.indexOf('/');
  const head = slash < 0 ? path : path.slice(0, slash);
  if (head.includes(':') || path.startsWith('/') || path.includes('\\')) return null;
  if (/[\u0000-\u001f\u007f]/.test(path)) return null;
  return path.split('/').map(encodeURIComponent).join('/');
}

function taskHref(id) {
  return '#' + encodeURIComponent(id);
}

// The colour of a status word where no group is given (a badge, a count by status): an error
// may be the agent's (its row's group says), a cancel or a skip never is.
function statusGroup(status) {
  if (status === 'passed') return 'passed';
  if (['error', 'not_configured', 'cancelled', 'skipped'].includes(status)) return 'not_judged';
  return 'failed';
}

function readJson(id) {
  const node = document.getElementById(id);
  if (!node) return null;
  return JSON.parse(node.textContent);
}

const detailCache = new Map();

function loadDetail(n) {
  if (!detailCache.has(n)) detailCache.set(n, readJson('detail-' + n));
  return detailCache.get(n);
}

function showFatal(message) {
  let box = document.getElementById('fatal');
  if (!box) {
    box = el('div', { id: 'fatal', role: 'alert' });
    document.body.prepend(box);
  }
  box.append(el('p', { text: message }));
}

function section(id, title, ...children) {
  return el('section', { id, cls: 'card', 'aria-labelledby': id + '-h' }, el('h2', { id: id + '-h', text: title }), ...children);
}

function badge(status) {
  return el('span', { cls: 'status-badge g-' + statusGroup(status), 'data-status': status, text: status.replace(/_/g, ' ') });
}

function groupBadge(status, group) {
  return el('span', { cls: 'status-badge g-' + group, 'data-status': status, text: status.replace(/_/g, ' ') });
}

function tag(text, cls) {
  return el('span', { cls: 'tag' + (cls ? ' ' + cls : ''), text });
}

function pre(text, attrs) {
  return el('pre', attrs || {}, ...ansiNodes(text === null || text === undefined ? '' : text));
}

/* ----- terminal colours ----- */

// Commands and models write ANSI escape sequences (a compiler's or a test runner's colours). The
// page shows SGR colours and styles as classes on spans (the 16 colours, bold, dim, italic,
// underline, inverse; a 256-colour or RGB colour as the nearest of the 16: the policy forbids
// inline styles) and drops every other sequence, so no escape byte or `[33m` is left in the text.
// The text still only ever becomes text nodes.
const ANSI_SEQ = /\x1b(?:\[([0-?]*)[ -\/]*(?:[@-~]|$)|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[PX^_][^\x1b]*(?:\x1b\\)?|[ -\/]*[0-~]?)|\x9b[0-?]*[ -\/]*[@-~]/g;
const ANSI_RGB = [[0, 0, 0], [205, 0, 0], [0, 205, 0], [205, 205, 0], [0, 0, 238], [205, 0, 205], [0, 205, 205], [229, 229, 229],
  [127, 127, 127], [255, 0, 0], [0, 255, 0], [255, 255, 0], [92, 92, 255], [255, 0, 255], [0, 255, 255], [255, 255, 255]];

function ansiNodes(value) {
  const text = String(value);
  if (!text.includes('\x1b') && !text.includes('\x9b')) return [text];
  const nodes = [];
  const sgr = { fg: null, bg: null, bold: false, dim: false, italic: false, underline: false, inverse: false };
  let at = 0;
  ANSI_SEQ.lastIndex = 0;
  for (let m = ANSI_SEQ.exec(text); m; m = ANSI_SEQ.exec(text)) {
    if (m.index > at) nodes.push(ansiSpan(text.slice(at, m.index), sgr));
    if (m[0].endsWith('m') && m[1] !== undefined && /^[\d;:]*$/.test(m[1])) applySgr(sgr, m[1]);
    at = m.index + m[0].length;
  }
  if (at < text.length) nodes.push(ansiSpan(text.slice(at), sgr));
  return nodes;
}

function ansiSpan(text, sgr) {
  const cls = [];
  let fg = sgr.fg, bg = sgr.bg;
  if (sgr.inverse) [fg, bg] = [bg === null ? 'inverse' : bg, fg === null ? 'inverse' : fg];
  if (fg !== null) cls.push('ansi-fg-' + fg);
  if (bg !== null) cls.push('ansi-bg-' + bg);
  for (const k of ['bold', 'dim', 'italic', 'underline']) if (sgr[k]) cls.push('ansi-' + k);
  return cls.length ? el('span', { cls: 'ansi ' + cls.join(' ') }, text) : text;
}

function applySgr(sgr, params) {
  const codes = params === '' ? [0] : params.split(/[;:]/).map((p) => (p === '' ? 0 : Number(p)));
  for (let i = 0; i < codes.length; i++) {
    const c = codes[i];
    if (c === 0) Object.assign(sgr, { fg: null, bg: null, bold: false, dim: false, italic: false, underline: false, inverse: false });
    else if (c === 1) sgr.bold = true;
    else if (c === 2) sgr.dim = true;
    else if (c === 3) sgr.italic = true;
    else if (c === 4) sgr.underline = true;
    else if (c === 7) sgr.inverse = true;
    else if (c === 22) sgr.bold = sgr.dim = false;
    else if (c === 23) sgr.italic = false;
    else if (c === 24) sgr.underline = false;
    else if (c === 27) sgr.inverse = false;
    else if (c >= 30 && c <= 37) sgr.fg = c - 30;
    else if (c >= 90 && c <= 97) sgr.fg = c - 90 + 8;
    else if (c === 39) sgr.fg = null;
    else if (c >= 40 && c <= 47) sgr.bg = c - 40;
    else if (c >= 100 && c <= 107) sgr.bg = c - 100 + 8;
    else if (c === 49) sgr.bg = null;
    else if (c === 38 || c === 48) {
      const [colour, used] = extendedColour(codes, i + 1);
      if (colour !== null) sgr[c === 38 ? 'fg' : 'bg'] = colour;
      i += used;
    }
  }
}

// `5;N` (256 colours) or `2;R;G;B` from codes[i]: the nearest of the 16, and how many codes it took.
function extendedColour(codes, i) {
  if (codes[i] === 5 && i + 1 < codes.length) {
    const n = codes[i + 1];
    if (n < 16) return [n, 2];
    if (n < 232) {
      const level = (v) => (v === 0 ? 0 : 55 + v * 40);
      return [nearestColour(level(Math.floor((n - 16) / 36)), level(Math.floor((n - 16) / 6) % 6), level((n - 16) % 6)), 2];
    }
    const grey = 8 + (n - 232) * 10;
    return [nearestColour(grey, grey, grey), 2];
  }
  if (codes[i] === 2 && i + 3 < codes.length) return [nearestColour(codes[i + 1], codes[i + 2], codes[i + 3]), 4];
  return [null, codes.length - i];
}

function nearestColour(r, g, b) {
  let best = 0, bestD = Infinity;
  ANSI_RGB.forEach(([R, G, B], n) => {
    const d = (R - r) ** 2 + (G - g) ** 2 + (B - b) ** 2;
    if (d < bestD) { best = n; bestD = d; }
  });
  return best;
}

function fileLink(path) {
  const href = safeHref(path);
  return href ? el('a', { href, text: path }) : el('span', { cls: 'unsafe-path', title: 'not a relative path: not linked', text: path });
}

function kv(pairs) {
  const dl = el('dl', { cls: 'kv' });
  for (const [key, value, field] of pairs) {
    if (value === null || value === undefined || value === '') continue;
    dl.append(el('dt', { text: key }), el('dd', { 'data-field': field || null }, value));
  }
  return dl;
}

/* ---------- 2. Overview ---------- */

const state = { report: null, rows: [], byId: new Map(), overview: null, taskView: null, scrollY: 0 };

function renderOverview(report) {
  const root = el('main', { id: 'overview' });
  root.append(runHeader(report), countsCard(report));
  if (report.run.shards.length) root.append(shardsCard(report.run.shards));
  if (report.combine) root.append(combineCard(report.combine));
  root.append(timelineCard(report), passRateCard(report));
  if (report.setups.length) root.append(setupsCard(report.setups));
  root.append(el('div', { cls: 'two-col' }, barChartCard('cost-chart', 'Cost per task', report.tasks, (t) => t.cost_usd, fmtCost),
    barChartCard('turns-chart', 'Turns per task', report.tasks, (t) => t.turns, String)));
  if (report.history.length) root.append(historyCard(report));
  root.append(tableCard(report));
  root.querySelector('#run-header').after(jumpNav(root, 'jump', 'sections of the overview'));
  return root;
}

// Buttons that scroll to the sections of the overview or a task's view (the hash is the task
// router's, so no #links).
function jumpNav(root, id, label) {
  const nav = el('nav', { id, cls: 'jump', 'aria-label': label });
  for (const card of root.querySelectorAll('section.card[id]')) {
    const title = card.querySelector('h2');
    if (!title) continue;
    nav.append(el('button', { type: 'button', 'data-target': card.id, text: title.textContent, onclick: () => {
      card.scrollIntoView({ block: 'start' });
      const focusable = card.querySelector('button, a, select, input');
      if (focusable) focusable.focus({ preventScroll: true });
    } }));
  }
  return nav;
}

function runHeader(report) {
  const run = report.run;
  const exit = run.finished_at === null
    ? el('span', { cls: 'warn', text: 'interrupted: no run.finished' })
    : el('span', { cls: run.exit_code === 0 ? 'ok' : 'bad', text: String(run.exit_code) });
  const title = report.kind === 'merged' ? 'Merged run' : report.kind === 'combined' ? 'Combined run' : 'Run';
  const head = el('header', { id: 'run-header', cls: 'card' },
    el('h1', {}, title + ' ', el('code', { 'data-field': 'run-id', text: run.run_id })),
    kv([
      ['started', fmtTime(run.started_at), 'started'],
      ['duration', fmtDuration(run.duration_ms), 'duration'],
      ['jobs', String(run.jobs), 'jobs'],
      ['version', run.version, 'version'],
      ['manifests', run.manifests.join(', '), 'manifests'],
      ['exit code', exit, 'exit'],
      ['cost', fmtCost(run.total_cost_usd) + (run.total_cost_usd === null ? ' (a price is unknown)' : ''), 'cost'],
      ['tokens', tokenLine(run.usage), 'tokens'],
      ['generated by', report.generated_by, 'generated-by'],
    ]));
  if (run.warnings.length) {
    head.append(el('ul', { cls: 'warnings', 'aria-label': 'warnings' }, ...run.warnings.map((w) => el('li', { cls: 'warn', text: w }))));
  }
  return head;
}

function tokenLine(usage) {
  return fmtTokens(usage.input_tokens) + ' in (' + fmtTokens(usage.cached_input_tokens) + ' cached), ' +
    fmtTokens(usage.output_tokens) + ' out (' + fmtTokens(usage.reasoning_output_tokens) + ' reasoning), ' +
    usage.requests + ' requests';
}

// Each count is a button that shows those tasks in the table.
function countsCard(report) {
  const c = report.counts;
  const item = (key, label, value, cls, filter) => el('li', { 'data-count': key, cls: 'count ' + (cls || '') },
    el('button', { type: 'button', title: 'show these tasks in the table', onclick: () => filterTo(filter) },
      el('span', { cls: 'count-value', text: String(value) }), el('span', { cls: 'count-label', text: label })));
  const main = el('ul', { cls: 'counts' },
    item('total', 'tasks', c.total, '', {}),
    ...GROUPS.map((g) => item(g, GROUP_LABEL[g], c[g], 'g-' + g, { group: 'g:' + g })),
    item('cached', 'cached', c.cached, '', { group: 'f:cached' }),
    item('carried', 'carried', c.carried, '', { group: 'f:carried' }),
    item('flaky', 'flaky', c.flaky, '', { group: 'f:flaky' }));
  const byStatus = el('ul', { cls: 'counts small', 'aria-label': 'by status' },
    ...c.by_status.map(([status, n]) => item('status:' + status, status.replace(/_/g, ' '), n, 'g-' + statusGroup(status), { status })));
  return el('section', { id: 'counts', cls: 'card', 'aria-label': 'counts' }, main, byStatus);
}

// Sets the table's filters to `f` (the others cleared) and scrolls to the table.
function filterTo(f) {
  const t = state.table;
  const set = (id, value) => { t.filters.querySelector('#' + id).value = value || ''; };
  set('filter-group', f.group);
  set('filter-status', f.status);
  set('filter-tag', '');
  set('filter-provider', '');
  set('filter-text', '');
  applyTable(t);
  document.getElementById('tasks').scrollIntoView({ block: 'start' });
}

function shardsCard(shards) {
  return section('shards', 'Shards', el('ul', {}, ...shards.map((s, i) => el('li', { 'data-shard': String(i) },
    el('code', { text: s.run_id }), ' ', s.shard ? 'shard ' + s.shard + ', ' : '', s.task_count + ' tasks, from ', el('code', { text: s.dir })))));
}

/* ----- combine report ----- */

function combineCard(c) {
  const card = section('combine', 'Combine report');
  card.append(kv([
    ['run', c.run_id, 'run-id'],
    ['base commit', c.base_commit, 'base-commit'],
    ['exit code', c.exit_code === undefined ? null : String(c.exit_code), 'exit'],
    ['patch', c.patch_path ? fileLink(c.patch_path) : null, 'patch'],
    ['branch', c.branch ? c.branch.name + ' at ' + c.branch.commit : null, 'branch'],
  ]));
  if (Array.isArray(c.applied)) card.append(listBlock('Applied', c.applied, 'applied'));
  if (Array.isArray(c.conflicts) && c.conflicts.length) card.append(combineConflicts(c.conflicts));
  if (Array.isArray(c.agreed) && c.agreed.length) {
    card.append(listBlock('Same change made by more than one task', c.agreed.map((a) =>
      a.task_id + ' (' + (a.files || []).join(', ') + ') with ' + (a.with || []).join(', ')), 'agreed'));
  }
  if (c.overlaps && Object.keys(c.overlaps).length) {
    card.append(listBlock('Files changed by more than one passed task', Object.entries(c.overlaps).map(([f, ts]) => f + ': ' + ts.join(', ')), 'overlaps'));
  }
  if (Array.isArray(c.files_changed)) card.append(listBlock('Files the union changes', c.files_changed, 'files-changed'));
  if (c.check) card.append(el('h3', { text: 'Check on the union' }), checkBlock(c.check, 'combine'));
  card.append(el('details', {}, el('summary', { text: 'combine.json' }), pre(JSON.stringify(c, null, 2))));
  return card;
}

function combineConflicts(conflicts) {
  return el('div', { 'data-field': 'conflicts' }, el('h3', { text: 'Conflicts (patches skipped)' }),
    el('ul', {}, ...conflicts.map((k) => el('li', { cls: 'bad' },
      el('a', { href: taskHref(k.task_id), text: k.task_id }), ': ' + (k.files || []).join(', ') +
      ' (with ' + (k.with || []).join(', ') + ')', pre(k.message || '')))));
}

function listBlock(title, items, field) {
  return el('div', { 'data-field': field }, el('h3', { text: title + ' (' + items.length + ')' }),
    items.length ? el('ul', { cls: 'plain inline' }, ...items.map((x) => el('li', {}, String(x)))) : el('p', { cls: 'muted', text: 'none' }));
}

/* ----- setup ----- */

function setupsCard(setups) {
  return section('setups', 'Setup', ...setups.map((s, i) => el('div', { cls: 'setup' + (s.error ? ' failed' : ''), 'data-setup': String(i) },
    kv([
      ['command', el('code', { text: s.command }), 'command'],
      ['repository', s.repo, 'repo'],
      ['duration', s.duration_ms === null ? 'did not finish' : fmtDuration(s.duration_ms), 'duration'],
      ['exit code', s.exit_code === null ? '—' : String(s.exit_code), 'exit'],
      ['error', s.error ? el('span', { cls: 'bad', text: s.error }) : null, 'error'],
      ['outputs', s.outputs.length ? s.outputs.join(', ') : null, 'outputs'],
    ]),
    s.output_tail ? el('details', { open: !!s.error }, el('summary', { text: 'output' }), pre(s.output_tail, { cls: 'setup-output' })) : null)));
}

/* ----- timeline ----- */

function timelineLanes(report) {
  const lanes = [];
  for (const row of report.tasks) {
    const last = row.timeline.length - 1;
    row.timeline.forEach((bar, i) => lanes.push({ row, bar, group: bar.group || (i === last ? row.group : statusGroup(bar.status)) }));
  }
  lanes.sort((a, b) => a.bar.start_ms - b.bar.start_ms || a.row.index - b.row.index || a.bar.attempt - b.bar.attempt);
  return lanes;
}

function timelineSpan(report, lanes) {
  let end = report.run.duration_ms || 0;
  for (const l of lanes) end = Math.max(end, l.bar.start_ms + l.bar.duration_ms);
  for (const s of report.setups) end = Math.max(end, s.start_ms + (s.duration_ms || 0));
  return Math.max(end, 1);
}

// Two layouts: one lane per attempt (the first TIMELINE_LANES, then "show all"), or attempts
// packed into as few lanes as ran at once (about --jobs lanes: the whole run on one screen).
// Runs of more than TIMELINE_LANES attempts open packed.
function timelineCard(report) {
  const lanes = timelineLanes(report);
  const card = section('timeline', 'Timeline');
  card.append(el('p', { cls: 'muted', text: 'Each bar is one task attempt, at --jobs ' + report.run.jobs +
    '. Hover a bar for its figures; click it to open the task.' }), timelineLegend());
  if (!lanes.length && !report.setups.length) {
    card.append(el('p', { cls: 'muted', text: 'No attempt ran.' }));
    return card;
  }
  const holder = el('div', { cls: 'timeline-holder' });
  const note = el('p', { cls: 'muted timeline-note' });
  const modes = el('div', { cls: 'timeline-mode', role: 'group', 'aria-label': 'timeline layout' });
  const draw = (mode, limit) => {
    holder.replaceChildren(timelineSvg(report, lanes, mode, limit));
    for (const b of modes.children) b.setAttribute('aria-pressed', String(b.getAttribute('data-mode') === mode));
    note.replaceChildren();
    if (mode === 'attempts' && lanes.length > limit) {
      note.append('The first ' + limit + ' of ' + lanes.length + ' lanes. ',
        el('button', { id: 'timeline-show-all', type: 'button', text: 'show all ' + lanes.length + ' lanes', onclick: () => draw('attempts', Infinity) }));
    }
  };
  modes.append(el('button', { id: 'timeline-mode-attempts', type: 'button', 'data-mode': 'attempts', text: 'one lane per attempt', onclick: () => draw('attempts', TIMELINE_LANES) }),
    el('button', { id: 'timeline-mode-packed', type: 'button', 'data-mode': 'packed', text: 'packed by concurrency', onclick: () => draw('packed', Infinity) }));
  card.append(modes, holder, note);
  draw(lanes.length > TIMELINE_LANES ? 'packed' : 'attempts', TIMELINE_LANES);
  return card;
}

// Attempts (sorted by start) into the fewest lanes where none overlap.
function packLanes(lanes) {
  const ends = [], rows = [];
  for (const lane of lanes) {
    let k = ends.findIndex((end) => end <= lane.bar.start_ms);
    if (k < 0) {
      k = ends.length;
      rows.push({ label: '', lanes: [] });
      ends.push(0);
    }
    ends[k] = lane.bar.start_ms + lane.bar.duration_ms;
    rows[k].lanes.push(lane);
  }
  rows.forEach((r, i) => { r.label = 'lane ' + (i + 1) + ' (' + r.lanes.length + ')'; });
  return rows;
}

function timelineLegend() {
  const swatch = (cls, phase) => svgEl('svg', { cls: 'swatch', viewBox: '0 0 20 10', 'aria-hidden': 'true' },
    svgEl('rect', { cls: 'bar ' + cls, x: 0, y: 0, width: 20, height: 10 }),
    phase ? svgEl('rect', { cls: 'ph ph-' + phase, x: 0, y: 0, width: 20, height: 10 }) : null);
  const item = (cls, phase, label) => el('li', {}, swatch(cls, phase), ' ' + label);
  return el('ul', { cls: 'legend', 'aria-label': 'legend' },
    ...GROUPS.map((g) => item('g-' + g, null, GROUP_LABEL[g])),
    item('g-setup', null, 'setup'),
    ...PHASES.map((p) => item('g-neutral', p, p)));
}

function niceStep(span) {
  const steps = [100, 200, 500, 1e3, 2e3, 5e3, 1e4, 15e3, 3e4, 6e4, 12e4, 3e5, 6e5, 9e5, 18e5, 36e5, 72e5, 144e5];
  return steps.find((s) => s >= span / 8) || Math.ceil(span / 8 / 36e5) * 36e5;
}

function fmtTick(ms) {
  if (ms === 0) return '0';
  if (ms >= 36e5 && ms % 36e5 === 0) return ms / 36e5 + ' h';
  if (ms >= 6e4 && ms % 6e4 === 0) return ms / 6e4 + ' m';
  return fmtDuration(ms);
}

function laneHeight(n) {
  if (n <= 30) return 16;
  if (n <= 80) return 11;
  if (n <= 200) return 6;
  return 4;
}

function timelineSvg(report, lanes, mode, limit) {
  const rows = mode === 'packed' ? packLanes(lanes)
    : lanes.slice(0, limit).map((l) => ({ label: clip(l.row.id, 26) + (l.bar.attempt > 1 ? ' #' + l.bar.attempt : ''), lanes: [l] }));
  const W = 1000, labelW = 170, axisH = 20, setupH = 14;
  const h = laneHeight(rows.length), gap = h >= 11 ? 3 : 1;
  const span = timelineSpan(report, lanes);
  const x = (ms) => labelW + (ms / span) * (W - labelW - 8);
  const top = axisH + report.setups.length * (setupH + 3);
  const H = top + rows.length * (h + gap) + 4;
  const svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, cls: 'timeline', 'data-mode': mode, role: 'img', 'aria-label': 'timeline of the run' });
  svg.append(hatchDefs(), timelineAxis(span, x, H, axisH));
  report.setups.forEach((s, i) => svg.append(setupLane(s, i, x, axisH + i * (setupH + 3), setupH, span)));
  rows.forEach((r, i) => {
    const y = top + i * (h + gap);
    for (const lane of r.lanes) svg.append(attemptLane(lane, x, y, h));
    if (h >= 11) svg.append(svgEl('text', { cls: 'lane-label', x: labelW - 6, y: y + h - 3.5, 'text-anchor': 'end' }, r.label));
  });
  svg.addEventListener('click', (e) => {
    const g = e.target.closest('g.lane[data-task-id]');
    if (g) location.hash = taskHref(g.getAttribute('data-task-id'));
  });
  return svg;
}

function hatchDefs() {
  return svgEl('defs', {}, svgEl('pattern', { id: 'hatch', width: 4, height: 4, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' },
    svgEl('rect', { cls: 'hatch-bg', x: 0, y: 0, width: 4, height: 4 }),
    svgEl('line', { cls: 'hatch-line', x1: 0, y1: 0, x2: 0, y2: 4 })));
}

function timelineAxis(span, x, H, axisH) {
  const g = svgEl('g', { cls: 'axis' });
  const step = niceStep(span);
  for (let t = 0; t <= span; t += step) {
    g.append(svgEl('line', { x1: x(t), x2: x(t), y1: axisH - 4, y2: H, cls: 'grid' }),
      svgEl('text', { x: x(t), y: axisH - 7, 'text-anchor': t === 0 ? 'start' : 'middle' }, fmtTick(t)));
  }
  return g;
}

function setupLane(s, i, x, y, h, span) {
  const end = s.duration_ms === null ? span : s.start_ms + s.duration_ms;
  const g = svgEl('g', { cls: 'lane setup', 'data-setup': String(i) });
  g.append(svgEl('title', {}, 'setup: ' + s.command + '\n' + (s.duration_ms === null ? 'did not finish' : fmtDuration(s.duration_ms)) +
    (s.exit_code === null ? '' : ', exit ' + s.exit_code) + (s.error ? '\n' + s.error : '')));
  g.append(svgEl('rect', { cls: 'bar g-setup' + (s.error ? ' g-failed' : '') + (s.duration_ms === null ? ' unfinished' : ''),
    x: x(s.start_ms), y, width: Math.max(1.5, x(end) - x(s.start_ms)), height: h }));
  g.append(svgEl('text', { cls: 'lane-label', x: 164, y: y + h - 3, 'text-anchor': 'end' }, 'setup ' + clip(s.command, 20)));
  return g;
}

function clip(text, n) {
  const chars = Array.from(String(text));
  return chars.length > n ? chars.slice(0, n - 1).join('') + '…' : chars.join('');
}

function attemptLane(lane, x, y, h) {
  const { row, bar, group } = lane;
  const g = svgEl('g', { cls: 'lane', 'data-task-id': row.id, 'data-attempt': String(bar.attempt), 'data-group': group });
  g.append(svgEl('title', {}, laneTitle(lane)));
  const x0 = x(bar.start_ms);
  g.append(svgEl('rect', { cls: 'bar g-' + group, x: x0, y, width: Math.max(1.5, x(bar.start_ms + bar.duration_ms) - x0), height: h }));
  for (const ph of bar.phases) {
    if (!PHASES.includes(ph.kind)) continue;
    const px = x(ph.start_ms);
    g.append(svgEl('rect', { cls: 'ph ph-' + ph.kind, 'data-phase': ph.kind, x: px, y, width: Math.max(0.5, x(ph.start_ms + ph.duration_ms) - px), height: h }));
  }
  return g;
}

function laneTitle({ row, bar }) {
  const phases = bar.phases.map((p) => p.kind + ' ' + fmtDuration(p.duration_ms)).join(', ');
  return row.id + ' — attempt ' + bar.attempt + ': ' + bar.status + ', ' + fmtDuration(bar.duration_ms) +
    '\nstarted at +' + fmtDuration(bar.start_ms) + (phases ? '\n' + phases : '');
}

/* ----- pass rate, cost and turns, history ----- */

function passRateCard(report) {
  const c = report.counts;
  const card = section('pass-rate', 'Pass rate');
  const W = 1000, H = 30;
  const svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, cls: 'stacked', role: 'img', 'aria-label': 'pass rate' });
  let at = 0;
  for (const g of GROUPS) {
    const n = c[g];
    if (!n) continue;
    const w = (n / Math.max(1, c.total)) * W;
    svg.append(svgEl('g', { 'data-group': g }, svgEl('title', {}, GROUP_LABEL[g] + ': ' + n + ' (' + fmtPct(n, c.total) + ')'),
      svgEl('rect', { cls: 'bar g-' + g, x: at, y: 0, width: w, height: H }),
      w > 70 ? svgEl('text', { cls: 'on-bar', x: at + 8, y: H / 2 + 5 }, GROUP_LABEL[g] + ' ' + fmtPct(n, c.total)) : null));
    at += w;
  }
  const judged = c.passed + c.failed;
  card.append(svg, el('p', { cls: 'rate-line' },
    ...GROUPS.map((g) => el('span', { cls: 'rate-item', 'data-group': g }, el('span', { cls: 'dot g-' + g }), ' ' + GROUP_LABEL[g] + ' ' + c[g] + ' (' + fmtPct(c[g], c.total) + ')')),
    el('span', { cls: 'muted', text: ' · of the judged: ' + fmtPct(c.passed, judged) + ' passed' })));
  return card;
}

function barChartCard(id, title, tasks, value, fmt) {
  const card = section(id, title);
  const items = tasks.filter((t) => typeof value(t) === 'number' && value(t) > 0).sort((a, b) => value(b) - value(a) || a.index - b.index);
  const unknown = tasks.filter((t) => value(t) === null || value(t) === undefined).length;
  if (!items.length) {
    card.append(el('p', { cls: 'muted', text: 'Nothing to draw.' }));
    return card;
  }
  const top = items.slice(0, 30), rest = items.slice(30);
  const W = 600, rowH = 16, labelW = 200, valueW = 70, max = value(top[0]);
  const H = (top.length + (rest.length ? 1 : 0)) * rowH + 2;
  const svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, cls: 'chart', role: 'img', 'aria-label': title });
  top.forEach((t, i) => {
    const w = Math.max(1, (value(t) / max) * (W - labelW - valueW));
    svg.append(svgEl('g', { cls: 'bar-row lane', 'data-task-id': t.id }, svgEl('title', {}, t.id + ': ' + fmt(value(t))),
      svgEl('text', { cls: 'lane-label', x: labelW - 6, y: i * rowH + 12, 'text-anchor': 'end' }, clip(t.id, 30)),
      svgEl('rect', { cls: 'bar g-' + t.group, x: labelW, y: i * rowH + 2, width: w, height: rowH - 4 }),
      svgEl('text', { cls: 'value', x: labelW + w + 4, y: i * rowH + 12 }, fmt(value(t)))));
  });
  if (rest.length) {
    const sum = rest.reduce((s, t) => s + value(t), 0);
    svg.append(svgEl('g', { cls: 'bar-rest' }, svgEl('text', { cls: 'muted-text', x: labelW, y: top.length * rowH + 12 },
      '+ ' + rest.length + ' more tasks: ' + fmt(sum) + ' in all')));
  }
  svg.addEventListener('click', (e) => {
    const g = e.target.closest('g[data-task-id]');
    if (g) location.hash = taskHref(g.getAttribute('data-task-id'));
  });
  card.append(svg);
  if (unknown) card.append(el('p', { cls: 'muted', text: unknown + ' task(s) with no figure (price unknown) left out.' }));
  return card;
}

function historyCard(report) {
  const points = report.history.map((h) => ({ label: h.run_id, when: h.started_at, passed: h.passed, total: h.total, cost: h.total_cost_usd,
    refused: h.protected_refused }));
  points.push({ label: report.run.run_id + ' (this run)', when: report.run.started_at, passed: report.counts.passed, total: report.counts.total,
    cost: report.run.total_cost_usd, refused: report.tasks.reduce((n, t) => n + t.protected_refused, 0), now: true });
  const rate = points.map((p) => ({ ...p, value: p.total ? p.passed / p.total : 0 }));
  const cost = points.map((p) => ({ ...p, value: p.cost }));
  const card = section('history-trend', 'Across runs');
  card.append(el('div', { cls: 'two-col' },
    el('figure', {}, lineChart(rate, 'pass-rate', 1, (v) => fmtPct(v, 1)), el('figcaption', { text: 'Pass rate, oldest first' })),
    el('figure', {}, lineChart(cost, 'cost', null, fmtCost), el('figcaption', { text: 'Cost, oldest first' }))));
  card.append(el('ol', { cls: 'plain small' }, ...points.map((p) => el('li', { 'data-run': p.now ? 'now' : p.label },
    el('code', { text: p.label }), ' ' + fmtTime(p.when) + ': ' + p.passed + '/' + p.total + ' passed, ' + fmtCost(p.cost),
    el('span', { cls: 'refused-count' + (p.refused ? ' warn' : ''), 'data-refused': String(p.refused || 0),
      text: ', ' + (p.refused || 0) + ' protected write' + (p.refused === 1 ? '' : 's') + ' refused' })))));
  return card;
}

function lineChart(points, metric, fixedMax, fmt) {
  const W = 480, H = 170, L = 56, R = 12, T = 12, B = 24;
  const known = points.filter((p) => typeof p.value === 'number');
  const max = fixedMax || Math.max(...known.map((p) => p.value), 0) || 1;
  const x = (i) => L + (points.length === 1 ? 0 : (i / (points.length - 1)) * (W - L - R));
  const y = (v) => T + (1 - v / max) * (H - T - B);
  const svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, cls: 'trend', 'data-metric': metric, role: 'img', 'aria-label': metric + ' across runs' });
  for (const f of [0, 0.5, 1]) {
    svg.append(svgEl('line', { cls: 'grid', x1: L, x2: W - R, y1: y(f * max), y2: y(f * max) }),
      svgEl('text', { cls: 'axis-text', x: L - 6, y: y(f * max) + 4, 'text-anchor': 'end' }, fmt(f * max)));
  }
  const path = known.map((p) => x(points.indexOf(p)).toFixed(1) + ',' + y(p.value).toFixed(1)).join(' ');
  if (known.length > 1) svg.append(svgEl('polyline', { cls: 'trend-line', points: path }));
  points.forEach((p, i) => {
    svg.append(svgEl('text', { cls: 'axis-text', x: x(i), y: H - 6, 'text-anchor': 'middle' }, p.now ? 'now' : String(i - points.length + 1)));
    if (typeof p.value !== 'number') return;
    svg.append(svgEl('circle', { cls: 'trend-dot' + (p.now ? ' now' : ''), cx: x(i), cy: y(p.value), r: 4 },
      svgEl('title', {}, p.label + ': ' + fmt(p.value))));
  });
  return svg;
}

/* ----- the task table ----- */

const COLUMNS = [
  ['id', 'task', (r) => r.id, 1],
  ['status', 'status', (r) => GROUPS.indexOf(r.group) + ':' + r.status, 1],
  ['reason', 'reason', (r) => r.reason || '', 1],
  ['tags', 'tags', (r) => r.tags.join(' '), 1],
  ['model', 'provider/model', (r) => r.provider + '/' + r.model, 1],
  ['turns', 'turns', (r) => r.turns, -1],
  ['cost', 'cost', (r) => (r.cost_usd === null ? -1 : r.cost_usd), -1],
  ['duration', 'duration', (r) => r.duration_ms, -1],
];

function tableCard(report) {
  const hasHistory = report.history.length > 0;
  const t = {
    rows: report.tasks, hasHistory, sort: null, dir: 1, limit: PAGE_ROWS, shown: 0, matching: [], rowEls: new Map(),
    search: new Map(report.tasks.map((r) => [r, [r.id, r.reason || '', r.tags.join(' '), r.model, r.provider, r.status].join('\n').toLowerCase()])),
  };
  state.table = t;
  t.tbody = el('tbody', {});
  t.tbody.addEventListener('click', (e) => {
    const tr = e.target.closest('tr[data-task-id]');
    if (tr && !e.target.closest('a, button')) location.hash = taskHref(tr.getAttribute('data-task-id'));
  });
  t.summary = el('p', { id: 'table-summary', 'aria-live': 'polite' });
  t.more = el('button', { id: 'table-more', type: 'button' });
  t.more.addEventListener('click', () => { t.limit += PAGE_ROWS; drawRows(t, true); });
  t.head = tableHead(t);
  const table = el('table', { id: 'task-table' }, t.head, t.tbody);
  const card = section('tasks', 'Tasks', filterBar(report, t), t.summary, el('div', { cls: 'table-wrap' }, table), t.more);
  applyTable(t);
  return card;
}

function tableHead(t) {
  const cells = COLUMNS.map(([key, label]) => {
    const button = el('button', { type: 'button', 'data-sort': key, text: label });
    button.addEventListener('click', () => sortBy(t, key));
    return el('th', { scope: 'col', cls: 'col-' + key }, button);
  });
  if (t.hasHistory) cells.push(el('th', { scope: 'col', cls: 'col-history', text: 'history' }));
  return el('thead', {}, el('tr', {}, ...cells));
}

function sortBy(t, key) {
  const column = COLUMNS.find((c) => c[0] === key);
  if (t.sort === key) t.dir = -t.dir;
  else { t.sort = key; t.dir = column[3]; }
  for (const th of t.head.querySelectorAll('th')) th.removeAttribute('aria-sort');
  const th = t.head.querySelector('th.col-' + key);
  th.setAttribute('aria-sort', t.dir > 0 ? 'ascending' : 'descending');
  applyTable(t);
}

function filterBar(report, t) {
  const tags = [...new Set(report.tasks.flatMap((r) => r.tags))].sort();
  const providers = [...new Set(report.tasks.map((r) => r.provider))].sort();
  const groupOptions = [['', 'all tasks'], ...GROUPS.map((g) => ['g:' + g, GROUP_LABEL[g]]),
    ['f:cached', 'cached'], ['f:carried', 'carried'], ['f:flaky', 'flaky'], ['f:repaired', 'repaired']];
  if (report.history.length) groupOptions.push(['f:changed', 'changed since the last run'], ['f:newly-failing', 'newly failing']);
  const select = (id, label, options) => {
    const s = el('select', { id }, ...options.map(([v, text]) => el('option', { value: v, text })));
    s.addEventListener('change', () => applyTable(t));
    return el('label', {}, label + ' ', s);
  };
  const text = el('input', { id: 'filter-text', type: 'search', placeholder: 'id, reason, tag, model', 'aria-label': 'search tasks' });
  text.addEventListener('input', () => applyTable(t));
  const bar = el('div', { cls: 'filters', role: 'search' },
    select('filter-group', 'show', groupOptions),
    select('filter-status', 'status', [['', 'any'], ...report.counts.by_status.map(([s, n]) => [s, s.replace(/_/g, ' ') + ' (' + n + ')'])]),
    select('filter-tag', 'tag', [['', 'any'], ...tags.map((x) => [x, x])]),
    select('filter-provider', 'provider', [['', 'any'], ...providers.map((x) => [x, x])]),
    el('label', {}, 'text ', text));
  t.filters = bar;
  return bar;
}

function currentFilters(t) {
  const v = (id) => t.filters.querySelector('#' + id).value;
  return { group: v('filter-group'), status: v('filter-status'), tag: v('filter-tag'), provider: v('filter-provider'), text: v('filter-text').trim().toLowerCase() };
}

function matchesGroup(row, value) {
  if (!value) return true;
  if (value.startsWith('g:')) return row.group === value.slice(2);
  const flip = flipOf(row);
  switch (value) {
    case 'f:cached': return row.cached;
    case 'f:carried': return row.carried_from !== null;
    case 'f:flaky': return row.flaky || row.verdict === 'flaky';
    case 'f:repaired': return row.repairs > 0;
    case 'f:changed': return flip !== null;
    case 'f:newly-failing': return flip === 'newly-failing';
    default: return true;
  }
}

function applyTable(t) {
  const f = currentFilters(t);
  const words = f.text.split(/\s+/).filter(Boolean);
  t.matching = t.rows.filter((r) => matchesGroup(r, f.group) && (!f.status || r.status === f.status) &&
    (!f.tag || r.tags.includes(f.tag)) && (!f.provider || r.provider === f.provider) &&
    words.every((w) => t.search.get(r).includes(w)));
  if (t.sort) {
    const key = COLUMNS.find((c) => c[0] === t.sort)[2];
    t.matching.sort((a, b) => {
      const ka = key(a), kb = key(b);
      const c = typeof ka === 'number' ? ka - kb : ka.localeCompare(kb);
      return c * t.dir || a.index - b.index;
    });
  }
  t.limit = PAGE_ROWS;
  drawRows(t);
}

function rowFor(t, r) {
  if (!t.rowEls.has(r)) t.rowEls.set(r, rowEl(r, t.hasHistory));
  return t.rowEls.get(r);
}

// The first t.limit matching rows (rows already drawn are kept when only the limit grew).
function drawRows(t, grow) {
  const from = grow ? t.shown : 0;
  const shown = Math.min(t.limit, t.matching.length);
  const rows = t.matching.slice(from, shown).map((r) => rowFor(t, r));
  if (grow) t.tbody.append(...rows);
  else if (rows.length) t.tbody.replaceChildren(...rows);
  else t.tbody.replaceChildren(el('tr', { cls: 'empty' }, el('td', { colspan: COLUMNS.length + (t.hasHistory ? 1 : 0), text: 'No task matches.' })));
  t.shown = shown;
  t.summary.textContent = (shown < t.matching.length ? 'Showing ' + shown + ' of ' : '') + t.matching.length +
    ' matching task' + (t.matching.length === 1 ? '' : 's') + ' (' + t.rows.length + ' in all).';
  const left = t.matching.length - shown;
  t.more.hidden = left <= 0;
  t.more.textContent = 'show ' + Math.min(left, PAGE_ROWS) + ' more (' + left + ' left)';
}

function rowEl(r, hasHistory) {
  const tr = el('tr', { 'data-task-id': r.id, 'data-status': r.status, 'data-group': r.group },
    el('td', { cls: 'col-id', title: r.id }, el('a', { href: taskHref(r.id), text: r.id })),
    el('td', { cls: 'col-status' }, groupBadge(r.status, r.group), ' ', ...rowFlags(r)),
    el('td', { cls: 'col-reason', title: r.reason || null, text: r.reason || '' }),
    el('td', { cls: 'col-tags' }, ...r.tags.map((x) => tag(x))),
    el('td', { cls: 'col-model', title: r.provider + '/' + r.model, text: r.provider + '/' + r.model }),
    el('td', { cls: 'col-turns num', text: String(r.turns) }),
    el('td', { cls: 'col-cost num', text: fmtCost(r.cost_usd) }),
    el('td', { cls: 'col-duration num', text: fmtDuration(r.duration_ms) }));
  if (hasHistory) tr.append(el('td', { cls: 'col-history' }, ...historyDots(r)));
  return tr;
}

function rowFlags(r) {
  const flags = [];
  if (r.cached) flags.push(tag('cached', 'flag'));
  if (r.carried_from !== null) flags.push(el('span', { cls: 'tag flag', title: 'carried from ' + r.carried_from, text: 'carried' }));
  if (r.flaky) flags.push(tag('flaky', 'flag warn'));
  if (r.verdict) flags.push(el('span', { cls: 'tag flag', title: 'repeat verdict', text: r.verdict + (r.pass_rate === null ? '' : ' ' + fmtPct(r.pass_rate, 1)) }));
  if (r.repairs) flags.push(tag(r.repairs + ' repair' + (r.repairs > 1 ? 's' : ''), 'flag'));
  if (r.attempts > 1) flags.push(tag(r.attempts + ' attempts', 'flag'));
  if (r.denied_calls) flags.push(tag(r.denied_calls + ' refused', 'flag bad'));
  if (r.network_denied) flags.push(el('span', { cls: 'tag flag bad', title: 'network refused to the agent', text: 'net ' + r.network_denied }));
  if (r.network_denied_check) {
    flags.push(el('span', { cls: 'tag flag', title: 'network refused to the check or the setup, not the agent', text: 'check net ' + r.network_denied_check }));
  }
  if (r.protected_refused) {
    flags.push(el('span', { cls: 'tag flag warn', title: 'writes to protected paths refused', text: r.protected_refused + ' protected refused' }));
  }
  return flags;
}

// null, 'flipped' or 'newly-failing': the last past result's group against tonight's.
function flipOf(r) {
  const last = r.history.length ? r.history[r.history.length - 1] : null;
  if (!last || last.group === r.group) return null;
  return r.group === 'failed' && last.group === 'passed' ? 'newly-failing' : 'flipped';
}

function historyDots(r) {
  const dots = r.history.map((p, i) => p
    ? el('span', { cls: 'hist-dot g-' + p.group, 'data-group': p.group, 'data-refused': String(p.protected_refused || 0),
      title: 'run ' + (i - r.history.length) + ': ' + p.status + (p.cost_usd === null ? '' : ', ' + fmtCost(p.cost_usd)) +
        (p.protected_refused ? ', ' + p.protected_refused + ' protected write(s) refused' : '') })
    : el('span', { cls: 'hist-dot missing', 'data-group': 'none', title: 'run ' + (i - r.history.length) + ': not in that run' }));
  dots.push(el('span', { cls: 'hist-dot now g-' + r.group, 'data-group': r.group, 'data-refused': String(r.protected_refused),
    title: 'this run: ' + r.status + (r.protected_refused ? ', ' + r.protected_refused + ' protected write(s) refused' : '') }));
  const flip = flipOf(r);
  if (flip) dots.push(el('span', { cls: 'flip ' + (flip === 'newly-failing' ? 'bad' : 'warn'), 'data-flip': flip, text: flip === 'newly-failing' ? 'newly failing' : 'flipped' }));
  return dots;
}

/* ---------- 3. Task view ---------- */

function renderTask(row) {
  const d = loadDetail(row.detail) || { id: row.id };
  const view = el('main', { id: 'task-view', 'data-task-id': row.id });
  view.append(el('nav', { cls: 'back' }, el('a', { id: 'task-back', href: '#', text: '← back to overview' }),
    el('span', { cls: 'muted', text: ' (Esc)' })));
  view.append(taskHeader(row, d));
  // What a reviewer reads first: the patch, then the check that graded it.
  if (d.diff || (d.files_changed || []).length) view.append(diffCard(d));
  if (d.check || (d.check_rounds || []).length) view.append(checkCard(d));
  if ((d.protected || []).length || (d.protected_refused || []).length || (d.kept_ignored || []).length) view.append(pathsCard(d));
  if (d.result || d.structured_output) view.append(answerCard(d));
  if ((d.prior_attempts || []).length || (d.retries || []).length || (d.limit_warnings || []).length) view.append(attemptsCard(d));
  if ((d.network_denied || []).length) view.append(networkCard(d.network_denied));
  view.append(transcriptCard(d));
  if ((d.repeats || []).length) view.append(repeatsCard(d.repeats));
  if ((d.files || []).length) view.append(filesCard(d.files));
  view.querySelector('.task-head').after(jumpNav(view, 'task-jump', 'sections of the task'));
  return view;
}

function missingTask(id) {
  return el('main', { id: 'task-view', 'data-task-id': id, 'data-missing': '1' },
    el('nav', { cls: 'back' }, el('a', { id: 'task-back', href: '#', text: '← back to overview' })),
    el('section', { cls: 'card' }, el('h1', { tabindex: '-1', text: 'No task named ' }, el('code', { text: id })),
      el('p', { text: 'This report has no task with that id.' })));
}

function taskHeader(row, d) {
  const card = el('header', { cls: 'card task-head' });
  card.append(el('h1', { tabindex: '-1' }, el('code', { cls: 'task-id', text: row.id }), ' ', groupBadge(row.status, row.group), ' ', ...rowFlags(row)));
  if (row.reason) card.append(el('p', { cls: 'task-reason', title: row.reason, text: row.reason }));
  if (d.error) card.append(el('div', { cls: 'task-error bad' }, el('strong', { text: d.error.kind + ': ' }), pre(d.error.message, { cls: 'inline-pre' })));
  const u = row.usage;
  card.append(kv([
    ['provider/model', row.provider + '/' + row.model, 'model'],
    ['manifest', row.manifest, 'manifest'],
    ['tags', row.tags.length ? el('span', {}, ...row.tags.map((x) => tag(x))) : null, 'tags'],
    ['cost', fmtCost(row.cost_usd), 'cost'],
    ['tokens', tokenLine(u), 'tokens'],
    ['turns', String(row.turns), 'turns'],
    ['duration', fmtDuration(row.duration_ms), 'duration'],
    ['time spent', phaseLine(row), 'phases'],
    ['attempts', String(row.attempts) + (row.flaky ? ' (flaky: passed after a failed attempt)' : ''), 'attempts'],
    ['repairs', row.repairs ? String(row.repairs) : null, 'repairs'],
    ['repeats', row.verdict ? row.verdict + (row.pass_rate === null ? '' : ', ' + fmtPct(row.pass_rate, 1) + ' of repeats passed') : null, 'verdict'],
    ['cached', row.cached ? 'taken from the cache: no agent ran; the figures are those of the run that recorded it' : null, 'cached'],
    ['carried', row.carried_from !== null ? 'carried from run ' + row.carried_from + ': no agent ran in this run' : null, 'carried'],
    ['history', row.history.length ? el('span', {}, ...historyDots(row)) : null, 'history'],
  ]));
  return card;
}

// "prepare 3.0 s · agent 1 m 02 s · check 12 s" over all attempts.
function phaseLine(row) {
  const sums = new Map();
  for (const bar of row.timeline) for (const p of bar.phases) sums.set(p.kind, (sums.get(p.kind) || 0) + p.duration_ms);
  return sums.size ? [...sums].map(([k, ms]) => k + ' ' + fmtDuration(ms)).join(' · ') : null;
}

function answerCard(d) {
  const card = section('answer', 'Final answer');
  if (d.result) card.append(el('div', { cls: 'msg-text answer' }, ...ansiNodes(d.result)));
  if (d.structured_output !== null && d.structured_output !== undefined) {
    card.append(el('h3', { text: 'Structured output' }), pre(JSON.stringify(d.structured_output, null, 2), { cls: 'json' }));
  }
  return card;
}

function attemptsCard(d) {
  const card = section('attempts', 'Attempts and retries');
  if ((d.prior_attempts || []).length) {
    card.append(el('h3', { text: 'Earlier attempts' }), el('ol', {}, ...d.prior_attempts.map((a) => el('li', {},
      badge(a.status), ' ' + fmtDuration(a.duration_ms), a.error ? ' — ' + a.error.kind + ': ' + a.error.message : ''))));
  }
  if ((d.retries || []).length) {
    card.append(el('h3', { text: 'Retries' }), el('ol', {}, ...d.retries.map((r) => el('li', {},
      el('span', { cls: 'tag', text: r.scope }), ' ' + r.reason + ' (waited ' + fmtDuration(r.delay_ms) + ')'))));
  }
  if ((d.limit_warnings || []).length) {
    card.append(el('h3', { text: 'Limit warnings given to the agent' }), el('ul', {}, ...d.limit_warnings.map((w) => el('li', { cls: 'warn', text: w }))));
  }
  return card;
}

/* ----- check ----- */

function exitText(code) {
  return el('span', { cls: 'exit ' + (code === 0 ? 'ok' : 'bad'), text: code === null || code === undefined ? 'no exit code (killed or did not start)' : 'exit ' + code });
}

function checkBlock(check, phase) {
  return el('div', { cls: 'check-run' }, el('p', {}, el('code', { cls: 'check-command', text: check.command || '' }), ' ', exitText(check.exit_code)),
    pre(check.output_tail, { cls: 'check-output', 'data-phase': phase }));
}

function checkCard(d) {
  const card = section('check', 'Check');
  const c = d.check;
  if (c) card.append(el('p', {}, el('code', { cls: 'check-command', text: c.command })));
  if (c && (c.ran_before || (c.before_output_tail !== null && c.before_output_tail !== undefined))) {
    card.append(el('h3', {}, 'Before the agent ', exitText(c.before_exit_code)),
      c.before_output_tail !== null && c.before_output_tail !== undefined
        ? pre(c.before_output_tail, { cls: 'check-output', 'data-phase': 'before' })
        : el('p', { cls: 'muted', text: 'Its output was not recorded.' }));
  }
  (d.check_rounds || []).forEach((r, i) => {
    card.append(el('details', { open: true, cls: 'round' },
      el('summary', {}, 'Round ' + (i + 1) + (i === 0 ? ' (after the agent)' : ' (after repair ' + i + ')') + ': ', exitText(r.exit_code), ' in ' + fmtDuration(r.duration_ms)),
      pre(r.output_tail, { cls: 'check-output', 'data-phase': 'round-' + (i + 1) })));
  });
  if (c) {
    card.append(el('h3', {}, (d.check_rounds || []).length ? 'Last run ' : 'After the agent ', exitText(c.exit_code)),
      pre(c.output_tail, { cls: 'check-output', 'data-phase': 'after' }));
  }
  return card;
}

/* ----- diff ----- */

function diffCard(d) {
  const card = section('diff', 'Diff');
  if ((d.files_changed || []).length) {
    card.append(el('p', { cls: 'muted', text: d.files_changed.length + ' file(s) changed: ' + d.files_changed.join(', ') }));
  }
  if (d.diff_cut) {
    const patch = (d.files || []).find((f) => f.endsWith('.patch'));
    card.append(el('p', { id: 'diff-cut', cls: 'warn' }, 'The diff is cut here at 256 KB; the whole patch: ', patch ? fileLink(patch) : 'in diffs/.'));
  }
  if (d.diff) card.append(diffBlock(d.diff));
  else card.append(el('p', { cls: 'muted', text: 'No diff.' }));
  return card;
}

function diffClass(line, inHunk) {
  if (inHunk) {
    if (line.startsWith('+')) return 'diff-add';
    if (line.startsWith('-')) return 'diff-del';
    if (line.startsWith('\\')) return 'diff-meta';
    return 'diff-ctx';
  }
  return 'diff-meta';
}

function diffFileName(line) {
  const m = /^diff --git (?:"?a\/)?(.*?)"? (?:"?b\/)(.*?)"?$/.exec(line);
  return m ? m[2] : line.slice('diff --git '.length);
}

function diffBlock(text) {
  const wrap = el('div', { cls: 'diff' });
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  let body = null, inHunk = false;
  for (const line of lines) {
    const header = line.startsWith('diff --git ');
    if (header || !body) {
      const name = header ? diffFileName(line) : '(patch)';
      body = el('pre', { cls: 'diff-body' });
      wrap.append(el('section', { cls: 'diff-file', 'data-file': name }, el('h3', { cls: 'diff-file-name' }, el('code', { text: name })), body));
      inHunk = false;
    }
    if (line.startsWith('@@')) inHunk = true;
    const cls = header ? 'diff-meta' : line.startsWith('@@') ? 'diff-hunk' : diffClass(line, inHunk);
    body.append(el('span', { cls: 'dl ' + cls }, line + '\n'));
  }
  return wrap;
}

/* ----- paths, network, repeats, files ----- */

function pathsCard(d) {
  const card = section('paths', 'Protected and kept paths');
  if ((d.protected || []).length) {
    card.append(el('h3', { text: 'Protected paths the agent changed (put back before the check)' }),
      el('ul', { id: 'protected' }, ...d.protected.map((p) => el('li', { cls: 'bad' }, el('code', { text: p })))));
  }
  if ((d.protected_refused || []).length) {
    card.append(el('h3', { text: 'Protected paths a tool was refused to change' }),
      el('ul', { id: 'protected-refused' }, ...d.protected_refused.map((p) => el('li', {}, el('code', { text: p })))));
  }
  if ((d.kept_ignored || []).length) {
    card.append(el('h3', { text: 'Ignored files kept for the check' }),
      el('ul', { id: 'kept-ignored' }, ...d.kept_ignored.map((p) => el('li', {}, el('code', { text: p })))));
  }
  return card;
}

function networkCard(list) {
  const what = (n) => n.lookup ? el('span', { text: 'a name lookup' }) : el('code', { text: n.host + ':' + n.port });
  return section('network', 'Network refused', el('ul', { id: 'network-denied' }, ...list.map((n) => el('li', {
    cls: n.phase === 'agent' ? 'bad' : 'muted', 'data-host': n.host, 'data-phase': n.phase },
    el('strong', { text: 'refused ' }), what(n), ' — ', el('span', { cls: 'tag', text: n.phase }), ' ', el('code', { text: n.command }),
    n.reason ? ' (' + n.reason + ')' : ''))));
}

function repeatsCard(repeats) {
  const head = el('tr', {}, ...['#', 'status', 'reported', 'repairs', 'duration', 'why', 'files'].map((h) => el('th', { scope: 'col', text: h })));
  const rows = repeats.map((r) => el('tr', { 'data-repeat': String(r.repeat), 'data-status': r.status },
    el('td', { text: String(r.repeat) }), el('td', {}, badge(r.status)),
    el('td', { text: r.reported ? 'reported' : '' }), el('td', { cls: 'num', text: String(r.repairs) }),
    el('td', { cls: 'num', text: fmtDuration(r.duration_ms) }),
    el('td', { cls: 'col-reason', text: r.error ? r.error.kind + ': ' + r.error.message : '' }),
    el('td', { cls: 'col-files' }, ...(r.files || []).map(fileLink))));
  return section('repeats-card', 'Repeats', el('div', { cls: 'table-wrap' }, el('table', { id: 'repeats' }, el('thead', {}, head), el('tbody', {}, ...rows))));
}

function filesCard(files) {
  return section('files-card', 'Files', el('ul', { id: 'files' }, ...files.map((f) => el('li', {}, fileLink(f)))));
}

/* ----- transcript ----- */

function blocksOf(message) {
  if (typeof message.content === 'string') return [{ type: 'text', text: message.content }];
  return Array.isArray(message.content) ? message.content : [];
}

function textOf(content) {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((c) => (c && typeof c.text === 'string' ? c.text : JSON.stringify(c))).join('\n');
  return content === undefined || content === null ? '' : JSON.stringify(content, null, 2);
}

function transcriptContext(d) {
  const ctx = { results: new Map(), calls: new Set(), denied: new Map(), net: new Map() };
  for (const m of d.transcript.messages || []) {
    for (const b of blocksOf(m)) {
      if (b && b.type === 'tool_result') ctx.results.set(b.tool_use_id, b);
      if (b && b.type === 'tool_use') ctx.calls.add(b.id);
    }
  }
  for (const x of d.denied || []) ctx.denied.set(x.call_id, x);
  for (const n of d.network_denied || []) {
    if (!ctx.net.has(n.command)) ctx.net.set(n.command, []);
    ctx.net.get(n.command).push(n);
  }
  return ctx;
}

function transcriptCard(d) {
  const card = section('transcript', 'Transcript');
  const t = d.transcript;
  if (!t) {
    card.append(el('p', { cls: 'muted', text: 'No transcript (no agent ran, or it was not kept).' }));
    return card;
  }
  const ctx = transcriptContext(d);
  card.append(el('details', { cls: 'msg msg-system' },
    el('summary', { text: 'System prompt (' + String(t.system || '').split('\n').length + ' lines) · tools: ' + ((t.tools || []).join(', ') || 'none') }),
    el('div', { cls: 'msg-text' }, ...ansiNodes(t.system || ''))));
  for (const m of t.messages || []) {
    const node = messageEl(m, ctx);
    if (node) card.append(node);
  }
  const orphans = (d.denied || []).filter((x) => !ctx.calls.has(x.call_id));
  if (orphans.length) {
    card.append(el('h3', { text: 'Refused calls not in the transcript' }), el('ul', {}, ...orphans.map((x) =>
      el('li', { cls: 'tool-call refused', 'data-call-id': x.call_id, 'data-tool': x.tool }, el('strong', { text: x.tool + ': refused by policy — ' }), x.message))));
  }
  return card;
}

function messageEl(m, ctx) {
  if (!m || typeof m !== 'object') return el('pre', { cls: 'msg-other' }, JSON.stringify(m));
  const role = typeof m.role === 'string' ? m.role : 'unknown';
  const parts = blocksOf(m).map((b) => blockEl(b, ctx)).filter(Boolean);
  if (!parts.length) return null;
  const cls = 'msg msg-' + (role === 'user' || role === 'assistant' ? role : 'other');
  return el('article', { cls, 'data-role': role }, el('div', { cls: 'msg-role', text: role === 'assistant' ? 'model' : role }), ...parts);
}

function blockEl(b, ctx) {
  if (!b || typeof b !== 'object') return el('pre', { cls: 'msg-other' }, JSON.stringify(b));
  switch (b.type) {
    case 'text':
      return collapsible(String(b.text || ''), 'msg-text', 'div', 60, 8000);
    case 'reasoning':
      return el('details', { cls: 'reasoning' },
        el('summary', { text: b.text ? 'reasoning (' + String(b.text).length + ' characters)' : 'reasoning (hidden by the provider)' }),
        el('div', { cls: 'msg-text' }, ...ansiNodes(b.text || '')));
    case 'tool_use':
      return toolCallEl(b, ctx);
    case 'tool_result':
      return ctx.calls.has(b.tool_use_id) ? null : resultEl(b, 'result of an unknown call ' + b.tool_use_id);
    default:
      return el('details', { cls: 'msg-other' }, el('summary', { text: 'block: ' + String(b.type) }), pre(JSON.stringify(b, null, 2)));
  }
}

function toolCallEl(b, ctx) {
  const denied = ctx.denied.get(b.id);
  const command = b.input && typeof b.input.command === 'string' ? b.input.command : null;
  const net = command !== null ? ctx.net.get(command) || [] : [];
  const div = el('div', { cls: 'tool-call' + (denied ? ' refused' : '') + (net.length ? ' net-refused' : ''), 'data-call-id': String(b.id), 'data-tool': String(b.name) });
  div.append(el('div', { cls: 'tool-head' }, el('span', { cls: 'tool-label', text: 'tool call ' }), el('code', { cls: 'tool-name', text: String(b.name) }),
    denied ? el('span', { cls: 'tag flag bad', text: 'refused by policy' }) : null,
    net.length ? el('span', { cls: 'tag flag bad', text: 'network refused' }) : null));
  div.append(argsEl(b.input));
  if (denied) div.append(el('p', { cls: 'refusal bad' }, el('strong', { text: 'Refused: ' }), denied.message));
  for (const n of net) div.append(el('p', { cls: 'refusal bad' }, 'Connection to ' + n.host + ':' + n.port + ' refused' + (n.reason ? ': ' + n.reason : '')));
  const result = ctx.results.get(b.id);
  div.append(result ? resultEl(result, 'result') : el('p', { cls: 'muted', text: 'No result recorded.' }));
  return div;
}

function argsEl(input) {
  const multiline = input && typeof input === 'object' && !Array.isArray(input) &&
    Object.values(input).some((v) => typeof v === 'string' && v.includes('\n'));
  if (!multiline) return collapsible(JSON.stringify(input === undefined ? null : input, null, 2), 'tool-args');
  const box = el('div', { cls: 'tool-args' });
  for (const [key, value] of Object.entries(input)) {
    box.append(el('div', { cls: 'arg-name', text: key }), collapsible(typeof value === 'string' ? value : JSON.stringify(value, null, 2), 'arg-value'));
  }
  return box;
}

function resultEl(b, label) {
  const text = textOf(b.content);
  return el('div', { cls: 'tool-result' + (b.is_error ? ' is-error' : '') },
    el('div', { cls: 'result-label' }, label, b.is_error ? el('span', { cls: 'tag flag bad', text: 'error' }) : null),
    collapsible(text, 'result-text'));
}

// Text in a <pre> (or a `tag` element); when long, its first lines visible and the whole behind
// a <details>.
function collapsible(text, cls, tag = 'pre', maxLines = 16, maxChars = 2400) {
  const lines = text.split('\n');
  if (lines.length <= maxLines && text.length <= maxChars) return el(tag, { cls }, ...ansiNodes(text));
  const head = lines.slice(0, Math.ceil(maxLines / 2)).join('\n').slice(0, maxChars / 2);
  const preview = el(tag, { cls: cls + ' preview', 'aria-hidden': 'true' }, ...ansiNodes(head + '\n…'));
  const full = el('details', { cls: 'long' }, el('summary', { text: 'show all ' + lines.length + ' lines (' + fmtTokens(text.length) + ' characters)' }),
    el(tag, { cls }, ...ansiNodes(text)));
  full.addEventListener('toggle', () => { preview.hidden = full.open; });
  return el('div', { cls: 'collapsible' }, preview, full);
}

/* ---------- 4. Routing and start-up ---------- */

function route() {
  const hash = location.hash.slice(1);
  if (!hash) {
    showOverview();
    return;
  }
  let id = hash;
  try { id = decodeURIComponent(hash); } catch (_) { /* keep it raw */ }
  const row = state.byId.get(id) || state.byId.get(hash);
  showTask(row ? renderTask(row) : missingTask(id), id);
}

function showOverview() {
  if (state.taskView) {
    const id = state.taskView.getAttribute('data-task-id');
    state.taskView.remove();
    state.taskView = null;
    state.overview.hidden = false;
    document.title = state.title;
    window.scrollTo(0, state.scrollY);
    const tr = state.table.rowEls.get(state.byId.get(id));
    if (tr && tr.isConnected) tr.querySelector('a').focus({ preventScroll: true });
  }
}

function showTask(view, id) {
  if (!state.overview.hidden) state.scrollY = window.scrollY;
  if (state.taskView) state.taskView.replaceWith(view);
  else document.body.append(view);
  state.taskView = view;
  state.overview.hidden = true;
  document.title = id + ' — ' + state.title;
  window.scrollTo(0, 0);
  const h1 = view.querySelector('h1');
  if (h1) h1.focus({ preventScroll: true });
}

function onKey(e) {
  if (e.key !== 'Escape' || !state.taskView || e.defaultPrevented) return;
  if (e.target instanceof HTMLElement && e.target.matches('input, select, textarea')) return;
  location.hash = '';
}

function start() {
  const t0 = performance.now();
  let report;
  try {
    report = readJson('report-data');
  } catch (e) {
    showFatal('The report data could not be read: ' + e.message);
    return;
  }
  if (!report || report.format !== 1) {
    showFatal('This page reads report data of format 1; this file holds format ' + (report ? String(report.format) : 'none') +
      '. Open it with the dracode version that wrote it, or run `dracode report` again.');
    return;
  }
  state.report = report;
  for (const row of report.tasks) state.byId.set(row.id, row);
  state.title = document.title;
  state.overview = renderOverview(report);
  document.body.append(state.overview);
  window.addEventListener('hashchange', route);
  document.addEventListener('keydown', onKey);
  route();
  finishTiming(t0, report.tasks.length);
}

function finishTiming(t0, tasks) {
  const ms = performance.now() - t0;
  const root = document.documentElement;
  root.setAttribute('data-render-ms', ms.toFixed(1));
  root.setAttribute('data-ready', '1');
  console.info('report.html: ' + tasks + ' tasks drawn in ' + ms.toFixed(1) + ' ms (' + performance.now().toFixed(1) + ' ms since navigation)');
  requestAnimationFrame(() => setTimeout(() => {
    const paint = performance.getEntriesByType('paint').find((p) => p.name === 'first-contentful-paint');
    if (paint) root.setAttribute('data-fcp-ms', paint.startTime.toFixed(1));
    console.info('report.html: first contentful paint ' + (paint ? paint.startTime.toFixed(1) + ' ms' : 'not reported'));
  }, 0));
}

window.addEventListener('error', (e) => showFatal('This page failed to draw: ' + (e.message || String(e.error))));
window.addEventListener('unhandledrejection', (e) => showFatal('This page failed to draw: ' + String(e.reason)));
try {
  start();
} catch (e) {
  showFatal('This page failed to draw: ' + (e && e.message ? e.message : String(e)));
  console.error(e);
}
