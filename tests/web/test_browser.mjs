// tests/web/test_browser.mjs: the `delayq web` page in a real browser.
//
// usage: node test_browser.mjs PATH/TO/delayq
//
// Runs under tests/support/with_redis (DQ_TEST_REDIS_URI).  Drives Debian's
// chromium through playwright-core (both installed by tools/webdeps.sh;
// node modules from $DQ_WEB_NODE_MODULES, browser from $DQ_CHROMIUM or
// /usr/bin/chromium).  A missing browser or module is a failure with a
// message, never a skip.  Screenshots go to $DQ_WEB_OUT_DIR and, when
// $DQ_WEB_SCREENSHOTS_DIR is set, there too (docs/ for the README).
import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';

const DELAYQ = process.argv[2];
const URI = process.env.DQ_TEST_REDIS_URI;
const OUT = process.env.DQ_WEB_OUT_DIR || '.';
const SHOTS = process.env.DQ_WEB_SCREENSHOTS_DIR;
let passed = 0, failed = 0;

function fatal(msg) {
  console.error('test_browser: ' + msg);
  console.log('0 passed, 1 failed');
  process.exit(1);
}
if (!DELAYQ || !URI) fatal('usage: node test_browser.mjs DELAYQ under with_redis (DQ_TEST_REDIS_URI unset)');

const chromium = [process.env.DQ_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-headless-shell']
  .find(p => p && fs.existsSync(p));
if (!chromium) fatal('no chromium (/usr/bin/chromium): run `bash tools/webdeps.sh`' + (process.env.CI ? ' (CI: this is a failure)' : ''));
let playwright;
try {
  const req = createRequire(path.join(process.env.DQ_WEB_NODE_MODULES || path.resolve('.deps/web-node/node_modules'), 'x.js'));
  playwright = req('playwright-core');
} catch (e) {
  fatal('playwright-core not found (' + e.message.split('\n')[0] + '): run `bash tools/webdeps.sh`');
}

function cli(args, input) {
  const r = spawnSync(DELAYQ, ['-u', URI, ...args], { input, env: { ...process.env, DELAYQ_QUEUE: '' } });
  if (r.status !== 0) throw new Error('delayq ' + args.join(' ') + ': ' + r.stderr);
  return r.stdout.toString();
}
function stats(q) { return JSON.parse(cli(['stats', '--json', q])); }
// Bulk dead jobs through the Python binding (tests/web/fill.py).
function fill(...args) {
  const env = { ...process.env, PYTHONPATH: process.env.DQ_WEB_PYTHONPATH };
  delete env.LD_PRELOAD;
  if (process.env.DQ_WEB_FILL_PRELOAD) {
    env.LD_PRELOAD = process.env.DQ_WEB_FILL_PRELOAD;
    env.ASAN_OPTIONS = 'detect_leaks=0:abort_on_error=1';
  }
  const r = spawnSync('python3', [process.env.DQ_WEB_FILL, URI, ...args], { env });
  if (r.status !== 0) throw new Error('fill ' + args.join(' ') + ': ' + r.stderr);
}
async function check(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    passed++;
    console.log('ok - ' + name + ' (' + (Date.now() - t0) + ' ms)');
  } catch (e) {
    failed++;
    console.log('not ok - ' + name + ': ' + (e.stack || e));
  }
}
function assert(c, msg) { if (!c) throw new Error('assertion failed: ' + msg); }

// ---- data and server -------------------------------------------------------
const Q = 'orders', QD = 'payments', QH = 'hostile<b>';
for (const [i, d] of ['30s', '2m', '3m', '10m', '40m', '2h', '3h', '12h', '2d', '30d'].entries())
  for (let k = 0; k <= i % 3; k++) cli(['-q', Q, 'push', JSON.stringify({ order: 1000 + i * 3 + k }), '--in', d]);
