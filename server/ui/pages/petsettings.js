// @ts-check
// Pet settings, in six stable tabs: General (appearance and position, the model, the default
// source), Skills (local import in two steps, enable, shortcut, removal, projection state),
// Locus (the Lark entries: read-only display and lifecycle actions), Environment (DSH_PET_*
// values, global and per workspace, always masked), Channel (the Lark bot binding, permitted
// senders and pairing) and Diagnostics (paths, allowlist, drift, explicit rebuild, executors,
// channel state).
import { h } from '../lib/dom.js';
import { pageHead, tabs, dl, field, busy, switchEl, emptyState, fmtTime, fmtBytes, statusLine, select, fill, rich } from '../lib/common.js';

const TABS = [
  { id: 'general', label: 'General' },
  { id: 'skills', label: 'Skills' },
  { id: 'locus', label: 'Locus' },
  { id: 'environment', label: 'Environment' },
  { id: 'channel', label: 'Channel' },
  { id: 'diagnostics', label: 'Diagnostics' },
];

// CH are the Lark channel routes.
const CH = {
  status: '/v1/channel/lark',
  binding: '/v1/channel/lark/binding',
  allowlist: '/v1/channel/lark/allowlist',
  pairing: '/v1/channel/lark/pairing',
  loci: '/v1/channel/lark/loci',
};

const SOURCE_KEY = 'pixie.pet.defaultSource';

function fieldError(msg) { return h('p', { class: 'field-error', role: 'alert' }, msg); }

function unavailable(e, what) {
  if (e && (e.status === 404 || e.status === 405)) return h('p', { class: 'muted' }, `${what} is not available on this server.`);
  return h('p', { class: 'error', role: 'alert' }, e.message);
}

/**
 * @param {HTMLElement} main
 * @param {import('../lib/ui.js').UI} ui
 */
export async function render(main, ui) {
  let current = TABS.some((t) => t.id === ui.params.get('tab')) ? ui.params.get('tab') : 'general';
  const draw = (kb) => {
    const t = tabs(TABS, current, (id, byKey) => { current = id; history.replaceState(null, '', '#/pet-settings?tab=' + id); draw(byKey); }, 'Pet settings');
    fill(main, pageHead('Pet settings', 'Installation, environment and diagnostics of Pet. Day-to-day runs happen from the Pet button and the task panel.'), t.bar, t.panel);
    const f = { general, skills, locus, environment, channel, diagnostics }[current];
    fill(t.panel, h('p', { class: 'muted' }, 'Loading…'));
    f(t.panel, ui).catch((e) => fill(t.panel, ui.errorBox(e)));
    if (kb) /** @type {HTMLElement} */ (main.querySelector(`[role=tab][data-tab=${current}]`)).focus();
  };
  draw();
}

// ---------------------------------------------------------------- General

