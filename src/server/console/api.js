// The REST API with the signed-in token. The token lives in this tab's
// sessionStorage only (never a cookie, never a URL): closing the tab signs
// out, and no other site can send it.
const KEY = 'gpupool.token';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function token() { return sessionStorage.getItem(KEY) || ''; }
export function setToken(t) { sessionStorage.setItem(KEY, t); }
export function signOut() {
  sessionStorage.removeItem(KEY);
  sessionStorage.removeItem('gpupool.who');
}

// GET path (with its query) as JSON, or as text when `text` is set; throws
// ApiError with the API's error code and message on a non-2xx answer.
export async function get(path, {text = false, bearer = token()} = {}) {
  const res = await fetch(path, {
    headers: {Authorization: `Bearer ${bearer}`, Accept: text ? 'text/plain' : 'application/json'},
    cache: 'no-store',
    credentials: 'omit',
  });
  if (!res.ok) {
    let code = 'http_' + res.status, message = `${res.status} ${res.statusText}`;
    try {
      const e = (await res.json()).error;
      if (e) { code = e.code; message = e.message; }
    } catch (_) { /* not the API's JSON error */ }
    throw new ApiError(res.status, code, message);
  }
  return text ? res.text() : res.json();
}

// Who a token is: {admin: true} for the admin (or a whole-pool reader) token,
// {admin: false, tenant} for a tenant's token. Throws ApiError (401) when the
// token is refused.
export async function whoami(bearer) {
  try {
    await get('/v1/tenants', {bearer});
    return {admin: true};
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 403) throw e;
  }
  const t = await get('/v1/tokens', {bearer});
  const tenant = t.tokens.length ? t.tokens[0].tenant : '';
  if (!tenant) throw new ApiError(403, 'forbidden', 'this token is neither the admin\'s nor a tenant\'s (node tokens cannot sign in)');
  return {admin: false, tenant};
}

// Every job of a listing (GET /v1/jobs with `query`), following next_after,
// at most `max` of them; returns {jobs, more}.
export async function allJobs(query, max = 2000) {
  const jobs = [];
  let after = 0;
  for (;;) {
    const page = await get(`/v1/jobs?limit=1000&${query}${after ? `&after=${after}` : ''}`);
    jobs.push(...page.jobs);
    if (page.next_after === null || page.next_after === undefined) return {jobs, more: false};
    if (jobs.length >= max) return {jobs: jobs.slice(0, max), more: true};
    after = page.next_after;
  }
}
