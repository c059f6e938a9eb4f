// The working copy of the gate set, shared by the Gates and Scope pages. Edits change the
// draft; only Save sends it (PUT /v1/gates, all-or-nothing, with the revision it was loaded
// at). A refused save keeps the draft and its problems ([{field, message}] with fields such as
// "gates[2].task" or "presets[0].gates[1].enabled"), which the pages show next to their fields.

let state = null;
const listeners = new Set();

function clone(v) { return JSON.parse(JSON.stringify(v)); }

function emit() { for (const f of listeners) f(state); }

// onChange registers f to be told when the draft changes; it returns the unregistering function.
export function onChange(f) { listeners.add(f); return () => listeners.delete(f); }

// load returns the draft, loading the saved set the first time (or when force is set and there
// are no unsaved changes).
export async function load(api, force) {
  if (state && (!force || state.dirty)) return state;
  const saved = await api('GET', '/v1/gates');
  state = { saved, draft: clone(saved), dirty: false, error: null };
  return state;
}

export function get() { return state; }

// change applies f to the draft and marks it unsaved.
export function change(f) {
  f(state.draft);
  state.dirty = true;
  emit();
}

// discard drops the unsaved changes.
export function discard() {
  state.draft = clone(state.saved);
  state.dirty = false;
  state.error = null;
  emit();
}

// save sends the draft. On success the saved set (as the server normalised it) becomes the new
// draft; on refusal the error (with its problems) is kept and thrown.
export async function save(api) {
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

// problems returns the refusal's problems whose field is prefix or lies under it.
export function problems(prefix) {
  const e = state && state.error;
  const list = e && Array.isArray(e.details) ? e.details : [];
  if (prefix === undefined) return list;
  return list.filter((d) => d.field === prefix || (d.field || '').startsWith(prefix + '.') || (d.field || '').startsWith(prefix + '['));
}

// gateIndex finds a gate of the draft by name.
export function gateIndex(name) {
  return state.draft.gates.findIndex((g) => g.name === name);
}

// conflicts finds presets where more than one enabled gate is attached and switched on at the
// same point (the server refuses to save them).
export function conflicts(draft) {
  const byName = new Map(draft.gates.map((g) => [g.name, g]));
  const out = [];
  for (const p of draft.presets) {
    const at = new Map();
    for (const a of p.gates) {
      const g = byName.get(a.gate);
      if (!g || !a.enabled || !g.enabled) continue;
      if (!at.has(g.point)) at.set(g.point, []);
      at.get(g.point).push(g.name);
    }
    for (const [point, names] of at) if (names.length > 1) out.push({ preset: p.name, point, gates: names });
  }
  return out;
}

// presetsOf lists the presets a gate is attached to.
export function presetsOf(draft, name) {
  return draft.presets.filter((p) => p.gates.some((a) => a.gate === name)).map((p) => p.name);
}

// Warn before leaving the page with unsaved gate changes.
window.addEventListener('beforeunload', (ev) => {
  if (state && state.dirty) { ev.preventDefault(); ev.returnValue = ''; }
});
