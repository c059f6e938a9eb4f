// @ts-check
// The hint bar (spec: hint.md): a round button docked bottom-right with a pending-count badge
// and a pop-up panel: an input where Enter sends and Shift+Enter adds a newline, the pending
// list with cancel, and the recently consumed hints. It follows the live SSE stream and falls
// back to polling /v1/hints/state (every 4 s, backing off to 12 s after consecutive failures).
// Pushed and polled snapshots go through the same apply path; action frames drive toasts, and a
// hint that moves from pending to consumed between two snapshots toasts too (the polling path
// has no action frames); toasts are de-duplicated by action + hint id.

/**
 * @param {HTMLElement} root
 * @param {import('../lib/ui.js').UI} ui
 */
export function hintBar(root, ui) {
  const { api, h, toast, uid } = ui;
  let snap = { revision: 0, pending: [], consumed: [] };
  let open = false;
  let es = null;
  let pollTimer = null;
  let failures = 0;
  const toasted = new Set();
  const inputId = uid('hint');
  const sessionId = uid('hint-session');

  const count = h('span', { class: 'count', hidden: true });
  const button = h('button', { class: 'pill', 'aria-label': 'Hints', 'aria-expanded': 'false', title: 'Hints (drop a line into the running task)' }, 'Hints', count);
  const status = h('p', { class: 'error', role: 'alert', hidden: true });
  const input = h('textarea', { id: inputId, rows: 2, placeholder: 'A hint for the agent’s next step… (Enter sends, Shift+Enter for a new line)' });
  const session = h('input', { id: sessionId, placeholder: 'optional: one session’s id', title: 'Empty: a global hint, seen once by the first session that takes a step' });
  const pendingList = h('ul', { 'aria-label': 'Pending hints' });
  const consumedList = h('ul', { 'aria-label': 'Recently consumed hints' });
  const conn = h('span', { class: 'muted' });
  const panel = h('div', { class: 'panel', hidden: true, role: 'dialog', 'aria-label': 'Hints' },
    h('div', { class: 'row spread' }, h('strong', {}, 'Hints'), conn),
    h('label', { for: inputId }, 'New hint'), input,
    h('label', { for: sessionId }, 'Session'), session,
    h('div', { class: 'row' }, h('button', { onclick: send }, 'Send')),
    status,
    h('h3', {}, 'Pending'), pendingList,
    h('h3', {}, 'Recently consumed'), consumedList);
  root.replaceChildren(h('div', { class: 'hint-anchor' }, panel, button));

  const setOpen = (v) => {
    open = v;
    panel.hidden = !open;
    button.setAttribute('aria-expanded', String(open));
    if (open) input.focus();
  };
  button.addEventListener('click', () => setOpen(!open));
  // Edit and send (Records) puts a text into the composer for a session: the bar opens with it.
  window.addEventListener('pixie:compose', (ev) => {
    const d = /** @type {CustomEvent} */ (ev).detail || {};
    input.value = d.text || '';
    session.value = d.sessionId || '';
    setOpen(true);
    input.setSelectionRange(input.value.length, input.value.length);
  });
  panel.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') { open = false; panel.hidden = true; button.setAttribute('aria-expanded', 'false'); button.focus(); }
  });
  input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); send(); }
  });
  // The same Enter may also arrive as a keypress of its own (CDP and some input tools send the
  // character apart from the key): it must not add a line break either.
  input.addEventListener('keypress', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) ev.preventDefault();
  });

  async function send() {
    const text = input.value;
    status.hidden = true;
    if (!text.trim()) { status.textContent = 'A hint needs some text.'; status.hidden = false; return; }
    const body = { text };
    if (session.value.trim()) body.sessionId = session.value.trim();
    try {
      const r = await api('POST', '/v1/hints', body);
      input.value = '';
      toast(r.running ? 'Sent: the agent will see it at its next step.' : 'Queued: the next task step will pick it up.');
      if (r.dropped && r.dropped.length) toast('The oldest pending hint was dropped to keep the backlog within its cap.');
      refresh();
    } catch (e) {
      status.textContent = e.message; status.hidden = false;
    }
  }

  async function cancel(id) {
    status.hidden = true;
    try { await api('DELETE', '/v1/hints/' + encodeURIComponent(id)); await refresh(); input.focus(); }
    catch (e) { status.textContent = e.message; status.hidden = false; }
  }

  function item(hint, cancellable) {
    const who = hint.sessionId ? `session ${hint.sessionId}` : 'the first session to step';
    return h('li', { 'data-hint-id': hint.id, 'data-state': hint.state },
      h('span', {}, hint.text), ' ', h('span', { class: 'muted' }, `(${who})`), ' ',
      cancellable ? h('button', { class: 'link', onclick: () => cancel(hint.id), 'aria-label': `Cancel hint: ${hint.text.slice(0, 40)}` }, 'Cancel') : null);
  }

  function apply(s) {
    if (!s || typeof s.revision !== 'number') return;
    if (s.revision < snap.revision) return;
    const wasPending = new Set(snap.pending.map((x) => x.id));
    snap = { revision: s.revision, pending: s.pending || [], consumed: s.consumed || [] };
    // A hint seen pending and now consumed is toasted from the snapshot too, so the polling
    // fallback (which has no action frames) still tells the person; action() de-duplicates.
    for (const c of snap.consumed) if (wasPending.has(c.id)) action({ kind: 'consumed', hint: c });
    count.textContent = String(snap.pending.length);
    count.hidden = snap.pending.length === 0;
    button.setAttribute('aria-label', `Hints (${snap.pending.length} pending)`);
    pendingList.replaceChildren(...(snap.pending.length ? snap.pending.map((x) => item(x, true)) : [h('li', { class: 'muted' }, 'Nothing pending.')]));
    consumedList.replaceChildren(...(snap.consumed.length ? snap.consumed.map((x) => item(x, false)) : [h('li', { class: 'muted' }, 'None yet.')]));
  }

  function action(a) {
    if (!a || !a.hint) return;
    const key = a.kind + ':' + a.hint.id;
    if (toasted.has(key)) return;
    toasted.add(key);
    if (a.kind === 'consumed') toast('The agent used your hint: ' + a.hint.text.slice(0, 80));
  }

  async function refresh() {
    try { apply(await api('GET', '/v1/hints/state')); failures = 0; }
    catch { failures += 1; }
  }

  function poll() {
    clearTimeout(pollTimer);
    pollTimer = setTimeout(async () => { await refresh(); poll(); }, failures >= 3 ? 12000 : 4000);
  }

  function connect() {
    if (es || document.hidden) return;
    if (!window.EventSource) { conn.textContent = 'polling'; refresh(); poll(); return; }
    es = new EventSource('/v1/hints/events');
    es.addEventListener('open', () => { conn.textContent = 'live'; clearTimeout(pollTimer); failures = 0; });
    es.addEventListener('state', (ev) => { try { apply(JSON.parse(ev.data)); } catch { /* ignore a bad frame */ } });
    es.addEventListener('hint', (ev) => { try { action(JSON.parse(ev.data)); } catch { /* ignore */ } });
    es.addEventListener('error', () => {
      conn.textContent = 'polling';
      if (es && es.readyState === EventSource.CLOSED) { es = null; }
      refresh(); poll();
    });
  }

  function disconnect() {
    if (es) { es.close(); es = null; }
    clearTimeout(pollTimer);
  }

  // The whole link disconnects while the page is hidden, so it never holds a connection slot.
  document.addEventListener('visibilitychange', () => { if (document.hidden) disconnect(); else { refresh(); connect(); } });
  refresh();
  connect();
}
