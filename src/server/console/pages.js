// The console's pages. Each renders into `out` from the API (api.js) with
// DOM nodes only (dom.js): no value is ever parsed as HTML. Numbers that the
// browser tests compare with the API carry data-field attributes.
import {allJobs, ApiError, get} from './api.js';
import {badge, duration, gpus, h, link, section, table, when} from './dom.js';
import {heatClass, stackedBar, tierBar, timeline} from './chart.js';
import {followLog} from './logtail.js';
import {gpuHistory, poolHistory, poolSizes, tenantHistory} from './series.js';

const num = (v, field) => ({v, attrs: {class: 'num', 'data-field': field}});

// --- overview ---------------------------------------------------------------------------
export async function overviewPage(out, who) {
  const [pools, pending] = await Promise.all([get('/v1/pools'), allJobs('state=pending', 1000)]);
  out.append(h('h1', {}, 'Overview'));
  const queued = pending.more ? `${pending.jobs.length}+` : String(pending.jobs.length);
  out.append(h('div', {class: 'tiles'},
    tile('Pools', String(pools.pools.length), 'pools'),
    tile(who.admin ? 'Pending jobs' : `Pending jobs of ${who.tenant}`, queued, 'queue_length'),
    tile('GPUs in all pools', gpus(sum(pools.pools, (p) => p.capacity?.total_gpus)), 'total_gpus'),
    tile('GPUs available', gpus(sum(pools.pools, (p) => p.capacity?.available_gpus)), 'available_gpus')));
  const rows = pools.pools.map((p) => {
    const c = p.capacity || {};
    const k = (f) => `pool:${p.name}:${f}`;
    return {attrs: {'data-pool': p.name}, cells: [p.name, num(String(p.nodes), k('nodes')),
      num(gpus(c.total_gpus), k('total_gpus')), num(gpus(c.allocated_gpus), k('allocated_gpus')),
      num(gpus(c.reserved_gpus), k('reserved_gpus')), num(gpus(c.fragmented_gpus), k('fragmented_gpus')),
      num(gpus(c.available_gpus), k('available_gpus')),
      stackedBar([{label: 'allocated', value: c.allocated_gpus || 0, cls: 'allocated'},
        {label: 'reserved', value: c.reserved_gpus || 0, cls: 'reserved'},
        {label: 'fragmented', value: c.fragmented_gpus || 0, cls: 'fragmented'},
        {label: 'available', value: c.available_gpus || 0, cls: 'available'}], c.total_gpus || 0, {format: gpus}),
      (p.dedicated_to || []).join(', ') || '–']};
  });
  out.append(section('Pools: capacity in GPUs',
    table(['Pool', ['Nodes', {class: 'num'}], ['Total', {class: 'num'}], ['Allocated', {class: 'num'}],
      ['Reserved', {class: 'num'}], ['Fragmented', {class: 'num'}], ['Available', {class: 'num'}], 'Split', 'Dedicated to'],
    rows, {id: 'pools'}),
    legend([['allocated', 'allocated'], ['reserved', 'reserved for a tenant'],
      ['fragmented', 'free but too small for a pending request'], ['available', 'available']])));
  const history = await poolHistory(who);
  if (history) out.append(history);
  if (who.admin) out.append(await recentEvents(12));
}

function tile(label, value, field) {
  return h('div', {class: 'tile'}, h('div', {class: 'tile-value', 'data-field': field}, value), h('div', {class: 'tile-label'}, label));
}

function legend(items) {
  return h('p', {class: 'legend-row'}, items.map(([cls, text]) => h('span', {class: 'key'}, h('i', {class: `sw ${cls}`}), text)));
}

function sum(list, f) { return list.reduce((a, x) => a + (Number(f(x)) || 0), 0); }

async function recentEvents(n) {
  const [health, names] = await Promise.all([get('/healthz'), eventNames()]);
  const since = Math.max(0, health.last_seq - n);
  const ev = await get(`/v1/events?since=${since}&limit=${n}`);
  const rows = ev.events.slice().reverse().map((e) => ({attrs: {'data-seq': e.seq},
    cells: [num(String(e.seq), `event:${e.seq}`), when(e.at), e.type, eventSummary(e, names), e.actor || '–']}));
  return section('Recent events', table([['Seq', {class: 'num'}], 'At', 'Type', 'Details', 'Actor'], rows, {id: 'events'}));
}

// The names that events give as indices (admin only): /v1/nodes, /v1/pools
// and /v1/tenants list nodes, pools and tenants in index order.
async function eventNames() {
  const [nodes, pools, tenants] = await Promise.all([get('/v1/nodes'), get('/v1/pools'), get('/v1/tenants')]);
  return {nodes: nodes.nodes.map((x) => x.name), pools: pools.pools.map((x) => x.name), tenants: tenants.tenants.map((x) => x.name),
    models: Object.fromEntries(nodes.nodes.map((x) => [x.name, x.model]))};
}

