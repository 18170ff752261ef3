// Browser tests of the web console (src/server/console/, issue 19): the real
// server binary on a quiescent fixture (tenants, nodes and jobs made through
// the API; no agents, so nothing moves once the first placements are made),
// headless Chromium (the system's, driven by playwright-core):
//   - the console's answers carry the CSP and nosniff headers, and the page
//     runs under the CSP without a violation;
//   - signed in as the admin, each page shows the numbers the API returns
//     for the same moment (the API read before and after the page must agree,
//     else the fixture was not quiescent and the test says so);
//   - signed in as a tenant, the pages show only its own jobs and tenant, and
//     #/job/ID of another tenant's job shows a not-found error and none of
//     that job's data; the admin-only pages answer forbidden;
//   - a job running on a real agent (a `gpupool dev` server with a fake GPU,
//     apart from the quiescent fixture): its page shows the lines the job
//     writes while it runs, appended in place without a reload;
//   - a screenshot of every page under OUT_DIR (build/console-screenshots).
//   node console_test.mjs GPUPOOL_BINARY OUT_DIR CHROMIUM
import {spawn} from 'node:child_process';
import {mkdirSync, mkdtempSync, readFileSync, rmSync} from 'node:fs';
import {tmpdir} from 'node:os';
import {join} from 'node:path';
import {chromium} from 'playwright-core';

const [bin, outDir, chromiumPath] = process.argv.slice(2);
mkdirSync(outDir, {recursive: true});
const data = mkdtempSync(join(tmpdir(), 'gpupool-console-'));
const devData = mkdtempSync(join(tmpdir(), 'gpupool-console-dev-'));
const children = [];  // every gpupool process started, stopped at the end
let browser, failures = 0;

function check(ok, what) {
  if (ok) { console.log(`ok: ${what}`); return; }
  failures++;
  console.log(`FAIL: ${what}`);
}
function eq(actual, expected, what) {
  const a = JSON.stringify(actual), e = JSON.stringify(expected);
  check(a === e, a === e ? what : `${what}: page shows ${a}, the API says ${e}`);
}
// GPUs as the console writes them (at most three decimals, no trailing zeros).
const gpus = (x) => String(Number(Number(x).toFixed(3)));

