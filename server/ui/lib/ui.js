// @ts-check
// The ui object the shell hands to every page's render(main, ui) and to the floating widgets
// (the hint bar, the Pet mascot). Types only: it exports no values.

/**
 * @typedef {object} UI
 * @property {typeof import('./api.js').api} api
 * @property {typeof import('./dom.js').h} h
 * @property {typeof import('./dom.js').toast} toast
 * @property {typeof import('./dom.js').errorBox} errorBox
 * @property {typeof import('./dom.js').fieldErrors} [fieldErrors]
 * @property {typeof import('./dom.js').uid} uid
 * @property {URLSearchParams} [params] the route's query (#/page?a=b)
 * @property {boolean} [hints] whether the server has hints (hints.enabled): the hint bar and
 *   what feeds it (Edit and send) are there only then
 */

export {};
