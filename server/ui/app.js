// Pixie Studio: the shell. It owns login, the router, the API client, error display and
// toasts; each page is a module in pages/ exporting render(main, ui).
import { hintBar } from './pages/hints.js';

const pages = {
  gates: () => import('./pages/gates.js'),
  scope: () => import('./pages/scope.js'),
  records: () => import('./pages/records.js'),
  settings: () => import('./pages/settings.js'),
  pet: () => import('./pages/pet.js'),
  'pet-settings': () => import('./pages/petsettings.js'),
};

// ApiError carries the server's {"error":{code,message,details}}.
export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status; this.code = code; this.details = details;
  }
}

// api calls a route with the session cookie and returns the decoded JSON answer.
export async function api(method, path, body, opts = {}) {
  const init = { method, credentials: 'same-origin', headers: {} };
  if (body instanceof FormData || body instanceof Blob || body instanceof ArrayBuffer) {
    init.body = body;
  } else if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    connection.lost();
    throw new ApiError(0, 'network', `Cannot reach the Pixie server at ${location.origin}.`);
  }
  connection.ok(true);
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!resp.ok) {
    const e = (data && data.error) || {};
    if (resp.status === 401 && !opts.noLogin) showLogin();
    throw new ApiError(resp.status, e.code || 'http_' + resp.status, e.message || resp.statusText, e.details);
  }
  return data;
}

// h builds an element: h('div', {class: 'x', onclick: f}, child, 'text', …). Text is always
// inserted as text, never as HTML.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'value') el.value = v;
    else if (k === 'checked') el.checked = !!v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// errorBox shows an error where it happened: a role=alert paragraph.
export function errorBox(err) {
  return h('p', { class: 'error', role: 'alert' }, err && err.message ? err.message : String(err));
}

// fieldErrors maps a refusal's details ([{field, message}]) to fields: it returns a function
// that gives the messages of one field, so a form can show each next to its input.
export function fieldErrors(err) {
  const list = (err && Array.isArray(err.details)) ? err.details : [];
  return (field) => list.filter((d) => d.field === field || (d.field || '').startsWith(field + '.'))
    .map((d) => h('p', { class: 'field-error', role: 'alert' }, d.message));
}

// connection watches whether the server answers. When a request cannot reach it (the server
// stopped or restarted), a banner says so and /healthz is polled every 2 s; when the server
// answers again the banner goes, and a page that could not load (an error or nothing shown)
// is opened again. A page module that failed to download reloads Studio instead (the browser
// remembers a failed module import).
const connection = {
  down: false,
  importFailed: false,
  timer: null,
  lost() {
    if (this.down) return;
    this.down = true;
    let bar = document.getElementById('offline');
    if (!bar) {
      bar = h('div', { id: 'offline', role: 'alert' });
      document.body.prepend(bar);
    }
    const retry = h('button', { type: 'button', class: 'secondary small', onclick: () => this.check() }, 'Retry now');
    bar.replaceChildren(`Cannot reach the Pixie server at ${location.origin}. Is pixie serve still running? Studio retries every 2 seconds.`, retry);
    bar.hidden = false;
    clearInterval(this.timer);
    this.timer = setInterval(() => this.check(), 2000);
  },
  async check() {
    try {
      const r = await fetch('/healthz', { cache: 'no-store' });
      if (r.ok) this.ok(true);
    } catch { /* still down */ }
  },
  ok(recovered) {
    if (!this.down) return;
    this.down = false;
    clearInterval(this.timer);
    this.timer = null;
    const bar = document.getElementById('offline');
    if (bar) bar.hidden = true;
    if (!recovered) return;
    if (this.importFailed) { location.reload(); return; }
    toast('Connected to the Pixie server again.');
    const view = document.querySelector('#main .view');
    if (!view || !view.childElementCount || view.querySelector('.error[role=alert]') || view.innerText.trim() === 'Loading…') route();
  },
};