// Spawns `gpupool ARGS...` and waits (at most 10 s) for it to print its
// address (`pattern`'s first group, in stdout or stderr).
async function spawnServing(args, pattern = /(http:\/\/127\.0\.0\.1:\d+)/) {
  const child = spawn(bin, args, {stdio: ['ignore', 'pipe', 'pipe'], env: {...process.env, GPUPOOL_LOG_REQUESTS: '0'}});
  children.push(child);
  let text = '';
  child.stderr.on('data', (d) => { text += d; });
  child.stdout.on('data', (d) => { text += d; });
  for (let i = 0; i < 200; i++) {
    const m = text.match(pattern);
    if (m) return m[1];
    if (child.exitCode !== null) throw new Error(`gpupool ${args[0]} exited: ${text}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`gpupool ${args[0]} printed no address: ${text}`);
}

const startServer = () => spawnServing(['server', '--data', data, '--listen', '127.0.0.1:0']);

async function api(base, method, path, tok, body) {
  const res = await fetch(base + path, {method, headers: {Authorization: `Bearer ${tok}`, 'Content-Type': 'application/json'},
    body: body === undefined ? undefined : JSON.stringify(body)});
  const text = await res.text();
  if (!res.ok && method !== 'GET') throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return {status: res.status, headers: res.headers, json: text && res.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(text) : text};
}

async function fixture(base, admin) {
  const q = (g, l) => ({default: {guaranteed_gpus: g, limit_gpus: l}});
  for (let i = 1; i <= 3; i++) {
    await api(base, 'POST', '/v1/nodes', admin, {name: `gpu-node-${i}`, model: 'H100', gpus: 8, cpu_cores: 96, memory_gib: 1024, rack: `rack-${i}`});
  }
  await api(base, 'POST', '/v1/nodes', admin, {name: 'a100-node', model: 'A100-80GB', gpus: 4, cpu_cores: 64, memory_gib: 512});
  const a = (await api(base, 'POST', '/v1/tenants', admin, {name: 'team-a', quota: q(4, 12)})).json.token;
  const b = (await api(base, 'POST', '/v1/tenants', admin, {name: 'team-b', quota: q(2, 4)})).json.token;
  const job = (tok, body) => api(base, 'POST', '/v1/jobs', tok, {cpu_cores: 4, memory_gib: 16, command: ['sleep', '3600'], image: 'host', ...body});
  const ids = {a: [], b: []};
  ids.a.push((await job(a, {name: 'train-llm', gpus: 4, replicas: 2, priority: 10})).json.id);
  ids.a.push((await job(a, {name: 'notebook', gpu_fraction: 0.5})).json.id);
  ids.a.push((await job(a, {name: 'too-big', gpus: 16, priority: 5})).json.id);  // no node has 16 GPUs: rejected
  // Reclaimed at their deadline: one ends at once; the checkpointable one stays checkpointing (no agent reports
  // its checkpoint), a reclaim in progress on the reclamation page.
  ids.a.push((await job(a, {name: 'deadline-run', gpus: 1, deadline_after: '2s'})).json.id);
  ids.a.push((await job(a, {name: 'deadline-ckpt', gpus: 1, deadline_after: '2s', checkpointable: true, checkpoint_timeout: '10m'})).json.id);
  ids.b.push((await job(b, {name: 'b-secret-eval', gpus: 2})).json.id);
  ids.b.push((await job(b, {name: 'b-secret-sweep', gpus: 4, priority: 3})).json.id);  // over team-b's limit
  // A region table for the regions page (every node is in region-1, within team-a's users' budget: nothing moves).
  await api(base, 'PUT', '/v1/regions', admin, {policy: 'cost-aware',
    regions: [{name: 'region-1', price_per_gpu_hour: 2.5, latency_ms: {'eu-west': 12, 'us-east': 85}},
      {name: 'region-2', price_per_gpu_hour: 1.75, latency_ms: {'eu-west': 95, 'us-east': 9}}],
    users: [{tenant: 'team-a', location: 'eu-west', latency_budget_ms: 50}]});
  return {a, b, ids};
}

// The API's view of a moment: everything the pages show.
async function snapshot(base, tok) {
  const get = async (p) => (await api(base, 'GET', p, tok)).json;
  return {pools: await get('/v1/pools'), tenants: await get('/v1/tenants'), nodes: await get('/v1/nodes'),
    pending: await get('/v1/jobs?state=pending&limit=1000'), regions: await get('/v1/regions')};
}

// Waits until the jobs that fit are placed (only `pendingNames` wait) and the
// API's answers are the same for a whole second.
async function waitQuiet(base, admin, pendingNames) {
  let prev = '', same = 0;
  for (let i = 0; i < 60; i++) {
    const snap = await snapshot(base, admin);
    const s = JSON.stringify(snap);
    const waiting = snap.pending.jobs.map((j) => j.name).sort();
    same = s === prev && JSON.stringify(waiting) === JSON.stringify(pendingNames) ? same + 1 : 0;
    if (same >= 4) return snap;
    prev = s;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`the fixture does not settle in 15 s (pending: ${prev && JSON.parse(prev).pending.jobs.map((j) => j.name)})`);
}

// Waits (at most 15 s) until each job {id: state} is in its state.
async function waitStates(base, admin, want) {
  let got = {};
  for (let i = 0; i < 60; i++) {
    for (const id of Object.keys(want)) got[id] = (await api(base, 'GET', `/v1/jobs/${id}`, admin)).json.state;
    if (Object.keys(want).every((id) => got[id] === want[id])) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`jobs not in their states in 15 s: want ${JSON.stringify(want)}, have ${JSON.stringify(got)}`);
}

async function open(page, hash) {
  await page.evaluate((h) => { location.hash = h; }, hash);
  await page.waitForSelector(`body[data-ready="${hash.split('/')[1]}"]`, {timeout: 10000});
}
const fields = (page) => page.$$eval('[data-field]', (els) => Object.fromEntries(els.map((e) => [e.dataset.field, e.textContent.trim()])));

async function signIn(page, base, tok) {
  await page.goto(base + '/');
  await page.fill('#token', tok);
  await page.click('#signin button[type=submit]');
  await page.waitForSelector('body[data-ready]', {timeout: 10000});
}

async function adminPages(page, base, admin, before) {
  await signIn(page, base, admin);
  check((await page.textContent('#who')).includes('admin'), 'the admin signs in');
  await adminOverview(page, base, admin, before);
  await adminTenants(page, base, admin, before);
  await adminQueue(page, before);
  await adminNodes(page, base, admin, before);
  await open(page, '#/reclamation');
  await reclamationPage(page, base, admin, before);
  await adminRegions(page, base, admin, before);
}

async function adminOverview(page, base, admin, before) {
  const f = await fields(page);
  for (const p of before.pools.pools) {
    for (const k of ['total_gpus', 'allocated_gpus', 'reserved_gpus', 'fragmented_gpus', 'available_gpus']) {
      eq(f[`pool:${p.name}:${k}`], gpus(p.capacity[k]), `overview: pool ${p.name} ${k}`);
    }
    eq(f[`pool:${p.name}:nodes`], String(p.nodes), `overview: pool ${p.name} nodes`);
  }
  eq(f.queue_length, String(before.pending.jobs.length), 'overview: queue length');
  await seriesCharts(page, base, admin, before, f);
  check(await page.locator('#events tbody tr').count() > 0, 'overview: recent events listed');
  await eventNames(page, base, admin, before);
  await page.screenshot({path: join(outDir, 'overview-admin.png'), fullPage: true});
}

async function adminTenants(page, base, admin, before) {
  await open(page, '#/tenants');
  const f = await fields(page);
  for (const t of before.tenants.tenants) {
    for (const [pool, q] of Object.entries(t.quota)) {
      eq(f[`tenant:${t.name}:${pool}:guaranteed_gpus`], gpus(q.guaranteed_gpus), `tenants: ${t.name} guaranteed`);
      eq(f[`tenant:${t.name}:${pool}:limit_gpus`], gpus(q.limit_gpus), `tenants: ${t.name} limit`);
      const u = t.usage[pool];
      for (const k of ['used_gpus', 'borrowed_gpus', 'lent_gpus']) eq(f[`tenant:${t.name}:${pool}:${k}`], gpus(u[k]), `tenants: ${t.name} ${k}`);
    }
  }
  const exhausted = {};  // tenant:pool -> pending jobs waiting on its quota, as GET /v1/jobs/{id} explains them
  for (const j of before.pending.jobs) {
    for (const p of (await api(base, 'GET', `/v1/jobs/${j.id}`, admin)).json.waiting_reasons?.pools || []) {
      if (p.reason === 'quota_exhausted') exhausted[`${j.tenant}:${p.pool}`] = (exhausted[`${j.tenant}:${p.pool}`] || 0) + 1;
    }
  }
  check(exhausted['team-b:default'] === 1, `tenants: the fixture has team-b waiting on its quota (${JSON.stringify(exhausted)})`);
  for (const t of before.tenants.tenants) {
    for (const pool of Object.keys(t.quota)) {
      const n = exhausted[`${t.name}:${pool}`];
      eq(/quota exhausted: (\d+) waiting/.exec(f[`tenant:${t.name}:${pool}:marks`])?.[1], n ? String(n) : undefined, `tenants: ${t.name} ${pool} quota-exhausted mark`);
    }
  }
  const ts = (await api(base, 'GET', '/v1/timeseries/tenants?minutes=1440', admin)).json;
  check(ts.series.length === before.tenants.tenants.length, `tenants: one series per tenant with a quota (${ts.series.length})`);
  for (const t of ts.series) {
    const latest = t.used_gpus[t.used_gpus.length - 1];
    const u = before.tenants.tenants.find((x) => x.name === t.tenant).usage[t.pool];
    eq(f[`series:tenant:${t.tenant}:${t.pool}:used_gpus`], gpus(latest), `tenants chart: ${t.tenant} ${t.pool} latest point`);
    eq(gpus(latest), gpus(u.used_gpus), `tenants: ${t.tenant}'s series ends at its usage`);
  }
  await page.screenshot({path: join(outDir, 'tenants-admin.png'), fullPage: true});
}

async function adminQueue(page, before) {
  await open(page, '#/queue');
  const shown = await page.$$eval('#queue tbody tr', (rows) => rows.map((r) => Number(r.dataset.job)).sort((x, y) => x - y));
  eq(shown, before.pending.jobs.map((j) => j.id).sort((x, y) => x - y), 'queue: the pending jobs');
  const f = await fields(page);
  for (const j of before.pending.jobs) eq(f[`job:${j.id}:priority`], String(j.priority), `queue: job ${j.id} priority`);
  const reasons = await page.$$eval('#queue [data-reason]', (els) => els.map((e) => e.dataset.reason));
  check(reasons.includes('quota_exhausted'), `queue: structured reasons shown (${reasons.join(', ')})`);
  await page.screenshot({path: join(outDir, 'queue-admin.png'), fullPage: true});
}

async function adminNodes(page, base, admin, before) {
  await open(page, '#/nodes');
  const f = await fields(page);
  for (const n of before.nodes.nodes) {
    eq(f[`node:${n.name}:free_gpus`], gpus(n.free_gpus), `nodes: ${n.name} free GPUs`);
    eq(await page.locator(`tr[data-node="${n.name}"] .gpu`).count(), n.gpu.length, `nodes: ${n.name} per-GPU cells`);
  }
  await page.screenshot({path: join(outDir, 'nodes-admin.png'), fullPage: true});
  await page.click('tr[data-node="a100-node"] a');  // the node's name links to its page
  await page.waitForSelector('body[data-ready="node"]', {timeout: 10000});
  check((await page.textContent('h1')).includes('a100-node'), 'nodes: a node\'s name opens its page');
  for (const n of before.nodes.nodes) await nodePage(page, base, admin, n);
}

// The overview's charts over time: the newest point of each pool's lines is what
// GET /v1/timeseries/pools answers, and that is GET /v1/pools of the same moment.
async function seriesCharts(page, base, admin, before, f) {
  const ts = (await api(base, 'GET', '/v1/timeseries/pools?minutes=360', admin)).json;
  eq(ts.series.map((x) => x.pool), before.pools.pools.map((p) => p.name), 'overview charts: one series per pool');
  eq(await page.locator('svg.chart').count(), 2 * before.pools.pools.length, 'overview charts: GPUs and queue per pool');
  for (const sr of ts.series) {
    const p = before.pools.pools.find((x) => x.name === sr.pool);
    for (const k of ['total_gpus', 'allocated_gpus', 'busy_gpus', 'idle_gpus']) {
      const latest = sr[k][sr[k].length - 1];
      eq(f[`series:pool:${sr.pool}:${k}`], gpus(latest), `overview chart: pool ${sr.pool} ${k}, latest point`);
    }
    eq(f[`series:pool:${sr.pool}:queued_jobs`], String(sr.queued_jobs[sr.queued_jobs.length - 1]), `overview chart: pool ${sr.pool} queue`);
    for (const k of ['total_gpus', 'allocated_gpus', 'reserved_gpus']) {
      eq(sr[k][sr[k].length - 1], p.capacity[k], `series: pool ${sr.pool} ${k} equals /v1/pools`);
    }
    eq(sr.idle_gpus[sr.idle_gpus.length - 1], p.capacity.allocated_gpus, `series: pool ${sr.pool} all allocated GPUs idle (no agent)`);
  }
  check(ts.series.some((sr) => Math.max(...sr.queued_jobs.filter((v) => v !== null)) === 1), 'overview charts: a queue of one (the case that once repeated a label)');
  await axisLabels(page, 'overview');
}

// The job page's log: a finished job's tail equals its log and stops following; a
// running job's page follows it until the page is left.
async function logTail(page, base, admin, fx) {
  const done = fx.ids.a[3];  // reclaimed at its deadline: ended
  await open(page, `#/job/${done}`);
  const text = (await api(base, 'GET', `/v1/jobs/${done}/logs`, admin)).json;
  await page.waitForSelector('#log[data-follow="ended"]', {timeout: 15000});
  eq(await page.textContent('#log'), text || '(no output yet)', `job ${done}: the log tail is the job's log, and following ended`);
  await open(page, `#/job/${fx.ids.a[0]}`);
  eq(await page.getAttribute('#log', 'data-follow'), 'following', `job ${fx.ids.a[0]}: a running job's log is followed`);
  await page.evaluate(() => { window.followed = document.getElementById('log'); });
  await open(page, '#/queue');
  await page.waitForFunction(() => window.followed.dataset.follow === 'stopped', null, {timeout: 10000});
  check(true, 'job page: following stops once the page is left');
}

// The regions page against /v1/regions, and (admin) its scaling list against /v1/events.
async function adminRegions(page, base, admin, before) {
  await open(page, '#/regions');
  const f = await fields(page);
  eq(f.policy, before.regions.policy, 'regions: policy');
  check(before.regions.regions.length === 2, 'regions: the fixture\'s region table is in force');
  for (const r of before.regions.regions) {
    eq(f[`region:${r.name}:price_per_gpu_hour`], String(r.price_per_gpu_hour), `regions: ${r.name} price`);
    for (const [loc, ms] of Object.entries(r.latency_ms)) eq(f[`region:${r.name}:latency:${loc}`], String(ms), `regions: ${r.name} latency from ${loc}`);
  }
  eq(await page.$$eval('#users tbody tr', (rows) => rows.map((r) => r.textContent)),
    before.regions.users.map((u) => `${u.tenant}${u.location}${u.latency_budget_ms}`), 'regions: where the users are');
  const scaling = ['ScaleOutRequested', 'ScaleOutFailed', 'NodeAdded', 'NodeDrainStarted', 'NodeRemoved', 'NodeLent', 'NodeReturned', 'WarmPoolSized'];
  const sev = (await api(base, 'GET', '/v1/events?since=0&limit=5000', admin)).json.events.filter((e) => scaling.includes(e.type));
  check(sev.length === before.nodes.nodes.length, `regions: the fixture's nodes joined as scaling events (${sev.length})`);
  eq(await page.$$eval('#scaling tbody tr', (rows) => rows.map((r) => `${r.dataset.seq} ${r.cells[2].textContent} ${r.cells[3].textContent}`)),
    sev.reverse().map((e) => `${e.seq} ${before.pools.pools[e.pool]?.name ?? before.nodes.nodes[e.node].pool} ${e.type}`), 'regions: the scaling events, newest first');
  eq(await page.locator('svg.timeline .mark').count(), sev.length, 'regions: one timeline mark per scaling event');
  for (const p of before.pools.pools) eq(f[`series:size:${p.name}:nodes`], String(p.nodes), `regions: pool ${p.name}'s size chart ends at its nodes`);
  await page.screenshot({path: join(outDir, 'regions-admin.png'), fullPage: true});
}

// The overview's recent events name nodes, pools and tenants (events carry indices: /v1/nodes, /v1/pools and
// /v1/tenants list them in index order) and write each placement's GPU mask as GPU indices.
async function eventNames(page, base, admin, before) {
  const shown = await page.$$eval('#events tbody tr', (rows) => Object.fromEntries(rows.map((r) => [r.dataset.seq, r.cells[3].textContent])));
  const ev = (await api(base, 'GET', '/v1/events?since=0&limit=1000', admin)).json.events.filter((e) => String(e.seq) in shown);
  const mask = (m) => [...Array(16).keys()].filter((i) => (m >> i) & 1).join(',');
  let placed = 0;
  for (const e of ev.filter((x) => x.type === 'JobPlaced')) {
    placed++;
    const want = e.replicas.map((r) => `${before.nodes.nodes[r.node].name}[${mask(r.gpus)}]`).join(' ');
    check(shown[e.seq].includes(`pool=${before.pools.pools[e.pool].name}`) && shown[e.seq].includes(`replicas=${want}`),
      `overview: event ${e.seq} names its pool and nodes (${shown[e.seq]}; want replicas=${want})`);
  }
  for (const e of ev.filter((x) => 'tenant' in x)) {
    check(shown[e.seq].includes(`tenant=${before.tenants.tenants[e.tenant].name}`), `overview: event ${e.seq} names its tenant (${shown[e.seq]})`);
  }
  check(placed > 0, `overview: the recent events include placements (${placed})`);
  // Events older than the twelve shown, through the page's own summary (pages.js has no side effect on import).
  const summaries = await page.evaluate(async (evs) => {
    const {eventSummary} = await import('/console/pages.js');
    const names = {nodes: ['n0', 'n1'], pools: ['p0', 'p1'], tenants: ['t0', 't1'], models: {n1: 'H100'}};
    return evs.map((e) => eventSummary(e, names));
  }, [{type: 'NodeAdded', node: 'n1', gpus: 8, model: 3, pool: 1},
    {type: 'GpusScrubbed', node: 1, gpus: 5},
    {type: 'NodeLent', node: 0, to: 1, reason: 'idle'},
    {type: 'NodesReserved', job: 4, nodes: [1, 0, 7]},
    {type: 'QuotaSet', tenant: 1, pool: 0, x: {a: 1}}]);
  eq(summaries, ['node=n1 gpus=8 model=H100 pool=p1', 'node=n1 gpus=[0,2]', 'node=n0 to=p1 reason=idle',
    'job=4 nodes=n1,n0,node 7', 'tenant=t1 pool=p0 x={"a":1}'], 'overview: event summaries name what events give by index');
  const set = ev.find((x) => x.type === 'RegionsSet');
  check(set && shown[set.seq] === `policy=cost-aware regions=region-1,region-2`, `overview: the region table's event in short (${set && shown[set.seq]})`);
}

// A node's page against /v1/nodes and the placements of the running and checkpointing jobs.
async function nodePage(page, base, admin, n) {
  if (!(await page.url()).endsWith(`#/node/${n.name}`)) await open(page, `#/node/${n.name}`);
  const f = await fields(page);
  eq([f['node:free_gpus'], f['node:gpus'], f['node:pool']], [gpus(n.free_gpus), String(n.gpus), n.pool], `node ${n.name}: facts`);
  eq(n.gpu.map((g) => f[`gpu:${g.index}:booked`]), n.gpu.map((g) => `${Math.round(100 - g.free_milli / 10)} %`), `node ${n.name}: each GPU's booked share`);
  const jobs = [];
  for (const st of ['running', 'checkpointing']) jobs.push(...(await api(base, 'GET', `/v1/jobs?state=${st}&limit=1000`, admin)).json.jobs);
  const want = jobs.flatMap((j) => j.placements.map((p, r) => ({id: j.id, r, p}))).filter((x) => x.p.node === n.name)
    .map((x) => `${x.id}/${x.r}:${x.p.gpus.join(', ')}`).sort();
  const shown = (await page.$$eval('#tasks tbody tr', (rows) => rows.map((r) => `${r.dataset.job}/${r.dataset.replica}:${r.lastChild.textContent}`))).sort();
  eq(shown, want, `node ${n.name}: its tasks and their GPUs`);
  const g = (await api(base, 'GET', `/v1/timeseries/gpus?node=${n.name}`, admin)).json;
  check(g.series.length === 0 && (await page.locator('#gpu-history-empty').count()) === 1,
    `node ${n.name}: no agent, so no GPU series, and the page says so (${g.series.length})`);
  if (n.name === 'a100-node' || n.name === 'gpu-node-3') await page.screenshot({path: join(outDir, `node-${n.name}-admin.png`), fullPage: true});
}

// The reclamation page against /v1/nodes and /v1/events: idle GPUs per node, and each reclaim's outcome as the
// events tell it (the fixture's two deadline reclaims: one ended, one checkpointing).
async function reclamationPage(page, base, admin, before) {
  const f = await fields(page);
  const idle = (n) => n.gpu.filter((g) => g.healthy && g.mode === 'idle').length;
  eq(f.idle_gpus, String(before.nodes.nodes.reduce((a, n) => a + idle(n), 0)), 'reclamation: GPUs with nothing on them');
  for (const n of before.nodes.nodes) if (idle(n)) eq(f[`idle:${n.name}:gpus`], String(idle(n)), `reclamation: ${n.name} idle GPUs`);
  const ev = (await api(base, 'GET', '/v1/events?since=0&limit=5000', admin)).json.events;
  const started = ev.filter((e) => e.type === 'ReclaimStarted');
  const ended = new Set(ev.filter((e) => e.type === 'JobReclaimed').map((e) => e.job));
  check(started.length === 2, `reclamation: the fixture's two deadline reclaims are in the journal (${started.length})`);
  for (const e of started) {
    eq(f[`reclaim:${e.job}:outcome`], ended.has(e.job) ? 'reclaimed' : e.checkpoint ? 'checkpointing' : 'stopping', `reclamation: job ${e.job}'s outcome`);
  }
  eq(f.reclaims_in_progress, String(started.filter((e) => !ended.has(e.job)).length), 'reclamation: reclaims in progress');
  eq(await page.locator('svg.timeline .seg.reclaim').count(), started.length, 'reclamation: one timeline segment per reclaim');
  eq(await page.locator('svg.timeline .seg.checkpoint').count(), started.filter((e) => e.checkpoint).length,
    'reclamation: checkpointing reclaims drawn as such');
  await page.screenshot({path: join(outDir, 'reclamation-admin.png'), fullPage: true});
}

async function jobPage(page, base, tok, id, name) {
  await open(page, `#/job/${id}`);
  const j = (await api(base, 'GET', `/v1/jobs/${id}`, tok)).json;
  const f = await fields(page);
  eq([f['job:tenant'], f['job:priority'], f['job:replicas']], [j.tenant, String(j.priority), String(j.replicas)], `job ${id}: facts`);
  check((await page.textContent('h1')).includes(j.name), `job ${id}: its name`);
  await page.screenshot({path: join(outDir, `${name}.png`), fullPage: true});
}

// The admin's job page lists the job's own events, as /v1/events has them (the checkpointing deadline job:
// submitted, placed, reclaim started).
async function jobEvents(page, base, admin, id, name) {
  await jobPage(page, base, admin, id, name);
  const ev = (await api(base, 'GET', '/v1/events?since=0&limit=5000', admin)).json.events;
  const want = ev.filter((e) => e.job === id || e.victim === id || e.preemptor === id || (e.moved || []).includes(id)).map((e) => `${e.seq} ${e.type}`);
  eq(await page.$$eval('#job-events tbody tr', (rows) => rows.map((r) => `${r.dataset.seq} ${r.cells[2].textContent}`)), want, `job ${id}: its events`);
  check(want.some((x) => x.endsWith('ReclaimStarted')), `job ${id}: the reclaim is among its events (${want.join(', ')})`);
}

async function tenantPages(page, base, fx, before) {
  await page.evaluate(() => sessionStorage.clear());
  await signIn(page, base, fx.a);
  check((await page.textContent('#who')).includes('team-a'), 'a tenant signs in as itself');
  check(!(await page.locator('#nav a[href="#/nodes"]').count()), 'tenant: no Nodes page in the navigation');
  await page.screenshot({path: join(outDir, 'overview-tenant.png'), fullPage: true});
  await open(page, '#/tenants');
  const tenants = await page.$$eval('#tenants tbody tr', (rows) => [...new Set(rows.map((r) => r.dataset.tenant))]);
  eq(tenants, ['team-a'], 'tenant: sees only its own tenant');
  await page.screenshot({path: join(outDir, 'tenants-tenant.png'), fullPage: true});
  await open(page, '#/queue');
  const jobs = await page.$$eval('[data-job]', (rows) => [...new Set(rows.map((r) => Number(r.dataset.job)))].sort((x, y) => x - y));
  check(jobs.length > 0 && jobs.every((id) => fx.ids.a.includes(id)), `tenant: queue and recent jobs are its own (${jobs})`);
  const body = await page.textContent('body');
  check(!body.includes('b-secret') && !body.includes('team-b'), 'tenant: no other tenant\'s job names on the queue page');
  await page.screenshot({path: join(outDir, 'queue-tenant.png'), fullPage: true});
  await jobPage(page, base, fx.a, fx.ids.a[0], 'job-tenant');
  check(!(await page.locator('#job-events').count()), 'tenant: a job page has no journal events (they are the admin\'s)');
  await open(page, `#/job/${fx.ids.b[0]}`);
  const err = await page.textContent('[data-error]').catch(() => '');
  check(/not found/i.test(err), `tenant: another tenant's job by URL shows not found (${err})`);
  const text = await page.textContent('main');
  check(!text.includes('b-secret') && !text.includes('team-b') && !(await page.locator('#job-facts').count()),
    'tenant: another tenant\'s job by URL shows none of its data');
  await page.screenshot({path: join(outDir, 'job-other-tenant.png'), fullPage: true});
  await open(page, '#/nodes');
  check(/forbidden/i.test(await page.textContent('main')), 'tenant: #/nodes answers forbidden');
  await open(page, '#/reclamation');
  check(/forbidden/i.test(await page.textContent('main')), 'tenant: #/reclamation answers forbidden');
  await open(page, '#/node/gpu-node-3');
  const node = await page.textContent('main');
  check(/forbidden/i.test(node) && !node.includes('train-llm'), 'tenant: #/node/NAME answers forbidden and shows no task');
  check(before.pools.pools.length > 0, 'fixture has pools');
  await open(page, '#/overview');
  const tf = await fields(page);
  const pool0 = before.pools.pools[0];
  eq(tf[`series:pool:${pool0.name}:allocated_gpus`], gpus(pool0.capacity.allocated_gpus), 'tenant: the overview charts its pools\' allocated GPUs');
  check(!(`series:pool:${pool0.name}:busy_gpus` in tf) && !(`series:pool:${pool0.name}:queued_jobs` in tf), 'tenant: no busy, idle or queue charts');
  const other = await page.evaluate(async (tok) => (await fetch('/v1/timeseries/tenants?tenant=team-b', {headers: {Authorization: `Bearer ${tok}`}})).status, fx.a);
  eq(other, 403, 'tenant: another tenant\'s series is forbidden');
  const own = (await api(base, 'GET', '/v1/timeseries/tenants', fx.a)).json;
  eq([...new Set(own.series.map((x) => x.tenant))], ['team-a'], 'tenant: its own series only');
  eq((await api(base, 'GET', '/v1/timeseries/gpus?node=gpu-node-1', fx.a)).status, 403, 'tenant: the GPU series are forbidden');
  await open(page, '#/tenants');
  const tt = await fields(page);
  check(Object.keys(tt).filter((k) => k.startsWith('series:tenant:')).every((k) => k.startsWith('series:tenant:team-a:')), 'tenant: the usage chart shows its own tenant only');
}

// Every chart on the page labels its y-axis without repeating a label (a
// queue of one once read 0, 1, 1: half steps written as whole numbers).
async function axisLabels(page, name) {
  const charts = await page.$$eval('svg.chart', (svgs) => svgs.map((svg) => ({title: svg.getAttribute('aria-label'),
    labels: [...svg.querySelectorAll('text.axis[text-anchor="end"]')].map((t) => t.textContent)})));
  check(charts.length > 0, `${name}: has charts`);
  for (const c of charts) {
    check(new Set(c.labels).size === c.labels.length && c.labels.length >= 2, `${name}: chart "${c.title}" y-axis labels ${JSON.stringify(c.labels)} are distinct`);
  }
}

// Starts `gpupool dev` (a server and one agent with one fake H100) on its own data directory; its address.
const startDev = () => spawnServing(['dev', '--data', devData, '--listen', '127.0.0.1:0', '--fake-gpus', 'H100'],
  /address: +(http:\/\/127\.0\.0\.1:\d+)/);

// Waits (at most `ms`) until `pred()` is true; false if it never was.
async function until(pred, ms) {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 200))) {
    if (await pred()) return true;
  }
  return false;
}

