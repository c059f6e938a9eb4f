// @ts-check
// A small Markdown renderer for gate notes: paragraphs (line breaks kept), headings, bullet and
// numbered lists, block quotes, fenced code, inline code, bold, italics and links. It builds DOM
// nodes through h(), so text is only ever text: raw HTML in a note (<img onerror=…>, <script>)
// is shown as the characters it is, never parsed. Links keep only http:, https: and mailto:
// targets (anything else, javascript: included, is shown as plain text) and open in a new tab
// without the opener.
import { h } from './dom.js';

/**
 * markdown renders text as a fragment of block elements.
 * @param {string} text
 * @returns {DocumentFragment}
 */
export function markdown(text) {
  const out = document.createDocumentFragment();
  const lines = String(text || '').replace(/\r\n?/g, '\n').split('\n');
  let i = 0;
  /** @type {string[]} */
  let para = [];
  const flush = () => {
    if (para.length) out.append(h('p', {}, inline(para.join('\n'))));
    para = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    const fence = /^\s*(```|~~~)\s*([\w+-]*)\s*$/.exec(line);
    if (fence) {
      flush();
      const body = [];
      i++;
      while (i < lines.length && !new RegExp('^\\s*' + fence[1] + '\\s*$').test(lines[i])) body.push(lines[i++]);
      i++; // the closing fence (or the end)
      out.append(h('pre', {}, h('code', fence[2] ? { 'data-lang': fence[2] } : {}, body.join('\n'))));
      continue;
    }
    const head = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (head) {
      flush();
      // Notes sit inside a block with its own title: their headings start below it.
      const level = Math.min(6, head[1].length + 3);
      out.append(h(/** @type {'h4'} */ ('h' + level), {}, inline(head[2])));
      i++;
      continue;
    }
    const item = /^\s{0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/.exec(line);
    if (item) {
      flush();
      const ordered = /\d/.test(item[1]);
      const list = h(ordered ? 'ol' : 'ul');
      while (i < lines.length) {
        const m = /^\s{0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/.exec(lines[i]);
        if (!m || /\d/.test(m[1]) !== ordered) break;
        const parts = [m[2]];
        i++;
        // Continuation lines indented under the item belong to it.
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !/^\s{0,3}([-*+]|\d{1,9}[.)])\s+/.test(lines[i])) parts.push(lines[i++].trim());
        list.append(h('li', {}, inline(parts.join('\n'))));
      }
      out.append(list);
      continue;
    }
    if (/^\s{0,3}>/.test(line)) {
      flush();
      const quoted = [];
      while (i < lines.length && /^\s{0,3}>/.test(lines[i])) quoted.push(lines[i++].replace(/^\s{0,3}>\s?/, ''));
      const q = h('blockquote');
      q.append(markdown(quoted.join('\n')));
      out.append(q);
      continue;
    }
    if (/^\s{0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) {
      flush();
      out.append(h('hr'));
      i++;
      continue;
    }
    if (line.trim() === '') flush();
    else para.push(line);
    i++;
  }
  flush();
  return out;
}

/**
 * inline renders a span's emphasis, code and links.
 * @param {string} s
 * @returns {(Node | string)[]}
 */
function inline(s) {
  /** @type {(Node | string)[]} */
  const out = [];
  // Code first (its content is literal), then links, bold, italics.
  const re = /(`+)([\s\S]*?[^`])\1(?!`)|\[([^\]\n]+)\]\(([^)\s]+)\)|\*\*([^*\n]+)\*\*|__([^_\n]+)__|\*([^*\n]+)\*|(^|[^\w])_([^_\n]+)_(?!\w)/g;
  let last = 0;
  let m;
  while ((m = re.exec(s))) {
    let start = m.index;
    if (m[8] !== undefined) start += m[8].length; // the character before _italics_
    if (start > last) out.push(s.slice(last, start));
    if (m[1]) out.push(h('code', {}, m[2]));
    else if (m[3] !== undefined) out.push(link(m[3], m[4]));
    else if (m[5] !== undefined || m[6] !== undefined) out.push(h('strong', {}, inline(m[5] ?? m[6])));
    else if (m[7] !== undefined) out.push(h('em', {}, inline(m[7])));
    else if (m[9] !== undefined) out.push(h('em', {}, inline(m[9])));
    last = re.lastIndex;
  }
  if (last < s.length) out.push(s.slice(last));
  return out;
}

/**
 * link is an anchor for a safe target, else the link's text as written.
 * @param {string} text
 * @param {string} href
 * @returns {Node | string}
 */
function link(text, href) {
  let u;
  try { u = new URL(href, 'https://invalid.example/'); } catch { return `[${text}](${href})`; }
  if (!['http:', 'https:', 'mailto:'].includes(u.protocol) || u.hostname === 'invalid.example') return `[${text}](${href})`;
  return h('a', { href: u.href, target: '_blank', rel: 'noopener noreferrer' }, text);
}