async function general(panel, ui) {
  const { api } = ui;
  const st = statusLine();
  const reset = h('button', { type: 'button', class: 'secondary' }, 'Reset the Pet’s position');
  reset.addEventListener('click', () => { localStorage.removeItem('pixie.pet.position'); window.dispatchEvent(new CustomEvent('pixie:pet-appearance')); st.textContent = 'The Pet is back in the bottom-left corner.'; });
  const shown = switchEl({ label: 'Show the floating Pet on every page', checked: localStorage.getItem('pixie.pet.hidden') !== '1', onchange: (on) => {
    if (on) localStorage.removeItem('pixie.pet.hidden'); else localStorage.setItem('pixie.pet.hidden', '1');
    window.dispatchEvent(new CustomEvent('pixie:pet-appearance'));
  } });
  const hint = h('button', { type: 'button', class: 'link' }, 'Show the Channel hint again');
  hint.addEventListener('click', () => { localStorage.removeItem('pixie.pet.channelHintDismissed'); st.textContent = 'The Channel hint will show again while no bot is bound.'; });
  const src = select([['page', 'The session the page shows, else independent'], ['independent', 'Always independent']], localStorage.getItem(SOURCE_KEY) || 'page', { name: 'default-source' });
  src.addEventListener('change', () => { localStorage.setItem(SOURCE_KEY, src.value); st.textContent = 'Saved in this browser.'; });
  fill(panel, 
    h('section', { class: 'card' }, h('h2', {}, 'Appearance'),
      h('p', { class: 'muted' }, 'Drag the Pet anywhere; its place is kept in this browser.'),
      h('div', { class: 'stack' }, shown, h('div', { class: 'row' }, reset, hint)), st),
    h('section', { class: 'card' }, h('h2', {}, 'Default source'),
      h('p', { class: 'muted' }, 'What the wheel proposes as the source of a new Invocation. You confirm (or change) it every time; it is frozen into the snapshot when you press Run.'),
      field('Propose', src)),
    h('section', { class: 'card', 'aria-live': 'polite' }, h('h2', {}, 'Model'), h('p', { class: 'muted' }, 'Instruction Skills (a SKILL.md without skill.wasm or run.sh) run with the Pixie model.'), h('p', { class: 'muted' }, 'Loading…')));
  try {
    const d = await api('GET', '/v1/pet/diagnostics');
    const m = d.model || {};
    fill(panel.lastChild, h('h2', {}, 'Model'),
      h('p', { class: 'muted' }, 'Instruction Skills (a SKILL.md without skill.wasm or run.sh) run with the Pixie model. Change it in ', h('a', { href: '#/settings' }, 'Pixie settings'), '.'),
      dl([['Status', m.configured ? h('span', { class: 'badge ok' }, 'Configured') : h('span', { class: 'badge bad' }, 'Not configured')],
        ['Provider', m.provider || null], ['Model', m.model || null], ['Default sandbox', d.scriptPolicy || null], ['Agent gates', d.agent ? (d.agent.gates ? `preset ${d.agent.preset || '—'}` : 'none') : null]]));
  } catch (e) { panel.lastChild.append(unavailable(e, 'Pet')); }
}

// ---------------------------------------------------------------- Skills

