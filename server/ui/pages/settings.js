// @ts-check
// Pixie settings: the Pixie model (provider, base URL, model, timeout, API key, a connection
// test) and the decision engine (LLM or Jev, the judge model and its system prompt, the Jev
// API and key). Values saved here win over pixie.yaml; a PIXIE_* environment variable wins
// over both and its field is read-only. API keys are pasted and saved but never shown again.
//
// Routes: GET /v1/settings; PUT|DELETE /v1/settings/model, DELETE /v1/settings/model/api-key,
// POST /v1/settings/model/test; PUT|DELETE /v1/settings/judge, DELETE
// /v1/settings/judge/model/api-key; PUT|DELETE /v1/judge/key. A refusal's details
// ([{field, message}]) are shown next to their fields.
import { h, uid } from '../lib/dom.js';
import { pageHead, tabs, dl, field, busy, fill, rich, select } from '../lib/common.js';

const TABS = [
  { id: 'model', label: 'Model' },
  { id: 'engine', label: 'Decision engine' },
];

const MODEL_FIELDS = ['provider', 'baseUrl', 'model', 'timeout'];

/**
 * @param {HTMLElement} main
 * @param {import('../lib/ui.js').UI} ui
 */
export async function render(main, ui) {
  const { api, errorBox } = ui;
  let view;
  try { view = await api('GET', '/v1/settings'); } catch (e) { fill(main, errorBox(e)); return; }
  let current = TABS.some((t) => t.id === ui.params.get('tab')) ? ui.params.get('tab') : 'model';
  const draw = (focusTab) => {
    const t = tabs(TABS, current, (id, kb) => { current = id; history.replaceState(null, '', '#/settings?tab=' + id); draw(kb); }, 'Pixie settings');
    fill(main, pageHead('Pixie settings', 'The model gate tasks, `pixie ask` and instruction Skills use, and the decision engine behind `pixie judge`. Changes apply at once, without a restart.'), t.bar, t.panel);
    const set = (v) => { view = v; draw(); };
    if (current === 'model') modelTab(t.panel, ui, view, set); else engineTab(t.panel, ui, view, set);
    if (focusTab) /** @type {HTMLElement} */ (main.querySelector(`[role=tab][data-tab=${current}]`)).focus();
  };
  draw();
}

function sourceNote(f) {
  if (!f) return null;
  if (f.source === 'env') return `Set by the environment variable ${f.env}; change or unset it there.`;
  if (f.source === 'settings') return 'Saved here (wins over pixie.yaml).';
  return 'From pixie.yaml (or its default).';
}

function keyNote(v) {
  if (!v.hasApiKey) return 'No key is set.';
  return { env: 'A key is set by the environment; it cannot be changed here.', settings: 'A key is saved here (never shown again).', file: 'A key is set in pixie.yaml.' }[v.apiKeySource] || 'A key is set.';
}

