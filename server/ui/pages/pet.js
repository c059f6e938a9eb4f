// @ts-check
// Pet: the task panel (#/pet: Tasks, their Invocations and Runs, retry and archive) and the
// floating mascot shown on every page (petMascot): a draggable button that opens the wheel of
// Skills and built-in actions. An unavailable entry is disabled and shows its reason; picking
// an entry asks for the source, freezes it into a Snapshot at the moment of confirmation, and
// runs the Invocation.
import { h, uid } from '../lib/dom.js';
import { pageHead, switchEl, busy, emptyState, fmtTime, fmtMs, dl, textBlock, fill, helperCalls } from '../lib/common.js';

const POS_KEY = 'pixie.pet.position';
const HIDE_KEY = 'pixie.pet.hidden';
const HINT_KEY = 'pixie.pet.channelHintDismissed';

function statusBadge(s) {
  const cls = s === 'succeeded' ? ' ok' : s === 'failed' ? ' bad' : ' warn';
  return h('span', { class: 'badge' + cls }, s || '—');
}

function scopeLabel(scope) {
  if (!scope || scope === 'independent') return 'Independent';
  const i = scope.indexOf(':');
  return i > 0 ? `${scope.slice(0, i) === 'session' ? 'Session' : 'Workspace'} ${scope.slice(i + 1)}` : scope;
}

function petChanged() { window.dispatchEvent(new CustomEvent('pixie:pet-changed')); }

// ---------------------------------------------------------------- the task panel (#/pet)

/**
 * @param {HTMLElement} main
 * @param {import('../lib/ui.js').UI} ui
 */