async function skills(panel, ui) {
  const { api, errorBox } = ui;
  const importSec = h('section', { class: 'card', 'aria-labelledby': 'import-title' });
  const listSec = h('section', { 'aria-labelledby': 'skills-title' }, h('p', { class: 'muted' }, 'Loading…'));
  fill(panel, importSec, listSec);
  let inspection = null; let importErr = null;
  const path = h('input', { name: 'skill-path', placeholder: '/home/me/skills/review-notes', autocomplete: 'off', spellcheck: 'false' });

  const drawImport = () => {
    const inspect = h('button', { type: 'button', 'data-action': 'inspect' }, 'Inspect');
    inspect.addEventListener('click', () => busy(inspect, async () => {
      importErr = null; inspection = null;
      if (!path.value.trim()) { importErr = { message: 'Give the absolute path of the Skill directory on the server’s machine.' }; drawImport(); path.focus(); return; }
      try { inspection = await api('POST', '/v1/pet/skills/inspect', { path: path.value.trim() }); } catch (e) { importErr = e; }
      drawImport();
      /** @type {HTMLElement} */ (importSec.querySelector('[data-action=register]') || path).focus();
    }));
    path.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') { ev.preventDefault(); inspect.click(); } });
    const problems = importErr && Array.isArray(importErr.details) ? importErr.details : [];
    fill(importSec, 
      h('h2', { id: 'import-title' }, 'Import a Skill'),
      h('p', { class: 'muted' }, 'A Skill is a directory with a SKILL.md on the machine running Pixie. Import is two steps: a read-only inspection, then a separately confirmed registration. Pixie stores a link to the directory, not a copy: edits there take effect at once.'),
      h('div', { class: 'inline-form' }, field('Skill directory (absolute path)', path, {
        errors: importErr ? [fieldError(importErr.message), ...problems.map((p) => fieldError(`${p.path || 'the Skill'}: ${p.reason || p.message}`))] : [],
      }), inspect),
      inspection ? inspectionView() : null);
  };

  // What runs an instruction Skill (the person's choice, never SKILL.md's): the Pixie model, or
  // Claude Code or Codex headless, with Pixie's hooks (docs/pet.md, "External executors").
  const EXECUTORS = [['builtin', 'Pixie model (built in)'], ['claude', 'Claude Code'], ['codex', 'Codex']];
  function executorSelect(id, value) {
    return h('select', { id, name: 'executor' }, EXECUTORS.map(([v, label]) => h('option', { value: v, selected: v === (value || 'builtin') }, label)));
  }

  function inspectionView() {
    const i = inspection;
    const executor = i.kind === 'instructions' ? executorSelect('reg-executor', 'builtin') : null;
    const enabled = h('input', { type: 'checkbox', id: 'reg-enabled', checked: true });
    const shortcut = h('input', { type: 'checkbox', id: 'reg-shortcut', checked: true });
    const err = h('div');
    // A Skill that asks for workspace-write is registered only once the person ticks the grant.
    const writes = i.sandbox === 'workspace-write';
    const grant = writes ? h('input', { type: 'checkbox', id: 'reg-sandbox', name: 'sandbox' }) : null;
    const reg = h('button', { type: 'button', 'data-action': 'register', disabled: writes }, i.registered ? 'Replace the registration' : 'Register');
    if (grant) grant.addEventListener('change', () => { reg.disabled = !grant.checked; });
    reg.addEventListener('click', () => busy(reg, async () => {
      try {
        const v = await api('POST', '/v1/pet/skills', { path: i.path, confirm: true, fingerprint: i.fingerprint, sandbox: i.sandbox, enabled: enabled.checked, shortcut: shortcut.checked,
          executor: executor ? executor.value : 'builtin' });
        ui.toast(`Registered ${v.name}.`);
        inspection = null; path.value = '';
        drawImport(); await loadList();
        /** @type {HTMLElement} */ (listSec.querySelector(`[data-skill="${CSS.escape(v.name)}"]`))?.focus();
      } catch (e) { fill(err, errorBox(e)); }
    }));
    const cancel = h('button', { type: 'button', class: 'secondary', onclick: () => { inspection = null; drawImport(); path.focus(); } }, 'Cancel');
    return h('div', { class: 'inspection', 'aria-label': 'Inspection' },
      h('h3', {}, `${i.name}`, h('span', { class: 'badge' }, i.kind)),
      dl([['Description', i.description], ['Directory', h('code', {}, i.path)], ['Sandbox', sandboxLabel(i.sandbox)], ['Files', `${i.files.length} (${fmtBytes(i.totalSize)})`]]),
      h('details', {}, h('summary', {}, 'File inventory'), h('ul', { class: 'files' }, i.files.map((f) => h('li', {}, h('code', {}, f.path), h('span', { class: 'muted' }, ` ${fmtBytes(f.size)}`))))),
      i.registered ? h('p', { class: 'warn' }, `A Skill named ${i.name} is already registered${i.registeredPath ? ` at ${i.registeredPath}` : ''}.`) : null,
      h('div', { class: 'field check' }, enabled, h('label', { for: 'reg-enabled' }, 'Enable it'), h('p', { class: 'help' }, 'Enabled Skills are in the allowlist and projected into the Pet workspace.')),
      h('div', { class: 'field check' }, shortcut, h('label', { for: 'reg-shortcut' }, 'Show it on the wheel')),
      grant ? h('div', { class: 'field check grant' }, grant, h('label', { for: 'reg-sandbox' }, 'Grant workspace-write'),
        h('p', { class: 'help' }, "This Skill asks for the workspace-write sandbox: its commands may change and delete files in the snapshot's working directory. Without it the Skill is not registered.")) : null,
      executor ? h('div', { class: 'field' }, h('label', { for: 'reg-executor' }, 'Runs on'), executor,
        h('p', { class: 'help' }, 'Claude Code and Codex run the Skill headless in the snapshot’s folder, sandboxed, with Pixie’s gates on every tool call.')) : null,
      err, h('div', { class: 'row' }, reg, cancel));
  }

  let list = [];
  async function loadList() {
    try { list = (await api('GET', '/v1/pet/skills')).skills; } catch (e) { fill(listSec, h('h2', { id: 'skills-title' }, 'Registered Skills'), unavailable(e, 'Pet')); return; }
    drawList();
  }
  function drawList() {
    fill(listSec, h('h2', { id: 'skills-title' }, 'Registered Skills'),
      list.length ? h('ul', { class: 'plain skills' }, list.map(skillRow)) : emptyState('No Skills yet.', h('p', {}, 'Pet ships no Skills of its own: import one above.')));
  }
  function skillRow(s) {
    const err = h('div');
    const patch = async (p) => {
      try {
        const v = await api('PATCH', '/v1/pet/skills/' + encodeURIComponent(s.name), p);
        Object.assign(s, v);
        drawList();
        const focus = 'executor' in p ? 'select[name=executor]' : `input[name=${'enabled' in p ? 'enabled' : 'shortcut'}]`;
        /** @type {HTMLElement} */ (listSec.querySelector(`[data-skill="${CSS.escape(s.name)}"] ${focus}`))?.focus();
        window.dispatchEvent(new CustomEvent('pixie:pet-changed'));
      } catch (e) { fill(err, errorBox(e)); throw e; }
    };
    let confirm = false;
    const rm = h('div', { class: 'row' });
    const drawRm = () => fill(rm, ...(confirm ? [h('span', {}, 'Remove it? The directory is not touched.'),
      h('button', { type: 'button', class: 'danger small', onclick: async () => { try { await api('DELETE', '/v1/pet/skills/' + encodeURIComponent(s.name)); ui.toast(`Removed ${s.name}.`); await loadList(); } catch (e) { fill(err, errorBox(e)); } } }, 'Remove'),
      h('button', { type: 'button', class: 'secondary small', onclick: () => { confirm = false; drawRm(); } }, 'Keep')] :
      [h('button', { type: 'button', class: 'link', 'aria-label': `Remove ${s.name}`, onclick: () => { confirm = true; drawRm(); /** @type {HTMLElement} */ (rm.querySelector('.danger')).focus(); } }, 'Remove')]));
    drawRm();
    let runsOn = null;
    if (s.kind === 'instructions' || (s.executor && s.executor !== 'builtin')) {
      const sel = executorSelect('exec-' + s.name, s.executor);
      sel.addEventListener('change', () => { patch({ executor: sel.value }).catch(() => { sel.value = s.executor || 'builtin'; }); });
      runsOn = h('div', { class: 'field inline' }, h('label', { for: 'exec-' + s.name }, 'Runs on'), sel);
    }
    return h('li', { class: 'card skill', 'data-skill': s.name, tabindex: '-1' },
      h('div', { class: 'row spread' },
        h('div', { class: 'grow' }, h('h3', { class: 'flush' }, s.name, s.kind ? h('span', { class: 'badge' }, s.kind) : null,
          s.available ? h('span', { class: 'badge ok' }, 'ready') : h('span', { class: 'badge bad' }, 'unavailable')),
        h('p', { class: 'desc' }, s.description)),
        h('div', { class: 'skill-switches' },
          switchEl({ label: 'Enabled', name: 'enabled', checked: s.enabled, onchange: (on) => patch({ enabled: on }) }),
          switchEl({ label: 'On the wheel', name: 'shortcut', checked: s.shortcut, onchange: (on) => patch({ shortcut: on }) }))),
      s.available ? null : h('p', { class: 'error' }, s.reason),
      runsOn,
      dl([['Directory', h('code', {}, s.path)], ['Sandbox', sandboxLabel(s.sandbox) + (s.sandboxAsked && s.sandboxAsked !== s.sandbox ? ` (SKILL.md now asks for ${s.sandboxAsked})` : '')],
        ['Projection', s.projection + (s.drift ? ' — drift: rebuild it under Diagnostics' : '')], ['Registered', fmtTime(s.registeredAt)]], 'compact'),
      err, rm);
  }
  drawImport();
  await loadList();
}

