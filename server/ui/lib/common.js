// @ts-check
// Shared building blocks of Studio's pages: action names, formatting, switches, tabs, page
// headers and read-only detail lists. Everything builds DOM through h() (never HTML strings).
// The point names are in points.js, read from the server.
import { h, uid } from './dom.js';

/** @type {Record<string, string>} */
export const ACTIONS = {
  replaced: 'Replaced', appended: 'Appended', rejected: 'Rejected', blocked: 'Blocked', steered: 'Asked to redo', none: 'None',
};
/** @type {Record<string, string>} */
export const CONCLUDED = { pixie: 'Pixie', 'hook-script': 'Hook script', 'skipped-by-hook': 'Skipped by hook' };

/**
 * @param {string} [action]
 * @returns {HTMLSpanElement}
 */
export function actionBadge(action) {
  const bad = action === 'rejected' || action === 'blocked' || action === 'steered';
  const ok = action === 'none';
  return h('span', { class: 'badge' + (bad ? ' bad' : ok ? ' ok' : '') }, (action && ACTIONS[action]) || action || '—');
}

// fmtTime shows a timestamp in the reader's locale; empty or zero times show a dash.
/**
 * @param {string} [t]
 * @returns {string}
 */
export function fmtTime(t) {
  if (!t || t.startsWith('0001-')) return '—';
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return t;
  return d.toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

/**
 * @param {number | null} [n]
 * @returns {string}
 */
export function fmtBytes(n) {
  if (n == null) return '—';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

/**
 * @param {{ inputTokens?: number, outputTokens?: number } | null} [u]
 * @returns {string}
 */
export function fmtUsage(u) {
  if (!u) return '—';
  const i = u.inputTokens || 0; const o = u.outputTokens || 0;
  return `${i} in · ${o} out`;
}

/**
 * @param {number | null} [ms]
 * @returns {string}
 */
export function fmtMs(ms) {
  if (ms == null) return '—';
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

// pageHead is a page's title row: a heading, an optional lead sentence, and actions on the right.
/**
 * @param {string} title
 * @param {string | null} [lead]
 * @param {...Node} actions
 * @returns {HTMLDivElement}
 */
export function pageHead(title, lead, ...actions) {
  return h('div', { class: 'page-head' },
    h('div', { class: 'page-title' }, h('h1', {}, title), lead ? h('p', { class: 'lead' }, rich(lead)) : null),
    actions.length ? h('div', { class: 'page-actions' }, ...actions) : null);
}

// switchEl is an accessible on/off switch (a checkbox with role=switch): Space toggles it.
// onchange(checked, input) may return a promise; the switch is disabled while it runs and
// reverts when it throws.
/**
 * @param {{ label: string, checked?: boolean, onchange?: (checked: boolean, input: HTMLInputElement) => unknown,
 *   hideLabel?: boolean, disabled?: boolean, name?: string }} opts
 * @returns {HTMLSpanElement}
 */
export function switchEl({ label, checked, onchange, hideLabel, disabled, name }) {
  const id = uid('sw');
  const input = h('input', { type: 'checkbox', role: 'switch', id, class: 'switch', checked, disabled, name });
  input.addEventListener('change', async () => {
    if (!onchange) return;
    const want = input.checked;
    input.disabled = true;
    try { await onchange(want, input); } catch { input.checked = !want; } finally { input.disabled = !!disabled; }
  });
  return h('span', { class: 'switch-wrap' }, input,
    h('label', { for: id, class: hideLabel ? 'sr-only' : 'switch-label' }, label));
}

// tabs builds an ARIA tablist. list is [{id, label, render(panel)}]; the selected tab is
// current; onselect(id) is called when the person picks another. Arrow keys, Home and End move
// between tabs.
/**
 * @param {{ id: string, label: string }[]} list
 * @param {string} current
 * @param {(id: string, byKey?: boolean) => void} onselect
 * @param {string} [label]
 * @returns {{ bar: HTMLDivElement, panel: HTMLDivElement }}
 */
export function tabs(list, current, onselect, label) {
  const bar = h('div', { class: 'tabs', role: 'tablist', 'aria-label': label || 'Sections' });
  const panel = h('div', { role: 'tabpanel', class: 'tabpanel', tabindex: '0' });
  const buttons = list.map((t) => {
    const b = h('button', {
      role: 'tab', id: 'tab-' + t.id, 'data-tab': t.id, 'aria-selected': String(t.id === current),
      'aria-controls': 'tabpanel', tabindex: t.id === current ? '0' : '-1', type: 'button',
    }, t.label);
    b.addEventListener('click', () => onselect(t.id));
    return b;
  });
  bar.addEventListener('keydown', (ev) => {
    const i = buttons.indexOf(/** @type {HTMLButtonElement} */ (document.activeElement));
    if (i < 0) return;
    let j = -1;
    if (ev.key === 'ArrowRight') j = (i + 1) % buttons.length;
    else if (ev.key === 'ArrowLeft') j = (i - 1 + buttons.length) % buttons.length;
    else if (ev.key === 'Home') j = 0;
    else if (ev.key === 'End') j = buttons.length - 1;
    if (j < 0) return;
    ev.preventDefault();
    buttons[j].focus();
    onselect(list[j].id, true);
  });
  bar.append(...buttons);
  panel.id = 'tabpanel';
  panel.setAttribute('aria-labelledby', 'tab-' + current);
  return { bar, panel };
}

// dl is a read-only list of label/value pairs; values may be nodes. Empty values show a dash.
/**
 * @param {any[][]} pairs each [label, value]; a pair without a value (undefined) is left out
 * @param {string} [cls]
 * @returns {HTMLDListElement}
 */
export function dl(pairs, cls) {
  const out = h('dl', { class: 'kv' + (cls ? ' ' + cls : '') });
  for (const [k, v] of pairs) {
    if (v === undefined) continue;
    out.append(h('dt', {}, k), h('dd', {}, v === null || v === '' ? h('span', { class: 'muted' }, '—') : v));
  }
  return out;
}

// textBlock shows a longer text as preformatted, or a muted placeholder when empty.
/**
 * @param {string | null} [text]
 * @param {string} [empty]
 * @returns {HTMLElement}
 */
export function textBlock(text, empty) {
  if (text === undefined || text === null || text === '') return h('p', { class: 'muted' }, empty || 'Empty.');
  return h('pre', {}, text);
}

// field builds a labelled control with its help text and a slot for its refusals.
/**
 * @param {string} label
 * @param {HTMLElement} control
 * @param {{ help?: string | null, errors?: Node[], id?: string }} [opts]
 * @returns {HTMLDivElement}
 */
export function field(label, control, { help, errors, id } = {}) {
  const cid = id || control.id || uid('fld');
  control.id = cid;
  const helpId = help ? cid + '-help' : null;
  if (helpId) control.setAttribute('aria-describedby', helpId);
  const errs = h('div', { class: 'field-errors', 'data-errors-for': cid });
  if (errors && errors.length) { errs.append(...errors); control.setAttribute('aria-invalid', 'true'); } else control.removeAttribute('aria-invalid');
  return h('div', { class: 'field' }, h('label', { for: cid }, label), control, errs,
    help ? h('p', { class: 'help', id: helpId }, help) : null);
}

// select builds a <select> from [value, label] pairs.
/**
 * @param {string[][]} options each [value, label]
 * @param {string | null} [value]
 * @param {import('./dom.js').Attrs} [attrs]
 * @returns {HTMLSelectElement}
 */
export function select(options, value, attrs = {}) {
  return h('select', attrs, ...options.map(([v, l]) => h('option', { value: v, selected: v === value }, l)));
}

// busy disables a button while f runs and restores it after.
/**
 * @template T
 * @param {HTMLButtonElement} button
 * @param {() => Promise<T> | T} f
 * @returns {Promise<T>}
 */
export async function busy(button, f) {
  const was = button.disabled;
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  try { return await f(); } finally { button.disabled = was; button.removeAttribute('aria-busy'); }
}

// status is a polite live region for the result of an action.
/** @returns {HTMLParagraphElement} */
export function statusLine() {
  return h('p', { class: 'status', role: 'status', 'aria-live': 'polite' });
}

// emptyState is a friendly paragraph for an empty list.
/**
 * @param {string} text
 * @param {...import('./dom.js').Child} more
 * @returns {HTMLDivElement}
 */
export function emptyState(text, ...more) {
  return h('div', { class: 'empty' }, h('p', {}, text), ...more);
}

// replaceHash changes the current page's query without reloading the page (no hashchange).
/** @param {string} hash */
export function replaceHash(hash) {
  history.replaceState(null, '', hash);
}

// fill replaces el's children with kids, skipping null, undefined and false (which
// replaceChildren would turn into text) and flattening arrays.
/**
 * @template {Element} E
 * @param {E} el
 * @param {...any} kids
 * @returns {E}
 */
export function fill(el, ...kids) {
  el.replaceChildren(...kids.flat(Infinity).filter((k) => k !== null && k !== undefined && k !== false));
  return el;
}

// rich turns a sentence with `code` spans into text and <code> nodes (no HTML is parsed).
/**
 * @param {unknown} text
 * @returns {(string | HTMLElement)[]}
 */
export function rich(text) {
  return String(text).split('`').map((part, i) => (i % 2 ? h('code', {}, part) : part)).filter((x) => x !== '');
}

/**
 * A `pixie ask` / `pixie judge` call as a run record keeps it.
 * @typedef {{ type: string, judgeType?: string, label?: string, engine?: string, confidence?: number | null,
 *   usage?: { inputTokens?: number, outputTokens?: number }, durationMs?: number, error?: string }} HelperCall
 */

// helperCalls shows a run's `pixie ask` / `pixie judge` calls: each judge's type, chosen value,
// engine and confidence, usage, time and error (never the text sent).
/**
 * @param {HelperCall[] | null} [calls]
 * @returns {HTMLElement}
 */
export function helperCalls(calls) {
  if (!calls || !calls.length) return h('p', { class: 'muted' }, 'No helper calls.');
  return h('div', { class: 'table-wrap' }, h('table', { class: 'stack-sm helper-calls' },
    h('thead', {}, h('tr', {}, ['Call', 'Judge type', 'Chosen', 'Engine', 'Confidence', 'Usage', 'Time', 'Error'].map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, calls.map((c) => h('tr', {}, h('td', { 'data-label': 'Call' }, c.type), h('td', { 'data-label': 'Judge type' }, c.judgeType || '—'),
      h('td', { 'data-label': 'Chosen' }, c.label || '—'), h('td', { 'data-label': 'Engine' }, c.engine || '—'),
      h('td', { 'data-label': 'Confidence' }, c.confidence != null ? c.confidence.toFixed(2) : '—'), h('td', { 'data-label': 'Usage' }, fmtUsage(c.usage)),
      h('td', { 'data-label': 'Time' }, fmtMs(c.durationMs)), h('td', { 'data-label': 'Error' }, c.error ? h('span', { class: 'error' }, c.error) : '—'))))));
}
