// Charts as hand-written SVG (no library): a stacked bar for a capacity or
// quota split, a line chart of time series, and a colour scale for heat maps.
// Every label is a text node; sizes are in SVG user units (CSS pixels).
const NS = 'http://www.w3.org/2000/svg';

function s(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

// parts: [{label, value, cls}] stacked left to right out of `total`; each
// part gets a <title> (the browser's tooltip) with its label and value.
export function stackedBar(parts, total, {width = 320, height = 18, format = String} = {}) {
  const svg = s('svg', {class: 'bar', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img'});
  svg.append(s('rect', {class: 'bar-bg', x: 0, y: 0, width, height, rx: 3}));
  let x = 0;
  const label = [];
  for (const p of parts) {
    const w = total > 0 ? Math.max(0, Math.min(width - x, (p.value / total) * width)) : 0;
    label.push(`${p.label} ${format(p.value)}`);
    if (w <= 0) continue;
    svg.append(s('rect', {class: p.cls, x, y: 0, width: w, height}, s('title', {}, `${p.label}: ${format(p.value)}`)));
    x += w;
  }
  svg.setAttribute('aria-label', label.join(', ') + ` of ${format(total)}`);
  return svg;
}

// A marker bar: `used` against a guarantee and a limit (the tenant tiers):
// [0, guarantee] guaranteed, (guarantee, limit] elastic, used drawn over them.
export function tierBar(guaranteed, limit, used, {width = 260, height = 18, format = String} = {}) {
  const scale = Math.max(limit, used, guaranteed, 1e-9);
  const px = (v) => (v / scale) * width;
  const svg = s('svg', {class: 'bar', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img',
    'aria-label': `used ${format(used)}, guaranteed ${format(guaranteed)}, limit ${format(limit)}`});
  svg.append(s('rect', {class: 'tier-elastic', x: 0, y: 0, width: px(limit), height, rx: 3},
    s('title', {}, `elastic limit ${format(limit)}`)));
  svg.append(s('rect', {class: 'tier-guaranteed', x: 0, y: 0, width: px(guaranteed), height, rx: 3},
    s('title', {}, `guaranteed ${format(guaranteed)}`)));
  svg.append(s('rect', {class: used > guaranteed ? 'tier-used over' : 'tier-used', x: 0, y: height / 4,
    width: px(used), height: height / 2}, s('title', {}, `used ${format(used)}`)));
  return svg;
}

// About n round steps over [lo, hi], each at least minStep (1 for counts,
// so that a small maximum does not give 0, 0.5, 1 written as 0, 1, 1).
function ticks(lo, hi, n, minStep = 0) {
  if (!(hi > lo)) return [lo];
  const raw = Math.max((hi - lo) / n, minStep), mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((v) => v >= raw);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) out.push(Number(v.toFixed(6)));
  return out;
}

// series: [{name, cls, points: [[unix_ms, value], ...], field}] over [from_ms,
// to_ms]; a null value is a gap (the line breaks there). A legend under the
// plot names each series with its latest value (its data-field: `field`).
// minStep: the smallest step between y-axis labels (1 for whole numbers).
export function lineChart(series, {from, to, width = 560, height = 180, title = '', format = String, minStep = 0} = {}) {
  const pad = {l: 44, r: 12, t: title ? 20 : 8, b: 22};
  const w = width - pad.l - pad.r, hgt = height - pad.t - pad.b;
  let ymax = 0;
  for (const sr of series) for (const [, v] of sr.points) if (v !== null) ymax = Math.max(ymax, v);
  ymax = ymax > 0 ? ymax * 1.1 : 1;
  const X = (t) => pad.l + ((t - from) / Math.max(1, to - from)) * w;
  const Y = (v) => pad.t + hgt - (v / ymax) * hgt;
  const rows = Math.ceil(series.length / 3);
  const full = height + 18 * rows;
  const svg = s('svg', {class: 'chart', width, height: full, viewBox: `0 0 ${width} ${full}`, role: 'img',
    'aria-label': title});
  if (title) svg.append(s('text', {class: 'chart-title', x: pad.l, y: 13}, title));
  for (const v of ticks(0, ymax, 4, minStep)) {
    svg.append(s('line', {class: 'grid', x1: pad.l, x2: pad.l + w, y1: Y(v), y2: Y(v)}));
    svg.append(s('text', {class: 'axis', x: pad.l - 5, y: Y(v) + 4, 'text-anchor': 'end'}, format(v)));
  }
  for (const t of timeTicks(from, to, 6)) {
    const d = new Date(t);
    const label = `${String(d.getUTCHours()).padStart(2, '0')}:${String(d.getUTCMinutes()).padStart(2, '0')}`;
    svg.append(s('text', {class: 'axis', x: X(t), y: pad.t + hgt + 15, 'text-anchor': 'middle'}, label));
  }
  svg.append(s('line', {class: 'axis-line', x1: pad.l, x2: pad.l + w, y1: pad.t + hgt, y2: pad.t + hgt}));
  series.forEach((sr, i) => {
    let d = '', gap = true, single = null;
    for (const [t, v] of sr.points) {
      if (v === null || v === undefined) { gap = true; continue; }
      d += `${gap ? 'M' : 'L'}${X(t).toFixed(1)},${Y(v).toFixed(1)}`;
      single = gap ? [t, v] : null;
      gap = false;
    }
    if (d) svg.append(s('path', {class: `line ${sr.cls}`, d}, s('title', {}, sr.name)));
    // A lone point (one minute recorded so far) as a dot, so that it shows.
    if (single) svg.append(s('circle', {class: `dot ${sr.cls}`, cx: X(single[0]), cy: Y(single[1]), r: 2.5}));
    const known = sr.points.filter(([, v]) => v !== null && v !== undefined);
    const last = known.length ? format(known[known.length - 1][1]) : '–';
    const lx = pad.l + (i % 3) * Math.floor((width - pad.l) / 3), ly = height + 6 + 18 * Math.floor(i / 3);
    svg.append(s('rect', {class: `swatch ${sr.cls}`, x: lx, y: ly, width: 10, height: 10}));
    svg.append(s('text', {class: 'legend', x: lx + 14, y: ly + 9}, `${sr.name}: `,
      s('tspan', sr.field ? {'data-field': sr.field} : {}, last)));
  });
  return svg;
}

// A heat-map cell's class for a fraction in [0, 1] (null: unknown).
export function heatClass(f) {
  if (f === null || f === undefined || Number.isNaN(f)) return 'heat-na';
  return `heat-${Math.max(0, Math.min(5, Math.floor(f * 5.0001)))}`;
}

// A timeline: one lane per row over [from, to] (unix ms), each with labelled
// segments ({from, to, cls, title}) and point marks ({at, cls, title}); the
// row's label on the left, UTC clock times along the bottom.
export function timeline(rows, {from, to, width = 900, label = 150, lane = 22} = {}) {
  const pad = {l: label, r: 16, t: 6, b: 22};
  const w = width - pad.l - pad.r, height = pad.t + rows.length * lane + pad.b;
  const X = (t) => pad.l + ((Math.min(Math.max(t, from), to) - from) / Math.max(1, to - from)) * w;
  const svg = s('svg', {class: 'chart timeline', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img',
    'aria-label': `timeline of ${rows.length} rows`});
  rows.forEach((r, i) => {
    const y = pad.t + i * lane;
    svg.append(s('text', {class: 'legend', x: pad.l - 8, y: y + lane / 2 + 4, 'text-anchor': 'end'}, r.label));
    svg.append(s('line', {class: 'grid', x1: pad.l, x2: pad.l + w, y1: y + lane / 2, y2: y + lane / 2}));
    for (const g of r.segments || []) {
      svg.append(s('rect', {class: `seg ${g.cls}`, x: X(g.from), y: y + 4, width: Math.max(2, X(g.to) - X(g.from)),
        height: lane - 8, rx: 2}, s('title', {}, g.title)));
    }
    for (const m of r.marks || []) {
      svg.append(s('circle', {class: `mark ${m.cls}`, cx: X(m.at), cy: y + lane / 2, r: 5}, s('title', {}, m.title)));
    }
  });
  const base = pad.t + rows.length * lane;
  svg.append(s('line', {class: 'axis-line', x1: pad.l, x2: pad.l + w, y1: base, y2: base}));
  for (const t of timeTicks(from, to, 6)) {
    const d = new Date(t);
    const hhmmss = [d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds()].map((x) => String(x).padStart(2, '0')).join(':');
    svg.append(s('text', {class: 'axis', x: X(t), y: base + 15, 'text-anchor': 'middle'}, hhmmss));
  }
  return svg;
}

// About n clock times in [from, to] (unix ms) on a round step (1 s ... 12 h).
function timeTicks(from, to, n) {
  const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200].map((x) => x * 1000);
  const step = steps.find((v) => v >= (to - from) / n) || steps[steps.length - 1];
  const out = [];
  for (let t = Math.ceil(from / step) * step; t <= to; t += step) out.push(t);
  return out;
}
