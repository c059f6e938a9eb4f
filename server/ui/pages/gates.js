// @ts-check
// Gates → Gate composition: a card per gate with its global switch, New gate from the
// templates, and the editor (When, What Pixie does, Advanced options) with Try it on a sample.
// Edits go to the shared draft (gatedraft.js); Save at the top sends the whole set, and every
// save-time refusal is shown next to its field (and listed at the top with a link to it).
import { h } from '../lib/dom.js';
import * as draft from '../lib/gatedraft.js';
import { loadPoints, points, pointLabel, pointApply } from '../lib/points.js';
import { loadSetup, setupWarnings } from '../lib/setup.js';
import {
  pageHead, switchEl, field, select, busy, emptyState, actionBadge,
  CONCLUDED, fmtUsage, dl, textBlock, replaceHash, fill, fmtMs } from '../lib/common.js';

const BASE_VARS = ['target', 'point', 'agent', 'turn', 'session.id', 'gate.name', 'tool.name', 'tool.args'];

function clone(v) { return JSON.parse(JSON.stringify(v)); }

function hookName(name) {
  const i = name.lastIndexOf('.');
  return i > 0 ? name.slice(0, i) : name;
}

/**
 * @param {HTMLElement} main
 * @param {import('../lib/ui.js').UI} ui
 */
export async function render(main, ui) {
  const { api } = ui;
  const edit = ui.params.get('edit');
  const tmpl = ui.params.get('new');
  const editing = edit !== null || tmpl !== null;
  const [, , setup] = await Promise.all([draft.load(api, true), loadPoints(api), editing ? null : loadSetup(api)]);
  if (editing) return editor(main, ui, edit, tmpl);
  return composition(main, ui, setup);
}

// saveButton saves the draft (after pre() when given) and reports the outcome.
function saveButton(ui, rerender, pre) {
  const b = h('button', { type: 'button', 'data-action': 'save' }, 'Save');
  b.addEventListener('click', () => busy(b, async () => {
    if (pre && !pre()) return;
    try {
      const s = await draft.save(ui.api);
      ui.toast(`Saved. The gates are at revision ${s.revision}.`);
    } catch (e) {
      if (!(e.details && e.details.length)) ui.toast(e.message);
    }
    rerender(true);
  }));
  return b;
}

// problemList summarises a refusal at the top of the page, each problem linked to its gate.
function problemList(ui, onlyOthers) {
  const st = draft.get();
  if (!st.error) return null;
  const ps = draft.problems();
  const items = ps.filter((p) => !onlyOthers || !onlyOthers(p)).map((p) => {
    const m = /^gates\[(\d+)\]/.exec(p.field || '');
    const g = m ? st.draft.gates[Number(m[1])] : null;
    const where = g ? h('a', { href: '#/gates?edit=' + encodeURIComponent(g.name) }, `Gate ${g.name}`) :
      /^presets\[(\d+)\]/.test(p.field || '') ? h('a', { href: '#/scope' }, `Preset ${(st.draft.presets[Number(/^presets\[(\d+)\]/.exec(p.field)[1])] || {}).name || ''}`) :
        h('span', {}, p.field || 'Gates');
    return h('li', {}, where, ': ', p.message);
  });
  if (!ps.length) return h('div', { class: 'alert', role: 'alert' }, h('strong', {}, 'Not saved. '), st.error.message);
  if (!items.length) return h('div', { class: 'alert', role: 'alert' }, h('strong', {}, 'Not saved. '), 'Each problem is shown next to its field below.');
  return h('div', { class: 'alert', role: 'alert' },
    h('strong', {}, `Not saved: ${ps.length} problem${ps.length === 1 ? '' : 's'}.`), h('ul', {}, items));
}

function conflictWarning() {
  const list = draft.conflicts(draft.get().draft);
  if (!list.length) return null;
  return h('div', { class: 'warn', role: 'note' },
    h('strong', {}, 'Only one enabled gate per preset and “When” is allowed. '), 'Saving will be refused until you fix these:',
    h('ul', {}, list.map((c) => h('li', {}, `Preset ${c.preset}, ${pointLabel(c.point)}: ${c.gates.join(', ')}`))));
}

