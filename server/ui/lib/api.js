// @ts-check
// The API client. Every route is called with the session cookie and answers JSON; a refusal
// ({"error":{code,message,details}}) becomes an ApiError. What happens when the server cannot
// be reached, answers again, or asks for a login is the shell's business: it says so once with
// connect(), so this module imports nothing of the shell and nothing of a page.

// ApiError carries the server's {"error":{code,message,details}}; status 0 means the server
// could not be reached.
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} code
   * @param {string} message
   * @param {any} [details]
   */
  constructor(status, code, message, details) {
    super(message);
    this.status = status; this.code = code; this.details = details;
  }
}

/**
 * What the shell does when a request cannot reach the server (lost), when one reaches it (ok),
 * and when the server answers 401 to a request that may ask for a login (unauthorized).
 * @typedef {{ lost(): void, ok(): void, unauthorized(): void }} ConnectionHooks
 */

/** @type {ConnectionHooks} */
let hooks = { lost() {}, ok() {}, unauthorized() {} };

/**
 * connect installs the shell's connection hooks.
 * @param {ConnectionHooks} h
 */
export function connect(h) { hooks = h; }

/**
 * @typedef {{ noLogin?: boolean }} ApiOptions noLogin: a 401 does not bring the login form back.
 */

/**
 * api calls a route with the session cookie and returns the decoded JSON answer (null when the
 * body is empty or not JSON). A FormData, Blob or ArrayBuffer body is sent as it is; any other
 * body is sent as JSON.
 * @param {string} method
 * @param {string} path
 * @param {any} [body]
 * @param {ApiOptions} [opts]
 * @returns {Promise<any>}
 */
export async function api(method, path, body, opts = {}) {
  /** @type {RequestInit & { headers: Record<string, string> }} */
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
    hooks.lost();
    throw new ApiError(0, 'network', `Cannot reach the Pixie server at ${location.origin}.`);
  }
  hooks.ok();
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!resp.ok) {
    const e = (data && data.error) || {};
    if (resp.status === 401 && !opts.noLogin) hooks.unauthorized();
    throw new ApiError(resp.status, e.code || 'http_' + resp.status, e.message || resp.statusText, e.details);
  }
  return data;
}
