// @ts-check
// The working copy of the gate set, shared by the Gates and Scope pages. Edits change the
// draft; only Save sends it (PUT /v1/gates, all-or-nothing, with the revision it was loaded
// at). A refused save keeps the draft and its problems ([{field, message}] with fields such as
// "gates[2].task" or "presets[0].gates[1].enabled"), which the pages show next to their fields.

/**
 * A gate as GET /v1/gates serves it: the fields Studio reads are named, the rest travel as
 * they are.
 * @typedef {{ name: string, point: string, enabled: boolean, [field: string]: any }} Gate
 * @typedef {{ gate: string, enabled: boolean }} Attachment
 * @typedef {{ name: string, gates: Attachment[], [field: string]: any }} Preset
 * @typedef {{ gates: Gate[], presets: Preset[], revision: number, [field: string]: any }} GateSet
 * @typedef {{ saved: GateSet, draft: GateSet, dirty: boolean, error: any }} Draft
 * @typedef {{ field?: string, message?: string }} Problem
 * @typedef {{ preset: string, point: string, gates: string[] }} Conflict
 */

/** @type {Draft | null} */
let state = null;
/** @type {Set<(d: Draft | null) => void>} */
const listeners = new Set();

/**
 * @template T
 * @param {T} v
 * @returns {T}
 */
function clone(v) { return JSON.parse(JSON.stringify(v)); }

function emit() { for (const f of listeners) f(state); }

// loaded returns the draft; the pages load it (load) before they read or change it.
function loaded() {
  if (!state) throw new Error('the gate draft is not loaded');
  return state;
}

/**
 * onChange registers f to be told when the draft changes; it returns the unregistering function.
 * @param {(d: Draft | null) => void} f
 * @returns {() => boolean}
 */
export function onChange(f) { listeners.add(f); return () => listeners.delete(f); }

/**
 * load returns the draft, loading the saved set the first time (or when force is set and there
 * are no unsaved changes).
 * @param {typeof import('./api.js').api} api
 * @param {boolean} [force]
 * @returns {Promise<Draft>}
 */
export async function load(api, force) {
  if (state && (!force || state.dirty)) return state;
  const saved = await api('GET', '/v1/gates');
  state = { saved, draft: clone(saved), dirty: false, error: null };
  return state;
}

/** @returns {Draft | null} */
export function get() { return state; }

/**
 * change applies f to the draft and marks it unsaved.
 * @param {(draft: GateSet) => void} f
 */
export function change(f) {
  const state = loaded();
  f(state.draft);
  state.dirty = true;
  emit();
}

// discard drops the unsaved changes.
export function discard() {
  const state = loaded();
  state.draft = clone(state.saved);
  state.dirty = false;
  state.error = null;
  emit();
}

/**
 * save sends the draft. On success the saved set (as the server normalised it) becomes the new
 * draft; on refusal the error (with its problems) is kept and thrown.
 * @param {typeof import('./api.js').api} api
 * @returns {Promise<GateSet>}
 */
export async function save(api) {
  const state = loaded();
  try {
    const body = { gates: state.draft.gates, presets: state.draft.presets, revision: state.saved.revision };
    const saved = await api('PUT', '/v1/gates', body);
    state.saved = saved;
    state.draft = clone(saved);
    state.dirty = false;
    state.error = null;
    emit();
    return saved;
  } catch (e) {
    state.error = e;
    emit();
    throw e;
  }
}

/**
 * problems returns the refusal's problems whose field is prefix or lies under it (all of them
 * without a prefix).
 * @param {string} [prefix]
 * @returns {Problem[]}
 */
export function problems(prefix) {
  const e = state && state.error;
  /** @type {Problem[]} */
  const list = e && Array.isArray(e.details) ? e.details : [];
  if (prefix === undefined) return list;
  return list.filter((d) => d.field === prefix || (d.field || '').startsWith(prefix + '.') || (d.field || '').startsWith(prefix + '['));
}

/**
 * gateIndex finds a gate of the draft by name (-1 when there is none).
 * @param {string} name
 * @returns {number}
 */
export function gateIndex(name) {
  return loaded().draft.gates.findIndex((g) => g.name === name);
}

/**
 * conflicts finds presets where more than one enabled gate is attached and switched on at the
 * same point (the server refuses to save them).
 * @param {GateSet} draft
 * @returns {Conflict[]}
 */
export function conflicts(draft) {
  const byName = new Map(draft.gates.map((g) => [g.name, g]));
  /** @type {Conflict[]} */
  const out = [];
  for (const p of draft.presets) {
    /** @type {Map<string, string[]>} */
    const at = new Map();
    for (const a of p.gates) {
      const g = byName.get(a.gate);
      if (!g || !a.enabled || !g.enabled) continue;
      if (!at.has(g.point)) at.set(g.point, []);
      at.get(g.point)?.push(g.name);
    }
    for (const [point, names] of at) if (names.length > 1) out.push({ preset: p.name, point, gates: names });
  }
  return out;
}

/**
 * presetsOf lists the presets a gate is attached to.
 * @param {GateSet} draft
 * @param {string} name
 * @returns {string[]}
 */
export function presetsOf(draft, name) {
  return draft.presets.filter((p) => p.gates.some((a) => a.gate === name)).map((p) => p.name);
}

// Warn before leaving the page with unsaved gate changes.
window.addEventListener('beforeunload', (ev) => {
  if (state && state.dirty) { ev.preventDefault(); ev.returnValue = ''; }
});