function dirtyBadge() {
  return draft.get().dirty ? h('span', { class: 'badge warn', role: 'status' }, 'Unsaved changes') : null;
}

/**
 * @param {HTMLElement} main
 * @param {import('../lib/ui.js').UI} ui
 * @param {import('../lib/setup.js').SetupReport | null} setup the set-up problems hooks ran into
 */
function composition(main, ui, setup) {
  const { api, errorBox } = ui;
  let picking = false;
  let templates = null;

  // A missing preset's fix: add it to the draft and open it on Scope, where gates are added to
  // it and the draft is saved.
  const createPreset = (name) => {
    draft.change((d) => { if (!d.presets.some((p) => p.name === name)) d.presets.push({ name, gates: [] }); });
    ui.toast(`Preset ${name} added to your changes. Add a gate to it and press Save.`);
    location.hash = '#/scope?preset=' + encodeURIComponent(name);
  };
  const warnings = () => {
    const st = draft.get();
    const saved = (st.saved.presets || []).map((p) => p.name);
    return setupWarnings(setup, { saved, drafted: st.draft.presets.map((p) => p.name).filter((n) => !saved.includes(n)), create: createPreset });
  };

  const rerender = () => {
    const st = draft.get();
    const newBtn = h('button', { type: 'button', class: 'secondary', 'data-action': 'new-gate', 'aria-expanded': String(picking) }, 'New gate');
    newBtn.addEventListener('click', async () => { picking = !picking; await rerenderAsync(); });
    const discard = st.dirty ? h('button', { type: 'button', class: 'secondary', onclick: () => { draft.discard(); rerender(); } }, 'Discard changes') : null;
    fill(main, 
      pageHead('Gates', 'Gate composition. Each card is one gate; its switch turns it on or off everywhere. Changes apply to runs once saved.',
        dirtyBadge(), discard, newBtn, saveButton(ui, () => rerender())),
      ...warnings(),
      problemList(ui),
      conflictWarning(),
      picking ? picker() : null,
      st.draft.gates.length ? h('div', { class: 'grid gate-grid' }, st.draft.gates.map((g, i) => card(g, i))) :
        emptyState('No gates yet.', h('p', { class: 'muted' }, 'Press New gate and pick a template: each point has a representative one, and the blank gate is last.')));
    if (picking) /** @type {HTMLElement} */ (main.querySelector('.template-list button'))?.focus();
  };
  const rerenderAsync = async () => {
    if (picking && !templates) {
      try { templates = (await api('GET', '/v1/gates/templates')).templates; } catch (e) { picking = false; main.prepend(errorBox(e)); return; }
    }
    rerender();
  };

  function picker() {
    const sec = h('section', { class: 'card picker', 'aria-labelledby': 'pick-title' },
      h('div', { class: 'row spread' }, h('h2', { id: 'pick-title' }, 'New gate: pick a template'),
        h('button', { type: 'button', class: 'link', onclick: () => { picking = false; rerender(); } }, 'Cancel')),
      h('ul', { class: 'template-list' }, templates.map((t) => h('li', { class: 'template' },
        h('div', {}, h('strong', {}, t.title), ' ', h('span', { class: 'badge' }, pointLabel(t.gate.point)),
          h('p', { class: 'muted' }, t.description)),
        h('button', {
          type: 'button', 'data-template': t.id, 'aria-label': `Use the template ${t.title}`,
          onclick: () => { location.hash = '#/gates?new=' + encodeURIComponent(t.id); },
        }, 'Use')))));
    sec.addEventListener('keydown', (ev) => { if (ev.key === 'Escape') { picking = false; rerender(); /** @type {HTMLElement} */ (main.querySelector('[data-action=new-gate]'))?.focus(); } });
    return sec;
  }

  function card(g, i) {
    const st = draft.get();
    const presets = draft.presetsOf(st.draft, g.name);
    const probs = draft.problems(`gates[${i}]`);
    let confirming = false;
    const actions = h('div', { class: 'row card-actions' });
    const drawActions = () => {
      fill(actions, ...(confirming ? [
        h('span', {}, `Delete ${g.name}?`),
        h('button', { type: 'button', class: 'danger', onclick: () => { draft.change((d) => { d.gates.splice(i, 1); for (const p of d.presets) p.gates = p.gates.filter((a) => a.gate !== g.name); }); rerender(); /** @type {HTMLElement} */ (main.querySelector('[data-action=save]'))?.focus(); } }, 'Delete'),
        h('button', { type: 'button', class: 'secondary', onclick: () => { confirming = false; drawActions(); } }, 'Keep'),
      ] : [
        h('a', { class: 'button', href: '#/gates?edit=' + encodeURIComponent(g.name), 'aria-label': `Edit ${g.name}` }, 'Edit'),
        h('button', { type: 'button', class: 'secondary', 'aria-label': `Delete ${g.name}`, onclick: () => { confirming = true; drawActions(); /** @type {HTMLElement} */ (actions.querySelector('.danger')).focus(); } }, 'Delete'),
      ]));
    };
    drawActions();
    return h('article', { class: 'card gate-card' + (g.enabled ? '' : ' off') + (probs.length ? ' invalid' : ''), 'data-gate': g.name },
      h('div', { class: 'row spread nowrap' }, h('h2', { class: 'card-title' }, g.name),
        switchEl({ label: `${g.name} on everywhere`, hideLabel: true, checked: g.enabled, onchange: (on) => {
          draft.change((d) => { d.gates[i].enabled = on; });
          rerender();
          /** @type {HTMLElement} */ (main.querySelector(`[data-gate="${CSS.escape(g.name)}"] input[role=switch]`))?.focus();
        } })),
      h('p', { class: 'when' }, h('span', { class: 'muted' }, 'When: '), pointLabel(g.point)),
      g.description ? h('p', { class: 'desc' }, g.description) : null,
      h('p', { class: 'tags' },
        g.rule ? h('span', { class: 'badge' }, `${g.rule.kind}: ${g.rule.name}`) : null,
        presets.length ? presets.map((p) => h('span', { class: 'badge muted-badge' }, `preset ${p}`)) : h('span', { class: 'badge warn' }, 'In no preset'),
        g.enabled ? null : h('span', { class: 'badge' }, 'Off')),
      probs.length ? h('ul', { class: 'field-error card-problems' }, probs.map((p) => h('li', {}, p.message))) : null,
      actions);
  }

  rerender();
}