// A job on a real agent writes one line, then another four seconds later: the
// job page, opened in between, shows the first and then the second in the same
// element (followed, not reloaded), as the API's log has them.
async function liveLog() {
  const base = await startDev();
  const tok = readFileSync(join(devData, 'tokens', 'team-a.token'), 'utf8').trim();
  const admin = readFileSync(join(devData, 'admin.token'), 'utf8').trim();
  const node = await until(async () => ((await api(base, 'GET', '/v1/nodes', admin)).json.nodes || []).length > 0, 20000);
  check(node, 'dev: the agent\'s node joined');
  const id = (await api(base, 'POST', '/v1/jobs', tok, {name: 'live-log', gpu_fraction: 0.25, cpu_cores: 0.1, memory_gib: 0.1,
    command: ['sh', '-c', 'echo live-line-one; sleep 4; echo live-line-two; sleep 120']})).json.id;
  const logText = async () => String((await api(base, 'GET', `/v1/jobs/${id}/logs`, tok)).json || '');
  check(await until(async () => (await logText()).includes('live-line-one'), 30000), `job ${id}: the agent ran it and its first line reached the server`);
  const page = await browser.newPage({viewport: {width: 1440, height: 900}});
  await signIn(page, base, tok);
  await open(page, `#/job/${id}`);
  await page.waitForFunction(() => document.getElementById('log')?.textContent.includes('live-line-one'), null, {timeout: 10000});
  const first = await page.textContent('#log');
  check(!first.includes('live-line-two'), `job ${id}: the page opened before the second line (${JSON.stringify(first)})`);
  await page.evaluate(() => { window.live = document.getElementById('log'); });
  await page.waitForFunction(() => window.live.isConnected && window.live.textContent.includes('live-line-two'), null, {timeout: 20000});
  eq(await page.textContent('#log'), await logText(), `job ${id}: the second line was appended in place, and the page's log is the API's`);
  eq(await page.getAttribute('#log', 'data-follow'), 'following', `job ${id}: still followed while it runs`);
  await page.screenshot({path: join(outDir, 'job-live-log.png'), fullPage: true});
  await api(base, 'DELETE', `/v1/jobs/${id}`, tok);
  check(await until(async () => (await api(base, 'GET', `/v1/jobs/${id}`, tok)).json.state === 'cancelled', 20000), `job ${id}: cancelled`);
  await page.close();
}

