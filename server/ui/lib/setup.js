// @ts-check
// The set-up problems the server has seen in hook calls (GET /v1/gates/setup): presets hooks
// asked for that do not exist (their sessions run no gate at all), no default preset, and hook
// calls without a valid token (those steps ran unchecked). The Gates page shows them above the
// gates, each with the one action that fixes it.
import { h } from './dom.js';
import { fmtTime, rich } from './common.js';

/**
 * @typedef {{ name: string, count: number, firstSeen: string, lastSeen: string, lastSession: string,
 *   lastPoint: string, lastHost?: string }} MissingPreset
 * @typedef {{ name: string, exists: boolean }} DefaultPreset
 * @typedef {{ noToken: number, wrongToken: number, lastAt?: string, since: string }} HookRefusals
 * @typedef {{ missingPresets: MissingPreset[], defaultPreset?: DefaultPreset, refusedHookCalls?: HookRefusals }} SetupReport
 */

/**
 * loadSetup reads the report; null when the server cannot give it (an older server, or an
 * error: the warnings are an aid, the page works without them).
 * @param {typeof import('./api.js').api} api
 * @returns {Promise<SetupReport | null>}
 */
export async function loadSetup(api) {
  try {
    const r = await api('GET', '/v1/gates/setup');
    return r && Array.isArray(r.missingPresets) ? r : null;
  } catch {
    return null;
  }
}

/**
 * @param {number} n
 * @param {string} one
 * @param {string} many
 * @returns {string}
 */
function count(n, one, many) { return `${n} ${n === 1 ? one : many}`; }

/**
 * setupWarnings renders the report's warnings (none: an empty list). saved lists the presets
 * saved now (a preset saved since the report was read is not missing); drafted those only in
 * the unsaved draft; create adds a preset to the draft and opens it on Scope.
 * @param {SetupReport | null} r
 * @param {{ saved: string[], drafted: string[], create: (name: string) => void }} opts
 * @returns {HTMLElement[]}
 */
export function setupWarnings(r, { saved, drafted, create }) {
  if (!r) return [];
  /** @type {HTMLElement[]} */
  const out = [];
  const exists = new Set(saved);
  const def = r.defaultPreset ? r.defaultPreset.name : '';
  /** @param {string} name */
  const action = (name) => drafted.includes(name) ?
    h('span', { class: 'muted' }, 'In your unsaved changes: ', h('a', { href: '#/scope?preset=' + encodeURIComponent(name) }, 'add a gate to it on Scope'), ' and Save.') :
    h('button', { type: 'button', class: 'secondary small', 'data-action': 'create-preset', 'data-preset': name,
      'aria-label': `Create the preset ${name}`, onclick: () => create(name) }, `Create preset “${name}”`);

  const missing = r.missingPresets.filter((m) => !exists.has(m.name));
  if (missing.length) {
    out.push(h('div', { class: 'warn setup-warn', role: 'note', 'data-warn': 'missing-presets' },
      h('strong', {}, missing.length === 1 ? 'Hooks asked for a preset that does not exist. ' : `Hooks asked for ${missing.length} presets that do not exist. `),
      'Their sessions run no gate at all. Create the preset (then add gates to it and Save), or point those hooks at an existing preset (', h('code', {}, 'pixie init claude --preset NAME'), ').',
      h('ul', { class: 'missing-presets' }, missing.map((m) => h('li', { 'data-missing-preset': m.name },
        h('code', {}, m.name), ' — ', count(m.count, 'call', 'calls'), `, last ${fmtTime(m.lastSeen)}`,
        h('span', { class: 'muted' }, ` (session ${m.lastSession}${m.lastHost ? ', ' + m.lastHost : ''})`),
        m.name === def ? h('span', { class: 'muted' }, ' — hooks that name no preset use it') : null,
        ' ', action(m.name))))));
  }
  if (r.defaultPreset && def && !exists.has(def) && !missing.some((m) => m.name === def)) {
    out.push(h('div', { class: 'warn setup-warn', role: 'note', 'data-warn': 'no-default-preset' },
      h('strong', {}, `No preset is called “${def}”. `),
      ...rich(`Hooks that name no preset use \`${def}\` (hooks.defaultPreset), so their sessions would run no gates. `), action(def)));
  }
  const rc = r.refusedHookCalls;
  if (rc && rc.noToken + rc.wrongToken > 0) {
    const n = rc.noToken + rc.wrongToken;
    const how = [rc.noToken ? `${rc.noToken} without a token` : '', rc.wrongToken ? `${rc.wrongToken} with a wrong one` : ''].filter(Boolean).join(', ');
    out.push(h('div', { class: 'warn setup-warn', role: 'note', 'data-warn': 'refused-hook-calls' },
      h('strong', {}, `${count(n, 'hook call', 'hook calls')} carried no valid token `),
      `since the server started (${how}; the last ${fmtTime(rc.lastAt)}), so Pixie checked nothing in those steps. `,
      ...rich('Start the agent with `PIXIE_TOKEN` set to the admin token (the token file in the Pixie home, `~/.pixie/token` by default); `pixie doctor` in the project checks the whole set-up.')));
  }
  return out;
}