cli(['-q', 'emails', 'push', 'welcome mail', '--in', '5m']);
cli(['-q', 'emails', 'push', 'reminder', '--in', '1h']);
cli(['-q', QD, 'push', 'charge card 42', '--id', 'charge-42']);
const polled = cli(['-q', QD, 'poll', '--lease', '1m']).split('\t');
cli(['-q', QD, 'nack', polled[0], polled[2], '--dead']);
// counted deliveries and acks on the orders queue (DQ_OPT_COUNTERS)
for (let i = 0; i < 5; i++) cli(['--counters', '-q', Q, 'push', 'counted ' + i]);
for (const line of cli(['--counters', '-q', Q, 'poll', '--max', '5']).trim().split('\n')) {
  const f = line.split('\t');
  cli(['--counters', '-q', Q, 'ack', f[0], f[2]]);
}
const EVIL = '<script>alert(1)</script><img src=x onerror=alert(2)>';
cli(['-q', QH, 'push', EVIL, '--id', '<i>id</i>']);
// an id that no path segment carries as it is
const ODD_ID = '../a b/?#%~x2e';
cli(['-q', QH, 'push', 'odd one', '--id', ODD_ID, '--in', '1h']);
// a repeating job and queue settings, for the job page and the settings card
cli(['-q', Q, 'push', 'nightly report', '--id', 'report-nightly', '--cron', '0 3 * * *']);
cli(['config', Q, 'max_attempts=5', 'lease_ms=2m', 'backoff=exponential', 'backoff_base_ms=1s',
  'backoff_cap_ms=10m', 'dead_ttl_ms=7d', 'rate_max=100', 'rate_window_ms=1s']);
// more dead jobs than one requeue/purge-all call moves (made in its check,
// after the screenshots: 1001 dead jobs would flatten the overview's chart)
const QB = 'bulk-dead';
cli(['-q', 'refunds', 'push', 'refund 7', '--id', 'refund-7']);
const rp = cli(['-q', 'refunds', 'poll', '--lease', '1m']).split('\t');
cli(['-q', 'refunds', 'nack', rp[0], rp[2], '--dead', '--reason', 'card expired']);
// a debounced job that runs while a push waits as its follow-up
cli(['-q', 'pings', 'push', 'ping 1', '--id', 'ping', '--debounce', '0', '--max-wait', '1h']);
cli(['-q', 'pings', 'poll', '--lease', '10m']);
cli(['-q', 'pings', 'push', 'ping 2', '--id', 'ping', '--debounce', '1m', '--max-wait', '1h']);

const web = spawn(DELAYQ, ['-u', URI, 'web', '--listen', '127.0.0.1:0'], { stdio: ['ignore', 'pipe', 'inherit'] });
const first = await new Promise((res, rej) => {
  const rl = readline.createInterface({ input: web.stdout });
  rl.once('line', res);
  web.once('exit', c => rej(new Error('delayq web exited ' + c)));
}).catch(e => fatal(e.message));
const base = first.replace(/^listening on /, '').trim().replace(/\/$/, '');
assert(base.startsWith('http://127.0.0.1:'), first);

const browser = await playwright.chromium.launch({ executablePath: chromium, args: ['--no-sandbox'] })
  .catch(e => { web.kill(); fatal('cannot start ' + chromium + ': ' + e.message); });
const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
const dialogs = [];
page.on('dialog', async d => { dialogs.push(d.type() + ':' + d.message()); await d.accept(); });
const pageErrors = [];
page.on('pageerror', e => pageErrors.push(String(e)));
page.on('console', m => console.log('# page console: ' + m.text()));
page.on('response', r => { if (r.status() >= 400) console.log('# HTTP ' + r.status() + ' ' + r.url()); });

async function shot(name) {
  const file = path.join(OUT, name);
  await page.screenshot({ path: file, fullPage: true });
  if (SHOTS) fs.copyFileSync(file, path.join(SHOTS, name));
}
const cell = (q, s) => page.locator(`tr.queue-row[data-queue="${q}"] td.c-${s}`);

