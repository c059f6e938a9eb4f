// Pixie settings: the Pixie model (provider, base URL, model, a connection test) and the
// decision engine (LLM or Jev, the judge model and its system prompt, the Jev key: pasted and
// saved but never shown again, read-only when it comes from the environment).
//
// The model and the engine are configured by the file, the environment or serve flags, and
// this page shows them as the server reports them (/v1/info, /v1/judge); only the Jev key can
// be changed at run time (/v1/judge/key). The page says how to change the rest.
import { h } from '../app.js';
import { pageHead, tabs, dl, field, busy, statusLine, fill, rich } from './common.js';

const ROUTES = {
  judge: '/v1/judge', // GET → the engine (no secrets)
  judgeKey: '/v1/judge/key', // PUT {key} · DELETE → {configured, source, readOnly}
  trial: '/v1/gates/try', // the connection test: a one-line trial makes one real model call
};

const TABS = [
  { id: 'model', label: 'Model' },
  { id: 'engine', label: 'Decision engine' },
];

export async function render(main, ui) {
  const { api, errorBox } = ui;
  let info;
  try { info = await api('GET', '/v1/info'); } catch (e) { fill(main, errorBox(e)); return; }
  let current = TABS.some((t) => t.id === ui.params.get('tab')) ? ui.params.get('tab') : 'model';
  const draw = (focusTab) => {
    const t = tabs(TABS, current, (id, kb) => { current = id; history.replaceState(null, '', '#/settings?tab=' + id); draw(kb); }, 'Pixie settings');
    fill(main, pageHead('Pixie settings', 'The model gate tasks and `pixie ask` use, and the decision engine behind `pixie judge`.'), t.bar, t.panel);
    if (current === 'model') modelTab(t.panel, ui, info);
    else {
      const show = async () => {
        let j = info.judge;
        try { j = await api('GET', ROUTES.judge); } catch (e) { if (e.status !== 404) throw e; }
        engineTab(t.panel, ui, j, show);
      };
      fill(t.panel, h('p', { class: 'muted' }, 'Loading…'));
      show().catch((e) => fill(t.panel, errorBox(e)));
    }
    if (focusTab) main.querySelector(`[role=tab][data-tab=${current}]`).focus();
  };
  draw();
}


function modelInfo(m, extra = []) {
  if (!m) return h('p', { class: 'muted' }, 'This server does not report its model.');
  return dl([
    ['Status', m.configured ? h('span', { class: 'badge ok' }, 'Configured') : h('span', { class: 'badge bad' }, 'Not configured')],
    ['Provider', m.provider || null], ['Base URL', m.baseUrl ? h('code', {}, m.baseUrl) : null], ['Model', m.model || null],
    ['API key', m.hasApiKey ? 'set (never shown)' : 'not set'], ...extra,
  ]);
}

function modelTab(panel, ui, info) {
  const { api } = ui;
  const m = info.model;
  const out = h('div', { class: 'test-result', 'aria-live': 'polite' });
  const test = h('button', { type: 'button', 'data-action': 'test-model', disabled: !(m && m.configured) }, 'Test the connection');
  test.addEventListener('click', () => busy(test, async () => {
    fill(out, h('p', { class: 'muted' }, 'Asking the model…'));
    const t0 = performance.now();
    try {
      // A trial of a one-line gate makes exactly one model call and reports a failure as the
      // result's error; nothing is recorded and no session is touched.
      const r = await api('POST', ROUTES.trial, {
        gate: { name: 'connection-test', point: 'user-message', task: 'Reply with exactly {"verdict":"pass"}.' },
        sample: { target: 'ping' },
      });
      const ms = Math.round(performance.now() - t0);
      fill(out, r.modelAnswer ? h('p', { class: 'status', role: 'status' }, `The model answered in ${ms} ms.`) :
        h('p', { class: 'error', role: 'alert' }, r.error || 'The model did not answer.'));
    } catch (e) {
      fill(out, h('p', { class: 'error', role: 'alert' }, e.status === 404 ? 'The connection test needs Pixie Gate, which is not enabled on this server.' : e.message));
    }
  }));
  fill(panel, 
    h('section', { class: 'card', 'aria-labelledby': 'model-title' },
      h('h2', { id: 'model-title' }, 'Pixie model'),
      h('p', { class: 'muted' }, rich('Gate tasks, `pixie ask` and instruction Skills use this model: any OpenAI-compatible chat endpoint (OpenAI, vLLM, llama.cpp, Ollama, LM Studio) or Anthropic’s Messages API.')),
      modelInfo(m),
      m && !m.configured ? h('p', { class: 'warn' }, 'No model is configured. Script- and guest-concluded gates still work; gates that need the model follow their error policy.') : null,
      h('div', { class: 'row' }, test), out),
    howTo('model', [
      'model.provider=openai        # or anthropic',
      'model.baseUrl=http://127.0.0.1:11434/v1',
      'model.model=qwen2.5-coder',
      'model.apiKey=…               # or the PIXIE_MODEL_API_KEY variable',
    ]));
}

function howTo(section, lines) {
  return h('section', { class: 'card', 'aria-label': 'How to change it' },
    h('h2', {}, 'Change it'),
    h('p', {}, `The ${section === 'model' ? 'model' : 'decision engine'} is set in `, h('code', {}, '<home>/pixie.yaml'), ', by ', h('code', {}, 'PIXIE_*'),
      ' environment variables (', rich('`model.apiKey` is `PIXIE_MODEL_API_KEY`'), '), or with ', h('code', {}, 'pixie serve --set key=value'), '; restart the server to apply. ', h('code', {}, 'pixie config'), ' prints every key.'),
    h('pre', {}, lines.join('\n')));
}