// GPU indices of a node's GpuMask (bit i: GPU i; 16 bits), e.g. "0,1,4".
function maskGpus(mask) {
  const out = [];
  for (let i = 0; i < 16; i++) if ((Number(mask) >> i) & 1) out.push(i);
  return out.join(',');
}

// An event's fields in one line, at most 160 characters: nodes, pools and
// tenants by name, every GPU mask (`gpus`, `unhealthy`) as GPU indices, a
// region table by its policy and region names. NodeAdded is the exception
// that gives its node by name, `gpus` as a count and `model` as a catalog
// index (shown as the node's model). names: {nodes, pools, tenants} (index
// order) and models {node name: model}.
export function eventSummary(e, names) {
  const skip = new Set(['seq', 'at', 'type', 'actor', 'request_id', 'spec']);
  const named = (list, i, what) => list?.[i] ?? `${what} ${i}`;
  const show = (k, v) => {
    if (e.type === 'NodeAdded' && (k === 'node' || k === 'gpus')) return String(v);
    if (e.type === 'NodeAdded' && k === 'model') return names.models?.[e.node] || String(v);
    if (k === 'node') return named(names.nodes, v, 'node');
    if (k === 'nodes' && Array.isArray(v)) return v.map((i) => named(names.nodes, i, 'node')).join(',');
    if (k === 'pool' || (k === 'to' && e.type === 'NodeLent')) return named(names.pools, v, 'pool');
    if (k === 'tenant') return named(names.tenants, v, 'tenant');
    if (k === 'gpus' || k === 'unhealthy') return `[${maskGpus(v)}]`;
    if (k === 'policy' && v && typeof v === 'object') {  // RegionsSet: the whole table; the regions page shows it
      return `${v.policy} regions=${(v.regions || []).map((r) => r.name).join(',') || 'none'}`;
    }
    if (k === 'replicas' && Array.isArray(v)) return v.map((r) => `${named(names.nodes, r.node, 'node')}[${maskGpus(r.gpus)}]`).join(' ');
    return typeof v === 'object' ? JSON.stringify(v) : String(v);
  };
  const text = Object.entries(e).filter(([k]) => !skip.has(k)).map(([k, v]) => `${k}=${show(k, v)}`).join(' ');
  return text.length > 160 ? `${text.slice(0, 159)}…` : text;
}

// --- tenants ----------------------------------------------------------------------------
export async function tenantsPage(out, who) {
  const [list, waiting] = await Promise.all([
    who.admin ? get('/v1/tenants').then((x) => x.tenants) : get(`/v1/tenants/${encodeURIComponent(who.tenant)}`).then((x) => [x]),
    pendingWithReasons()]);
  // tenant|pool -> how many of the explained pending jobs wait on that pool's quota
  const exhausted = new Map();
  for (const d of waiting.details) {
    for (const p of d.waiting_reasons?.pools || []) {
      if (p.reason === 'quota_exhausted') exhausted.set(`${d.tenant}|${p.pool}`, (exhausted.get(`${d.tenant}|${p.pool}`) || 0) + 1);
    }
  }
  out.append(h('h1', {}, who.admin ? 'Tenants' : `Tenant ${who.tenant}`));
  const rows = [];
  for (const t of list) {
    const pools = new Set([...Object.keys(t.quota || {}), ...Object.keys(t.usage || {})]);
    for (const pool of [...pools].sort()) {
      const q = t.quota[pool] || {guaranteed_gpus: 0, limit_gpus: 0, weight: 1, reserved: false};
      const u = t.usage[pool] || {used_gpus: 0, borrowed_gpus: 0, lent_gpus: 0};
      const k = (f) => `tenant:${t.name}:${pool}:${f}`;
      rows.push({attrs: {'data-tenant': t.name, 'data-pool': pool}, cells: [t.name, pool,
        num(gpus(q.guaranteed_gpus), k('guaranteed_gpus')), num(gpus(q.limit_gpus), k('limit_gpus')),
        num(gpus(u.used_gpus), k('used_gpus')), num(gpus(u.borrowed_gpus), k('borrowed_gpus')),
        num(gpus(u.lent_gpus), k('lent_gpus')),
        tierBar(q.guaranteed_gpus, q.limit_gpus, u.used_gpus, {format: gpus}),
        {v: [q.reserved ? badge('reserved', 'info') : null, u.used_gpus >= q.limit_gpus && q.limit_gpus > 0 ? badge('at limit', 'warn') : null,
          exhausted.has(`${t.name}|${pool}`) ? badge(`quota exhausted: ${exhausted.get(`${t.name}|${pool}`)} waiting`, 'warn') : null],
        attrs: {'data-field': k('marks')}}]});
    }
  }
  out.append(section('Quota tiers against usage (GPUs)',
    table(['Tenant', 'Pool', ['Guaranteed', {class: 'num'}], ['Elastic limit', {class: 'num'}], ['Used', {class: 'num'}],
      ['Borrowed (preemptible)', {class: 'num'}], ['Lent', {class: 'num'}], 'Tiers', ''], rows, {id: 'tenants'}),
    legend([['tier-guaranteed', 'guaranteed'], ['tier-elastic', 'elastic (up to the limit)'], ['tier-used', 'used'],
      ['tier-used over', 'used beyond the guarantee: borrowed, preemptible']]),
    h('p', {class: 'legend-row'}, `"quota exhausted": pending jobs that wait on the tenant's limit in that pool (of the ${kDetails} ` +
      'highest-priority pending jobs, which the Engine explains).')));
  const usage = await tenantHistory(who);
  if (usage) out.append(usage);
}