try {
  await check('overview lists the queues with their counts', async () => {
    await page.goto(base + '/');
    await cell(Q, 'scheduled').waitFor({ timeout: 10000 });
    const st = stats(Q);
    assert(await cell(Q, 'scheduled').textContent() === String(st.scheduled), 'scheduled count');
    assert(await cell(QD, 'dead').textContent() === '1', 'dead count');
    assert(await page.locator('#overview-chart').count() === 1, 'chart');
  });

  await check('counts change as jobs are pushed', async () => {
    const before = Number(await cell('emails', 'scheduled').textContent());
    for (let i = 0; i < 3; i++) cli(['-q', 'emails', 'push', 'newsletter ' + i, '--in', '20m']);
    await page.waitForFunction(n => {
      const td = document.querySelector('tr.queue-row[data-queue="emails"] td.c-scheduled');
      return td && Number(td.textContent) === n;
    }, before + 3, { timeout: 10000 });
    await shot('web-overview.png');
  });

  await check('requeue a dead job through the UI (with its confirm dialog)', async () => {
    await page.locator(`tr.queue-row[data-queue="${QD}"] a`).click();
    await page.locator('#queue-name').waitFor();
    await page.locator('button[data-state="dead"]').click();
    const row = page.locator('tr.job-row[data-id="charge-42"]');
    await row.waitFor({ timeout: 10000 });
    const n = dialogs.length;
    await row.locator('button.requeue').click();
    await page.waitForFunction(() => document.querySelector('#tile-dead .v')?.textContent === '0', null, { timeout: 10000 });
    assert(dialogs.length === n + 1 && dialogs[n].startsWith('confirm:'), 'one confirm dialog: ' + dialogs.slice(n));
    const st = stats(QD);
    assert(st.dead === 0 && st.scheduled + st.due === 1, 'requeued in Redis: ' + JSON.stringify(st));
    await page.locator('button[data-state="scheduled"]').click();
    await page.locator('tr.job-row[data-id="charge-42"]').waitFor({ timeout: 10000 });
  });

  await check('a <script> payload shows as literal text and runs nothing', async () => {
    const before = dialogs.length;
    await page.goto(base + '/');
    await page.locator(`tr.queue-row[data-queue="${QH}"] a`).click();
    const row = page.locator('tr.job-row').first();
    await row.waitFor({ timeout: 10000 });
    assert(await row.locator('td.payload').textContent() === EVIL, 'payload text');
    assert(await row.locator('a.id').textContent() === '<i>id</i>', 'id text');
    assert(await page.locator('#queue-name').textContent() === QH, 'queue name text');
    await row.locator('a.id').click();
    await page.locator('#job-page #job-payload').waitFor();
    assert(await page.locator('#job-payload').textContent() === EVIL, 'full payload text');
    assert(await page.locator('main script, main img, main b, main td i, main pre i, main h2 i').count() === 0, 'no element made from data');
    await page.waitForTimeout(300);
    assert(dialogs.length === before, 'no dialog fired: ' + dialogs.slice(before));
  });

  await check('queue page with the due-time histogram (screenshot)', async () => {
    await page.goto(base + '/');
    await page.locator(`tr.queue-row[data-queue="${Q}"] a`).click();
    await page.locator('#histogram').waitFor();
    // a second stats sample (one per 5 s) draws the line chart; counted
    // deliveries and acks meanwhile, until the per-minute chart of the
    // counters has points to draw (three samples)
    let extra = 0;
    const deadline = Date.now() + 30000;
    for (;;) {
      cli(['--counters', '-q', Q, 'push', 'counted more ' + extra]);
      const f = cli(['--counters', '-q', Q, 'poll', '--max', '1']).split('\t');
      cli(['--counters', '-q', Q, 'ack', f[0], f[2]]);
      extra++;
      const points = await page.evaluate(async () => {
        const r = await fetch(location.pathname.replace(/[^/]*$/, '') + 'api/queues/' + 'orders');
        return (await r.json()).rates.series.length;
      });
      if (points >= 2 && !/^no rates/.test(await page.locator('#rates').textContent() || 'no rates')) break;
      assert(Date.now() < deadline, 'no counter samples within 30 s');
      await page.waitForTimeout(1500);
    }
    await page.waitForFunction(n => new RegExp('^totals: delivered ' + n + ', acked ' + n + ',').test(document.querySelector('#counters')?.textContent || ''),
      5 + extra, { timeout: 10000 });
    await shot('web-queue.png');
    const totals = await page.locator('#counters').textContent();
    assert(totals.startsWith('totals: delivered ' + (5 + extra) + ', acked ' + (5 + extra) + ', retried 0, failed 0'), 'counter totals: ' + totals);
    assert(await page.locator('#counter-rates').count() === 1, 'counter chart');
    assert(pageErrors.length === 0, 'page errors: ' + pageErrors);
  });

  await check('the queue page shows the queue settings', async () => {
    await page.goto(base + '/');
    await page.locator(`tr.queue-row[data-queue="${Q}"] a`).click();
    await page.locator('#settings-card').waitFor({ timeout: 10000 });
    const v = async k => (await page.locator(`#settings-card tr[data-setting="${k}"] td`).textContent());
    assert(await v('max_attempts') === '5', 'max attempts: ' + await v('max_attempts'));
    assert(await v('lease_ms') === '2m', 'lease: ' + await v('lease_ms'));
    assert(await v('backoff') === 'exponential', 'backoff');
    assert(await v('rate') === '100 deliveries per 1s', 'rate: ' + await v('rate'));
    assert((await v('dead_max')).startsWith('not set'), 'dead_max unset');
  });

  await check('open a job by id through the box, and see its page', async () => {
    await page.goto(base + '/');
    await page.locator(`tr.queue-row[data-queue="${Q}"] a`).click();
    await page.locator('#queue-name').waitFor();
    const box = page.locator('#job-id-input');
    await box.fill('report-nightly');
    await box.press('Enter');
    await page.locator('#job-page').waitFor({ timeout: 10000 });
    assert(await page.locator('#job-id').textContent() === 'report-nightly', 'job id');
    const f = async k => (await page.locator(`#job-page tr[data-field="${k}"] td`).textContent());
    assert(await f('state') === 'scheduled', 'state: ' + await f('state'));
    assert(await f('repeat') === 'cron 0 3 * * * tz +0', 'repeat: ' + await f('repeat'));
    assert(await f('attempt') === '0', 'attempts');
    assert(await page.locator('#job-page tr[data-field="followup"]').count() === 0, 'no follow-up row');
    assert(await page.locator('#job-payload').textContent() === 'nightly report', 'payload');
    const qhex = Buffer.from(Q).toString('hex'), ihex = Buffer.from('report-nightly').toString('hex');
    assert(new URL(page.url()).hash === '#/q/' + qhex + '/j/' + ihex, 'address: ' + page.url());
    // the address alone opens it (a reload, a link sent to someone)
    await page.reload();
    await page.locator('#job-page #job-id').waitFor({ timeout: 10000 });
    // an id with /, ?, #, %, spaces and dots, in a queue named <b>
    await page.locator('#job-back').click();
    await page.goto(base + '/#/q/' + Buffer.from(QH).toString('hex'));
    await page.locator('#queue-name').waitFor();
    await box.fill(ODD_ID);
    await page.locator('#job-open-go').click();
    await page.waitForFunction(id => document.querySelector('#job-id')?.textContent === id, ODD_ID, { timeout: 10000 });
    assert(await page.locator('#job-payload').textContent() === 'odd one', 'odd payload');
    // a dead job: its last error
    await page.goto(base + '/#/q/' + Buffer.from('refunds').toString('hex'));
    await page.locator('#queue-name').waitFor();
    await box.fill('refund-7');
    await box.press('Enter');
    await page.locator('#job-page').waitFor({ timeout: 10000 });
    assert(await f('state') === 'dead', 'dead state');
    assert(await f('last-error') === 'card expired', 'last error: ' + await f('last-error'));
    // a debounced job in flight with its follow-up queued
    await page.goto(base + '/#/q/' + Buffer.from('pings').toString('hex') + '/j/' + Buffer.from('ping').toString('hex'));
    await page.locator('#job-page tr[data-field="followup"]').waitFor({ timeout: 10000 });
    assert(await f('state') === 'inflight', 'ping state: ' + await f('state'));
    assert(/^runs after this delivery is acked, due .* at the earliest$/.test(await f('followup')), 'follow-up: ' + await f('followup'));
    // an unknown id
    await page.locator('#job-back').click();
    await page.locator('#queue-name').waitFor();
    await box.fill('no-such-job');
    await box.press('Enter');
    await page.locator('#job-missing').waitFor({ timeout: 10000 });
    assert(pageErrors.length === 0, 'page errors: ' + pageErrors);
  });

  await check('purge-all and requeue-all: confirmed, and told when dead jobs remain', async () => {
    fill('dead', QB, '1001', 'bd-');
    await page.goto(base + '/#/q/' + Buffer.from(QB).toString('hex'));
    await page.locator('#queue-name').waitFor();
    await page.locator('button[data-state="dead"]').click();
    await page.locator('#requeue-all').waitFor({ timeout: 10000 });
    let n = dialogs.length;
    await page.locator('#requeue-all').click();
    await page.locator('#bulk-notice').waitFor({ timeout: 10000 });
    assert(dialogs.length === n + 1 && dialogs[n] === 'confirm:Requeue up to 1000 dead jobs of ' + QB + '?', 'confirm: ' + dialogs.slice(n));
    let t = await page.locator('#bulk-notice span').textContent();
    assert(t.startsWith('requeued 1000; 1 dead jobs left'), 'notice: ' + t);
    let st = stats(QB);
    assert(st.dead === 1 && st.scheduled + st.due === 1000, 'requeued 1000: ' + JSON.stringify(st));
    // go again: the rest
    n = dialogs.length;
    await page.locator('#bulk-again').click();
    await page.waitForFunction(() => /no dead jobs left/.test(document.querySelector('#bulk-notice span')?.textContent || ''), null, { timeout: 10000 });
    assert(dialogs.length === n + 1 && dialogs[n].startsWith('confirm:Requeue'), 'second confirm');
    assert(await page.locator('#bulk-again').count() === 0, 'nothing more to do');
    st = stats(QB);
    assert(st.dead === 0, 'all requeued: ' + JSON.stringify(st));
    // purge-all, confirmed
    fill('dead', QB + '-2', '3', 'p-');
    await page.goto(base + '/#/q/' + Buffer.from(QB + '-2').toString('hex'));
    await page.locator('#queue-name').waitFor();
    await page.locator('button[data-state="dead"]').click();
    await page.locator('#purge-all').waitFor({ timeout: 10000 });
    n = dialogs.length;
    await page.locator('#purge-all').click();
    await page.waitForFunction(() => /^purged 3; no dead jobs left/.test(document.querySelector('#bulk-notice span')?.textContent || ''), null, { timeout: 10000 });
    assert(dialogs.length === n + 1 && dialogs[n] === 'confirm:Delete up to 1000 dead jobs of ' + QB + '-2 for good?', 'purge confirm: ' + dialogs.slice(n));
    assert(stats(QB + '-2').dead === 0, 'purged');
  });

  await check('run a scheduled job now through the UI (with its confirm dialog)', async () => {
    const QP = 'promos';
    cli(['-q', QP, 'push', 'promo mail', '--id', 'promo-1', '--in', '1h']);
    await page.goto(base + '/#/q/' + Buffer.from(QP).toString('hex'));
    await page.locator('#queue-name').waitFor();
    const row = page.locator('tr.job-row[data-id="promo-1"]');
    await row.waitFor({ timeout: 10000 });
    const n = dialogs.length;
    await row.locator('button.promote').click();
    await page.waitForFunction(() => document.querySelector('#tile-due .v')?.textContent === '1', null, { timeout: 10000 });
    assert(dialogs.length === n + 1 && dialogs[n] === 'confirm:Run job promo-1 now?', 'one confirm dialog: ' + dialogs.slice(n));
    const st = stats(QP);
    assert(st.due === 1 && st.scheduled === 0, 'due now in Redis: ' + JSON.stringify(st));
    const job = JSON.parse(cli(['-q', QP, 'get', 'promo-1', '--json']));
    assert(job.payload === 'promo mail' && job.attempts === 0, 'kept: ' + JSON.stringify(job));
  });

  await check('job lists show each job\'s group and priority, and so does its page', async () => {
    const QG = 'tenants';
    cli(['-q', QG, 'push', 'plain job', '--id', 't-plain']);
    cli(['-q', QG, 'push', 'acme job', '--id', 't-acme', '--group', 'acme', '--priority', '4']);
    cli(['-q', QG, 'push', 'globex job', '--id', 't-globex', '--group', 'globex', '--in', '1h']);
    await page.goto(base + '/#/q/' + Buffer.from(QG).toString('hex'));
    await page.locator('#queue-name').waitFor();
    const heads = await page.locator('#jobs thead th').allTextContents();
    assert(heads.includes('group') && heads.includes('priority'), 'columns: ' + heads);
    const cols = async id => {
      const row = page.locator(`tr.job-row[data-id="${id}"]`);
      await row.waitFor({ timeout: 10000 });
      return [await row.locator('td.group').textContent(), await row.locator('td.prio').textContent()];
    };
    const want = { 't-plain': ['', ''], 't-acme': ['acme', '4'], 't-globex': ['globex', ''] };
    for (const [id, w] of Object.entries(want)) {
      const got = await cols(id);
      assert(got[0] === w[0] && got[1] === w[1], id + ': ' + got);
    }
    // dead: the same columns
    const f = cli(['-q', QG, 'poll', '--max', '1']).split('\t');
    assert(f[0] === 't-acme', 'polled ' + f[0]);
    cli(['-q', QG, 'nack', f[0], f[2], '--dead']);
    await page.locator('button[data-state="dead"]').click();
    const got = await cols('t-acme');
    assert(got[0] === 'acme' && got[1] === '4', 'dead t-acme: ' + got);
    // the job's page
    await page.locator('tr.job-row[data-id="t-acme"] a.id').click();
    await page.locator('#job-page').waitFor({ timeout: 10000 });
    const fld = async k => (await page.locator(`#job-page tr[data-field="${k}"] td`).textContent());
    assert(await fld('group') === 'acme', 'group: ' + await fld('group'));
    assert(await fld('priority') === '4', 'priority: ' + await fld('priority'));
    await page.goto(base + '/#/q/' + Buffer.from(QG).toString('hex') + '/j/' + Buffer.from('t-plain').toString('hex'));
    await page.waitForFunction(() => document.querySelector('#job-id')?.textContent === 't-plain', null, { timeout: 10000 });
    assert(await fld('group') === 'none', 'plain group: ' + await fld('group'));
    assert(await fld('priority') === '0', 'plain priority: ' + await fld('priority'));
    assert(pageErrors.length === 0, 'page errors: ' + pageErrors);
  });

  await check('a queue without counters says how to get them', async () => {
    await page.goto(base + '/');
    await page.locator('tr.queue-row[data-queue="emails"] a').click();
    await page.locator('#queue-name').waitFor();
    const t = await page.locator('#counters').textContent();
    assert(t === 'no counters: start producers and consumers with DQ_OPT_COUNTERS (URI clients: see docs)', 'hint: ' + t);
    assert(await page.locator('#counter-rates').count() === 0, 'no counter chart');
  });
} finally {
  await browser.close();
  web.kill('SIGTERM');
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
