// @ts-check
// Gates → Scope: the script folder (with Refresh list), the presets with Add gate and their
// per-preset switches, the gates in no preset at the bottom, and WASM module upload. Preset
// changes go to the shared draft (gatedraft.js) and apply once saved; the script folder and
// modules are saved at once by their own routes.
import { h } from '../lib/dom.js';
import * as draft from '../lib/gatedraft.js';
import { loadPoints, pointLabel } from '../lib/points.js';
import { pageHead, switchEl, field, select, busy, emptyState, fmtTime, fmtBytes, statusLine, dl, fill, rich } from '../lib/common.js';

/**
 * @param {HTMLElement} main
 * @param {import('../lib/ui.js').UI} ui
 */
export async function render(main, ui) {
  const { api, errorBox } = ui;
  await Promise.all([draft.load(api, true), loadPoints(api)]);
  let defaultPreset = null;
  try { const info = await api('GET', '/v1/info'); defaultPreset = info && info.hooks ? info.hooks.defaultPreset : null; } catch { /* the warning is optional */ }
  const folderSec = h('section', { class: 'card', 'aria-labelledby': 'folder-title' });
  const presetsSec = h('section', { 'aria-labelledby': 'presets-title' });
  const modulesSec = h('section', { class: 'card', 'aria-labelledby': 'modules-title' });
  const head = h('div');
  fill(main, head, folderSec, presetsSec, modulesSec);

  const drawHead = () => {
    const st = draft.get();
    const save = h('button', { type: 'button', 'data-action': 'save' }, 'Save');
    save.addEventListener('click', () => busy(save, async () => {
      try { const s = await draft.save(api); ui.toast(`Saved. The gates are at revision ${s.revision}.`); } catch (e) { if (!(e.details && e.details.length)) ui.toast(e.message); }
      drawHead(); drawPresets();
    }));
    const discard = st.dirty ? h('button', { type: 'button', class: 'secondary', onclick: () => { draft.discard(); drawHead(); drawPresets(); } }, 'Discard changes') : null;
    const problems = draft.problems().filter((p) => !/^presets\[\d+\]/.test(p.field || ''));
    const saved = st.saved || { presets: [] };
    const noDefault = defaultPreset && !(saved.presets || []).some((p) => p.name === defaultPreset);
    fill(head, 
      pageHead('Scope', 'Where gates apply: the script folder, the presets agents run with, and WASM modules. A gate runs only for agents using a preset it is attached to and switched on in.',
        st.dirty ? h('span', { class: 'badge warn', role: 'status' }, 'Unsaved changes') : null, discard, save),
      noDefault ? h('div', { class: 'warn', 'data-warn': 'no-default-preset' }, h('strong', {}, `No preset is called “${defaultPreset}”. `),
        rich(`Agent hooks that name no preset use \`${defaultPreset}\` (hooks.defaultPreset), so their sessions run no gates. Add a preset named \`${defaultPreset}\` below, or point the hooks at another preset (\`pixie init claude --preset NAME\`).`)) : null,
      st.error ? h('div', { class: 'alert', role: 'alert' }, h('strong', {}, 'Not saved. '),
        problems.length ? h('ul', {}, problems.map((p) => h('li', {}, `${p.field}: ${p.message}`))) : (draft.problems().length ? 'Each problem is shown next to its preset below.' : st.error.message)) : null);
  };

  // --- script folder ---
  let listing = null;
  const drawFolder = (err) => {
    const folder = h('input', { name: 'folder', value: listing && listing.custom ? listing.folder : '', placeholder: listing ? listing.default : '', spellcheck: 'false', autocomplete: 'off' });
    const status = statusLine();
    const saveFolder = h('button', { type: 'button' }, 'Use this folder');
    saveFolder.addEventListener('click', () => busy(saveFolder, async () => {
      try { listing = await api('PUT', '/v1/gates/scripts', { folder: folder.value }); drawFolder(); folderSec.querySelector('[role=status]').textContent = 'Saved.'; } catch (e) { drawFolder(e); }
    }));
    const refresh = h('button', { type: 'button', class: 'secondary', 'data-action': 'refresh-scripts' }, 'Refresh list');
    refresh.addEventListener('click', () => busy(refresh, async () => {
      try { listing = await api('POST', '/v1/gates/scripts/refresh'); drawFolder(); folderSec.querySelector('[role=status]').textContent = `Listed ${listing.scripts.length} script${listing.scripts.length === 1 ? '' : 's'}.`; } catch (e) { drawFolder(e); }
    }));
    const rows = listing ? listing.scripts : [];
    fill(folderSec, 
      h('h2', { id: 'folder-title' }, 'Script folder'),
      h('p', { class: 'muted' }, 'Only executable files directly in this folder can be chosen as a gate’s hook script. Leave the field empty to use the default; the folder is not created for you. Press Refresh list after adding a file.'),
      h('div', { class: 'inline-form' },
        field('Folder (absolute or ~/…)', folder, { errors: err ? [h('p', { class: 'field-error', role: 'alert' }, err.message)] : [] }),
        saveFolder, refresh),
      status,
      !listing && !err ? h('p', { class: 'muted' }, 'Loading…') : null,
      listing ? dl([['In use', h('code', {}, listing.folder)], ['Default', h('code', {}, listing.default)],
        ['Listed', fmtTime(listing.listedAt)]]) : null,
      listing && !listing.exists ? h('p', { class: 'warn' }, 'This folder does not exist yet. Create it and press Refresh list.') : null,
      listing && listing.error ? h('p', { class: 'error', role: 'alert' }, listing.error) : null,
      listing && rows.length ? h('table', { class: 'scripts' },
        h('thead', {}, h('tr', {}, ['Script', 'Use in a task', 'Size', 'Modified'].map((x) => h('th', { scope: 'col' }, x)))),
        h('tbody', {}, rows.map((s) => h('tr', {}, h('td', {}, h('code', {}, s.name), s.link ? h('span', { class: 'muted' }, ' (link)') : null),
          h('td', {}, h('code', {}, `{{hooks.${s.hookName}.text}}`)), h('td', {}, fmtBytes(s.size)), h('td', {}, fmtTime(s.modified)))))) :
        listing && listing.exists ? h('p', { class: 'muted' }, 'No executable scripts in this folder.') : null);
  };

  // --- presets ---
  let newPresetErr = null;
  const drawPresets = () => {
    const st = draft.get();
    const d = st.draft;
    const newName = h('input', { name: 'preset', placeholder: 'e.g. default', autocomplete: 'off', spellcheck: 'false' });
    const add = h('button', { type: 'button', class: 'secondary' }, 'New preset');
    const addPreset = () => {
      const n = newName.value.trim();
      if (!n) { newPresetErr = 'A preset needs a name.'; drawPresets(); /** @type {HTMLElement} */ (presetsSec.querySelector('[name=preset]')).focus(); return; }
      if (d.presets.some((p) => p.name === n)) { newPresetErr = `There is already a preset named ${n}.`; drawPresets(); /** @type {HTMLElement} */ (presetsSec.querySelector('[name=preset]')).focus(); return; }
      newPresetErr = null;
      draft.change((x) => { x.presets.push({ name: n, gates: [] }); });
      drawHead(); drawPresets();
      /** @type {HTMLElement} */ (presetsSec.querySelector(`[data-preset="${CSS.escape(n)}"] select`))?.focus();
    };
    add.addEventListener('click', addPreset);
    newName.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') { ev.preventDefault(); addPreset(); } });
    const attached = new Set(d.presets.flatMap((p) => p.gates.map((a) => a.gate)));
    const loose = d.gates.filter((g) => !attached.has(g.name));
    const conflicts = draft.conflicts(d);
    fill(presetsSec, 
      h('div', { class: 'section-head' }, h('h2', { id: 'presets-title' }, 'Presets'),
        h('div', { class: 'inline-form' }, field('New preset name', newName, { errors: newPresetErr ? [h('p', { class: 'field-error', role: 'alert' }, newPresetErr)] : [] }), add)),
      conflicts.length ? h('div', { class: 'warn', role: 'note' }, h('strong', {}, 'Only one enabled gate per preset and “When” is allowed. '),
        h('ul', {}, conflicts.map((c) => h('li', {}, `${c.preset}, ${pointLabel(c.point)}: ${c.gates.join(', ')}`)))) : null,
      d.presets.length ? h('div', { class: 'preset-list' }, d.presets.map((p, i) => presetCard(p, i))) :
        emptyState('No presets yet.', h('p', {}, 'Make one (for example “default”), then add gates to it. Agents tell Pixie which preset they run with.')),
      h('section', { class: 'card loose', 'aria-labelledby': 'loose-title' },
        h('h2', { id: 'loose-title' }, 'Gates in no preset'),
        loose.length ? h('ul', { class: 'plain' }, loose.map((g) => h('li', {}, h('a', { href: '#/gates?edit=' + encodeURIComponent(g.name) }, g.name), h('span', { class: 'muted' }, ` · ${pointLabel(g.point)}`), g.enabled ? null : h('span', { class: 'badge' }, 'Off')))) :
          h('p', { class: 'muted' }, d.gates.length ? 'Every gate is in at least one preset.' : 'There are no gates yet.')));
  };

  function presetCard(p, i) {
    const d = draft.get().draft;
    const byName = new Map(d.gates.map((g) => [g.name, g]));
    const errs = (sub) => draft.problems(`presets[${i}]${sub}`).map((x) => h('p', { class: 'field-error', role: 'alert' }, x.message));
    const free = d.gates.filter((g) => !p.gates.some((a) => a.gate === g.name));
    const pick = select([['', free.length ? 'Choose a gate…' : 'Every gate is attached'], ...free.map((g) => [g.name, `${g.name} — ${pointLabel(g.point)}`])], '', { name: 'add-gate', 'aria-label': `Gate to add to ${p.name}`, disabled: !free.length });
    const addBtn = h('button', { type: 'button', class: 'secondary', disabled: !free.length, 'data-action': 'add-gate' }, 'Add gate');
    addBtn.addEventListener('click', () => {
      if (!pick.value) { pick.focus(); return; }
      const name = pick.value;
      draft.change((x) => { x.presets[i].gates.push({ gate: name, enabled: true }); });
      drawHead(); drawPresets();
      /** @type {HTMLElement} */ (presetsSec.querySelector(`[data-preset="${CSS.escape(p.name)}"] [name=add-gate]`))?.focus();
    });
    let confirm = false;
    const remove = h('div', { class: 'row' });
    const drawRemove = () => fill(remove, ...(confirm ? [
      h('span', {}, `Remove preset ${p.name}?`),
      h('button', { type: 'button', class: 'danger small', onclick: () => { draft.change((x) => { x.presets.splice(i, 1); }); drawHead(); drawPresets(); /** @type {HTMLElement} */ (presetsSec.querySelector('[name=preset]'))?.focus(); } }, 'Remove'),
      h('button', { type: 'button', class: 'secondary small', onclick: () => { confirm = false; drawRemove(); } }, 'Keep'),
    ] : [h('button', { type: 'button', class: 'link', 'aria-label': `Remove preset ${p.name}`, onclick: () => { confirm = true; drawRemove(); /** @type {HTMLElement} */ (remove.querySelector('.danger')).focus(); } }, 'Remove preset')]));
    drawRemove();
    return h('article', { class: 'card preset', 'data-preset': p.name, 'aria-label': `Preset ${p.name}` },
      h('div', { class: 'row spread' }, h('h3', { class: 'preset-name' }, p.name), remove),
      h('div', {}, errs('.name')),
      p.gates.length ? h('table', { class: 'attached' },
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Gate'), h('th', { scope: 'col' }, 'When'), h('th', { scope: 'col' }, 'In this preset'), h('th', { scope: 'col' }, h('span', { class: 'sr-only' }, 'Actions')))),
        h('tbody', {}, p.gates.map((a, j) => {
          const g = byName.get(a.gate);
          return h('tr', { 'data-gate': a.gate },
            h('td', {}, h('a', { href: '#/gates?edit=' + encodeURIComponent(a.gate) }, a.gate), g && !g.enabled ? h('span', { class: 'badge' }, 'Off everywhere') : null, errs(`.gates[${j}].gate`)),
            h('td', {}, g ? pointLabel(g.point) : h('span', { class: 'error' }, 'missing')),
            h('td', {}, switchEl({ label: `${a.gate} in ${p.name}`, hideLabel: true, checked: a.enabled, onchange: (on) => { draft.change((x) => { x.presets[i].gates[j].enabled = on; }); drawHead(); drawPresets(); /** @type {HTMLElement} */ (presetsSec.querySelector(`[data-preset="${CSS.escape(p.name)}"] tr[data-gate="${CSS.escape(a.gate)}"] input`))?.focus(); } }), errs(`.gates[${j}].enabled`)),
            h('td', { class: 'right' }, h('button', { type: 'button', class: 'link', 'aria-label': `Detach ${a.gate} from ${p.name}`, onclick: () => {
              draft.change((x) => { x.presets[i].gates.splice(j, 1); });
              drawHead(); drawPresets();
              /** @type {HTMLElement} */ (presetsSec.querySelector(`[data-preset="${CSS.escape(p.name)}"] [name=add-gate]`))?.focus();
            } }, 'Detach')));
        }))) : h('p', { class: 'muted' }, 'No gates in this preset yet.'),
      h('div', { class: 'inline-form add-gate' }, h('div', { class: 'field' }, pick), addBtn));
  }

  // --- modules ---
  let modules = null; let modErr = null; let maxSize = 0;
  const drawModules = (uploadErr) => {
    const file = h('input', { type: 'file', name: 'module', accept: '.wasm,application/wasm' });
    const name = h('input', { name: 'module-name', placeholder: 'taken from the file name', autocomplete: 'off', spellcheck: 'false' });
    file.addEventListener('change', () => { if (!name.value && file.files[0]) name.value = file.files[0].name.replace(/\.wasm$/, ''); });
    const up = h('button', { type: 'button', 'data-action': 'upload-module' }, 'Upload');
    up.addEventListener('click', () => busy(up, async () => {
      const f = file.files[0];
      if (!f) { drawModules({ message: 'Choose a .wasm file first.' }); return; }
      const fd = new FormData();
      fd.append('name', name.value.trim() || f.name.replace(/\.wasm$/, ''));
      fd.append('module', f, f.name);
      try { const m = await api('POST', '/v1/modules', fd); ui.toast(`Uploaded ${m.name}.`); await loadModules(); drawModules(); } catch (e) { drawModules(e); }
    }));
    fill(modulesSec, 
      h('h2', { id: 'modules-title' }, 'WASM modules'),
      h('p', { class: 'muted' }, 'Gates can use a WebAssembly guest as their rule instead of a script. It runs sandboxed, with no network; the only files it sees are a read-only view of the session’s working directory, and only when the session’s sandbox policy grants it (never the Pixie home). In Try it, it runs with no files at all. Build guests with the Go SDK (see the guide).'),
      !modules && !modErr ? h('p', { class: 'muted' }, 'Loading…') : null,
      modErr ? h('p', { class: 'muted' }, `Modules are not available here: ${modErr.message}`) : !modules ? null : h('div', { class: 'inline-form' }, field('Module file', file), field('Name', name), up),
      modules && maxSize ? h('p', { class: 'help' }, `A .wasm guest of at most ${fmtBytes(maxSize)}. Uploading under an existing name replaces that module.`) : null,
      uploadErr ? h('p', { class: 'error', role: 'alert' }, uploadErr.message) : null,
      modules && modules.length ? h('table', {},
        h('thead', {}, h('tr', {}, ['Module', 'Size', 'Uploaded', 'SHA-256', ''].map((x) => h('th', { scope: 'col' }, x)))),
        h('tbody', {}, modules.map((m) => h('tr', { 'data-module': m.name }, h('td', {}, h('code', {}, m.name)), h('td', {}, fmtBytes(m.size)), h('td', {}, fmtTime(m.uploadedAt)),
          h('td', {}, h('code', { class: 'hash', title: m.sha256 }, (m.sha256 || '').slice(0, 12))),
          h('td', { class: 'right' }, h('button', { type: 'button', class: 'link', 'aria-label': `Delete module ${m.name}`, onclick: async (ev) => {
            try { await api('DELETE', '/v1/modules/' + encodeURIComponent(m.name)); ui.toast(`Deleted ${m.name}.`); await loadModules(); drawModules(); } catch (e) { drawModules(e); }
            void ev;
          } }, 'Delete')))))) : (modules && !modErr ? h('p', { class: 'muted' }, 'No modules uploaded.') : null));
  };
  const loadModules = async () => {
    try { const r = await api('GET', '/v1/modules'); modules = r.modules || []; maxSize = r.maxSize || 0; modErr = null; } catch (e) { modules = null; modErr = e.status === 404 ? { message: 'this server has no module registry.' } : e; }
  };

  drawHead();
  drawPresets();
  drawFolder();
  drawModules();
  // #/scope?preset=NAME (from the Gates page's missing-preset warning) opens that preset.
  const want = ui.params && ui.params.get('preset');
  const card = want ? /** @type {HTMLElement} */ (presetsSec.querySelector(`[data-preset="${CSS.escape(want)}"]`)) : null;
  if (card) { card.scrollIntoView({ block: 'center' }); /** @type {HTMLElement} */ (card.querySelector('[name=add-gate]'))?.focus(); }
  const [l] = await Promise.all([api('GET', '/v1/gates/scripts').catch((e) => { drawFolder(e); return null; }), loadModules()]);
  if (l) { listing = l; drawFolder(); }
  drawModules();
  void errorBox;
}