// --- queue ------------------------------------------------------------------------------
const kDetails = 25;  // pending jobs whose structured reasons are fetched (one GET each)

// The pending jobs (at most 1000), highest priority first, and the views of
// the first kDetails with their structured reasons (one GET /v1/jobs/{id}
// each: the Engine explains each job); a job whose GET fails keeps its summary.
async function pendingWithReasons() {
  const pending = await allJobs('state=pending', 1000);
  const jobs = pending.jobs.slice().sort((a, b) => b.priority - a.priority || a.id - b.id);
  const details = await Promise.all(jobs.slice(0, kDetails).map((j) => get(`/v1/jobs/${j.id}`).catch(() => j)));
  return {jobs, details, more: pending.more};
}

export async function queuePage(out, who) {
  const {jobs, details, more} = await pendingWithReasons();
  const now = Date.now();
  out.append(h('h1', {}, who.admin ? 'Queue' : `Queue of ${who.tenant}`));
  const rows = jobs.map((j, i) => {
    const d = details[i] || j;
    const deadline = j.request?.deadline;
    return {attrs: {'data-job': j.id}, cells: [{v: link(`#/job/${j.id}`, String(j.id), {'data-field': `job:${j.id}:id`}), attrs: {class: 'num'}},
      j.name, j.tenant, num(String(j.priority), `job:${j.id}:priority`), gpusOf(j.request),
      duration((now - Date.parse(j.submitted_at)) / 1000), deadline ? when(deadline) : '–',
      d.waiting_reasons ? reasons(d.waiting_reasons) : h('span', {class: 'muted'}, d.waiting || (i >= kDetails ? 'open the job' : 'queued'))]};
  });
  out.append(section(`Pending jobs (${more ? `${jobs.length}+` : jobs.length}), highest priority first`,
    rows.length ? table([['Job', {class: 'num'}], 'Name', 'Tenant', ['Priority', {class: 'num'}], 'Asks', 'Waiting', 'Deadline', 'Why it waits'], rows, {id: 'queue'})
      : h('p', {class: 'muted', id: 'queue-empty'}, 'Nothing is waiting.')));
  const recent = await get('/v1/jobs?order=newest&limit=30');
  out.append(section('Recent jobs', table([['Job', {class: 'num'}], 'Name', 'Tenant', 'State', 'Pool', 'Submitted'],
    recent.jobs.map((j) => ({attrs: {'data-job': j.id}, cells: [{v: link(`#/job/${j.id}`, String(j.id)), attrs: {class: 'num'}}, j.name, j.tenant,
      badge(j.state), j.pool || '–', when(j.submitted_at)]})), {id: 'recent'})));
}

function gpusOf(r) {
  if (!r) return '–';
  const per = r.gpus ? `${r.gpus} GPU` : r.gpu_fraction ? `${r.gpu_fraction} GPU` : 'CPU only';
  return (r.replicas && r.replicas > 1 ? `${r.replicas} × ` : '') + per + (r.gpu_models?.length ? ` ${r.gpu_models.join('|')}` : '');
}

function reasons(w) {
  const items = (w.pools || []).map((p) => {
    let text = `${p.pool}: ${p.reason.replaceAll('_', ' ')}`;
    if (p.reason === 'quota_exhausted') text += ` (uses ${gpus(p.used_gpus)} of ${gpus(p.limit_gpus)})`;
    const checks = Object.entries(p.nodes_by_check || {}).filter(([, n]) => n > 0).map(([c, n]) => `${n} ${c.replaceAll('_', ' ')}`);
    if (checks.length) text += ` — nodes: ${checks.join(', ')}`;
    return h('li', {'data-reason': p.reason}, text);
  });
  if (w.victims_pending) items.push(h('li', {}, `${w.victims_pending} preempted job(s) still checkpointing`));
  return h('ul', {class: 'reasons'}, items);
}