function engineTab(panel, ui, j, reload) {
  if (!j) {
    fill(panel, h('section', { class: 'card' }, h('h2', {}, 'Decision engine'),
      h('p', { class: 'muted' }, 'This server does not report a decision engine.')));
    return;
  }
  const isJev = j.engine === 'jev';
  const engines = h('div', { class: 'engine-choice' },
    [['llm', 'LLM', 'The judge model answers in the Jev format (the Pixie model when no judge model is set).'],
      ['jev', 'Jev', 'TypeSafe Jev answers through its API. Gate input is sent to TypeSafe.']].map(([id, label, desc]) => h('div', { class: 'engine' + (j.engine === id ? ' chosen' : ''), 'data-engine': id },
      h('h3', {}, label, j.engine === id ? h('span', { class: 'badge ok' }, 'in use') : null), h('p', { class: 'help' }, desc))));
  const key = (j.jev && j.jev.key) || {};
  fill(panel, 
    j.problem ? h('div', { class: 'alert', role: 'alert' }, h('strong', {}, 'The decision engine cannot judge: '), j.problem) : null,
    h('section', { class: 'card', 'aria-labelledby': 'engine-title' },
      h('h2', { id: 'engine-title' }, 'Engine'),
      h('p', { class: 'muted' }, rich('`pixie judge` in scripts, the `pixie_judge` host function and the `judge` agent tool use this engine. A judgment error stays an error: it never becomes “no” or a low score.')),
      engines),
    h('section', { class: 'card', 'aria-labelledby': 'judge-model-title' },
      h('h2', { id: 'judge-model-title' }, 'Judge model (LLM engine)'),
      j.usesPixieModel ? h('p', {}, 'No judge model is set: the Pixie model answers.') : null,
      modelInfo(j.model, [['System prompt', j.customSystemPrompt ? rich('custom (`judge.systemPrompt`)') : 'built-in']])),
    h('section', { class: 'card', 'aria-labelledby': 'jev-title' },
      h('h2', { id: 'jev-title' }, 'Jev'),
      dl([['API', j.jev && j.jev.baseUrl ? h('code', {}, j.jev.baseUrl) : null], ['Model', (j.jev && j.jev.model) || null], ['Timeout', (j.jev && j.jev.timeout) || null]]),
      jevKey(ui, key, isJev, reload)),
    howTo('engine', ['judge.engine=llm              # or jev', 'judge.model.provider=openai  # empty: the Pixie model', 'judge.systemPrompt=…', 'judge.jevModel=jev-latest     # pin e.g. jev-1.13.0']));
}

// jevKey shows whether the Jev key is set and where from; a key from the environment cannot be
// changed here. A pasted key is sent once and never shown again.
function jevKey(ui, key, isJev, reload) {
  const { api } = ui;
  const set = key.configured === true;
  const from = { env: 'from the environment (TYPESAFE_API_KEY)', dotenv: 'from a .env file (TYPESAFE_API_KEY)', credentials: 'saved (never shown again)' }[key.source] || 'set';
  const wrap = h('div', { class: 'jev-key' }, h('h3', {}, 'API key'));
  wrap.append(dl([['Key', set ? h('span', { class: 'badge ok', 'data-key-source': key.source }, from) : h('span', { class: 'badge' + (isJev ? ' bad' : '') }, 'not set')]]));
  if (key.readOnly) {
    wrap.append(h('p', { class: 'muted' }, 'A TYPESAFE_API_KEY from the environment or a .env file is used instead of a saved key, and cannot be changed here.'));
    return wrap;
  }
  const input = h('input', { type: 'password', name: 'jev-key', autocomplete: 'off', spellcheck: 'false', placeholder: set ? 'paste a new key to replace it' : 'paste the key' });
  const errs = h('div');
  const st = statusLine();
  const save = h('button', { type: 'button', 'data-action': 'save-key' }, 'Save key');
  save.addEventListener('click', () => busy(save, async () => {
    fill(errs);
    if (!input.value.trim()) { fill(errs, h('p', { class: 'field-error', role: 'alert' }, 'Paste the key first.')); input.focus(); return; }
    try {
      await api('PUT', ROUTES.judgeKey, { key: input.value.trim() });
      input.value = '';
      ui.toast('The Jev key was saved.');
      await reload();
    } catch (e) {
      fill(errs, h('p', { class: 'field-error', role: 'alert' }, e.status === 404 || e.status === 405 ? 'This server cannot save the key at run time; set TYPESAFE_API_KEY in its environment.' : e.message));
    }
  }));
  const remove = set ? h('button', { type: 'button', class: 'secondary' }, 'Remove key') : null;
  if (remove) {
    remove.addEventListener('click', () => busy(remove, async () => {
      try { await api('DELETE', ROUTES.judgeKey); ui.toast('The Jev key was removed.'); await reload(); } catch (e) { fill(errs, h('p', { class: 'field-error', role: 'alert' }, e.message)); }
    }));
  }
  wrap.append(h('div', { class: 'inline-form' }, field('New key', input, { help: 'Stored in the server’s credentials (0600) and never shown again.' }), save, remove), errs, st);
  return wrap;
}

