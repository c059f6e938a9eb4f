// @ts-check
// The block a gate's note is shown in (spec: pixie-gate.md, "Chat notes and per-session
// switches"): a title from the note's bracketed first-line label ("[한국어 번역]" → 한국어 번역;
// without one, the gate's name), a "not verified" badge when the label says so ("not verified",
// any case, or "미확인"), the body rendered as Markdown (safely: markdown.js never parses HTML),
// Hide (collapses the block only) and Turn off in this session (the gate's per-session switch).
import { h, uid } from './dom.js';
import { markdown } from './markdown.js';

/**
 * @typedef {object} ParsedNote
 * @property {string} title the label, or the fallback
 * @property {string} body the note without its label
 * @property {boolean} labelled whether the note had a label
 * @property {boolean} notVerified whether the label says the note is not verified
 */

/**
 * parseNote splits a leading [label] off a note, as the server does for chat notes.
 * @param {string} note
 * @param {string} fallback the title of a note without a label (the gate's name)
 * @returns {ParsedNote}
 */
export function parseNote(note, fallback) {
  const text = String(note || '');
  const nl = text.indexOf('\n');
  const first = (nl < 0 ? text : text.slice(0, nl)).replace(/^[ \t]+/, '');
  const rest = nl < 0 ? '' : text.slice(nl + 1);
  const end = first.indexOf(']');
  if (!first.startsWith('[') || end < 2) return { title: fallback, body: text.trim(), labelled: false, notVerified: false };
  const label = first.slice(1, end).trim();
  if (!label) return { title: fallback, body: text.trim(), labelled: false, notVerified: false };
  let body = first.slice(end + 1).trim();
  if (rest) body = body ? body + '\n' + rest : rest;
  return { title: label, body: body.trim(), labelled: true, notVerified: /not verified/i.test(label) || label.includes('미확인') };
}

/**
 * @typedef {object} NoteBlockOptions
 * @property {string} gate the gate whose run left the note (the fallback title)
 * @property {boolean} [off] whether the gate is switched off in this session now
 * @property {((on: boolean) => Promise<unknown>) | null} [setSwitch] turns the gate on or off in
 *   this session; without it the block has no switch button
 */

/**
 * noteBlock builds the block of one note.
 * @param {string} note
 * @param {NoteBlockOptions} opts
 * @returns {HTMLElement}
 */
export function noteBlock(note, opts) {
  const n = parseNote(note, opts.gate);
  const bodyId = uid('note');
  const body = h('div', { class: 'note-body', id: bodyId });
  body.append(markdown(n.body));
  const hide = h('button', { type: 'button', class: 'secondary small', 'data-action': 'hide-note', 'aria-expanded': 'true', 'aria-controls': bodyId }, 'Hide');
  hide.addEventListener('click', () => {
    const hidden = !body.hidden;
    body.hidden = hidden;
    block.classList.toggle('collapsed', hidden);
    hide.textContent = hidden ? 'Show' : 'Hide';
    hide.setAttribute('aria-expanded', String(!hidden));
  });
  let off = !!opts.off;
  /** @type {HTMLButtonElement | null} */
  let sw = null;
  const status = h('span', { class: 'muted note-status', role: 'status' });
  if (opts.setSwitch) {
    const setSwitch = opts.setSwitch;
    sw = h('button', { type: 'button', class: 'secondary small', 'data-action': 'switch-gate' });
    const label = () => {
      if (!sw) return;
      sw.textContent = off ? 'Turn on in this session' : 'Turn off in this session';
      status.textContent = off ? `${opts.gate} is off in this session.` : '';
    };
    label();
    sw.addEventListener('click', async () => {
      if (!sw) return;
      sw.disabled = true;
      try {
        await setSwitch(off);
        off = !off;
        label();
      } catch (e) {
        status.textContent = e && typeof e === 'object' && 'message' in e ? String(e.message) : String(e);
      } finally {
        sw.disabled = false;
      }
    });
  }
  const block = h('section', { class: 'chat-note', 'data-gate': opts.gate, 'aria-label': `Note of ${opts.gate}: ${n.title}` },
    h('div', { class: 'note-head' },
      h('strong', { class: 'note-title' }, n.title),
      n.notVerified ? h('span', { class: 'badge warn', 'data-badge': 'not-verified' }, 'not verified') : null,
      n.labelled ? h('span', { class: 'muted' }, `· ${opts.gate}`) : null,
      h('span', { class: 'note-actions' }, hide, sw)),
    body, status);
  return block;
}
