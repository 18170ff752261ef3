// The job page's live log tail: polls GET /v1/jobs/{id}/logs?format=json
// (each log apart with its size, what `gpupool job logs -f` follows) and
// appends what each log gained since the last poll. Bounded: at most
// kKeepChars characters stay in the page (older lines are cut, and the
// page says so). Stops once the job has ended and two more polls bring
// nothing, when the page is left (navigation, or the element is gone), or
// after kMaxPolls polls. The <pre>'s data-follow says which: "following",
// "ended", "stopped"; data-bytes counts the log bytes seen.
import {get} from './api.js';

const kTailBytes = 16384;    // the first poll's tail of each log
const kKeepChars = 65536;    // kept in the page
const kIntervalMs = 2000;
const kMaxPolls = 1800;      // an hour at kIntervalMs
const kTerminal = new Set(['succeeded', 'failed', 'cancelled', 'rejected', 'evicted']);

// The last `n` bytes of `text` as a string (UTF-8; a cut character is dropped).
function lastBytes(text, n) {
  const bytes = new TextEncoder().encode(text);
  if (n >= bytes.length) return text;
  return new TextDecoder('utf-8', {fatal: false}).decode(bytes.slice(bytes.length - n)).replace(/^\uFFFD+/, '');
}

class Follower {
  constructor(pre, id) {
    this.pre = pre;
    this.id = id;
    this.seen = new Map();  // "replica/attempt" -> bytes shown
    this.shownKey = '';
    this.quietAfterEnd = -1;
    this.polls = 0;
    this.text = '';
    this.cut = false;
    this.left = false;
    this.connected = false;
    window.addEventListener('hashchange', () => { this.left = true; }, {once: true});
  }

  // Appends what each log gained; true when there was news.
  take(parts) {
    let news = false;
    for (const p of parts) {
      const key = `${p.replica}/${p.attempt}`;
      const done = this.seen.get(key) || 0;
      if (p.bytes <= done) continue;
      news = true;
      let add = '';
      if ((parts.length > 1 || p.attempt > 1) && key !== this.shownKey) add += `==> replica ${p.replica}, attempt ${p.attempt} <==\n`;
      this.shownKey = key;
      const fresh = p.bytes - done;
      const textBytes = new TextEncoder().encode(p.text).length;
      if (fresh > textBytes && done > 0) add += `[... ${fresh - textBytes} bytes not shown ...]\n`;
      add += lastBytes(p.text, fresh);
      this.seen.set(key, p.bytes);
      this.text += add;
    }
    if (this.text.length > kKeepChars) {
      const from = this.text.indexOf('\n', this.text.length - kKeepChars);
      this.text = this.text.slice(from < 0 ? this.text.length - kKeepChars : from + 1);
      this.cut = true;
    }
    return news;
  }

  show(state) {
    this.pre.textContent = (this.cut ? '[... older lines not kept here ...]\n' : '') + (this.text || '(no output yet)');
    this.pre.dataset.follow = state;
    let total = 0;
    for (const b of this.seen.values()) total += b;
    this.pre.dataset.bytes = String(total);
  }

  async poll() {
    const page = await get(`/v1/jobs/${this.id}/logs?format=json&tail_bytes=${kTailBytes}`);
    const news = this.take(page.parts || []);
    this.polls++;
    if (this.quietAfterEnd >= 0) {
      this.quietAfterEnd = news ? 0 : this.quietAfterEnd + 1;
    } else if (kTerminal.has((await get(`/v1/jobs/${this.id}`)).state)) {
      this.quietAfterEnd = 0;
    }
  }

  // Whether to stop now, and as what.
  done() {
    if (this.pre.isConnected) this.connected = true;
    if (this.left || (this.connected && !this.pre.isConnected)) return 'stopped';
    if (this.quietAfterEnd >= 2) return 'ended';
    if (this.polls >= kMaxPolls) return 'stopped';
    return '';
  }

  schedule() {
    setTimeout(async () => {
      const end = this.done();
      if (end) return this.show(end);
      try {
        await this.poll();
      } catch (e) {
        this.pre.dataset.follow = 'stopped';
        this.pre.append(`\n(stopped following: ${e.message})`);
        return;
      }
      const after = this.done();
      this.show(after || 'following');
      if (!after) this.schedule();
    }, kIntervalMs);
  }
}

// Fills `pre` with the job's log tail now, then follows it (see above).
export async function followLog(pre, id) {
  const f = new Follower(pre, id);
  try {
    await f.poll();
  } catch (e) {
    pre.textContent = `(logs unavailable: ${e.message})`;
    pre.dataset.follow = 'stopped';
    return;
  }
  f.show('following');
  f.schedule();
}
