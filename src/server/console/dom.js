// DOM helpers: every value reaches the page as a text node (textContent),
// never as markup, so nothing from the API can inject HTML or script.

// h('td', {class: 'num', 'data-field': 'x'}, 'text', child, ...): an element
// with attributes (set with setAttribute; `on*` keys are refused) and
// children (strings become text nodes; null and undefined are skipped).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

export function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) throw new Error('event handlers are added with addEventListener, not as attributes');
    el.setAttribute(k, v === true ? '' : String(v));
  }
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// A table: headers (strings, or [text, attrs]) and rows of cells (a cell is a
// value, a Node, or {v, attrs}).
export function table(headers, rows, attrs) {
  const head = h('tr', {}, headers.map((x) => (Array.isArray(x) ? h('th', x[1], x[0]) : h('th', {}, x))));
  const body = rows.map((r) =>
    h('tr', r.attrs || {}, (r.cells || r).map((c) =>
      c !== null && typeof c === 'object' && !(c instanceof Node) && 'v' in c ? h('td', c.attrs, c.v) : h('td', {}, c))));
  return h('table', attrs || {}, h('thead', {}, head), h('tbody', {}, body));
}

// GPUs as the API gives them (a number of GPUs, fractions in thousandths):
// at most three decimals, no trailing zeros ("2", "0.5", "1.125").
export function gpus(x) {
  if (x === null || x === undefined || Number.isNaN(Number(x))) return '–';
  return String(Number(Number(x).toFixed(3)));
}

// A duration in seconds as "45 s", "12 min", "3 h 5 min", "2 d 4 h".
export function duration(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

// An RFC 3339 time (or milliseconds since the epoch) as "2026-12-04 13:05:09 UTC".
export function when(t) {
  if (t === null || t === undefined || t === '') return '–';
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

export function badge(text, kind) {
  return h('span', {class: `badge ${kind || String(text)}`}, text);
}

export function section(title, ...children) {
  return h('section', {class: 'card'}, h('h2', {}, title), children);
}

export function link(href, text, attrs) {
  return h('a', {...(attrs || {}), href}, text);
}
