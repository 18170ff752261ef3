// The console's shell: sign-in, navigation and hash routing
// (#/overview, #/tenants, #/queue, #/nodes, #/node/NAME, #/reclamation, #/job/ID, #/regions).
import {ApiError, setToken, signOut, token, whoami} from './api.js';
import {clear, h} from './dom.js';
import {jobPage, nodePage, nodesPage, overviewPage, queuePage, reclamationPage, regionsPage, tenantsPage} from './pages.js';

const PAGES = [
  {path: 'overview', title: 'Overview', render: overviewPage},
  {path: 'tenants', title: 'Tenants', render: tenantsPage},
  {path: 'queue', title: 'Queue', render: queuePage},
  {path: 'nodes', title: 'Nodes', render: nodesPage, admin: true},
  {path: 'reclamation', title: 'Reclamation', render: reclamationPage, admin: true},
  {path: 'regions', title: 'Regions', render: regionsPage},
];

let who = null;  // {admin, tenant}, once signed in

function main() { return document.getElementById('main'); }

function showSignIn(message) {
  document.getElementById('nav').replaceChildren();
  document.getElementById('who').textContent = '';
  document.getElementById('signout').hidden = true;
  const input = h('input', {id: 'token', type: 'password', autocomplete: 'off', spellcheck: 'false',
    placeholder: 'admin or tenant token', required: true, size: 48});
  const form = h('form', {id: 'signin', class: 'card signin'},
    h('h1', {}, 'Sign in to gpupool'),
    h('p', {class: 'muted'}, 'Paste a bearer token: the admin token (DATA/admin.token) or a tenant\'s token. ' +
      'It stays in this browser tab only and is sent to this server alone.'),
    h('label', {for: 'token'}, 'Token'), input,
    h('button', {type: 'submit'}, 'Sign in'),
    message ? h('p', {class: 'error', role: 'alert'}, message) : null);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const t = input.value.trim();
    try {
      who = await whoami(t);
      setToken(t);
      sessionStorage.setItem('gpupool.who', JSON.stringify(who));
      if (!location.hash || location.hash === '#/signin') location.hash = '#/overview';
      else route();
    } catch (e) {
      showSignIn(e instanceof ApiError && e.status === 401 ? 'That token is not accepted (unknown, revoked or expired).'
        : `Cannot sign in: ${e.message}`);
    }
  });
  clear(main()).append(form);
  input.focus();
}

function renderNav(current) {
  const nav = document.getElementById('nav');
  nav.replaceChildren(...PAGES.filter((p) => !p.admin || who.admin).map((p) =>
    h('a', {href: `#/${p.path}`, class: p.path === current ? 'active' : null}, p.title)));
  document.getElementById('who').textContent = who.admin ? 'signed in as admin' : `signed in as tenant ${who.tenant}`;
  document.getElementById('signout').hidden = false;
}

let generation = 0;

export async function route() {
  if (!token() || !who) return showSignIn('');
  const [, path = 'overview', arg] = (location.hash || '#/overview').split('/');
  const page = PAGES.find((p) => p.path === path);
  renderNav(path === 'job' ? 'queue' : path === 'node' ? 'nodes' : path);
  const mine = ++generation;
  const out = h('div', {class: 'page', 'data-page': path});
  try {
    if (path === 'job') await jobPage(out, who, decodeURIComponent(arg || ''));
    else if (path === 'node') await nodePage(out, who, decodeURIComponent(arg || ''));
    else if (page) await page.render(out, who);
    else out.append(h('p', {class: 'error'}, `No page "${path}".`));
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) { signOut(); who = null; return showSignIn('The token was refused: sign in again.'); }
    out.append(h('div', {class: 'error', role: 'alert', 'data-error': e.code || 'error'},
      e instanceof ApiError && e.status === 404 ? `Not found: ${e.message}`
        : e instanceof ApiError && e.status === 403 ? `Forbidden: ${e.message}` : `Error: ${e.message}`));
  }
  if (mine !== generation) return;  // a newer navigation replaced this one
  clear(main()).append(out);
  document.body.setAttribute('data-ready', path);
}

function start() {
  try { who = JSON.parse(sessionStorage.getItem('gpupool.who') || 'null'); } catch (_) { who = null; }
  document.getElementById('signout').addEventListener('click', () => {
    signOut(); who = null; location.hash = '#/signin'; showSignIn('');
  });
  window.addEventListener('hashchange', () => { document.body.removeAttribute('data-ready'); route(); });
  route();
}

start();
