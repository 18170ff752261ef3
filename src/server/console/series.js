// Charts of the time series endpoints (GET /v1/timeseries/{pools,tenants,gpus},
// docs/server.md "Time series"): an answer holds arrays of one value a minute
// from `start` (null where nothing was recorded), which become the
// [unix_ms, value] points of chart.js's lineChart. The newest value of each
// line is in its legend, with a data-field the browser tests compare.
import {lineChart} from './chart.js';
import {get} from './api.js';
import {h, section} from './dom.js';

// The points of one array of an answer: [[unix_ms, value or null], ...].
export function points(answer, values) {
  const start = Date.parse(answer.start), step = answer.step_s * 1000;
  return (values || []).map((v, i) => [start + i * step, v]);
}

// The window an answer covers, [from, to] in unix ms (to: the end of its last minute).
function span(answer) {
  const from = Date.parse(answer.start);
  return {from, to: from + answer.points * answer.step_s * 1000};
}

// One chart of `lines` ([{name, cls, values, field}]) over the answer's window.
export function seriesChart(answer, lines, {title, format, width = 560, height = 170} = {}) {
  return lineChart(lines.map((l) => ({name: l.name, cls: l.cls, field: l.field, points: points(answer, l.values)})),
    {...span(answer), title, format, width, height, minStep: format === count ? 1 : 0});
}

// GET /v1/timeseries/SCOPE?QUERY, or null when the server has none (an
// older server answers 404): the pages then leave the charts out.
export async function fetchSeries(scope, query) {
  try {
    return await get(`/v1/timeseries/${scope}?${query}`);
  } catch (e) {
    if (e.status === 404) return null;
    throw e;
  }
}

const palette = (i) => `c${i % 8}`;
const gpus = (x) => String(Number(Number(x).toFixed(3)));
const count = (x) => String(Math.round(x));

function chartsOrNote(charts, note) {
  return charts.length ? h('div', {class: 'charts'}, ...charts) : h('p', {class: 'muted'}, note);
}

// The overview: per pool, GPUs total, allocated, busy and idle, and (admin)
// the queue, over the last `hours` hours.
export async function poolHistory(who, hours = 6) {
  const a = await fetchSeries('pools', `minutes=${hours * 60}`);
  if (!a) return null;
  const charts = [];
  for (const p of a.series) {
    const k = (f) => `series:pool:${p.pool}:${f}`;
    const lines = [{name: 'total', cls: 'c-total', values: p.total_gpus, field: k('total_gpus')},
      {name: 'allocated', cls: 'c-allocated', values: p.allocated_gpus, field: k('allocated_gpus')}];
    if (p.busy_gpus) {
      lines.push({name: 'busy', cls: 'c-busy', values: p.busy_gpus, field: k('busy_gpus')},
        {name: 'idle', cls: 'c-idle', values: p.idle_gpus, field: k('idle_gpus')});
    }
    charts.push(seriesChart(a, lines, {title: `${p.pool}: GPUs`, format: gpus}));
    if (p.queued_jobs) {
      charts.push(seriesChart(a, [{name: 'pending jobs', cls: 'c-queue', values: p.queued_jobs, field: k('queued_jobs')}],
        {title: `${p.pool}: queue length`, format: count, width: 360}));
    }
  }
  const what = who.admin ? 'busy (utilization at least the idle threshold) vs allocated vs idle GPUs, and the queue'
    : 'total and allocated GPUs';
  return section(`The last ${hours} hours: ${what}`, chartsOrNote(charts, 'No series yet.'),
    h('p', {class: 'legend-row'}, 'One point a minute, recorded by the server since it started (docs/server.md).'));
}

// The tenants page: per pool, each tenant's GPUs in use over the last 24 h.
export async function tenantHistory(who) {
  const a = await fetchSeries('tenants', 'minutes=1440');
  if (!a) return null;
  const byPool = new Map();
  for (const t of a.series) byPool.set(t.pool, [...(byPool.get(t.pool) || []), t]);
  const charts = [...byPool.entries()].sort(([x], [y]) => (x < y ? -1 : 1)).map(([pool, list]) =>
    seriesChart(a, list.map((t, i) => ({name: t.tenant, cls: palette(i), values: t.used_gpus,
      field: `series:tenant:${t.tenant}:${pool}:used_gpus`})), {title: `${pool}: GPUs in use`, format: gpus}));
  return section(who.admin ? 'Usage over the last 24 hours' : `Usage of ${who.tenant} over the last 24 hours`,
    chartsOrNote(charts, 'No tenant has a quota, usage or waiting jobs yet.'));
}

// The regions page: each pool's size (nodes) over the last 24 h.
export async function poolSizes() {
  const a = await fetchSeries('pools', 'minutes=1440');
  if (!a) return null;
  const lines = a.series.map((p, i) => ({name: p.pool, cls: palette(i), values: p.nodes, field: `series:size:${p.pool}:nodes`}));
  return section('Pool sizes over the last 24 hours (nodes)',
    chartsOrNote(lines.length ? [seriesChart(a, lines, {title: 'nodes per pool', format: count, width: 900})] : [], 'No pools.'));
}

// A node's page: its GPUs over the last hour (utilization, memory, temperature).
export async function gpuHistory(node) {
  const a = await fetchSeries('gpus', `node=${encodeURIComponent(node)}&minutes=60`);
  if (!a) return null;
  if (!a.series.length) return section('The last hour per GPU', h('p', {class: 'muted', id: 'gpu-history-empty'}, 'No agent has reported this node\'s GPUs since the server started.'));
  const line = (f, scale = 1, as = f) => a.series.map((g, i) => ({name: `GPU ${g.gpu}`, cls: palette(i),
    values: g[f].map((v) => (v === null ? null : v * scale)), field: `series:gpu:${g.gpu}:${as}`}));
  return section('The last hour per GPU', h('div', {class: 'charts'},
    seriesChart(a, line('utilization_pct'), {title: 'utilization (%)', format: count, width: 440}),
    seriesChart(a, line('memory_used_mib', 1 / 1024, 'memory_used_gib'), {title: 'memory used (GiB)', format: (x) => String(Number(x.toFixed(1))), width: 440}),
    seriesChart(a, line('temperature_c'), {title: 'temperature (°C)', format: count, width: 440})));
}
