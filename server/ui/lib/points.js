// @ts-check
// The point table: the five gate points in pipeline order, each with its words and what each of
// the four output fields (stop with its reason, replacement, addition, note) does there. Studio
// keeps no copy: the table is internal/gate's (gate.PointTable), read once from
// GET /v1/gates/points. A page that shows points awaits loadPoints before it draws.

/**
 * @typedef {{ stop: string, replacement: string, addition: string, note: string }} PointApply
 * @typedef {{ id: string, label: string, apply: PointApply }} Point
 */

/** @type {Point[]} */
let table = [];
/** @type {Promise<Point[]> | null} */
let loading = null;

/**
 * loadPoints reads the table from the server the first time; a failed read is tried again on
 * the next call.
 * @param {typeof import('./api.js').api} api
 * @returns {Promise<Point[]>}
 */
export function loadPoints(api) {
  if (!loading) {
    loading = api('GET', '/v1/gates/points').then(
      (r) => { table = (r && Array.isArray(r.points)) ? r.points : []; return table; },
      (e) => { loading = null; throw e; });
  }
  return loading;
}

/**
 * points returns the table as loaded (empty before loadPoints has answered).
 * @returns {Point[]}
 */
export function points() { return table; }

/**
 * pointLabel names a point in the guide's words; an unknown point shows its id, none a dash.
 * @param {string | null | undefined} id
 * @returns {string}
 */
export function pointLabel(id) {
  const p = table.find((x) => x.id === id);
  return p ? p.label : id || '—';
}

/**
 * pointApply returns what the output fields do at a point, in the table's column order (stop,
 * replacement, addition, note); an unknown point gives none.
 * @param {string | null | undefined} id
 * @returns {string[]}
 */
export function pointApply(id) {
  const p = table.find((x) => x.id === id);
  return p ? [p.apply.stop, p.apply.replacement, p.apply.addition, p.apply.note] : [];
}