export async function render(main, ui) {
  const { api, errorBox } = ui;
  let archived = ui.params.get('archived') === '1';
  let selected = ui.params.get('task');
  const focusInv = ui.params.get('inv');
  const listSec = h('section', { class: 'card task-list', 'aria-labelledby': 'tasks-title' });
  const detailSec = h('section', { class: 'task-detail', 'aria-live': 'polite' });
  let timer = null;
  const refresh = h('button', { type: 'button', class: 'secondary', 'data-action': 'refresh' }, 'Refresh');
  fill(main, 
    pageHead('Pet', 'Chores run in their own executor against a frozen snapshot of their source. Each request is an Invocation inside its source’s Task; each attempt is a Run.',
      switchEl({ label: 'Show archived', checked: archived, onchange: async (on) => { archived = on; await loadList(); } }), refresh),
    h('div', { class: 'task-layout' }, listSec, detailSec));

  let tasks = [];
  async function loadList() {
    try {
      tasks = (await api('GET', '/v1/pet/tasks?archived=' + archived)).tasks;
    } catch (e) { fill(listSec, h('h2', { id: 'tasks-title' }, 'Tasks'), errorBox(e)); return; }
    if (!selected && tasks.length) selected = tasks[0].id;
    drawList();
    await loadTask();
  }
  function drawList() {
    fill(listSec, h('h2', { id: 'tasks-title' }, 'Tasks'),
      tasks.length ? h('ul', { class: 'plain tasks' }, tasks.map((t) => h('li', {},
        h('a', { href: `#/pet?task=${encodeURIComponent(t.id)}${archived ? '&archived=1' : ''}`, class: 'task-link', 'aria-current': t.id === selected ? 'true' : null, 'data-task': t.id },
          h('span', { class: 'task-scope' }, scopeLabel(t.scope)),
          h('span', { class: 'muted small' }, `epoch ${t.epoch} · ${t.invocations} invocation${t.invocations === 1 ? '' : 's'} · ${fmtTime(t.updatedAt)}`),
          t.archived ? h('span', { class: 'badge' }, 'Archived') : null)))) :
        h('p', { class: 'muted' }, 'No tasks yet. Run a Skill from the Pet button (bottom left) to start one.'));
  }
  async function loadTask() {
    clearTimeout(timer);
    if (!selected) { fill(detailSec, emptyState('No task selected.', h('p', {}, 'Import a Skill under Pet settings → Skills, then run it from the wheel.'))); return; }
    let t;
    try { t = await api('GET', '/v1/pet/tasks/' + encodeURIComponent(selected)); } catch (e) { fill(detailSec, errorBox(e)); return; }
    drawTask(t);
    if (t.invocationList.some((i) => i.status === 'running') && document.body.contains(main)) timer = setTimeout(loadTask, 2000);
  }
  function drawTask(t) {
    let confirming = false;
    const arch = h('div', { class: 'row' });
    const drawArch = () => fill(arch, ...(t.archived ? [h('span', { class: 'badge' }, `Archived ${fmtTime(t.archivedAt)}`)] : confirming ? [
      h('span', {}, 'Archive this task for good? The next invocation from this source starts a new epoch.'),
      h('button', { type: 'button', class: 'danger small', onclick: async (ev) => busy(ev.currentTarget, async () => {
        try { await api('POST', `/v1/pet/tasks/${encodeURIComponent(t.id)}/archive`); ui.toast('Task archived.'); await loadList(); } catch (e) { arch.append(errorBox(e)); }
      }) }, 'Archive'),
      h('button', { type: 'button', class: 'secondary small', onclick: () => { confirming = false; drawArch(); } }, 'Keep'),
    ] : [h('button', { type: 'button', class: 'secondary small', onclick: () => { confirming = true; drawArch(); /** @type {HTMLElement} */ (arch.querySelector('.danger')).focus(); } }, 'Archive task')]));
    drawArch();
    const invs = [...t.invocationList].reverse();
    fill(detailSec, 
      h('div', { class: 'card' },
        h('div', { class: 'row spread' }, h('h2', { class: 'flush' }, scopeLabel(t.scope)), arch),
        dl([['Task', h('code', {}, t.id)], ['Epoch', String(t.epoch)], ['Executor session', h('code', {}, t.executorSession)], ['Created', fmtTime(t.createdAt)], ['Invocations', String(t.invocations)]])),
      h('h2', {}, 'Invocations'),
      invs.length ? h('ol', { class: 'plain invocations', reversed: true }, invs.map((inv) => invocation(inv, t))) : h('p', { class: 'muted' }, 'No invocations.'));
    if (focusInv) detailSec.querySelector(`[data-invocation="${CSS.escape(focusInv)}"]`)?.scrollIntoView({ block: 'nearest' });
  }
  function invocation(inv, t) {
    const latest = inv.runs[inv.runs.length - 1];
    const canRetry = !t.archived && latest && latest.status === 'failed' && latest.transient;
    const retry = canRetry ? h('button', { type: 'button', class: 'small', 'data-action': 'retry' }, 'Retry') : null;
    const err = h('div');
    if (retry) retry.addEventListener('click', () => busy(retry, async () => {
      try { await api('POST', `/v1/pet/invocations/${encodeURIComponent(inv.id)}/retry`); ui.toast('Retried: a new Run was added.'); await loadTask(); } catch (e) { fill(err, errorBox(e)); }
    }));
    const sn = inv.snapshot || {};
    return h('li', { class: 'card invocation', 'data-invocation': inv.id },
      h('div', { class: 'row spread' },
        h('h3', { class: 'flush' }, `#${inv.seq} ${inv.skill}`),
        h('div', { class: 'row' }, statusBadge(inv.status), h('span', { class: 'muted small' }, `${inv.attempts} run${inv.attempts === 1 ? '' : 's'} · ${fmtTime(inv.createdAt)}`), retry)),
      err,
      h('details', {}, h('summary', {}, 'Snapshot'),
        dl([['Source', scopeLabel(inv.scope)], ['Title', sn.title || null], ['Working directory', sn.cwd ? h('code', {}, sn.cwd) : null],
          ['Captured', fmtTime(sn.capturedAt)], ['Selection', sn.selection ? h('pre', {}, sn.selection) : null], ['Transcript', sn.transcript ? h('pre', {}, sn.transcript) : null]])),
      h('ol', { class: 'plain runs' }, inv.runs.map((r) => run(r))));
  }
  function run(r) {
    return h('li', { class: 'run', 'data-run': String(r.n) },
      h('div', { class: 'row' }, h('strong', {}, `Run ${r.n}`), statusBadge(r.status), h('span', { class: 'muted small' }, `${r.executor} · ${fmtTime(r.startedAt)} · ${fmtMs(r.durationMs)}`),
        r.exitCode != null ? h('span', { class: 'muted small' }, `exit ${r.exitCode}`) : null, r.transient ? h('span', { class: 'badge warn' }, 'worth retrying') : null),
      r.error ? h('p', { class: 'error' }, `${r.error.code}: ${r.error.message}`) : null,
      r.output ? h('pre', { class: 'run-output' }, r.output) : (r.status === 'running' ? h('p', { class: 'muted' }, 'Running…') : null),
      r.stderr ? h('details', {}, h('summary', {}, 'Stderr'), textBlock(r.stderr)) : null,
      (r.logs || []).length ? h('details', {}, h('summary', {}, 'Logs'), h('pre', {}, r.logs.join('\n'))) : null,
      (r.toolCalls || []).length ? h('details', { class: 'tool-calls', open: true }, h('summary', {}, `Tool calls (${r.toolCalls.length})`), toolCalls(r.toolCalls)) : null,
      (r.helperCalls || []).length ? h('details', {}, h('summary', {}, `Helper calls (${r.helperCalls.length})`), helperCalls(r.helperCalls)) : null,
      dl([['Skill path', h('code', {}, r.skillPath)], r.sandbox ? ['Sandbox', r.sandbox] : [undefined], r.steps ? ['Model turns', String(r.steps)] : [undefined], (r.envKeys || []).length ? ['Environment', r.envKeys.map((k) => 'DSH_PET_' + k).join(', ')] : [undefined],
        r.usage ? ['Usage', `${r.usage.inputTokens || 0} in · ${r.usage.outputTokens || 0} out`] : [undefined]].filter((x) => x[0] !== undefined), 'compact'));
  }
  /** A Run's tool calls: one entry each, the input and the output shown as text. */
  function toolCalls(calls) {
    return h('ol', { class: 'plain tool-call-list' }, calls.map((c) => h('li', { class: 'tool-call' + (c.isError ? ' failed' : ''), 'data-tool-call': String(c.n) },
      h('div', { class: 'row' }, h('strong', {}, `#${c.n} ${c.name}`), h('span', { class: 'muted small' }, `turn ${c.step} · ${fmtMs(c.durationMs)}`),
        c.isError ? h('span', { class: 'badge bad' }, 'error') : h('span', { class: 'badge ok' }, 'ok')),
      c.gate ? h('p', { class: 'warn gate-note' }, c.gate) : null,
      h('pre', { class: 'tool-input' }, JSON.stringify(c.input)),
      h('pre', { class: 'tool-output' }, c.output || '(no output)'))));
  }
  refresh.addEventListener('click', () => busy(refresh, loadList));
  const onChange = () => { if (document.body.contains(main)) loadList(); else window.removeEventListener('pixie:pet-changed', onChange); };
  window.addEventListener('pixie:pet-changed', onChange);
  window.addEventListener('hashchange', () => clearTimeout(timer), { once: true });
  await loadList();
}