// --- nodes ------------------------------------------------------------------------------
export async function nodesPage(out) {
  const {nodes} = await get('/v1/nodes');
  out.append(h('h1', {}, 'Nodes'));
  const rows = nodes.map((n) => {
    const k = (f) => `node:${n.name}:${f}`;
    return {attrs: {'data-node': n.name}, cells: [link(`#/node/${encodeURIComponent(n.name)}`, n.name),
      n.pool + (n.lent_from ? ` (lent by ${n.lent_from})` : ''), n.model,
      badge(n.condition), num(String(n.gpus), k('gpus')), num(gpus(n.free_gpus), k('free_gpus')),
      [n.region, n.zone, n.rack].filter(Boolean).join(' / ') || '–', gpuCells(n),
      n.hotspot ? h('span', {class: 'warn-text'}, `hotspot: ${n.hotspot.reason}`) : n.agent ? `agent ${when(n.agent.last_heartbeat_at)}` : 'no agent']};
  });
  out.append(section('Nodes and their GPUs',
    table(['Node', 'Pool', 'Model', 'Condition', ['GPUs', {class: 'num'}], ['Free', {class: 'num'}], 'Region / zone / rack',
      'Per GPU (colour: utilization, else booked share)', 'Agent'], rows, {id: 'nodes'}),
    legend([['heat-0', '0–20 %'], ['heat-1', '20–40 %'], ['heat-2', '40–60 %'], ['heat-3', '60–80 %'], ['heat-4', '80–100 %'],
      ['heat-na', 'unknown'], ['unhealthy', 'unhealthy']]),
    h('p', {class: 'legend-row'}, 'Marks: T time-sliced, P MPS, M MIG (the instances in the GPU\'s tooltip); no mark: whole or idle.')));
}

// The sharing mode's mark in a GPU's cell (idle and whole GPUs have none).
const MODE_MARK = {'time-slice': 'T', mps: 'P', mig: 'M'};

function gpuCells(n) {
  const agent = new Map((n.agent?.gpus || []).map((g) => [g.index, g]));
  return h('div', {class: 'gpus'}, (n.gpu || []).map((g) => {
    const a = agent.get(g.index) || {};
    const booked = 1 - g.free_milli / 1000;
    const f = a.util_pct !== undefined ? a.util_pct / 100 : booked;
    const lines = [`GPU ${g.index}: ${g.mode}`, `booked ${Math.round(booked * 100)} %`];
    if (a.util_pct !== undefined) lines.push(`utilization ${a.util_pct} %`);
    if (a.memory_used_mib !== undefined) lines.push(`memory used ${a.memory_used_mib} MiB`);
    if (a.temperature_c !== undefined && a.temperature_c >= 0) lines.push(`${a.temperature_c} °C`);
    if (a.mig?.length) lines.push(`MIG: ${a.mig.map((m) => m.profile).join(', ')}`);
    if (!g.healthy) lines.push(`unhealthy${a.health_detail ? `: ${a.health_detail}` : ''}`);
    return h('span', {class: `gpu ${g.healthy ? heatClass(f) : 'unhealthy'}`, title: lines.join('\n'),
      'data-gpu': g.index, 'data-mode': g.mode}, `${g.index}`, h('small', {}, MODE_MARK[g.mode] || ''));
  }));
}

// --- one node ---------------------------------------------------------------------------
const kNodeJobs = 2000;  // running and checkpointing jobs scanned (each state) for the node's tasks

