// @ts-check
// Records: one session's gate runs, newest first, each with its detail (the applied action,
// who concluded, the five output fields, the original and final text, notes, usage, helper
// calls, the rule's run); Edit and send for a rejected input; and the session's per-session
// gate switches ("Gates in this session").
import { h } from '../lib/dom.js';
import { loadPoints, pointLabel } from '../lib/points.js';
import {
  pageHead, switchEl, field, busy, emptyState, fmtTime, fmtUsage, fmtMs, actionBadge, CONCLUDED, dl, textBlock, fill, helperCalls } from '../lib/common.js';
import { noteBlock } from '../lib/noteblock.js';

const RECENT_KEY = 'pixie.records.recent';

function recent() {
  try { const v = JSON.parse(localStorage.getItem(RECENT_KEY) || '[]'); return Array.isArray(v) ? v.filter((x) => typeof x === 'string').slice(0, 8) : []; } catch { return []; }
}
function remember(id) {
  const list = [id, ...recent().filter((x) => x !== id)].slice(0, 8);
  try { localStorage.setItem(RECENT_KEY, JSON.stringify(list)); } catch { /* private mode */ }
}

function link(session, run) {
  let s = '#/records?session=' + encodeURIComponent(session);
  if (run) s += '&run=' + encodeURIComponent(run);
  return s;
}

/**
 * @param {HTMLElement} main
 * @param {import('../lib/ui.js').UI} ui
 */
export async function render(main, ui) {
  await loadPoints(ui.api);
  const session = (ui.params.get('session') || '').trim();
  const run = ui.params.get('run');
  const input = h('input', { name: 'session', value: session, placeholder: 'the agent host’s session id', autocomplete: 'off', spellcheck: 'false' });
  const open = h('button', { type: 'submit' }, 'Open');
  const form = h('form', { class: 'inline-form session-form', 'aria-label': 'Open a session' }, field('Open a session by id', input), open);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const v = input.value.trim();
    if (v) location.hash = link(v);
  });
  const rec = recent().filter((x) => x !== session);
  fill(main,
    pageHead('Records', 'Every gate run of a session: what was applied, who concluded, and what Pixie answered.',
      session ? h('a', { href: '#/records', class: 'button secondary' }, 'All sessions') : null),
    h('div', { class: 'card' }, form,
      rec.length ? h('p', { class: 'recent' }, h('span', { class: 'muted' }, 'Recent: '), rec.map((r) => h('a', { href: link(r), class: 'chip-link' }, r))) : null));
  if (!session) return sessions(main, ui);
  remember(session);
  if (run) return detail(main, ui, session, run);
  return list(main, ui, session);
}

// sessions lists the sessions that have records, newest run first, each with its last run.
async function sessions(main, ui) {
  const { api, errorBox } = ui;
  const sec = h('section', { class: 'sessions', 'aria-labelledby': 'sessions-title' }, h('h2', { id: 'sessions-title' }, 'Sessions'),
    h('p', { class: 'muted' }, 'Loading…'));
  main.append(sec);
  const tbody = h('tbody');
  const more = h('button', { type: 'button', class: 'secondary', 'data-action': 'more-sessions', hidden: true }, 'Load more');
  let next = '';
  let shown = 0;
  const load = async () => {
    const q = next ? '&cursor=' + encodeURIComponent(next) : '';
    const page = await api('GET', '/v1/gates/sessions?limit=50' + q);
    next = page.next || '';
    for (const s of page.sessions) {
      shown += 1;
      const r = s.lastRun || {};
      tbody.append(h('tr', { 'data-session': s.session },
        h('td', { 'data-label': 'Session', class: 'clip' }, h('a', { href: link(s.session) }, s.session)),
        h('td', { 'data-label': 'Preset' }, s.preset || '—'),
        h('td', { 'data-label': 'Last run' }, h('a', { href: link(s.session, r.id) }, fmtTime(r.startedAt))),
        h('td', { 'data-label': 'Gate' }, r.gate || '—'),
        h('td', { 'data-label': 'Point' }, pointLabel(r.point)),
        h('td', { 'data-label': 'Applied' }, actionBadge(r.action)),
        h('td', { 'data-label': 'Error', class: 'clip' }, r.error ? h('span', { class: 'error' }, r.error) : '—')));
    }
    more.hidden = !next;
  };
  more.addEventListener('click', () => busy(more, () => load().catch((e) => more.replaceWith(errorBox(e)))));
  try {
    await load();
  } catch (e) {
    fill(sec, h('h2', { id: 'sessions-title' }, 'Sessions'), errorBox(e));
    return;
  }
  if (!shown) {
    fill(sec, h('h2', { id: 'sessions-title' }, 'Sessions'),
      emptyState('No session has gate runs yet.', h('p', {}, 'A session appears here after its first gate run (for Claude Code, once its hooks reach Pixie).')));
    return;
  }
  fill(sec, h('h2', { id: 'sessions-title' }, 'Sessions'),
    h('p', { class: 'muted' }, 'Sessions that have gate runs, the most recent first. Open one to see all its runs and switch its gates.'),
    h('div', { class: 'table-wrap' }, h('table', { class: 'stack-sm records sessions-table' },
      h('thead', {}, h('tr', {}, ['Session', 'Preset', 'Last run', 'Gate', 'Point', 'Applied', 'Error'].map((x) => h('th', { scope: 'col' }, x)))), tbody)),
    more);
}