// ---------------------------------------------------------------- the floating mascot

const RING_RADII = [82, 146, 210];
const BTN = 66;

/**
 * @param {HTMLElement} root
 * @param {import('../lib/ui.js').UI} ui
 */
export function petMascot(root, ui) {
  const { api, errorBox, toast } = ui;
  let open = false;
  let step = 'wheel'; // wheel | confirm | result
  let chosen = null; let result = null; let captured = '';
  let wheel = null; let wheelErr = null;
  let skillsCount = null; let channel = null;

  const face = h('span', { class: 'mascot-face', 'aria-hidden': 'true' }, h('span', { class: 'eye' }), h('span', { class: 'eye' }));
  const button = h('button', { type: 'button', class: 'mascot', 'aria-label': 'Pet: run a Skill', 'aria-expanded': 'false', 'aria-haspopup': 'dialog', title: 'Pet (drag to move)' }, face);
  const panel = h('div', { class: 'pet-panel', role: 'dialog', 'aria-label': 'Pet', hidden: true });
  fill(root, button, panel);
  root.hidden = localStorage.getItem(HIDE_KEY) === '1';
  window.addEventListener('pixie:pet-appearance', () => { root.hidden = localStorage.getItem(HIDE_KEY) === '1'; place(); });

  // Position: dragged with the pointer, kept in localStorage, reset from Pet settings → General.
  function place() {
    let p = null;
    try { p = JSON.parse(localStorage.getItem(POS_KEY) || 'null'); } catch { p = null; }
    if (p && typeof p.x === 'number' && typeof p.y === 'number') {
      const x = Math.min(Math.max(0, p.x), window.innerWidth - 56);
      const y = Math.min(Math.max(0, p.y), window.innerHeight - 56);
      root.style.left = x + 'px'; root.style.top = y + 'px'; root.style.bottom = 'auto';
    } else { root.style.left = ''; root.style.top = ''; root.style.bottom = ''; }
  }
  place();
  window.addEventListener('resize', place);
  let drag = null; let moved = false;
  button.addEventListener('pointerdown', (ev) => {
    captured = String(window.getSelection ? window.getSelection() : '').slice(0, 65536);
    const r = root.getBoundingClientRect();
    drag = { dx: ev.clientX - r.left, dy: ev.clientY - r.top, x0: ev.clientX, y0: ev.clientY };
    moved = false;
    button.setPointerCapture(ev.pointerId);
  });
  button.addEventListener('pointermove', (ev) => {
    if (!drag) return;
    if (!moved && Math.hypot(ev.clientX - drag.x0, ev.clientY - drag.y0) < 6) return;
    moved = true;
    const x = Math.min(Math.max(0, ev.clientX - drag.dx), window.innerWidth - 56);
    const y = Math.min(Math.max(0, ev.clientY - drag.dy), window.innerHeight - 56);
    root.style.left = x + 'px'; root.style.top = y + 'px'; root.style.bottom = 'auto';
  });
  button.addEventListener('pointerup', () => {
    if (drag && moved) {
      const r = root.getBoundingClientRect();
      try { localStorage.setItem(POS_KEY, JSON.stringify({ x: r.left, y: r.top })); } catch { /* private mode */ }
      if (open) position();
    }
    drag = null;
  });
  button.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' || ev.key === ' ') captured = String(window.getSelection ? window.getSelection() : '').slice(0, 65536);
  });
  button.addEventListener('click', (ev) => {
    if (moved) { moved = false; ev.preventDefault(); return; }
    toggle(!open);
  });
  panel.addEventListener('keydown', (ev) => { if (ev.key === 'Escape') { ev.stopPropagation(); toggle(false); button.focus(); } });

  function toggle(v) {
    open = v;
    panel.hidden = !open;
    button.setAttribute('aria-expanded', String(open));
    if (open) { step = 'wheel'; chosen = null; result = null; load(); }
  }

  // position keeps the panel inside the window, above (or below) the mascot.
  function position() {
    const r = root.getBoundingClientRect();
    const w = Math.min(520, window.innerWidth - 16);
    panel.style.width = w + 'px';
    const left = Math.min(Math.max(8, r.left), window.innerWidth - w - 8);
    panel.style.left = (left - r.left) + 'px';
    const ph = panel.offsetHeight;
    if (r.top - ph - 8 >= 8) { panel.style.top = ''; panel.style.bottom = (r.height + 8) + 'px'; } else { panel.style.bottom = ''; panel.style.top = (r.height + 8) + 'px'; }
  }

  async function load() {
    draw();
    try {
      const [w, s] = await Promise.all([api('GET', '/v1/pet/wheel'), api('GET', '/v1/pet/skills').catch(() => null)]);
      wheel = w; wheelErr = null; skillsCount = s ? s.skills.length : null;
    } catch (e) { wheelErr = e; }
    if (channel === null) {
      try { channel = await api('GET', '/v1/channel/lark'); } catch { channel = false; }
    }
    if (open) { draw(); /** @type {HTMLElement} */ (panel.querySelector('.wheel-entry:not([aria-disabled=true]), .wheel-entry, a'))?.focus(); }
  }

  function hint() {
    if (skillsCount === 0) {
      return h('p', { class: 'pet-hint' }, 'Pet ships no Skills of its own. ', h('a', { href: '#/pet-settings?tab=skills', onclick: () => toggle(false) }, 'Import a Skill'), ' to put it on the wheel.');
    }
    if (channel && !channel.bound && localStorage.getItem(HINT_KEY) !== '1') {
      return h('p', { class: 'pet-hint' }, 'Bind a Lark bot to take questions from chat. ',
        h('a', { href: '#/pet-settings?tab=channel', onclick: () => toggle(false) }, 'Channel settings'), ' ',
        h('button', { type: 'button', class: 'link small', onclick: () => { localStorage.setItem(HINT_KEY, '1'); draw(); } }, 'Dismiss'));
    }
    return null;
  }

  function draw() {
    const headLinks = h('div', { class: 'row' },
      h('a', { href: '#/pet', onclick: () => toggle(false) }, 'Task panel'),
      h('a', { href: '#/pet-settings', onclick: () => toggle(false) }, 'Settings'),
      h('button', { type: 'button', class: 'link', 'aria-label': 'Close Pet', onclick: () => { toggle(false); button.focus(); } }, 'Close'));
    const body = step === 'confirm' ? confirmView() : step === 'result' ? resultView() : wheelView();
    fill(panel, h('div', { class: 'row spread' }, h('strong', {}, step === 'wheel' ? 'Run a capability' : chosen ? chosen.label : 'Pet'), headLinks), body);
    if (open) position();
  }

  function wheelView() {
    if (wheelErr) return wheelErr.status === 404 ? h('p', { class: 'muted' }, 'Pet is not enabled on this server.') : errorBox(wheelErr);
    if (!wheel) return h('p', { class: 'muted' }, 'Loading…');
    const entries = wheel.entries || [];
    const detail = h('div', { class: 'wheel-detail', 'aria-live': 'polite' });
    const show = (e) => fill(detail, ...[h('strong', {}, e.label), e.kind === 'builtin' ? h('span', { class: 'badge muted-badge' }, 'built-in') : null,
      e.sandbox === 'workspace-write' ? h('span', { class: 'badge warn', title: "may change files in the source's working directory" }, 'workspace-write') : null,
      e.description ? h('p', {}, e.description) : null,
      e.available ? null : h('p', { class: 'error' }, 'Unavailable: ' + (e.reason || 'unknown reason'))].filter(Boolean));
    const rings = Math.max(1, ...entries.map((e) => e.ring || 1));
    const size = 2 * RING_RADII[rings - 1] + BTN;
    const scale = Math.min(1, (Math.min(520, window.innerWidth - 16) - 28) / size);
    const disc = h('div', { class: 'wheel-disc', role: 'group', 'aria-label': 'Capabilities' });
    disc.style.width = disc.style.height = size * scale + 'px';
    const inner = h('div', { class: 'wheel-inner' });
    inner.style.width = inner.style.height = size + 'px';
    inner.style.transform = `scale(${scale})`;
    for (let r = 1; r <= rings; r++) {
      const ring = h('div', { class: 'wheel-ring', 'aria-hidden': 'true' });
      const d = 2 * RING_RADII[r - 1];
      ring.style.width = ring.style.height = d + 'px';
      ring.style.left = ring.style.top = (size - d) / 2 + 'px';
      inner.append(ring);
    }
    const center = h('span', { class: 'wheel-center', 'aria-hidden': 'true' }, h('span', { class: 'mascot-face' }, h('span', { class: 'eye' }), h('span', { class: 'eye' })));
    center.style.left = center.style.top = (size - 48) / 2 + 'px';
    inner.append(center);
    for (const e of entries) {
      const n = wheel.rings[e.ring - 1] || 6;
      const a = (-90 + (360 / n) * e.slot) * Math.PI / 180;
      const rr = RING_RADII[e.ring - 1];
      const reasonId = uid('why');
      const b = h('button', {
        type: 'button', class: 'wheel-entry' + (e.available ? '' : ' unavailable') + (e.kind === 'builtin' ? ' builtin' : ''),
        'data-entry': e.name, 'data-kind': e.kind, 'aria-disabled': e.available ? null : 'true',
        'aria-describedby': e.available ? null : reasonId, title: e.available ? (e.description || e.label) : `${e.label}: ${e.reason}`,
        'aria-label': e.label,
      }, h('span', { class: 'entry-label', 'aria-hidden': 'true' }, e.label), e.available ? null : h('span', { class: 'sr-only', id: reasonId }, 'Unavailable: ' + e.reason));
      b.style.left = (size / 2 + rr * Math.cos(a) - BTN / 2) + 'px';
      b.style.top = (size / 2 + rr * Math.sin(a) - BTN / 2) + 'px';
      b.addEventListener('focus', () => show(e));
      b.addEventListener('mouseenter', () => show(e));
      b.addEventListener('click', () => {
        if (!e.available) { show(e); return; }
        chosen = e; step = 'confirm'; draw();
        /** @type {HTMLElement} */ (panel.querySelector('select, input, button'))?.focus();
      });
      inner.append(b);
    }
    disc.append(inner);
    requestAnimationFrame(() => fitLabels(disc));
    if (!entries.length) {
      return h('div', {}, hint() || h('p', { class: 'muted' }, 'The wheel is empty: enable a Skill and show it as a shortcut in Pet settings → Skills.'));
    }
    const unavailable = entries.filter((e) => !e.available);
    return h('div', { class: 'wheel' }, hint(), disc, detail,
      unavailable.length ? h('details', { class: 'unavailable-list' }, h('summary', {}, `${unavailable.length} unavailable`),
        h('ul', {}, unavailable.map((e) => h('li', {}, h('strong', {}, e.label), ': ', e.reason)))) : null,
      (wheel.overflow || []).length ? h('p', { class: 'muted small' }, `${wheel.overflow.length} more did not fit on the wheel.`) : null);
  }

  // defaultSource is the session the page shows (Records), else independent.
  function defaultSource() {
    const q = new URLSearchParams(location.hash.split('?')[1] || '');
    if (localStorage.getItem('pixie.pet.defaultSource') === 'independent') return { kind: 'independent', id: '' };
    if (location.hash.startsWith('#/records') && q.get('session')) return { kind: 'session', id: q.get('session') };
    return { kind: 'independent', id: '' };
  }

  function confirmView() {
    const src = defaultSource();
    const kind = h('select', { name: 'source' },
      h('option', { value: 'independent', selected: src.kind === 'independent' }, 'Independent (no source)'),
      h('option', { value: 'session', selected: src.kind === 'session' }, 'A session'),
      h('option', { value: 'workspace' }, 'A workspace'));
    const kindId = uid('src'); kind.id = kindId;
    const id = h('input', { name: 'source-id', value: src.id, autocomplete: 'off', spellcheck: 'false', placeholder: 'id' });
    const idId = uid('srcid'); id.id = idId;
    const idField = h('div', { class: 'field', hidden: src.kind === 'independent' }, h('label', { for: idId }, 'Id'), id);
    kind.addEventListener('change', () => { idField.hidden = kind.value === 'independent'; });
    const title = h('input', { name: 'title', value: document.title.replace(/^Pixie Studio$/, '') || '', autocomplete: 'off' });
    const titleId = uid('title'); title.id = titleId;
    const selBox = captured ? h('div', { class: 'field' }, h('label', {}, 'Selected text (frozen with the snapshot)'), h('pre', { class: 'selection' }, captured)) : null;
    const err = h('div');
    const run = h('button', { type: 'button', 'data-action': 'run' }, 'Run');
    const back = h('button', { type: 'button', class: 'secondary', onclick: () => { step = 'wheel'; draw(); } }, 'Back');
    run.addEventListener('click', () => busy(run, async () => {
      fill(err);
      const snapshot = { scope: kind.value === 'independent' ? 'independent' : `${kind.value}:${id.value.trim()}`, capturedAt: new Date().toISOString() };
      if (kind.value !== 'independent' && !id.value.trim()) { fill(err, h('p', { class: 'field-error', role: 'alert' }, `A ${kind.value} needs its id.`)); id.focus(); return; }
      if (title.value.trim()) snapshot.title = title.value.trim();
      if (captured) snapshot.selection = captured;
      try {
        if (chosen.kind === 'builtin') {
          const r = await api('POST', `/v1/pet/actions/${encodeURIComponent(chosen.name)}/invoke`, { snapshot });
          result = { builtin: true, output: r.output };
        } else {
          result = await api('POST', '/v1/pet/invocations', { skill: chosen.name, snapshot });
          toast(`${chosen.label}: ${result.status}`);
        }
        step = 'result'; draw(); petChanged();
        /** @type {HTMLElement} */ (panel.querySelector('.pet-result a, .pet-result button'))?.focus();
      } catch (e) { fill(err, errorBox(e)); }
    }));
    return h('div', { class: 'pet-confirm' },
      chosen.description ? h('p', { class: 'muted' }, chosen.description) : null,
      h('p', {}, 'Confirm the source. It is frozen into the snapshot when you press Run.'),
      h('div', { class: 'field' }, h('label', { for: kindId }, 'Source'), kind), idField,
      h('div', { class: 'field' }, h('label', { for: titleId }, 'Title (optional)'), title),
      selBox, err, h('div', { class: 'row' }, run, back));
  }

  function resultView() {
    if (result.builtin) return h('div', { class: 'pet-result' }, h('pre', {}, result.output || 'Done.'), h('div', { class: 'row' }, h('button', { type: 'button', class: 'secondary', onclick: () => { step = 'wheel'; draw(); } }, 'Back to the wheel')));
    const r = result.runs[result.runs.length - 1] || {};
    return h('div', { class: 'pet-result' },
      h('p', {}, statusBadge(result.status), ' ', `Invocation #${result.seq} in ${scopeLabel(result.scope)}`),
      r.error ? h('p', { class: 'error' }, r.error.message) : null,
      r.output ? h('pre', { class: 'run-output' }, r.output) : null,
      h('div', { class: 'row' },
        h('a', { class: 'button', href: `#/pet?task=${encodeURIComponent(result.taskId)}&inv=${encodeURIComponent(result.id)}`, onclick: () => toggle(false) }, 'Open in the task panel'),
        h('button', { type: 'button', class: 'secondary', onclick: () => { step = 'wheel'; draw(); } }, 'Back to the wheel')));
  }

  window.addEventListener('hashchange', () => { if (open) toggle(false); });
}