export async function nodePage(out, who, name) {
  const [{nodes}, running, saving] = await Promise.all([get('/v1/nodes'), allJobs('state=running', kNodeJobs),
    allJobs('state=checkpointing', kNodeJobs)]);
  const n = nodes.find((x) => x.name === name);
  if (!n) throw new ApiError(404, 'not_found', `no node '${name}'`);
  out.append(h('h1', {}, 'Node ', n.name, ' ', badge(n.condition)));
  const a = n.agent;
  out.append(h('dl', {class: 'facts', id: 'node-facts'},
    fact('Pool', n.pool + (n.lent_from ? ` (lent by ${n.lent_from})` : ''), 'pool', 'node'), fact('Model', n.model || '–', 'model', 'node'),
    fact('GPUs', String(n.gpus), 'gpus', 'node'), fact('Free GPUs', gpus(n.free_gpus), 'free_gpus', 'node'),
    fact('CPU cores', String(n.cpu_cores), 'cpu_cores', 'node'), fact('Memory (GiB)', String(n.memory_gib), 'memory_gib', 'node'),
    fact('Region / zone / rack', [n.region, n.zone, n.rack].filter(Boolean).join(' / ') || '–', 'where', 'node'),
    fact('Agent', a ? `heartbeat ${when(a.last_heartbeat_at)}` : 'no agent', 'agent', 'node'),
    n.hotspot ? fact('Hotspot', `GPUs ${n.hotspot.gpus.join(', ')}: ${n.hotspot.reason} (since ${when(n.hotspot.since)})`, 'hotspot', 'node') : null));
  out.append(section('GPUs', nodeGpuTable(n)));
  const last = await gpuHistory(n.name);
  if (last) out.append(last);
  const tasks = [...running.jobs, ...saving.jobs].flatMap((j) => j.placements.map((pl, replica) => ({j, pl, replica})))
    .filter(({pl}) => pl.node === n.name).sort((x, y) => x.j.id - y.j.id || x.replica - y.replica);
  const more = running.more || saving.more ? ` (of the first ${kNodeJobs} running and checkpointing jobs)` : '';
  out.append(section(`Tasks on this node (${tasks.length})${more}`, tasks.length
    ? table([['Job', {class: 'num'}], 'Name', 'Tenant', 'State', ['Replica', {class: 'num'}], 'GPUs'],
      tasks.map(({j, pl, replica}) => ({attrs: {'data-job': j.id, 'data-replica': replica}, cells: [
        {v: link(`#/job/${j.id}`, String(j.id)), attrs: {class: 'num'}}, j.name, j.tenant, badge(j.state),
        {v: String(replica), attrs: {class: 'num'}},
        {v: pl.gpus.join(', ') || 'CPU only', attrs: {'data-field': `task:${j.id}:${replica}:gpus`}}]})), {id: 'tasks'})
    : h('p', {class: 'muted', id: 'tasks-empty'}, 'No task runs here.')));
}

// One row per GPU: the Engine's booking (mode, booked share, free memory of a
// share, health) and the agent's last report (utilization, memory, temperature, MIG).
function nodeGpuTable(n) {
  const agent = new Map((n.agent?.gpus || []).map((g) => [g.index, g]));
  const rows = (n.gpu || []).map((g) => {
    const a = agent.get(g.index) || {};
    const k = (f) => `gpu:${g.index}:${f}`;
    return {attrs: {'data-gpu': g.index}, cells: [{v: String(g.index), attrs: {class: 'num'}},
      {v: h('span', {class: `gpu ${g.healthy ? heatClass(a.util_pct !== undefined ? a.util_pct / 100 : 1 - g.free_milli / 1000) : 'unhealthy'}`},
        String(g.index)), attrs: {}}, g.mode,
      num(`${Math.round(100 - g.free_milli / 10)} %`, k('booked')), num(g.mode === 'whole' || g.mode === 'idle' ? '–' : String(g.memory_free_mib), k('memory_free_mib')),
      g.healthy ? 'healthy' : h('span', {class: 'warn-text'}, `unhealthy${a.health_detail ? `: ${a.health_detail}` : ''}`),
      num(a.util_pct !== undefined ? `${a.util_pct} %` : '–', k('util')), num(a.memory_used_mib !== undefined ? String(a.memory_used_mib) : '–', k('memory_used_mib')),
      num(a.temperature_c !== undefined ? `${a.temperature_c} °C` : '–', k('temperature')),
      a.mig?.length ? a.mig.map((m) => m.profile).join(', ') : '–']};
  });
  return rows.length ? table([['GPU', {class: 'num'}], '', 'Mode', ['Booked', {class: 'num'}], ['Share memory free (MiB)', {class: 'num'}],
    'Health', ['Utilization', {class: 'num'}], ['Memory used (MiB)', {class: 'num'}], ['Temperature', {class: 'num'}], 'MIG instances'], rows, {id: 'gpus'})
    : h('p', {class: 'muted'}, 'No GPUs (a CPU node, or registered after the latest summary).');
}

// --- one job ----------------------------------------------------------------------------
export async function jobPage(out, who, id) {
  if (!/^\d{1,18}$/.test(id)) throw new ApiError(404, 'not_found', `no job ${id}`);
  const j = await get(`/v1/jobs/${id}`);
  out.append(h('h1', {}, `Job ${j.id}: `, j.name, ' ', badge(j.state)));
  out.append(h('dl', {class: 'facts', id: 'job-facts'},
    fact('Tenant', j.tenant, 'tenant'), fact('Kind', j.kind, 'kind'), fact('Priority', String(j.priority), 'priority'),
    fact('Replicas', String(j.replicas), 'replicas'), fact('Pool', j.pool || '–', 'pool'),
    fact('Borrowed capacity', j.borrowed ? 'yes (preemptible)' : 'no', 'borrowed'),
    fact('Preemptions', String(j.preemptions), 'preemptions'), fact('Interruptions', String(j.interruptions), 'interruptions')));
  if (j.state === 'pending') {
    out.append(section('Why it waits', h('p', {}, j.waiting || 'queued'), j.waiting_reasons ? reasons(j.waiting_reasons) : null));
  }
  out.append(section('Placements', j.placements.length
    ? table(['Node', 'GPUs'], j.placements.map((p) => [p.node, p.gpus.join(', ') || 'CPU only']), {id: 'placements'})
    : h('p', {class: 'muted'}, 'Not placed.')));
  out.append(section('State history', table(['When', 'What', 'Why'], history(j), {id: 'history'})));
  if (who.admin) out.append(await jobEvents(j.id));
  out.append(section('Request', h('pre', {class: 'json'}, JSON.stringify(j.request, null, 2))));
  const log = h('pre', {class: 'log', id: 'log'});
  await followLog(log, j.id);
  out.append(section('Log tail (the last 64 KiB; followed while the job runs)', log));
}