// ---------------------------------------------------------------- Locus

async function locus(panel, ui) {
  const { api, errorBox } = ui;
  fill(panel, h('p', { class: 'muted' }, 'Loading…'));
  let loci;
  const reload = async () => { const r = await api('GET', CH.loci); loci = Array.isArray(r) ? r : r.loci || []; draw(); };
  try { const r = await api('GET', CH.loci); loci = Array.isArray(r) ? r : r.loci || []; } catch (e) { fill(panel, h('section', { class: 'card' }, h('h2', {}, 'Loci'), unavailable(e, 'The Lark channel'))); return; }
  const draw = () => fill(panel, 
    h('section', { class: 'card' }, h('h2', {}, 'Loci'),
      h('p', { class: 'muted' }, 'A Locus ties a Lark chat (or a topic in it) to a main session and the child session that answers there. They are created by the first qualifying mention; this page shows them and offers lifecycle actions only.')),
    loci.length ? h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {}, ['Entry', 'Main session', 'Child', 'Tool tier', 'Executor', 'State', 'Queue', ''].map((x) => h('th', { scope: 'col' }, x)))),
      h('tbody', {}, loci.map((l) => row(l))))) : emptyState('No Loci yet.', h('p', {}, 'Bind a bot under Channel, then mention it in a group as an allowlisted sender.')));
  function row(l) {
    const err = h('div');
    const archived = !!l.archived || l.state === 'archived';
    const tier = select([['read', 'read'], ['shell', 'shell']], l.toolTier, { 'aria-label': `Tool tier of ${l.entry}`, disabled: archived });
    tier.addEventListener('change', async () => {
      try { const v = await api('PATCH', `${CH.loci}/${encodeURIComponent(l.id)}`, { toolTier: tier.value }); Object.assign(l, v); ui.toast('Tool tier changed.'); } catch (e) { tier.value = l.toolTier; fill(err, errorBox(e)); }
    });
    const cancel = !archived && l.currentDelivery ? h('button', { type: 'button', class: 'link' }, 'Cancel the current message') : null;
    if (cancel) cancel.addEventListener('click', () => busy(cancel, async () => {
      try { await api('POST', `${CH.loci}/${encodeURIComponent(l.id)}/cancel`, { reason: 'cancelled from Studio' }); ui.toast('The current message was cancelled; the next one is handed over.'); await reload(); } catch (e) { fill(err, errorBox(e)); }
    }));
    const arch = archived ? null : h('button', { type: 'button', class: 'link' }, 'Archive');
    if (arch) arch.addEventListener('click', () => busy(arch, async () => {
      try { const v = await api('POST', `${CH.loci}/${encodeURIComponent(l.id)}/archive`, { reason: 'archived from Studio' }); Object.assign(l, v); draw(); } catch (e) { fill(err, errorBox(e)); }
    }));
    return h('tr', {}, h('td', {}, h('code', {}, l.entry), l.qa ? h('span', { class: 'badge' }, 'Q&A') : null),
      h('td', {}, h('a', { href: '#/records?session=' + encodeURIComponent(l.mainSessionId), title: l.mainSessionId }, h('code', {}, l.mainSession ? l.mainSession.shortId || l.mainSessionId : l.mainSessionId))),
      h('td', {}, l.child ? `${l.child.turns} turns` : '—'), h('td', {}, tier), h('td', {}, l.executor), h('td', {}, l.state),
      h('td', {}, l.currentDelivery ? `1 current, ${l.queued} queued` : `${l.queued || 0} queued`), h('td', {}, h('div', { class: 'stack' }, cancel, arch), err));
  }
  draw();
}