async function list(main, ui, session) {
  const { api, errorBox } = ui;
  const switches = h('section', { class: 'card', 'aria-labelledby': 'sw-title' });
  const runs = h('section', { 'aria-labelledby': 'runs-title' });
  main.append(switches, runs);

  const drawSwitches = (sg, err) => {
    fill(switches, h('h2', { id: 'sw-title' }, 'Gates in this session'),
      h('p', { class: 'muted' }, 'A gate switched off here does not run in this session from its next message on. Definitions, presets and other sessions do not change.'),
      err ? errorBox(err) : null,
      sg && !sg.preset ? h('p', { class: 'muted' }, 'No gate has run in this session yet, so its preset is not known.') : null,
      sg && sg.preset ? h('p', {}, 'Preset: ', h('strong', {}, sg.preset)) : null,
      sg && sg.preset && !sg.gates.length ? h('p', { class: 'muted' }, 'No gate applies to this preset.') : null,
      sg && sg.gates.length ? h('ul', { class: 'switch-list' }, sg.gates.map((g) => h('li', { 'data-gate': g.gate },
        switchEl({ label: g.gate, checked: g.on, onchange: async (on) => {
          try {
            const q = sg.preset ? '?preset=' + encodeURIComponent(sg.preset) : '';
            const next = await api('PUT', `/v1/gates/sessions/${encodeURIComponent(session)}/switches/${encodeURIComponent(g.gate)}${q}`, { on });
            ui.toast(`${g.gate} is ${on ? 'on' : 'off'} in this session.`);
            drawSwitches(next);
            /** @type {HTMLElement} */ (switches.querySelector(`li[data-gate="${CSS.escape(g.gate)}"] input`))?.focus();
          } catch (e) { drawSwitches(sg, e); throw e; }
        } }),
        h('span', { class: 'muted' }, ` · ${pointLabel(g.point)}`)))) : null);
  };
  api('GET', `/v1/gates/sessions/${encodeURIComponent(session)}/switches`).then((sg) => drawSwitches(sg)).catch((e) => drawSwitches(null, e));

  const rows = [];
  let next = '';
  const tbody = h('tbody');
  const more = h('button', { type: 'button', class: 'secondary', hidden: true }, 'Load more');
  const status = h('div');
  fill(runs, h('div', { class: 'section-head' }, h('h2', { id: 'runs-title' }, `Runs of ${session}`)), status);
  const table = h('div', { class: 'table-wrap' }, h('table', { class: 'records stack-sm' },
    h('thead', {}, h('tr', {}, ['When it ran', 'Gate', 'Point', 'Turn', 'Action', 'Concluded by', 'Reason or error', 'Usage'].map((x) => h('th', { scope: 'col' }, x)))),
    tbody));
  const load = async () => {
    const q = new URLSearchParams({ limit: '50' });
    if (next) q.set('cursor', next);
    const page = await api('GET', `/v1/gates/sessions/${encodeURIComponent(session)}/records?${q}`);
    next = page.next || '';
    for (const r of page.records) {
      rows.push(r);
      tbody.append(h('tr', { 'data-run': r.id },
        h('td', { 'data-label': 'When it ran' }, h('a', { href: link(session, r.id), 'aria-label': `Open the run of ${r.gate} at ${fmtTime(r.startedAt)}` }, fmtTime(r.startedAt))),
        h('td', { 'data-label': 'Gate' }, r.gate), h('td', { 'data-label': 'Point' }, pointLabel(r.point)), h('td', { 'data-label': 'Turn' }, String(r.turn)),
        h('td', { 'data-label': 'Action' }, actionBadge(r.action)), h('td', { 'data-label': 'Concluded by' }, CONCLUDED[r.concludedBy] || r.concludedBy || '—'),
        h('td', { class: 'clip', 'data-label': 'Reason or error' }, r.error ? h('span', { class: 'error' }, r.error) : (r.reason || (r.verdict ? `verdict: ${r.verdict}` : '—'))),
        h('td', { 'data-label': 'Usage' }, fmtUsage(r.usage), r.helperCalls ? h('span', { class: 'muted' }, ` · ${r.helperCalls} helper call${r.helperCalls === 1 ? '' : 's'}`) : null)));
    }
    more.hidden = !next;
  };
  more.addEventListener('click', () => busy(more, () => load().catch((e) => fill(status, errorBox(e)))));
  try {
    await load();
    if (!rows.length) fill(status, emptyState('No gate runs recorded for this session.', h('p', {}, 'Runs are kept for 30 days. Check that a gate is on, attached to the session’s preset, and saved.')));
    else runs.append(table, h('div', { class: 'row' }, more));
  } catch (e) { fill(status, errorBox(e)); }
}