// Every event of the job in the newest kJobEvents of the journal (admin only:
// /v1/events is): its placements, preemptions (as victim or preemptor),
// idle notices, reclaims, interruptions, moves and resizes, one by one.
const kJobEvents = 5000;

async function jobEvents(id) {
  const [health, names] = await Promise.all([get('/healthz'), eventNames()]);
  const ev = await get(`/v1/events?since=${Math.max(0, health.last_seq - kJobEvents)}&limit=${kJobEvents}`);
  const mine = ev.events.filter((e) => e.job === id || e.victim === id || e.preemptor === id || (e.moved || []).includes(id));
  return section(`Events of this job (in the newest ${kJobEvents} of the journal)`, mine.length
    ? table([['Seq', {class: 'num'}], 'At', 'Type', 'Details', 'Actor'], mine.map((e) => ({attrs: {'data-seq': e.seq},
      cells: [{v: String(e.seq), attrs: {class: 'num'}}, {v: when(e.at), attrs: {class: 'nowrap'}}, e.type, eventSummary(e, names), e.actor || '–']})),
    {id: 'job-events'})
    : h('p', {class: 'muted'}, 'None in these events.'));
}

function fact(k, v, field, of = 'job') { return [h('dt', {}, k), h('dd', {'data-field': `${of}:${field}`}, v)]; }

