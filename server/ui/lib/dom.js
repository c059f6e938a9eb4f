// @ts-check
// Building DOM: h() (text is always inserted as text, never parsed as HTML), fresh ids for
// label/input pairs, error paragraphs, and toasts. It imports nothing.

/**
 * A child of h(): a node, text (numbers are shown as text), nothing (null, undefined, false),
 * or an array of children.
 * @typedef {Node | string | number | boolean | null | undefined | ChildList} Child
 * @typedef {Child[]} ChildList
 */

/**
 * The attributes of h(): on… functions become listeners, class the class name, value and
 * checked the properties; null, undefined and false leave an attribute out, true sets it empty.
 * @typedef {Record<string, any>} Attrs
 */

/**
 * h builds an element: h('div', {class: 'x', onclick: f}, child, 'text', …).
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attrs | null} [attrs]
 * @param {...Child} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'value') /** @type {HTMLInputElement} */ (/** @type {unknown} */ (el)).value = v;
    else if (k === 'checked') /** @type {HTMLInputElement} */ (/** @type {unknown} */ (el)).checked = !!v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of /** @type {any[]} */ (children).flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/**
 * errorBox shows an error where it happened: a role=alert paragraph.
 * @param {unknown} err
 * @returns {HTMLParagraphElement}
 */
export function errorBox(err) {
  const m = err && typeof err === 'object' && 'message' in err && err.message ? err.message : String(err);
  return h('p', { class: 'error', role: 'alert' }, String(m));
}

/**
 * fieldErrors maps a refusal's details ([{field, message}]) to fields: it returns a function
 * that gives the messages of one field, so a form can show each next to its input.
 * @param {unknown} err
 * @returns {(field: string) => HTMLParagraphElement[]}
 */
export function fieldErrors(err) {
  const details = err && typeof err === 'object' && 'details' in err ? err.details : null;
  /** @type {{ field?: string, message?: string }[]} */
  const list = Array.isArray(details) ? details : [];
  return (field) => list.filter((d) => d.field === field || (d.field || '').startsWith(field + '.'))
    .map((d) => h('p', { class: 'field-error', role: 'alert' }, d.message));
}

/**
 * toast shows a short message for four seconds.
 * @param {string} text
 */
export function toast(text) {
  const t = h('div', { class: 'toast' }, text);
  const box = /** @type {HTMLElement} */ (document.getElementById('toasts'));
  // Just under the header (or the top of the window once it scrolled away): never over Log out
  // or the navigation, nor over the Pet and hint panels that open at the bottom.
  const top = document.querySelector('#app .top');
  const app = document.getElementById('app');
  box.style.top = Math.max(8, (top && app && !app.hidden ? top.getBoundingClientRect().bottom : 0) + 8) + 'px';
  box.append(t);
  setTimeout(() => t.remove(), 4000);
}

let seq = 0;
/**
 * uid returns a fresh id for label/input pairs.
 * @param {string} [prefix]
 * @returns {string}
 */
export function uid(prefix = 'f') { seq += 1; return `${prefix}-${seq}`; }