// modelForm edits one model section (the Pixie model, or the judge model with prefix "model.").
// collect() returns the ModelInput to save: fields saved before or changed now (an unchanged
// field from pixie.yaml keeps following the file), and the API key only when one was typed.
function modelForm(v, { prefix, judge, err, values }) {
  const val = (name) => (values && values[name] !== undefined ? values[name] : v[name] || '');
  const fe = (name) => fieldErrorsOf(err, prefix + name);
  const fields = v.fields || {};
  const ro = (name) => !!(fields[name] && fields[name].readOnly);
  const provider = select(judge ? [['', 'The Pixie model'], ['openai', 'OpenAI-compatible'], ['anthropic', 'Anthropic']] :
    [['', 'None'], ['openai', 'OpenAI-compatible'], ['anthropic', 'Anthropic']], val('provider'), { name: prefix + 'provider', disabled: ro('provider') });
  const baseUrl = h('input', { name: prefix + 'baseUrl', value: val('baseUrl'), placeholder: 'the provider’s default', autocomplete: 'off', spellcheck: 'false', disabled: ro('baseUrl') });
  const modelName = h('input', { name: prefix + 'model', value: val('model'), autocomplete: 'off', spellcheck: 'false', disabled: ro('model') });
  const timeout = h('input', { name: prefix + 'timeout', value: val('timeout'), placeholder: '60s', autocomplete: 'off', disabled: ro('timeout') });
  const apiKey = h('input', { type: 'password', name: prefix + 'apiKey', autocomplete: 'new-password', spellcheck: 'false', disabled: ro('apiKey'),
    placeholder: v.hasApiKey ? 'paste a new key to replace it' : 'paste the key', value: val('apiKey') });
  const details = h('div', { class: 'form-grid' },
    field('Base URL', baseUrl, { errors: fe('baseUrl'), help: sourceNote(fields.baseUrl) }),
    field('Model', modelName, { errors: fe('model'), help: sourceNote(fields.model) }),
    field('Timeout', timeout, { errors: fe('timeout'), help: 'A duration such as 45s or 2m. ' + (sourceNote(fields.timeout) || '') }),
    field('API key', apiKey, { errors: fe('apiKey'), help: keyNote(v) }));
  const showDetails = () => { details.hidden = judge && !provider.value; };
  provider.addEventListener('change', showDetails);
  showDetails();
  const el = h('div', { class: 'model-form' },
    h('div', { class: 'form-grid' }, field('Provider', provider, { errors: fe('provider'), help: sourceNote(fields.provider) })), details);
  const inputs = { provider, baseUrl, model: modelName, timeout };
  const collect = () => {
    const out = {};
    for (const name of MODEL_FIELDS) {
      if (ro(name)) continue;
      const now = inputs[name].value.trim();
      const was = (v[name] || '').trim();
      if (now !== was || (fields[name] && fields[name].source === 'settings')) out[name] = now;
    }
    if (!ro('apiKey') && apiKey.value.trim()) out.apiKey = apiKey.value.trim();
    return out;
  };
  // values are the form's current entries, kept when a refusal redraws it.
  const entries = () => ({ provider: provider.value, baseUrl: baseUrl.value, model: modelName.value, timeout: timeout.value, apiKey: apiKey.value });
  return { el, collect, values: entries };
}

function fieldErrorsOf(err, name) {
  const list = err && Array.isArray(err.details) ? err.details : [];
  return list.filter((d) => d.field === name).map((d) => h('p', { class: 'field-error', role: 'alert' }, d.message));
}

// otherErrors are a refusal's problems that have no field on the form, or the error itself.
function otherErrors(err, known) {
  if (!err) return null;
  const list = Array.isArray(err.details) ? err.details : [];
  if (!list.length) return h('p', { class: 'error', role: 'alert' }, err.message);
  const rest = list.filter((d) => !known.includes(d.field));
  return rest.length ? h('ul', { class: 'error', role: 'alert' }, rest.map((d) => h('li', {}, d.field ? `${d.field}: ${d.message}` : d.message))) : null;
}

function status(v, what) {
  return dl([
    ['Status', v.configured ? h('span', { class: 'badge ok' }, 'Configured') : h('span', { class: 'badge bad' }, 'Not configured')],
    ['Calls go to', v.endpoint ? h('code', {}, v.endpoint) : null],
    ['Settings', v.overridden ? `Saved here, on top of pixie.yaml (${what})` : 'pixie.yaml and the environment'],
  ]);
}