// ---------------------------------------------------------------- Environment

async function environment(panel, ui) {
  const { api, errorBox } = ui;
  let list = []; let err = null;
  const key = h('input', { name: 'env-key', placeholder: 'CR_GROUP', autocomplete: 'off', spellcheck: 'false' });
  const value = h('input', { name: 'env-value', type: 'password', autocomplete: 'off', spellcheck: 'false' });
  const ws = h('input', { name: 'env-workspace', placeholder: 'empty: global', autocomplete: 'off', spellcheck: 'false' });
  const load = async () => { list = (await api('GET', '/v1/pet/env')).env; };
  const draw = () => {
    const save = h('button', { type: 'button', 'data-action': 'save-env' }, 'Save value');
    save.addEventListener('click', () => busy(save, async () => {
      err = null;
      try {
        await api('PUT', '/v1/pet/env/' + encodeURIComponent(key.value.trim()), { value: value.value, workspace: ws.value.trim() || undefined });
        ui.toast(`Saved ${key.value.trim()}.`); key.value = ''; value.value = '';
        await load();
      } catch (e) { err = e; }
      draw();
    }));
    const scopes = new Map();
    for (const e of list) { if (!scopes.has(e.scope)) scopes.set(e.scope, []); scopes.get(e.scope).push(e); }
    fill(panel, 
      h('section', { class: 'card' }, h('h2', {}, 'Environment values'),
        h('p', { class: 'muted' }, 'Values a Skill needs but Pet cannot infer. A Skill reads KEY as $DSH_PET_KEY. A workspace value overrides a global one of the same key for Tasks from that workspace.'),
        h('p', { class: 'warn' }, 'This is not a credential store: the values reach every command the executor runs. The masking below is display-only.'),
        h('div', { class: 'form-grid' }, field('Key (upper snake case)', key), field('Value', value), field('Workspace', ws, { help: 'Leave empty for the global scope.' })),
        err ? errorBox(err) : null,
        h('div', { class: 'row' }, save)),
      list.length ? [...scopes].map(([scope, entries]) => h('section', { class: 'card' }, h('h3', { class: 'flush' }, scope === 'global' ? 'Global' : scope.replace(/^workspace:/, 'Workspace ')),
        h('table', {}, h('thead', {}, h('tr', {}, ['Variable', 'Value', 'Updated', ''].map((x) => h('th', { scope: 'col' }, x)))),
          h('tbody', {}, entries.map((e) => h('tr', {}, h('td', {}, h('code', {}, e.var)), h('td', {}, h('code', {}, e.value)), h('td', {}, fmtTime(e.updatedAt)),
            h('td', { class: 'right' }, h('button', { type: 'button', class: 'link', 'aria-label': `Delete ${e.key} (${scope})`, onclick: async () => {
              try {
                const q = scope.startsWith('workspace:') ? '?workspace=' + encodeURIComponent(scope.slice('workspace:'.length)) : '';
                await api('DELETE', '/v1/pet/env/' + encodeURIComponent(e.key) + q); await load(); draw();
              } catch (x) { err = x; draw(); }
            } }, 'Delete')))))))) : emptyState('No environment values.'));
  };
  try { await load(); } catch (e) { fill(panel, unavailable(e, 'Pet')); return; }
  draw();
}