// fitLabels fits a wheel label into its round button: its font shrinks (down to 8.5 px) until
// each word fits on a line (labels wrap between words or after a hyphen, never inside a word)
// and the label fits in three lines; a word still too long is shortened with "…" (the full
// label stays the button's name and title, and shows in the detail line).
/** @param {ParentNode} root */
export function fitLabels(root) {
  const fits = (el) => el.scrollWidth <= el.clientWidth + 0.5 && el.scrollHeight <= el.clientHeight + 0.5;
  for (const el of /** @type {NodeListOf<HTMLElement>} */ (root.querySelectorAll('.entry-label'))) {
    const full = el.dataset.full || el.textContent;
    el.dataset.full = full;
    el.textContent = full;
    let size = 11;
    el.style.fontSize = size + 'px';
    while (size > 8.5 && !fits(el)) {
      size -= 0.5;
      el.style.fontSize = size + 'px';
    }
    const parts = full.split(/(?<=[\s-])/);
    for (let guard = 0; !fits(el) && guard < 200; guard++) {
      let longest = 0;
      for (let i = 1; i < parts.length; i++) if (parts[i].replace('…', '').length > parts[longest].replace('…', '').length) longest = i;
      const w = parts[longest].replace('…', '');
      const tail = /[\s-]$/.test(w) ? w.slice(-1) : '';
      const core = tail ? w.slice(0, -1) : w;
      if (core.length <= 3) break;
      parts[longest] = core.slice(0, -1) + '…' + tail;
      el.textContent = parts.join('');
    }
  }
}