function modelTab(panel, ui, view, set) {
  const { api } = ui;
  let err = null; let testResult = null; let kept = null;
  const draw = () => {
    const v = view.model;
    const form = modelForm(v, { prefix: '', judge: false, err, values: kept });
    const refused = (e) => { err = e; kept = form.values(); draw(); focusInvalid(panel); };
    const out = h('div', { class: 'test-result', 'aria-live': 'polite' });
    if (testResult) fill(out, testView(testResult));
    const save = h('button', { type: 'button', 'data-action': 'save-model' }, 'Save');
    save.addEventListener('click', () => busy(save, async () => {
      try { view.model = await api('PUT', '/v1/settings/model', form.collect()); err = null; testResult = null; ui.toast('The Pixie model was saved and is in use.'); set(view); } catch (e) { refused(e); }
    }));
    const test = h('button', { type: 'button', class: 'secondary', 'data-action': 'test-model' }, 'Test the connection');
    test.addEventListener('click', () => busy(test, async () => {
      fill(out, h('p', { class: 'muted' }, 'Asking the model…'));
      try { testResult = await api('POST', '/v1/settings/model/test', form.collect()); err = null; fill(out, testView(testResult)); } catch (e) { testResult = null; refused(e); }
    }));
    const reset = v.overridden ? h('button', { type: 'button', class: 'secondary' }, 'Use pixie.yaml again') : null;
    if (reset) reset.addEventListener('click', () => busy(reset, async () => {
      try { view.model = await api('DELETE', '/v1/settings/model'); err = null; ui.toast('The Pixie model follows pixie.yaml again.'); set(view); } catch (e) { err = e; draw(); }
    }));
    const delKey = v.apiKeySource === 'settings' ? h('button', { type: 'button', class: 'link' }, 'Remove the saved key') : null;
    if (delKey) delKey.addEventListener('click', () => busy(delKey, async () => {
      try { view.model = await api('DELETE', '/v1/settings/model/api-key'); err = null; ui.toast('The saved API key was removed.'); set(view); } catch (e) { err = e; draw(); }
    }));
    fill(panel,
      v.problem ? h('div', { class: 'alert', role: 'alert' }, h('strong', {}, 'Saved settings not applied: '), v.problem) : null,
      h('section', { class: 'card', 'aria-labelledby': 'model-title' },
        h('h2', { id: 'model-title' }, 'Pixie model'),
        h('p', { class: 'muted' }, 'Any OpenAI-compatible chat endpoint (OpenAI, vLLM, llama.cpp server, Ollama, LM Studio) or Anthropic’s Messages API. Without a model, script- and guest-concluded gates still work; gates that need the model follow their error policy.'),
        status(v, 'the Pixie model'),
        h('h3', {}, 'Change it'),
        form.el,
        otherErrors(err, ['provider', 'baseUrl', 'model', 'timeout', 'apiKey']),
        h('div', { class: 'row' }, save, test, reset, delKey),
        h('p', { class: 'help' }, 'Test the connection sends one short message (“Reply with OK”) with the values on the form, saved or not.'),
        out));
  };
  draw();
}

function testView(r) {
  if (r.ok) {
    return h('p', { class: 'status', role: 'status' }, `The model answered in ${r.latencyMs} ms`, r.model ? ` (${r.model})` : '', r.reply ? `: “${r.reply}”` : '.');
  }
  return h('p', { class: 'error', role: 'alert' }, `The connection test failed after ${r.latencyMs} ms: ${r.error ? r.error.message : 'no answer'}`);
}

function focusInvalid(panel) {
  (panel.querySelector('[aria-invalid=true]') || panel.querySelector('[role=alert]'))?.focus?.();
}