// ---------------------------------------------------------------- Channel

async function channel(panel, ui) {
  const { api, errorBox } = ui;
  let status; let allow = []; let code = null;
  const load = async () => {
    status = await api('GET', CH.status);
    const a = await api('GET', CH.allowlist).catch(() => []);
    allow = Array.isArray(a) ? a : a.entries || [];
  };
  try { await load(); } catch (e) { fill(panel, h('section', { class: 'card' }, h('h2', {}, 'Lark channel'), unavailable(e, 'The Lark channel'))); return; }
  const draw = () => {
    const s = status;
    fill(panel, 
      h('section', { class: 'card' }, h('h2', {}, 'Lark bot'),
        h('p', { class: 'muted' }, 'Off by default. With a bound bot, an allowlisted teammate can mention it in a group or message it directly; a read-only child session answers from the context of your work.'),
        s.enabled ? null : h('div', { class: 'note', 'data-note': 'lark-enable' }, h('strong', {}, 'To turn the channel on: '),
          rich('set `lark.enabled: true` in the `pixie.yaml` of the Pixie home (or start the server with `PIXIE_LARK_ENABLED=true`), restart `pixie serve`, then bind a bot here.')),
        dl([['Channel', s.enabled ? (s.available ? h('span', { class: 'badge ok' }, 'available') : h('span', { class: 'badge bad' }, 'unavailable')) : h('span', { class: 'badge' }, 'disabled in the configuration')],
          ['Problem', s.problem || null], ['Bot', s.bound ? `${s.botName || '(no name)'} · ${s.botOpenId}` : 'not bound'], ['App id', s.appId || null],
          ['Events', s.bound ? (s.encrypted ? 'encrypted and signed' : 'not encrypted (set an encrypt key)') : null], ['Verified', s.verifiedAt ? fmtTime(s.verifiedAt) : null],
          ['Default workspace', s.defaultWorkspace ? h('span', {}, h('code', {}, s.defaultWorkspace), s.workspaceOk ? '' : h('span', { class: 'error' }, ' (missing)')) : 'not set'],
          ['Warnings', (s.warnings || []).length ? h('ul', {}, s.warnings.map((w) => h('li', {}, w))) : null]]),
        s.bound ? unbindRow() : bindForm()),
      h('section', { class: 'card' }, h('h2', {}, 'Permitted senders'),
        h('p', { class: 'muted' }, 'Allowlisted senders can ask anywhere and are the only ones who can run control commands or set up a new chat.'),
        pairing(),
        allow.length ? h('table', {}, h('thead', {}, h('tr', {}, ['Sender', 'Name', 'Added', ''].map((x) => h('th', { scope: 'col' }, x)))),
          h('tbody', {}, allow.map((e) => h('tr', {}, h('td', {}, h('code', {}, e.openId), e.owner ? h('span', { class: 'badge' }, 'owner') : null), h('td', {}, e.name || '—'),
            h('td', {}, `${fmtTime(e.addedAt)} (${e.via})`),
            h('td', { class: 'right' },
              e.owner ? null : h('button', { type: 'button', class: 'link', 'aria-label': `Make ${e.openId} the owner`, onclick: async () => {
                try { await api('PATCH', `${CH.allowlist}/${encodeURIComponent(e.openId)}`, { owner: true }); await load(); draw(); } catch (x) { panel.prepend(errorBox(x)); }
              } }, 'Make owner'),
              h('button', { type: 'button', class: 'link', 'aria-label': `Remove ${e.openId}`, onclick: async () => {
                try { await api('DELETE', `${CH.allowlist}/${encodeURIComponent(e.openId)}`); await load(); draw(); } catch (x) { panel.prepend(errorBox(x)); }
              } }, 'Remove')))))) : h('p', { class: 'muted' }, 'Nobody is allowlisted yet.'),
        h('p', { class: 'help' }, 'The owner is the person the Q&A group action adds to the groups it opens.'),
        manualAllow()));
  };
  function bindForm() {
    const f = { appId: h('input', { autocomplete: 'off' }), appSecret: h('input', { type: 'password', autocomplete: 'off' }),
      verificationToken: h('input', { type: 'password', autocomplete: 'off' }), encryptKey: h('input', { type: 'password', autocomplete: 'off' }) };
    const err = h('div');
    const bind = h('button', { type: 'button' }, 'Bind and verify');
    bind.addEventListener('click', () => busy(bind, async () => {
      try { status = await api('PUT', CH.binding, { appId: f.appId.value, appSecret: f.appSecret.value, verificationToken: f.verificationToken.value, encryptKey: f.encryptKey.value || undefined }); ui.toast('The bot is bound.'); draw(); } catch (e) { fill(err, errorBox(e)); }
    }));
    return h('div', {}, h('h3', {}, 'Bind a bot'),
      h('div', { class: 'form-grid' }, field('App id', f.appId), field('App secret', f.appSecret), field('Verification token', f.verificationToken), field('Encrypt key (recommended)', f.encryptKey)),
      h('p', { class: 'help' }, 'Binding verifies the credentials by fetching the bot’s own open_id. The secrets are stored in the server’s credentials and never shown again.'), err, bind);
  }
  function unbindRow() {
    const b = h('button', { type: 'button', class: 'secondary' }, 'Unbind the bot');
    const err = h('div');
    b.addEventListener('click', () => busy(b, async () => { try { status = await api('DELETE', CH.binding); draw(); } catch (e) { fill(err, errorBox(e)); } }));
    return h('div', { class: 'row' }, b, err);
  }
  function pairing() {
    const p = (status && status.pairing) || {};
    const err = h('div');
    const mint = h('button', { type: 'button', class: 'secondary', disabled: !status.bound }, p.pending || code ? 'Replace the pairing code' : 'Pair a sender');
    mint.addEventListener('click', () => busy(mint, async () => { try { code = await api('POST', CH.pairing); status.pairing = { pending: true, expiresAt: code.expiresAt }; draw(); } catch (e) { fill(err, errorBox(e)); } }));
    const cancel = p.pending ? h('button', { type: 'button', class: 'link' }, 'Cancel pairing') : null;
    if (cancel) cancel.addEventListener('click', () => busy(cancel, async () => { try { await api('DELETE', CH.pairing); code = null; status.pairing = { pending: false }; draw(); } catch (e) { fill(err, errorBox(e)); } }));
    return h('div', { class: 'pairing' },
      code ? h('div', { class: 'note' }, h('p', {}, 'Send this in a direct chat with the bot within five minutes. The first person to send it is added to the allowlist; do not forward it.'),
        h('pre', { class: 'pair-code' }, code.command), h('p', { class: 'help' }, `Expires ${fmtTime(code.expiresAt)}. It is shown only now.`)) :
        p.pending ? h('p', {}, `A pairing code is pending until ${fmtTime(p.expiresAt)}.`) : null,
      h('div', { class: 'row' }, mint, cancel), err);
  }
  function manualAllow() {
    const id = h('input', { placeholder: 'ou_…', autocomplete: 'off', spellcheck: 'false' });
    const name = h('input', { autocomplete: 'off' });
    const err = h('div');
    const add = h('button', { type: 'button', class: 'secondary' }, 'Add');
    add.addEventListener('click', () => busy(add, async () => { try { await api('POST', CH.allowlist, { openId: id.value, name: name.value || undefined }); await load(); draw(); } catch (e) { fill(err, errorBox(e)); } }));
    return h('details', {}, h('summary', {}, 'Add an open_id by hand (advanced)'), h('div', { class: 'inline-form' }, field('open_id', id), field('Name (display only)', name), add), err);
  }
  draw();
}