// A quiet heartbeat notices a server that went away while the page sits idle.
setInterval(() => {
  if (connection.down || document.hidden) return;
  fetch('/healthz', { cache: 'no-store' }).catch(() => connection.lost());
}, 10000);

export function toast(text) {
  const t = h('div', { class: 'toast' }, text);
  const box = document.getElementById('toasts');
  // Just under the header (or the top of the window once it scrolled away): never over Log out
  // or the navigation, nor over the Pet and hint panels that open at the bottom.
  const top = document.querySelector('#app .top');
  box.style.top = Math.max(8, (top && !document.getElementById('app').hidden ? top.getBoundingClientRect().bottom : 0) + 8) + 'px';
  box.append(t);
  setTimeout(() => t.remove(), 4000);
}

let seq = 0;
// uid returns a fresh id for label/input pairs.
export function uid(prefix = 'f') { seq += 1; return `${prefix}-${seq}`; }

function showLogin() {
  document.getElementById('app').hidden = true;
  document.getElementById('login').hidden = false;
  document.getElementById('login-token').focus();
}

async function route() {
  // Each route renders into its own container: a page still loading when the person moves on
  // writes into its detached container, never over the next page.
  const main = h('div', { class: 'view' });
  document.getElementById('main').replaceChildren(main);
  const name = (location.hash.replace(/^#\/?/, '').split(/[/?]/)[0]) || 'gates';
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === name) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  const load = pages[name] || pages.gates;
  main.replaceChildren(h('p', { class: 'muted' }, 'Loading…'));
  try {
    let mod;
    try {
      mod = await load();
    } catch (e) {
      // The module could not be downloaded: the server is most likely gone.
      connection.importFailed = true;
      connection.lost();
      throw new ApiError(0, 'network', `Cannot reach the Pixie server at ${location.origin} to open this page.`);
    }
    main.replaceChildren();
    await mod.render(main, { api, h, toast, errorBox, fieldErrors, uid, params: new URLSearchParams(location.hash.split('?')[1] || '') });
  } catch (e) {
    // A route the server does not mount means that part of Pixie is not enabled there.
    main.replaceChildren(e.status === 404 && e.message === 'no such route'
      ? errorBox('This part of Pixie is not enabled on this server.') : errorBox(e));
  }
}

async function start() {
  document.getElementById('app').hidden = false;
  document.getElementById('login').hidden = true;
  hintBar(document.getElementById('hintbar'), { api, h, toast, errorBox, uid });
  import('./pages/pet.js').then((m) => m.petMascot(document.getElementById('pet-mascot'), { api, h, toast, errorBox, uid }))
    .catch((e) => document.getElementById('pet-mascot').replaceChildren(errorBox(e)));
  await route();
}

document.getElementById('login-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const err = document.getElementById('login-error');
  err.hidden = true;
  try {
    await api('POST', '/login', { token: document.getElementById('login-token').value.trim() }, { noLogin: true });
    document.getElementById('login-token').value = '';
    await start();
  } catch (e) {
    err.textContent = e.status === 401 ? 'That token is not right.' : e.message;
    err.hidden = false;
  }
});

document.getElementById('logout').addEventListener('click', async () => {
  await api('POST', '/logout', undefined, { noLogin: true }).catch(() => {});
  showLogin();
});

window.addEventListener('hashchange', route);

(async () => {
  try {
    await api('GET', '/v1/info', undefined, { noLogin: true });
  } catch (e) {
    if (e.status === 0) {
      // Not a login problem: the server did not answer. Wait for it instead of asking for a
      // token it cannot check.
      await new Promise((resolve) => {
        const t = setInterval(async () => {
          try { await api('GET', '/v1/info', undefined, { noLogin: true }); clearInterval(t); resolve(true); } catch (x) { if (x.status !== 0) { clearInterval(t); resolve(false); } }
        }, 2000);
      }).then((ok) => (ok ? start() : showLogin()));
      return;
    }
    showLogin();
    return;
  }
  await start();
})();