function engineTab(panel, ui, view, set) {
  const { api } = ui;
  const j = view.judge;
  if (!j) {
    fill(panel, h('section', { class: 'card' }, h('h2', {}, 'Decision engine'), h('p', { class: 'muted' }, 'This server has no decision engine.')));
    return;
  }
  let err = null; let kept = null;
  const draw = () => {
    const f = j.fields || {};
    const k = (name, def) => (kept && kept[name] !== undefined ? kept[name] : def);
    const ro = (name) => !!(f[name] && f[name].readOnly);
    const fe = (name) => fieldErrorsOf(err, name);
    const engineName = uid('engine');
    const engines = h('fieldset', { class: 'engine-choice' }, h('legend', { class: 'sr-only' }, 'Engine'),
      [['llm', 'LLM', 'The judge model answers in the Jev format; with an OpenAI-compatible provider that returns log-probabilities, the answer’s probabilities come from them.'],
        ['jev', 'Jev', 'TypeSafe Jev answers through its API. Gate input is sent to TypeSafe.']].map(([id, label, desc]) => {
        const rid = uid('eng');
        return h('div', { class: 'engine' + (j.engine === id ? ' chosen' : ''), 'data-engine': id },
          h('div', { class: 'row nowrap' }, h('input', { type: 'radio', name: engineName, id: rid, value: id, checked: k('engine', j.engine) === id, disabled: ro('engine') }),
            h('label', { for: rid, class: 'engine-label' }, label, j.engine === id ? h('span', { class: 'badge ok' }, 'in use') : null)),
          h('p', { class: 'help' }, desc));
      }));
    const form = modelForm(j.model, { prefix: 'model.', judge: true, err, values: kept && kept.model });
    const prompt = h('textarea', { name: 'systemPrompt', rows: 12, class: 'task', spellcheck: 'false', disabled: ro('systemPrompt') }, );
    prompt.value = k('systemPrompt', j.systemPrompt || j.defaultSystemPrompt || '');
    const builtin = h('button', { type: 'button', class: 'link', disabled: ro('systemPrompt') }, 'Use the built-in prompt');
    builtin.addEventListener('click', () => { prompt.value = j.defaultSystemPrompt || ''; prompt.focus(); });
    const jevBaseUrl = h('input', { name: 'jevBaseUrl', value: k('jevBaseUrl', j.jevBaseUrl || ''), placeholder: 'https://api.typesafe.ai', autocomplete: 'off', spellcheck: 'false', disabled: ro('jevBaseUrl') });
    const jevModel = h('input', { name: 'jevModel', value: k('jevModel', j.jevModel || ''), placeholder: 'jev-latest', autocomplete: 'off', spellcheck: 'false', disabled: ro('jevModel') });
    const jevTimeout = h('input', { name: 'jevTimeout', value: k('jevTimeout', j.jevTimeout || ''), placeholder: '30s', autocomplete: 'off', disabled: ro('jevTimeout') });
    const collect = () => {
      const out = {};
      const pick = (name, now, was) => { if (!ro(name) && (now !== was || (f[name] && f[name].source === 'settings'))) out[name] = now; };
      const eng = panel.querySelector(`input[name="${engineName}"]:checked`);
      pick('engine', eng ? eng.value : j.engine, j.engine);
      const p = prompt.value === (j.defaultSystemPrompt || '') ? '' : prompt.value;
      pick('systemPrompt', p, j.systemPrompt || '');
      pick('jevBaseUrl', jevBaseUrl.value.trim(), j.jevBaseUrl || '');
      pick('jevModel', jevModel.value.trim(), j.jevModel || '');
      pick('jevTimeout', jevTimeout.value.trim(), j.jevTimeout || '');
      const m = form.collect();
      if (Object.keys(m).length) out.model = m;
      return out;
    };
    const save = h('button', { type: 'button', 'data-action': 'save-engine' }, 'Save the engine settings');
    save.addEventListener('click', () => busy(save, async () => {
      try { view.judge = await api('PUT', '/v1/settings/judge', collect()); err = null; ui.toast('The decision engine was saved and is in use.'); set(view); } catch (e) {
        const eng = panel.querySelector(`input[name="${engineName}"]:checked`);
        kept = { engine: eng ? eng.value : j.engine, systemPrompt: prompt.value, jevBaseUrl: jevBaseUrl.value, jevModel: jevModel.value, jevTimeout: jevTimeout.value, model: form.values() };
        err = e; draw(); focusInvalid(panel);
      }
    }));
    const reset = j.overridden ? h('button', { type: 'button', class: 'secondary' }, 'Use pixie.yaml again') : null;
    if (reset) reset.addEventListener('click', () => busy(reset, async () => {
      try { view.judge = await api('DELETE', '/v1/settings/judge'); err = null; ui.toast('The decision engine follows pixie.yaml again.'); set(view); } catch (e) { err = e; draw(); }
    }));
    const delKey = j.model && j.model.apiKeySource === 'settings' ? h('button', { type: 'button', class: 'link' }, 'Remove the saved judge model key') : null;
    if (delKey) delKey.addEventListener('click', () => busy(delKey, async () => {
      try { view.judge = await api('DELETE', '/v1/settings/judge/model/api-key'); err = null; set(view); } catch (e) { err = e; draw(); }
    }));
    const reload = async () => { view = await api('GET', '/v1/settings'); set(view); };
    fill(panel,
      j.problem ? h('div', { class: 'alert', role: 'alert' }, h('strong', {}, 'The decision engine cannot judge: '), j.problem) : null,
      h('section', { class: 'card', 'aria-labelledby': 'engine-title' },
        h('h2', { id: 'engine-title' }, 'Engine'),
        h('p', { class: 'muted' }, rich('`pixie judge` in scripts, the `pixie_judge` host function and the `judge` agent tool use this engine. A judgment error stays an error: it never becomes “no” or a low score.')),
        engines, h('div', { class: 'field-errors' }, fe('engine')), ro('engine') ? h('p', { class: 'help' }, sourceNote(f.engine)) : null),
      h('section', { class: 'card', 'aria-labelledby': 'judge-model-title' },
        h('h2', { id: 'judge-model-title' }, 'Judge model (LLM engine)'),
        j.usesPixieModel ? h('p', { class: 'muted' }, 'No judge model is set: the Pixie model answers.') : status(j.model, 'the judge model'),
        form.el),
      h('section', { class: 'card', 'aria-labelledby': 'prompt-title' },
        h('div', { class: 'row spread' }, h('h2', { id: 'prompt-title', class: 'flush' }, 'Judge system prompt'), builtin),
        h('p', { class: 'muted' }, 'The answer-format instructions are part of each question, so a custom prompt cannot break them. ', j.systemPrompt ? 'A custom prompt is in use.' : 'The built-in prompt is in use.'),
        field('System prompt', prompt, { errors: fe('systemPrompt'), help: sourceNote(f.systemPrompt) })),
      h('section', { class: 'card', 'aria-labelledby': 'jev-title' },
        h('h2', { id: 'jev-title' }, 'Jev'),
        h('div', { class: 'form-grid' },
          field('API base URL', jevBaseUrl, { errors: fe('jevBaseUrl'), help: sourceNote(f.jevBaseUrl) }),
          field('Model', jevModel, { errors: fe('jevModel'), help: 'jev-latest, or a pinned version such as jev-1.13.0 once thresholds are tuned.' }),
          field('Timeout', jevTimeout, { errors: fe('jevTimeout'), help: sourceNote(f.jevTimeout) })),
        jevKey(ui, j.jevKey || {}, j.engine === 'jev', reload)),
      otherErrors(err, ['engine', 'systemPrompt', 'jevBaseUrl', 'jevModel', 'jevTimeout', ...MODEL_FIELDS.map((x) => 'model.' + x), 'model.apiKey']),
      h('div', { class: 'row sticky-actions' }, save, reset, delKey));
  };
  draw();
}