// ---------------------------------------------------------------- Diagnostics

async function diagnostics(panel, ui) {
  const { api, errorBox } = ui;
  let d; let ch = null; let report = null; let err = null;
  const load = async () => {
    d = await api('GET', '/v1/pet/diagnostics');
    ch = await api('GET', CH.status).catch(() => null);
  };
  const draw = () => {
    const rebuild = h('button', { type: 'button', 'data-action': 'rebuild' }, 'Rebuild the projection');
    rebuild.addEventListener('click', () => busy(rebuild, async () => {
      try { report = await api('POST', '/v1/pet/projection/rebuild'); err = null; await load(); } catch (e) { err = e; }
      draw();
      /** @type {HTMLElement} */ (panel.querySelector('[data-action=rebuild]'))?.focus();
    }));
    const ex = d.executors || {};
    fill(panel, 
      h('section', { class: 'card' }, h('h2', {}, 'Paths'), dl([['Pet workspace', h('code', {}, d.paths.workspace)], ['Projected Skills', h('code', {}, d.paths.skills)], ['Default sandbox', d.scriptPolicy], ['Agent limits', d.agent ? `${d.agent.maxSteps} model turns · ${d.agent.maxTokens} tokens` : null]])),
      h('section', { class: 'card' }, h('h2', {}, 'Executors'),
        dl(Object.keys(ex).sort().map((k) => [k, ex[k].available ? h('span', { class: 'badge ok' }, 'available') : h('span', {}, h('span', { class: 'badge bad' }, 'unavailable'), ' ', ex[k].reason)])),
        (d.builtins || []).length ? h('div', {}, h('h3', {}, 'Built-in actions'), dl(d.builtins.map((b) => [b.label, b.available ? 'available' : `unavailable: ${b.reason}`]))) : null),
      h('section', { class: 'card' }, h('h2', {}, 'Allowlist and projection'),
        dl([['Allowlist', d.allowlist.length ? d.allowlist.join(', ') : null],
          ['Drift', d.drift.length ? h('ul', {}, d.drift.map((x) => h('li', {}, h('strong', {}, x.skill), ': ', x.problem))) : h('span', { class: 'badge ok' }, 'none')],
          ['Stray entries', d.stray.length ? h('ul', {}, d.stray.map((x) => h('li', {}, h('code', {}, x)))) : 'none']]),
        h('p', { class: 'muted' }, 'A drifted Skill fails closed until the projection is rebuilt. Rebuilding makes the skills folder exactly the enabled Skills and removes everything else in it.'),
        err ? errorBox(err) : null,
        report ? h('p', { class: 'status', role: 'status' }, `Rebuilt: ${report.created.length} created, ${report.kept.length} kept, ${report.removed.length} removed, ${report.cleared.length} drift marks cleared.`) : null,
        rebuild),
      h('section', { class: 'card' }, h('h2', {}, 'Channel connection'),
        ch ? dl([['State', ch.available ? 'available' : ch.enabled ? `unavailable: ${ch.problem || 'unknown'}` : 'disabled'], ['Bound', ch.bound ? 'yes' : 'no'],
          ['Started', fmtTime(ch.startedAt)], ['Replay watermark', fmtTime(ch.watermark)], ['Images', ch.imagesOk ? 'available' : 'unavailable'],
          ['Dropped events', (ch.drops || []).length ? h('ul', {}, ch.drops.map((x) => h('li', {}, `${x.reason}: ${x.count}`))) : 'none']]) : h('p', { class: 'muted' }, 'The Lark channel is not available on this server.')));
  };
  try { await load(); } catch (e) { fill(panel, unavailable(e, 'Pet')); return; }
  draw();
}

/** What a sandbox policy means, for a Skill's views. @param {string} p */
function sandboxLabel(p) {
  if (p === 'workspace-write') return 'workspace-write — may change files in the working directory';
  return (p || 'read-only') + ' — may read, not change files';
}