async function detail(main, ui, session, id) {
  const { api, errorBox } = ui;
  const back = h('p', {}, h('a', { href: link(session) }, `← All runs of ${session}`));
  let r;
  try { r = await api('GET', '/v1/gates/records/' + encodeURIComponent(id)); } catch (e) { main.append(back, errorBox(e)); return; }
  const o = r.output || {};
  const byScript = r.concludedBy === 'hook-script';
  const messagePoint = r.point === 'user-message' || r.point === 'agent-message';
  const sec = (title, ...kids) => h('section', { class: 'card' }, h('h2', {}, title), ...kids);
  const out = h('article', { class: 'record', 'aria-labelledby': 'run-title' },
    back,
    h('div', { class: 'record-head' }, h('h2', { id: 'run-title' }, `${r.gate} · ${pointLabel(r.point)}`), actionBadge(r.action),
      h('span', { class: 'muted' }, `${fmtTime(r.startedAt)} · ${fmtMs(r.durationMs)}`)),
    r.error ? h('div', { class: 'alert', role: 'alert' }, h('strong', {}, 'The gate failed: '), r.error, r.errorDetail ? h('pre', {}, r.errorDetail) : null,
      h('p', {}, `Error policy: ${r.onError === 'stop' ? 'stop it' : 'continue as usual'}.`)) : null,
    r.action === 'rejected' && messagePoint ? editAndSend(ui, r) : null,
    h('div', { class: 'detail-grid' },
      sec('Run',
        dl([['Applied action', actionBadge(r.action)], ['Concluded by', CONCLUDED[r.concludedBy] || r.concludedBy || null],
          ['Gate', h('a', { href: '#/gates?edit=' + encodeURIComponent(r.gate) }, r.gate)], ['Point', pointLabel(r.point)],
          ['Session', r.session], ['Preset', r.preset], ['Turn', String(r.turn)], ['Agent', r.agent === 'child' ? 'Subagent' : 'Main agent'],
          r.tool ? ['Tool', h('code', {}, r.tool.name)] : [undefined], r.tool && r.tool.args ? ['Tool arguments', h('pre', {}, JSON.stringify(r.tool.args, null, 2))] : [undefined],
          ['Usage', fmtUsage(r.usage)], ['Run id', h('code', {}, r.id)], r.cancelled ? ['Cancelled', 'yes'] : [undefined]].filter((x) => x[0] !== undefined))),
      sec(byScript ? 'Script output' : 'Pixie output',
        dl([['Verdict', o.verdict ? h('span', { class: 'badge' + (o.verdict === 'stop' ? ' bad' : ' ok') }, o.verdict) : null], ['Reason', o.reason || null],
          ['Replacement', o.replace ? h('pre', {}, o.replace) : null], ['Addition', o.append ? h('pre', {}, o.append) : null], ['Note', o.note ? h('pre', {}, o.note) : null]]))),
    h('div', { class: 'detail-grid' },
      sec('Original text', textBlock(r.original)),
      sec('Final text', textBlock(r.final), r.addition ? h('div', {}, h('h3', {}, 'Sent along'), h('pre', {}, r.addition)) : null,
        r.reason ? h('div', {}, h('h3', {}, 'Reason'), h('p', {}, r.reason)) : null,
        r.suggestion ? h('div', {}, h('h3', {}, 'Suggestion'), h('pre', {}, r.suggestion)) : null)),
    notesSection(ui, r),
    sec('Helper calls', helperCalls(r.helperCalls)),
    r.rule ? sec('Hook script run', dl([['Rule', h('code', {}, `${r.rule.kind}: ${r.rule.name}`)], ['Exit code', String(r.rule.exitCode)], ['Time', fmtMs(r.rule.durationMs)],
      ['Output', r.rule.stdout ? h('pre', {}, r.rule.stdout) : null]])) : null,
    (r.logs || []).length ? sec('Guest log', h('pre', {}, r.logs.map((l) => `[${l.level}] ${l.message}`).join('\n'))) : null,
    r.modelAnswer ? h('details', { class: 'card' }, h('summary', {}, 'Raw model answer'), h('pre', {}, r.modelAnswer)) : null);
  main.append(out);
  out.querySelector('#run-title').setAttribute('tabindex', '-1');
  void busy;
}