function editor(main, ui, editName, templateId) {
  const { api, errorBox, uid } = ui;
  const st = draft.get();
  let index = editName !== null ? draft.gateIndex(editName) : -1;
  let g;
  let scripts = null; let modules = null; let templates = null;
  let tryResult = null; let tryError = null;
  const sample = { target: '', toolName: '', toolArgs: '', agent: 'root', structured: false };

  const start = async () => {
    const loads = [
      api('GET', '/v1/gates/scripts').then((l) => { scripts = l; }).catch((e) => { scripts = { scripts: [], error: e.message }; }),
      api('GET', '/v1/modules').then((l) => { modules = Array.isArray(l) ? l : (l && l.modules) || []; }).catch(() => { modules = null; }),
    ];
    if (editName !== null) {
      if (index < 0) { fill(main, pageHead('Gate not found'), errorBox(`No gate is named “${editName}”.`), h('a', { href: '#/gates' }, 'Back to the gates')); return; }
      g = clone(st.draft.gates[index]);
    } else {
      loads.push(api('GET', '/v1/gates/templates').then((r) => { templates = r.templates; }));
    }
    await Promise.all(loads);
    if (editName === null) {
      const t = templates.find((x) => x.id === templateId) || templates[templates.length - 1];
      g = clone(t.gate);
      let name = t.gate.name; let n = 2;
      while (st.draft.gates.some((x) => x.name === name)) name = `${t.gate.name}-${n++}`;
      g.name = name;
      sample.target = sampleFor(g.point);
    }
    if (!g.advanced) g.advanced = {};
    if (!sample.target) sample.target = sampleFor(g.point);
    draw();
  };

  // saveProblems are the refusal's problems for this gate, by sub-field (".task", ".advanced.onError", …).
  const errorsFor = (sub) => {
    const out = [];
    if (index >= 0) {
      for (const p of draft.problems(`gates[${index}]`)) {
        const rest = p.field.slice(`gates[${index}]`.length);
        if (rest === sub || rest.startsWith(sub + '.')) out.push(h('p', { class: 'field-error', role: 'alert' }, p.message));
      }
    }
    if (tryError && Array.isArray(tryError.details)) {
      for (const p of tryError.details) {
        const rest = (p.field || '').replace(/^gate/, '');
        if (rest === sub || rest.startsWith(sub + '.')) out.push(h('p', { class: 'field-error', role: 'alert' }, p.message));
      }
    }
    return out;
  };

  // apply puts the form's gate into the draft; it returns false when it cannot (no name).
  const apply = () => {
    const clash = draft.get().draft.gates.findIndex((x, j) => x.name === g.name && j !== index);
    if (clash >= 0) { ui.toast(`Another gate is already named ${g.name}.`); return false; }
    const wasNew = index < 0;
    draft.change((d) => {
      if (wasNew) { d.gates.push(clone(g)); index = d.gates.length - 1; } else {
        const old = d.gates[index].name;
        d.gates[index] = clone(g);
        if (old !== g.name) for (const p of d.presets) for (const a of p.gates) if (a.gate === old) a.gate = g.name;
      }
    });
    replaceHash('#/gates?edit=' + encodeURIComponent(g.name));
    return true;
  };

  function draw() {
    const focusId = document.activeElement && main.contains(document.activeElement) ? document.activeElement.id : null;
    const isNew = index < 0;
    const applyBtn = h('button', { type: 'button', class: 'secondary', 'data-action': 'apply' }, 'Apply');
    applyBtn.addEventListener('click', () => { if (apply()) { ui.toast('Applied. Press Save to make it take effect.'); draw(); } });
    const back = h('a', { href: '#/gates', class: 'button secondary' }, 'All gates');
    const onlyOthers = (p) => index >= 0 && (p.field || '').startsWith(`gates[${index}]`);
    fill(main, 
      pageHead(isNew ? 'New gate' : `Gate ${g.name}`,
        isNew ? 'Set When and What Pixie does, try it on a sample, then Apply and Save.' : 'Edit, try it on a sample, then Apply and Save.',
        dirtyBadge(), back, applyBtn, saveButton(ui, () => {
          const j = draft.gateIndex(g.name);
          if (j >= 0 && !draft.get().dirty) { index = j; g = clone(draft.get().draft.gates[j]); if (!g.advanced) g.advanced = {}; }
          draw();
        }, apply)),
      problemList(ui, onlyOthers),
      h('div', { class: 'editor' }, form(), trySection()));
    const firstInvalid = main.querySelector('[aria-invalid=true]');
    if (draft.get().error && firstInvalid && !focusId) firstInvalid.focus();
    else if (focusId && document.getElementById(focusId)) document.getElementById(focusId).focus();
    else if (firstInvalid) firstInvalid.focus();
  }

  function input(attrs, get, set) {
    const el = h(attrs.tag || 'input', { ...attrs, tag: undefined, value: get() });
    el.addEventListener('input', () => set(el.value));
    return el;
  }

  function form() {
    const name = input({ name: 'name', autocomplete: 'off', spellcheck: 'false' }, () => g.name, (v) => { g.name = v; });
    const desc = input({ name: 'description' }, () => g.description || '', (v) => { g.description = v; });
    const point = select(points().map((p) => [p.id, p.label]), g.point, { name: 'point' });
    point.addEventListener('change', () => { g.point = point.value; if (!sample.target) sample.target = sampleFor(g.point); draw(); });
    const task = input({ tag: 'textarea', name: 'task', rows: Math.min(28, Math.max(10, (g.task || '').split('\n').length + 2)), class: 'task', spellcheck: 'false' }, () => g.task || '', (v) => { g.task = v; });

    const vars = [...BASE_VARS];
    if (g.rule && g.rule.name) { const hn = hookName(g.rule.name); vars.push(`hooks.${hn}.text`, `hooks.${hn}.data`); }
    const chips = h('div', { class: 'chips', role: 'group', 'aria-label': 'Insert a variable into the task' }, h('span', { class: 'muted small' }, 'Insert:'), vars.map((v) => h('button', {
      type: 'button', class: 'chip', onclick: () => {
        const s = task.selectionStart ?? task.value.length; const e = task.selectionEnd ?? s;
        const ins = `{{${v}}}`;
        task.value = task.value.slice(0, s) + ins + task.value.slice(e);
        g.task = task.value; task.focus(); task.setSelectionRange(s + ins.length, s + ins.length);
      },
    }, `{{${v}}}`)));

    const a = g.advanced;
    const ruleOpts = [['', 'None']];
    for (const s of (scripts && scripts.scripts) || []) ruleOpts.push(['script:' + s.name, `Script: ${s.name}`]);
    for (const m of modules || []) { const n = m.name || m; ruleOpts.push(['module:' + n, `WASM module: ${n}`]); }
    const cur = g.rule && g.rule.name ? `${g.rule.kind || 'script'}:${g.rule.name}` : '';
    if (cur && !ruleOpts.some(([v]) => v === cur)) ruleOpts.push([cur, `${g.rule.kind}: ${g.rule.name} (not found)`]);
    const rule = select(ruleOpts, cur, { name: 'rule' });
    rule.addEventListener('change', () => {
      const v = rule.value;
      g.rule = v ? { kind: v.slice(0, v.indexOf(':')), name: v.slice(v.indexOf(':') + 1) } : null;
      draw();
    });
    const kind = g.rule && g.rule.name ? (g.rule.kind || 'script') : '';
    const folderHelp = scripts && scripts.error ? `The script folder cannot be read: ${scripts.error}` :
      scripts ? `Scripts are the executable files in ${scripts.folder || 'the script folder'} (change it under Scope).` : '';
    const moduleHelp = 'WASM modules are uploaded with pixie module push. A module runs sandboxed, with no network, and sees the session’s working directory read-only only when its sandbox policy grants it.';
    const ruleHelp = kind === 'module' ? moduleHelp : kind === 'script' ? folderHelp : `${folderHelp} ${moduleHelp}`.trim();
    const onError = select([['continue', 'Continue as usual'], ['stop', 'Stop it']], a.onError || 'continue', { name: 'onError' });
    onError.addEventListener('change', () => { a.onError = onError.value; });
    const targets = select([['root', 'Main agent'], ['child', 'Subagents'], ['all', 'All']], a.targets || (g.point === 'agent-message' ? 'child' : 'root'), { name: 'targets' });
    targets.addEventListener('change', () => { a.targets = targets.value; });
    const timeout = input({ type: 'number', min: 1, max: 600, name: 'timeoutSeconds', inputmode: 'numeric' }, () => String(a.timeoutSeconds ?? 60), (v) => { a.timeoutSeconds = v === '' ? 0 : Number(v); });
    const redo = input({ type: 'number', min: 0, max: 10, name: 'redoLimit', inputmode: 'numeric' }, () => String(a.redoLimit ?? 1), (v) => { a.redoLimit = v === '' ? 0 : Number(v); });
    const adv = ['.rule', '.advanced'].some((s) => errorsFor(s).length);
    const check = (label, key, help) => {
      const id = uid('chk');
      const c = h('input', { type: 'checkbox', id, name: key, checked: !!a[key], 'aria-describedby': id + '-help' });
      c.addEventListener('change', () => { a[key] = c.checked; });
      return h('div', { class: 'field check' }, c, h('label', { for: id }, label), h('p', { class: 'help', id: id + '-help' }, help), h('div', { class: 'field-errors' }, errorsFor('.advanced.' + key)));
    };
    const details = h('details', { class: 'advanced', open: adv || !!g.rule },
      h('summary', {}, 'Advanced options'),
      h('div', { class: 'form-grid' },
        field('Rule (runs before the task)', rule, { help: ruleHelp, errors: errorsFor('.rule') }),
        field('If Pixie fails', onError, { help: kind === 'module' ? 'On model or module errors and timeouts.' : 'On model or rule errors and timeouts.', errors: errorsFor('.advanced.onError') }),
        field('Target agents', targets, { errors: errorsFor('.advanced.targets') }),
        field('Time limit (seconds)', timeout, { help: 'The rule, helper and model calls together; 1 to 600.', errors: errorsFor('.advanced.timeoutSeconds') }),
        // A redo (asking the agent to correct its answer) happens only at turn-end; a
        // replacement becomes a suggestion only at message points.
        g.point === 'turn-end' ? field('Redo limit per turn', redo, { help: 'Corrections per turn when the agent finishes its answer; 0 to 10.', errors: errorsFor('.advanced.redoLimit') }) : null),
      check('Show the result in the chat', 'showInChat', 'Shows the result right under what the gate checked.'),
      g.point === 'user-message' || g.point === 'agent-message'
        ? check('Confirm before replacing', 'confirmReplace', 'Turns a replacement of the message into a suggestion.') : null);

    const row = pointApply(g.point);
    return h('section', { class: 'card editor-form', 'aria-label': 'Gate' },
      h('div', { class: 'form-grid' },
        field('Name', name, { errors: errorsFor('.name'), help: 'Letters, digits, “.”, “_” and “-”.' }),
        field('Description', desc, { errors: errorsFor('.description') })),
      h('h2', {}, 'When'),
      field('The gate runs when', point, { errors: errorsFor('.point') }),
      h('table', { class: 'apply-table' }, h('caption', { class: 'sr-only' }, 'How results apply at this point'),
        h('thead', {}, h('tr', {}, ['Stop + reason', 'Replacement', 'Addition', 'Note'].map((x) => h('th', { scope: 'col' }, x)))),
        h('tbody', {}, h('tr', {}, row.map((x) => h('td', {}, x))))),
      h('h2', {}, 'What Pixie does'),
      field('Task', task, { errors: errorsFor('.task'), help: kind ? 'Say in plain words whether to pass or stop, what to replace or add, and what note to show only to you. It may stay empty: then the rule alone decides.' : 'Say in plain words whether to pass or stop, what to replace or add, and what note to show only to you.' }),
      chips,
      details);
  }

  function trySection() {
    const tool = g.point === 'tool-before' || g.point === 'tool-after';
    const targetLabel = { 'user-message': 'Sample instruction', 'agent-message': 'Sample agent message', 'tool-before': 'Sample tool arguments (JSON)', 'tool-after': 'Sample tool result', 'turn-end': 'Sample final answer' }[g.point] || 'Sample';
    const target = input({ tag: 'textarea', rows: 6, name: 'sample' }, () => sample.target, (v) => { sample.target = v; });
    const toolName = tool ? input({ name: 'toolName', placeholder: 'bash' }, () => sample.toolName, (v) => { sample.toolName = v; }) : null;
    const toolArgs = g.point === 'tool-after' ? input({ tag: 'textarea', rows: 2, name: 'toolArgs', placeholder: '{"command": "…"}' }, () => sample.toolArgs, (v) => { sample.toolArgs = v; }) : null;
    const agent = select([['root', 'Main agent'], ['child', 'Subagent']], sample.agent, { name: 'agent' });
    agent.addEventListener('change', () => { sample.agent = agent.value; });
    const run = h('button', { type: 'button', 'data-action': 'try' }, 'Run');
    const out = h('div', { class: 'try-result', 'aria-live': 'polite' });
    run.addEventListener('click', () => busy(run, async () => {
      tryError = null; tryResult = null;
      fill(out, h('p', { class: 'muted' }, 'Running the trial…'));
      const s = { target: sample.target, agent: sample.agent };
      if (tool) {
        s.tool = { name: sample.toolName.trim() || 'tool' };
        const args = g.point === 'tool-before' ? sample.target : sample.toolArgs;
        if (args.trim()) {
          try { s.tool.args = JSON.parse(args); } catch { tryError = { message: 'The tool arguments must be JSON.' }; fill(out, errorBox(tryError)); return; }
        }
      }
      try {
        tryResult = await api('POST', '/v1/gates/try', { gate: g, sample: s });
      } catch (e) {
        tryError = e;
      }
      draw();
      /** @type {HTMLElement} */ (document.querySelector('[data-action=try]'))?.focus();
    }));
    if (tryError) fill(out, errorBox(tryError));
    else if (tryResult) fill(out, result(tryResult));
    return h('section', { class: 'card try', 'aria-labelledby': 'try-title' },
      h('h2', { id: 'try-title' }, 'Try it'),
      h('p', { class: 'muted' }, tryNote(g)),
      field(targetLabel, target),
      tool ? field('Tool name', toolName) : null,
      toolArgs ? field('Tool arguments (JSON, optional)', toolArgs) : null,
      field('Agent', agent),
      h('div', { class: 'row' }, run),
      out);
  }

  function result(r) {
    const o = r.output || {};
    return h('div', { class: 'result', 'data-action-result': r.action },
      h('p', { class: 'result-head' }, 'Would apply: ', actionBadge(r.action), r.concludedBy ? h('span', { class: 'muted' }, ` · concluded by ${CONCLUDED[r.concludedBy] || r.concludedBy}`) : null),
      r.error ? h('p', { class: 'error', role: 'alert' }, r.error) : null,
      r.ruleRan && r.rule ? h('p', { class: 'rule-ran', 'data-rule-ran': r.rule.name }, `The WASM rule ${r.rule.name} ran (no files: a trial has no working directory) and exited ${r.rule.exitCode} in ${fmtMs(r.rule.durationMs)}.`) : null,
      r.scriptNotRun ? h('p', { class: 'muted' }, 'The script was not run (trials have no session sandbox policy); its {{hooks.…}} variables were empty.') : null,
      h('h3', {}, r.concludedBy === 'hook-script' ? 'The rule’s answer' : 'Pixie’s answer'),
      dl([['Verdict', o.verdict || null], ['Reason', o.reason || null], ['Replacement', o.replace ? h('pre', {}, o.replace) : null],
        ['Addition', o.append ? h('pre', {}, o.append) : null], ['Note', o.note ? h('pre', {}, o.note) : null]]),
      h('h3', {}, 'Result'),
      dl([['Final text', textBlock(r.text)], r.reason ? ['Reason', r.reason] : [], r.suggestion ? ['Suggestion', h('pre', {}, r.suggestion)] : [],
        r.addition ? ['Addition', h('pre', {}, r.addition)] : [], (r.notes || []).length ? ['Notes', h('ul', {}, r.notes.map((n) => h('li', {}, n)))] : [],
        ['Usage', fmtUsage(r.usage)]].filter((x) => x.length)),
      r.modelAnswer ? h('details', {}, h('summary', {}, 'Raw model answer'), h('pre', {}, r.modelAnswer)) : null);
  }

  start().catch((e) => fill(main, errorBox(e)));
}

// tryNote says what a trial runs for this gate.
function tryNote(g) {
  const kind = g.rule && g.rule.name ? (g.rule.kind || 'script') : '';
  const model = (g.task || '').trim() ? 'The configured Pixie model really answers. ' : '';
  if (kind === 'module') return `${model}The WASM rule runs${model ? ' first' : ''}, with no files (a trial has no working directory). Nothing is recorded or sent to a session.`;
  if (kind === 'script') return `${model}Nothing is recorded or sent to a session. The script is not run in trials: it needs a session’s sandbox policy.`;
  return `${model}Nothing is recorded or sent to a session.`;
}

function sampleFor(point) {
  switch (point) {
    case 'tool-before': return '{"command": "rm -rf ~/projects"}';
    case 'turn-end': return 'Done: I fixed the bug and all tests pass.';
    case 'agent-message': return 'hey can you look at the thing in the parser';
    case 'tool-after': return '';
    default: return 'fix it';
  }
}