async function main() {
  const base = await startServer();
  const admin = readFileSync(join(data, 'admin.token'), 'utf8').trim();
  const root = await fetch(base + '/');
  const csp = root.headers.get('content-security-policy') || '';
  check(root.status === 200 && root.headers.get('content-type').startsWith('text/html'), 'GET / is the console page');
  check(csp.includes("default-src 'self'") && csp.includes("script-src 'self'") && !csp.includes('unsafe'), `CSP: ${csp}`);
  check(root.headers.get('x-content-type-options') === 'nosniff', 'X-Content-Type-Options: nosniff');
  const js = await fetch(base + '/console/app.js');
  check(js.headers.get('content-type').startsWith('text/javascript'), 'app.js is served as JavaScript');
  const etag = js.headers.get('etag');
  check((await fetch(base + '/console/app.js', {headers: {'If-None-Match': etag}})).status === 304, 'a matching ETag gets 304');
  check((await fetch(base + '/console/no-such.js')).status === 404, 'an unknown console file is 404');

  const fx = await fixture(base, admin);
  await waitStates(base, admin, {[fx.ids.a[3]]: 'evicted', [fx.ids.a[4]]: 'checkpointing'});
  const before = await waitQuiet(base, admin, ['b-secret-sweep']);
  browser = await chromium.launch({executablePath: chromiumPath, args: ['--no-sandbox']});
  const page = await browser.newPage({viewport: {width: 1440, height: 900}});
  const violations = [];
  page.on('console', (m) => { if (/Content Security Policy|Refused to/i.test(m.text())) violations.push(m.text()); });
  page.on('pageerror', (e) => violations.push(`page error: ${e.message}`));
  await page.goto(base + '/');
  await page.waitForSelector('#signin');
  await page.screenshot({path: join(outDir, 'signin.png')});
  await adminPages(page, base, admin, before);
  await jobPage(page, base, admin, fx.ids.a[0], 'job-admin');
  await jobEvents(page, base, admin, fx.ids.a[4], 'job-reclaimed-admin');
  await logTail(page, base, admin, fx);
  await tenantPages(page, base, fx, before);
  eq(JSON.stringify(await snapshot(base, admin)) === JSON.stringify(before), true, 'the fixture stayed quiescent while the pages were read');
  check(violations.length === 0, `no CSP violation or script error (${violations.join(' | ')})`);
  const stored = await page.evaluate(() => document.cookie);
  check(stored === '', 'no cookie is set');
  await liveLog();
}

try {
  await main();
} catch (e) {
  failures++;
  console.log(`FAIL: ${e.stack || e}`);
} finally {
  if (browser) await browser.close();
  // SIGTERM, then at most 10 s each to exit (the dev agent stops its tasks).
  for (const c of children.filter((x) => x.exitCode === null)) {
    c.kill('SIGTERM');
    await new Promise((r) => { c.on('exit', r); setTimeout(r, 10000); });
  }
  rmSync(data, {recursive: true, force: true});
  rmSync(devData, {recursive: true, force: true});
}
console.log(failures ? `console_test: ${failures} failure(s)` : `console_test: all passed; screenshots in ${outDir}`);
process.exit(failures ? 1 : 0);