function history(j) {
  const rows = [[when(j.submitted_at), 'submitted', `priority ${j.priority}`]];
  if (j.started_at) rows.push([when(j.started_at), 'started', j.pool ? `in pool ${j.pool}` : '']);
  if (j.last_stop) {
    rows.push([when(j.last_stop.at), `last stopped: ${j.last_stop.cause}`,
      j.last_stop.reason + (j.last_stop.by_job ? ` (by job ${j.last_stop.by_job})` : '')]);
  }
  if (j.ended_at) rows.push([when(j.ended_at), j.state, j.reason || '']);
  else if (j.state === 'rejected') rows.push(['–', 'rejected', j.reason || '']);
  return rows.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

// --- regions ----------------------------------------------------------------------------
export async function regionsPage(out, who) {
  const r = await get('/v1/regions');
  const locations = [...new Set(r.regions.flatMap((x) => Object.keys(x.latency_ms || {})))].sort();
  out.append(h('h1', {}, 'Regions'), h('p', {}, 'Placement policy: ', h('strong', {'data-field': 'policy'}, r.policy)));
  out.append(section('Region table',
    r.regions.length ? table(['Region', ['Price per GPU-hour', {class: 'num'}], ...locations.map((l) => [`Latency from ${l} (ms)`, {class: 'num'}])],
      r.regions.map((x) => ({attrs: {'data-region': x.name}, cells: [x.name,
        num(String(x.price_per_gpu_hour), `region:${x.name}:price_per_gpu_hour`),
        ...locations.map((l) => (x.latency_ms && l in x.latency_ms ? num(String(x.latency_ms[l]), `region:${x.name}:latency:${l}`)
          : {v: '–', attrs: {class: 'num'}}))]})), {id: 'regions'})
      : h('p', {class: 'muted'}, 'No regions: placement ignores regions.')));
  if (r.users.length) {
    out.append(section('Where tenants\' users are', table(['Tenant', 'Location', ['Latency budget (ms)', {class: 'num'}]],
      r.users.map((u) => [u.tenant, u.location, {v: String(u.latency_budget_ms || 0), attrs: {class: 'num'}}]), {id: 'users'})));
  }
  const sizes = await poolSizes();
  if (sizes) out.append(sizes);
  if (who.admin) out.append(await scalingSection());
}

// --- scaling (on the regions page) -------------------------------------------------------
const kScalingEvents = 5000;  // the newest journal events scanned for scale-outs, drains and moves
const SCALING = {ScaleOutRequested: 'scale-out', ScaleOutFailed: 'scale-failed', NodeAdded: 'added', NodeDrainStarted: 'drain',
  NodeRemoved: 'removed', NodeLent: 'lent', NodeReturned: 'returned', WarmPoolSized: 'warm'};

// Scale-outs, nodes joining, drains, removals, loans between pools and warm
// pool sizes in the newest kScalingEvents events: one timeline lane per pool
// (a node's event in its home pool's lane) and the list, newest first.
async function scalingSection() {
  const [health, names, {nodes}] = await Promise.all([get('/healthz'), eventNames(), get('/v1/nodes')]);
  const ev = await get(`/v1/events?since=${Math.max(0, health.last_seq - kScalingEvents)}&limit=${kScalingEvents}`);
  const home = (i) => (nodes[i] ? nodes[i].lent_from || nodes[i].pool : `node ${i}`);
  const list = ev.events.filter((e) => e.type in SCALING)
    .map((e) => ({e, at: new Date(e.at).getTime(), pool: 'pool' in e ? names.pools[e.pool] ?? `pool ${e.pool}` : home(e.node)}));
  const title = `Scaling: scale-outs, nodes added, drains, removals and loans (the newest ${kScalingEvents} events)`;
  if (!list.length) return section(title, h('p', {class: 'muted', id: 'scaling-empty'}, 'None in these events.'));
  const pools = [...new Set(list.map((x) => x.pool))].sort();
  const now = Date.now(), from = Math.min(now - 60e3, ...list.map((x) => x.at));
  const rows = pools.map((p) => ({label: `pool ${p}`, marks: list.filter((x) => x.pool === p)
    .map((x) => ({at: x.at, cls: SCALING[x.e.type], title: `${when(x.at)}: ${x.e.type} ${eventSummary(x.e, names)}`}))}));
  return section(title, timeline(rows, {from, to: now}),
    legend([['scale-out', 'scale-out requested'], ['scale-failed', 'scale-out failed'], ['added', 'node added'], ['drain', 'drain started'],
      ['removed', 'node removed'], ['lent', 'lent to another pool'], ['returned', 'returned'], ['warm', 'warm pool sized']]),
    table([['Seq', {class: 'num'}], 'At', 'Pool', 'What', 'Details'], list.slice().reverse().map((x) => ({attrs: {'data-seq': x.e.seq},
      cells: [{v: String(x.e.seq), attrs: {class: 'num'}}, {v: when(x.at), attrs: {class: 'nowrap'}}, x.pool, x.e.type, eventSummary(x.e, names)]})),
    {id: 'scaling'}));
}

// --- reclamation ------------------------------------------------------------------------
const kReclaimEvents = 5000;  // the newest journal events scanned for notices, reclaims and scrubs
const kReclaimRows = 30;      // jobs on the timeline (the newest)
const kLowUtilPct = 10;       // a booked GPU whose agent reports less is listed as "booked but idle"

export async function reclamationPage(out) {
  const [{nodes}, health] = await Promise.all([get('/v1/nodes'), get('/healthz')]);
  const ev = await get(`/v1/events?since=${Math.max(0, health.last_seq - kReclaimEvents)}&limit=${kReclaimEvents}`);
  const {jobs, scrubs} = reclaimHistory(ev.events, nodes);
  const free = [], low = [];
  for (const n of nodes) {
    const agent = new Map((n.agent?.gpus || []).map((g) => [g.index, g]));
    for (const g of n.gpu || []) {
      if (!g.healthy) continue;
      const util = agent.get(g.index)?.util_pct;
      if (g.mode === 'idle') free.push([n, g]);
      else if (util !== undefined && util < kLowUtilPct) low.push([n, g, util]);
    }
  }
  const live = jobs.filter((j) => !j.done);
  out.append(h('h1', {}, 'Reclamation'));
  out.append(h('div', {class: 'tiles'},
    tile('GPUs with nothing on them', String(free.length), 'idle_gpus'),
    tile(`Booked GPUs below ${kLowUtilPct} % utilization`, String(low.length), 'low_util_gpus'),
    tile('Idle notices and reclaims in progress', String(live.length), 'reclaims_in_progress'),
    tile('Scrubs in the scanned events', String(scrubs.length), 'scrubs')));
  out.append(idleGpuTable(free, low));
  const shown = jobs.slice(-kReclaimRows);
  const now = Date.now();
  const from = Math.min(now - 60e3, ...shown.flatMap((j) => [j.noticed, j.started].filter(Boolean)), ...scrubs.map((x) => x.at));
  const rows = shown.map((j) => ({label: `job ${j.job}`, segments: reclaimSegments(j, now), marks: reclaimMarks(j)}));
  if (scrubs.length) {
    rows.push({label: 'GPU scrubs', marks: scrubs.map((x) => ({at: x.at, cls: 'scrub', title: `${when(x.at)}: ${x.node} GPUs ${x.gpus.join(', ')}`}))});
  }
  out.append(section(`Idle notices, reclaims and scrubs (the newest ${kReclaimEvents} events)`,
    rows.length ? timeline(rows, {from, to: now}) : h('p', {class: 'muted', id: 'reclaims-empty'}, 'No idle notice, reclaim or scrub in these events.'),
    legend([['grace', 'idle noticed: grace period'], ['checkpoint', 'reclaim started: checkpointing'],
      ['stopping', 'reclaim started: stopping (not checkpointable)'], ['reclaimed', 'reclaimed'],
      ['recovered', 'busy again'], ['scrub', 'GPUs scrubbed']]),
    shown.length ? table([['Job', {class: 'num'}], 'Reason', 'Idle noticed', 'Reclaim started', 'Checkpoint', 'Outcome'],
      shown.slice().reverse().map((j) => ({attrs: {'data-reclaim': j.job}, cells: [{v: link(`#/job/${j.job}`, String(j.job)), attrs: {class: 'num'}},
        j.reason || 'idle', when(j.noticed), when(j.started), j.started ? (j.checkpoint ? 'yes' : 'no') : '–',
        {v: reclaimOutcome(j), attrs: {'data-field': `reclaim:${j.job}:outcome`}}]})), {id: 'reclaims'}) : null));
}

// Per job, from the events (oldest first): the idle notice, a recovery, the
// reclaim's start (reason, checkpoint) and its end; and every GPU scrub.
// /v1/nodes lists nodes in index order, which is what events call "node".
function reclaimHistory(events, nodes) {
  const byJob = new Map(), scrubs = [];
  const rec = (id) => byJob.get(id) || byJob.set(id, {job: id}).get(id);
  for (const e of events) {
    const at = new Date(e.at).getTime();  // RFC 3339 or unix ms
    if (e.type === 'JobIdleSuspected') Object.assign(rec(e.job), {noticed: at, recovered: undefined, done: false});
    else if (e.type === 'JobIdleRecovered') Object.assign(rec(e.job), {recovered: at, done: true});
    else if (e.type === 'ReclaimStarted') Object.assign(rec(e.job), {started: at, reason: e.reason, checkpoint: e.checkpoint, done: false});
    else if (e.type === 'JobReclaimed') Object.assign(rec(e.job), {ended: at, done: true});
    else if (e.type === 'GpusScrubbed') {
      const gpus = [];
      for (let i = 0; i < 16; i++) if ((Number(e.gpus) >> i) & 1) gpus.push(i);  // a node's GpuMask: 16 bits
      scrubs.push({at, node: nodes[e.node]?.name || `node ${e.node}`, gpus});
    }
  }
  return {jobs: [...byJob.values()], scrubs};
}

function reclaimSegments(j, now) {
  const out = [];
  if (j.noticed) {
    const end = j.started || j.recovered || now;
    out.push({from: j.noticed, to: end, cls: 'grace', title: `job ${j.job}: idle noticed ${when(j.noticed)}, grace until ${when(end)}`});
  }
  if (j.started) {
    const end = j.ended || now;
    out.push({from: j.started, to: end, cls: `reclaim ${j.checkpoint ? 'checkpoint' : 'stopping'}`,
      title: `job ${j.job}: reclaim (${j.reason}) from ${when(j.started)}${j.checkpoint ? ', checkpointing' : ''}${j.ended ? ` to ${when(j.ended)}` : ', in progress'}`});
  }
  return out;
}

function reclaimMarks(j) {
  if (j.ended) return [{at: j.ended, cls: 'reclaimed', title: `job ${j.job}: reclaimed ${when(j.ended)}`}];
  if (j.recovered) return [{at: j.recovered, cls: 'recovered', title: `job ${j.job}: busy again ${when(j.recovered)}`}];
  return [];
}

function reclaimOutcome(j) {
  if (j.ended) return 'reclaimed';
  if (j.recovered) return 'busy again';
  if (j.started) return j.checkpoint ? 'checkpointing' : 'stopping';
  return 'in grace period';
}

function idleGpuTable(free, low) {
  const byNode = new Map();
  for (const [n, g] of free) (byNode.get(n.name) || byNode.set(n.name, {n, free: [], low: []}).get(n.name)).free.push(g.index);
  for (const [n, g, u] of low) (byNode.get(n.name) || byNode.set(n.name, {n, free: [], low: []}).get(n.name)).low.push(`${g.index} (${u} %)`);
  const rows = [...byNode.values()].map(({n, free: f, low: l}) => ({attrs: {'data-node': n.name}, cells: [n.name, n.pool, n.model,
    num(String(f.length), `idle:${n.name}:gpus`), f.join(', ') || '–', l.join(', ') || '–']}));
  return section('Idle GPUs by node',
    rows.length ? table(['Node', 'Pool', 'Model', ['Nothing on them', {class: 'num'}], 'Which', `Booked, below ${kLowUtilPct} % (agent)`], rows, {id: 'idle'})
      : h('p', {class: 'muted'}, 'Every healthy GPU is in use.'));
}