// jevKey shows whether the Jev key is set and where from; a key from the environment or a .env
// file cannot be changed here. A pasted key is sent once and never shown again.
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
  const input = h('input', { type: 'password', name: 'jev-key', autocomplete: 'new-password', spellcheck: 'false', placeholder: set ? 'paste a new key to replace it' : 'paste the key' });
  const errs = h('div');
  const save = h('button', { type: 'button', 'data-action': 'save-key' }, 'Save key');
  save.addEventListener('click', () => busy(save, async () => {
    fill(errs);
    if (!input.value.trim()) { fill(errs, h('p', { class: 'field-error', role: 'alert' }, 'Paste the key first.')); input.focus(); return; }
    try {
      await api('PUT', '/v1/judge/key', { key: input.value.trim() });
      input.value = '';
      ui.toast('The Jev key was saved.');
      await reload();
    } catch (e) {
      fill(errs, h('p', { class: 'field-error', role: 'alert' }, e.message));
    }
  }));
  const remove = set ? h('button', { type: 'button', class: 'secondary' }, 'Remove key') : null;
  if (remove) {
    remove.addEventListener('click', () => busy(remove, async () => {
      try { await api('DELETE', '/v1/judge/key'); ui.toast('The Jev key was removed.'); await reload(); } catch (e) { fill(errs, h('p', { class: 'field-error', role: 'alert' }, e.message)); }
    }));
  }
  wrap.append(h('div', { class: 'inline-form' }, field('New key', input, { help: 'Stored in the server’s credentials (0600) and never shown again.' }), save, remove), errs);
  return wrap;
}
