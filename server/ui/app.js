// @ts-check
// Pixie Studio: the shell. It owns login, the router and the connection banner; each page is a
// module in pages/ exporting render(main, ui). Modules import one way: lib/ (the API client,
// DOM building, the point table, shared blocks) imports only lib/; pages/ imports only lib/;
// this shell imports both, and nothing imports the shell (server/ui_test.go checks it).
import { api, ApiError, connect } from './lib/api.js';
import { h, errorBox, fieldErrors, toast, uid } from './lib/dom.js';
import { hintBar } from './pages/hints.js';

const pages = {
  gates: () => import('./pages/gates.js'),
  scope: () => import('./pages/scope.js'),
  records: () => import('./pages/records.js'),
  settings: () => import('./pages/settings.js'),
  pet: () => import('./pages/pet.js'),
  'pet-settings': () => import('./pages/petsettings.js'),
};

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
    const view = /** @type {HTMLElement | null} */ (document.querySelector('#main .view'));
    if (!view || !view.childElementCount || view.querySelector('.error[role=alert]') || view.innerText.trim() === 'Loading…') route();
  },
};

connect({ lost: () => connection.lost(), ok: () => connection.ok(true), unauthorized: () => showLogin() });

// A quiet heartbeat notices a server that went away while the page sits idle.
setInterval(() => {
  if (connection.down || document.hidden) return;
  fetch('/healthz', { cache: 'no-store' }).catch(() => connection.lost());
}, 10000);

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
  for (const a of /** @type {NodeListOf<HTMLElement>} */ (document.querySelectorAll('[data-nav]'))) {
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
    await mod.render(main, { api, h, toast, errorBox, fieldErrors, uid, hints: hintsOn, params: new URLSearchParams(location.hash.split('?')[1] || '') });
  } catch (e) {
    // A route the server does not mount means that part of Pixie is not enabled there.
    main.replaceChildren(e.status === 404 && e.message === 'no such route'
      ? errorBox('This part of Pixie is not enabled on this server.') : errorBox(e));
  }
}

// hintsOn is whether the server has hints (hints.enabled, /v1/info): without them there is no
// hint bar (its routes are not mounted) and no Edit and send.
let hintsOn = false;

async function start() {
  document.getElementById('app').hidden = false;
  document.getElementById('login').hidden = true;
  try {
    const info = await api('GET', '/v1/info');
    hintsOn = !info.hints || info.hints.enabled !== false;
  } catch { hintsOn = true; /* the bar reports its own errors */ }
  const bar = document.getElementById('hintbar');
  if (hintsOn) hintBar(bar, { api, h, toast, errorBox, uid });
  else { bar.replaceChildren(); bar.hidden = true; }
  import('./pages/pet.js').then((m) => m.petMascot(document.getElementById('pet-mascot'), { api, h, toast, errorBox, uid }))
    .catch((e) => document.getElementById('pet-mascot').replaceChildren(errorBox(e)));
  await route();
}

document.getElementById('login-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const err = document.getElementById('login-error');
  err.hidden = true;
  try {
    await api('POST', '/login', { token: /** @type {HTMLInputElement} */ (document.getElementById('login-token')).value.trim() }, { noLogin: true });
    /** @type {HTMLInputElement} */ (document.getElementById('login-token')).value = '';
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