// notesSection shows the run's notes as the chat's note blocks (whatever the gate's "Show the
// result in the chat": a gate with it off shows its notes only here), each with Hide and the
// gate's per-session switch.
function notesSection(ui, r) {
  const { api } = ui;
  const notes = (r.notes || []).filter((n) => String(n).trim());
  const sec = h('section', { class: 'card notes', 'aria-labelledby': 'notes-title' }, h('h2', { id: 'notes-title' }, 'Notes'));
  if (!notes.length) {
    sec.append(h('p', { class: 'muted' }, 'No notes.'));
    return sec;
  }
  sec.append(h('p', { class: 'muted' }, r.showInChat
    ? 'Shown in the chat under what the gate checked, and kept here.'
    : 'This gate does not show its results in the chat (Show the result in the chat is off): its notes are only here.'));
  const list = h('div', { class: 'note-list' });
  sec.append(list);
  const base = `/v1/gates/sessions/${encodeURIComponent(r.session)}/switches`;
  const q = r.preset ? '?preset=' + encodeURIComponent(r.preset) : '';
  const setSwitch = async (on) => {
    await api('PUT', `${base}/${encodeURIComponent(r.gate)}${q}`, { on });
    ui.toast(`${r.gate} is ${on ? 'on' : 'off'} in this session.`);
  };
  const draw = (off) => list.replaceChildren(...notes.map((n) => noteBlock(n, { gate: r.gate, off, setSwitch })));
  draw(false);
  api('GET', base + q).then((sg) => {
    const g = (sg.gates || []).find((x) => x.gate === r.gate);
    if (g && !g.on) draw(true);
  }).catch(() => { /* the blocks work without knowing the switch */ });
  return sec;
}

// editAndSend is the restore card of a rejected input: the suggestion (or the original) goes
// into the hint bar's composer for that session, to edit and send.
function editAndSend(ui, r) {
  const text = r.suggestion || r.original || '';
  if (ui.hints === false) {
    // No hint bar on this server (hints.enabled is off): the text is shown to copy.
    return h('section', { class: 'card restore', 'aria-label': 'Rejected input' },
      h('h2', {}, 'This input was rejected'),
      r.reason ? h('p', {}, h('strong', {}, 'Reason: '), r.reason) : null,
      h('p', { class: 'muted' }, r.suggestion ? 'Pixie suggested a replacement:' : 'The original input:'),
      h('pre', {}, text));
  }
  const b = h('button', { type: 'button', 'data-action': 'edit-and-send' }, 'Edit and send');
  b.addEventListener('click', () => {
    window.dispatchEvent(new CustomEvent('pixie:compose', { detail: { text, sessionId: r.session } }));
  });
  return h('section', { class: 'card restore', 'aria-label': 'Rejected input' },
    h('h2', {}, 'This input was rejected'),
    r.reason ? h('p', {}, h('strong', {}, 'Reason: '), r.reason) : null,
    h('p', { class: 'muted' }, r.suggestion ? 'Pixie suggested a replacement. Edit and send puts it into the hint composer for this session.' : 'Edit and send puts the original into the hint composer for this session.'),
    h('pre', {}, text),
    h('div', { class: 'row' }, b));
}
