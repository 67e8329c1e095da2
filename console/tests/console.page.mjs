// The console's browser test (issue 13): headless Chromium, driven by
// Playwright, against a running server (AUTH=on) on a fresh database.
//
//   ADMIN_TOKEN=... node tests/console.page.mjs BASE_URL [SCREENSHOT_DIR]
//
// It sets up, through the API, a tool that needs approval and a scripted
// agent (no model) whose sessions wait on approvals or hold a turn, and a
// responder token that may only READ and RESPOND on the agent. Then, in
// the browser: signs in with the admin token; checks the inbox lists every
// waiting interrupt with its live badge; approves one from the inbox and
// sees its session page (open in another tab) go on live; approves one
// with a replacement input that is checked against the tool's inputSchema
// first; retries a held turn with a note; closes a session with a reason;
// has a second browser (the responder) answer one, which removes the row
// from the first with a notice, and checks the responder sees no control
// it may not use; answers one with the keyboard alone (the focus ring at
// least 3:1); opens deep links (a session, a turn, an interrupt) and
// checks each turn says how its approval or hold was answered, and a held
// turn why it is held; reads a session's clock and end, the agent's trigger
// diagnostic and intake record, and a sessions row whose status changes
// live; and fails if any page requested
// anything from another origin, broke the Content-Security-Policy or
// threw. Every screen is looked at 1280 px and 390 px wide: axe-core
// (from node_modules, never a CDN) must find no serious or critical
// accessibility violation, and at 390 px nothing may be wider than the
// page. The browser's clock is fixed 3 min after the server's fixed clock
// (SERVER_TIME), so times read as they would a few minutes on. With
// SCREENSHOT_DIR, it leaves PNGs of every screen at both widths there.
// Prints one line per check; exits non-zero on the first failure.
// server/console_test.go runs it from `go test`.
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { chromium } from 'playwright-core';

const [base, shots] = process.argv.slice(2);
const admin = process.env.ADMIN_TOKEN;
if (!base || !admin) {
  console.error('usage: ADMIN_TOKEN=... node tests/console.page.mjs BASE_URL [SCREENSHOT_DIR]');
  process.exit(2);
}
const origin = new URL(base).origin;
const host = new URL(base).host;
const executablePath = process.env.CHROMIUM ?? '/usr/bin/chromium';
const timeout = Number(process.env.PAGE_TIMEOUT_MS ?? 60_000);
const serverTime = Date.parse(process.env.SERVER_TIME ?? '2026-03-02T09:00:00Z');
const browserTime = serverTime + 3 * 60_000;
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

const check = (ok, what, detail = '') => {
  if (!ok) throw new Error(`${what}${detail ? `: ${detail}` : ''}`);
  console.log(`ok ${what}`);
};

// ---------------------------------------------------------------- the API

async function gql(query, variables = {}, token = admin) {
  const r = await fetch(`${origin}/graphql`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = await r.json();
  if (body.errors?.length) throw new Error(`${query.slice(0, 60)}…: ${JSON.stringify(body.errors)}`);
  return body.data;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Reads until pick returns something truthy (a poll of the API: the service runs on its own). */
async function until(what, read, pick) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const v = pick(await read());
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

const toolId = '7a0d3b52-3c4e-4d1f-9b2a-6e5f4c3b2a10';
const agentId = '4b8e2f61-0d9c-4a7b-8e3f-2c1d0b9a8f71';
const toolSchema = {
  type: 'object',
  required: ['account_id'],
  properties: { account_id: { type: 'string', minLength: 3 }, reason: { type: 'string' } },
  additionalProperties: false,
};
const outcome = (state) => ({ name: 'report_outcome', input: { status: 'OPEN', state } });

async function setUp() {
  await gql(
    `mutation($id: UUID!, $in: ActionInput!) { actions { createAction(id: $id, input: $in) { version } } }`,
    {
      id: toolId,
      in: {
        name: 'freeze-account',
        kind: 'starlark',
        source: 'def call(event):\n    return {"frozen": event["input"]["account_id"]}\n',
        tool: { name: 'freeze_account', description: 'Freeze an account.', inputSchema: toolSchema },
      },
    },
  );
  await gql(`mutation($id: UUID!, $in: ActionInput!) { actions { createAction(id: $id, input: $in) { version } } }`, {
    id: agentId,
    in: {
      name: 'agent-monitor',
      kind: 'agent',
      config: {
        provider: 'scripted',
        system: 'You watch accounts for fraud.',
        tools: [{ action: toolId, approval: 'REQUIRED' }],
        script: [
          { step: 0, when: 'The transfer was reviewed', toolCalls: [outcome({ reviewed: true })] },
          { step: 0, when: 'suspicious-transfer', refusal: { category: 'fraud', explanation: 'I cannot judge this transfer' } },
          { step: 0, text: 'Freezing the account.', toolCalls: [{ id: 'call_freeze', name: 'freeze_account', input: { account_id: '3f0c9f8e', reason: 'large entry' } }] },
          { step: 1, when: 'second-thoughts', refusal: { category: 'doubt', explanation: 'On reflection I should not freeze this account' } },
          { step: 1, toolCalls: [outcome({ frozen: true })] },
        ],
      },
      triggers: [
        { name: 'opened', event: 'event.type == "account.inserted"', session: { start: { input: { account_id: 'string(event.data.account_id)' } } } },
        { name: 'entry', event: 'event.type == "entry.inserted"', session: { resume: { id: 'string(event.data.account_id)' } } },
        // Its predicate fails on a limit.changed event without a limit: a trigger diagnostic.
        { name: 'limit', event: 'event.type == "limit.changed" && event.data.limit > 1000', session: { resume: { id: 'string(event.data.account_id)' } } },
      ],
      session: {
        id: 'string(session.input.account_id)',
        ends: "session.started_at + duration('720h')",
        // The server's clock stays at SERVER_TIME, so neither fires: the session page shows their next firings.
        schedule: [
          { name: 'review', every: '1h' },
          { name: 'morning', cron: '0 9 * * 1-5', timezone: 'America/New_York' },
        ],
        turns: { on: ['entry', 'morning'] },
      },
    },
  });
  const r = await gql(
    `mutation($p: [PolicyInput!]!) { auth { createToken(principal: "carol", policies: $p) { token } } }`,
    { p: [{ action: 'READ', resource: `financial.Action.document:${agentId}` }, { action: 'RESPOND', resource: `financial.Action.document:${agentId}` }] },
  );
  return r.auth.createToken.token;
}

/** Opens account acct and writes an entry (suspicious: the model refuses; a string: the entry's note), leaving its session waiting. */
async function raise(acct, suspicious = false) {
  await gql(`mutation($a: String!, $e: JSON!) { ledger {
    a: putValue(namespace: "account", key: $a, value: { account_id: $a }) { key }
    e: putValue(namespace: "entry", key: $a, value: $e) { key } } }`, {
    a: acct,
    e: { account_id: acct, amount: 12000, note: typeof suspicious === 'string' ? suspicious : suspicious ? 'suspicious-transfer' : 'large entry' },
  });
  await until(`session ${acct} to wait`, () => session(acct), (s) => s?.status === 'WAITING' && !s.running);
}

/** Writes an entry (entry.inserted) of key for account acct, which resumes acct's session if it has one; returns the event's position. */
const entry = async (key, acct, note = 'large entry') =>
  (
    await gql(`mutation($k: String!, $e: JSON!) { ledger { putValue(namespace: "entry", key: $k, value: $e) { event { position } } } }`, {
      k: key,
      e: { account_id: acct, amount: 12000, note },
    })
  ).ledger.putValue.event.position;

/** A session that went on: OPEN again once its newest turn (after the first) committed. */
const wentOn = (s) => s.status === 'OPEN' && !s.running && s.turns.nodes[0]?.number > 1 && s.turns.nodes[0].status === 'COMPLETED' && s;

const session = async (acct) =>
  (await gql(`query($a: UUID!, $s: String!) { actions { action(id: $a) { session(id: $s) {
      status running state turns(first: 1) { nodes { number status } } } } } }`, { a: agentId, s: acct })).actions.action.session;

// ---------------------------------------------------------------- the browser

const launch = async (name) => {
  const profile = mkdtempSync(join(tmpdir(), `console-page-${name}-`));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  context.on('request', (r) => requests.push(r.url()));
  context.profile = profile;
  // Date in every page of the context reads browserTime; timers run as usual.
  await context.clock.setFixedTime(browserTime);
  return context;
};

const requests = [];
const sockets = [];
const problems = [];
let phase = 'set-up';

const watch = (page, who) => {
  page.setDefaultTimeout(timeout);
  page.on('websocket', (ws) => sockets.push(ws.url()));
  page.on('pageerror', (err) => problems.push(`${who} uncaught (${phase}): ${err.stack ?? err.message}`));
  page.on('console', (msg) => {
    if (/Content Security Policy|Refused to/i.test(msg.text())) problems.push(`${who} CSP: ${msg.text()}`);
  });
  return page;
};

const row = (page, text) => page.locator('li[data-interrupt]', { hasText: text });

/** Resolves after the page has laid out and painted twice (React has rendered what a resize changed). */
const settled = (page) => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));

/** The serious and critical axe-core violations of the page as it is, one line each. */
async function violations(page) {
  // Evaluated through the DevTools protocol, so the page's CSP (no inline
  // script, no eval) does not apply; the page itself loads nothing.
  if (!(await page.evaluate(() => typeof window.axe === 'object'))) await page.evaluate(axeSource);
  const { rules, found } = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return {
      rules: r.passes.length + r.violations.length + r.incomplete.length,
      found: r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map((n) => `${n.target.join(' ')}: ${n.failureSummary?.split('\n').slice(1, 2).join('')}`) })),
    };
  });
  if (rules < 10) throw new Error(`axe-core applied only ${rules} rules: it did not look at the page`);
  const line = (v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.join(' | ')}`;
  const serious = (v) => v.impact === 'serious' || v.impact === 'critical';
  for (const v of found.filter((x) => !serious(x))) console.log(`note: axe-core, not failing: ${line(v)}`);
  return found.filter(serious).map(line);
}

/** What sticks out past a 390 px page: the widest elements, as "tag.class width". */
const overflow = (page) =>
  page.evaluate(() => {
    const w = document.documentElement.clientWidth;
    if (document.documentElement.scrollWidth <= w) return [];
    return [...document.querySelectorAll('body *')]
      .filter((el) => el.getBoundingClientRect().right > w + 1 && getComputedStyle(el).position !== 'absolute')
      .slice(-3)
      .map((el) => `${el.tagName.toLowerCase()}.${[...el.classList].join('.')} right ${Math.round(el.getBoundingClientRect().right)}`);
  });

/**
 * Looks at a screen as a reader would, at 1280 px and at 390 px: no serious
 * or critical accessibility violation at either, nothing wider than the
 * phone's page; with SCREENSHOT_DIR, a PNG of each.
 */
const screen = async (page, name) => {
  for (const [w, h, suffix] of [
    [1280, 900, '1280'],
    [390, 844, 'phone'],
  ]) {
    await page.setViewportSize({ width: w, height: h });
    await settled(page);
    const bad = await violations(page);
    check(bad.length === 0, `${name} at ${w} px: axe-core finds no serious or critical violation`, bad.join('\n  '));
    if (w < 400) {
      const wide = await overflow(page);
      check(wide.length === 0, `${name} at ${w} px: nothing is wider than the page`, wide.join(', '));
    }
    if (shots) {
      mkdirSync(shots, { recursive: true });
      await page.screenshot({ path: join(shots, `${name}-${suffix}.png`), fullPage: true });
    }
  }
  await page.setViewportSize({ width: 1280, height: 900 });
  await settled(page);
  if (shots) console.log(`screenshots ${join(shots, name)}-{1280,phone}.png`);
};

let one;
let two;
let page;
try {
  const carol = await setUp();
  check(true, 'a gated tool, a scripted agent and a responder token are set up');
  // a1: approve from the inbox; a2: held, retried; a3: approve with a
  // replacement input; a4: closed; a5: answered by the second browser; a6:
  // answered with the keyboard.
  for (const [acct, suspicious] of [
    ['acct-a1', false],
    ['acct-a2', true],
    ['acct-a3', false],
    ['acct-a4', false],
    ['acct-a5', false],
  ]) {
    await raise(acct, suspicious);
  }
  check(true, 'five sessions wait: four approvals and a held turn');

  // Sign-in.
  phase = 'sign-in';
  one = await launch('one');
  page = watch(one.pages()[0] ?? (await one.newPage()), 'admin');
  const resp = await page.goto(`${base}/`);
  check(resp?.status() === 200 && new URL(page.url()).pathname === '/console/', 'GET / lands on /console/', page.url());
  await page.getByLabel('Token').waitFor();
  check(true, 'the console asks for a token (AUTH=on)');
  // The accessibility check can fail: an image without a text alternative is critical.
  await page.evaluate(() => document.querySelector('main').insertAdjacentHTML('beforeend', '<img id="no-alt" src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">'));
  const planted = await violations(page);
  await page.evaluate(() => document.getElementById('no-alt').remove());
  check(planted.some((v) => v.startsWith('image-alt (critical)')), 'axe-core is loaded from node_modules and reports a planted violation', planted.join(' | '));
  await screen(page, 'sign-in');
  await page.getByLabel('Token').fill('not-a-token');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByText('This token is not valid.').waitFor();
  check(true, 'a wrong token is refused with a message');
  await page.getByLabel('Token').fill(admin);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: /Inbox/ }).waitFor();
  check(true, 'signed in, the inbox is the landing page');
  const stored = await page.evaluate(() => [sessionStorage.length, localStorage.length, document.cookie]);
  check(stored[0] === 1 && stored[1] === 0 && stored[2] === '', 'the token is kept in sessionStorage only', JSON.stringify(stored));

  // The inbox and its badge.
  phase = 'inbox';
  await page.locator('li[data-interrupt]').nth(4).waitFor();
  check((await page.locator('li[data-interrupt]').count()) === 5, 'the inbox lists the five interrupts');
  const badge = page.getByTestId('inbox-badge');
  await page.waitForFunction(() => document.querySelector('[data-testid="inbox-badge"]')?.textContent === '5');
  check(true, 'the badge counts 5');
  check((await row(page, 'acct-a1').innerText()).includes('freeze_account'), 'a row names the tool');
  check(await row(page, 'acct-a1').getByText('3f0c9f8e').isVisible(), "a row shows the call's input");
  check(await row(page, 'acct-a2').getByText('I cannot judge this transfer').isVisible(), "the hold's explanation is shown");
  check(await row(page, 'acct-a2').getByRole('button', { name: 'Skip its inputs' }).isEnabled(), 'skip is offered for a held turn that may be skipped');
  const waited = await row(page, 'acct-a1').locator('.waited').innerText();
  check(waited === 'waiting for 3 min', "a row says how long it has waited, by the browser's clock", waited);
  await screen(page, 'inbox');

  // A new interrupt appears without a reload.
  await page.evaluate(() => (window.__noReload = true));
  await raise('acct-a6');
  await row(page, 'acct-a6').waitFor();
  await page.waitForFunction(() => document.querySelector('[data-testid="inbox-badge"]')?.textContent === '6');
  check(await page.evaluate(() => window.__noReload === true), 'a new approval appears live, and the badge counts 6');

  // Approve from the inbox; the session page, open in a second tab, goes on live.
  phase = 'approve';
  // A tab the console opens gets a copy of its sessionStorage, so the token.
  const [opened] = await Promise.all([one.waitForEvent('page'), page.evaluate((u) => window.open(u), `${base}/console/sessions/${agentId}/acct-a1`)]);
  const follow = watch(opened, 'admin tab 2');
  await follow.getByRole('heading', { name: /Session acct-a1/ }).waitFor();
  await follow.locator('.title-line .status', { hasText: 'WAITING' }).waitFor();
  await follow.evaluate(() => (window.__noReload = true));
  check(true, 'the session page shows acct-a1 WAITING');
  const pendingAnswer = follow.locator('[data-turn="1"] .msg-approval .answered-pending');
  check((await pendingAnswer.innerText()).includes('Waiting for an answer') && (await pendingAnswer.getByRole('link', { name: 'Approve or deny it' }).count()) === 1, 'the approval request in turn 1 says it waits, with a link to answer it');
  const clock = await follow.getByRole('region', { name: 'Clock' }).innerText();
  check(
    /review[\s\S]*every 1h[\s\S]*rides along[\s\S]*2026-03-02 10:00:00 UTC \(in 57 min\)/.test(clock) && /morning[\s\S]*0 9 \* \* 1-5 \(America\/New_York\)[\s\S]*yes[\s\S]*2026-03-02 14:00:00 UTC/.test(clock),
    "the session's clock shows each entry's schedule and next firing",
    clock,
  );
  const ends = await follow.locator('.kv', { hasText: 'Ends' }).first().innerText();
  check(/in 29 d 23 h \(2026-04-01 09:00:00 UTC\)/.test(ends), "and the session's end", ends);
  // A spend cap set on an agent session's page (G8; this server prices the scripted model, at a
  // rate this test never comes near the cap with).
  await follow.getByLabel(/Spend cap in US dollars/).fill('3');
  await follow.getByRole('button', { name: 'Set cap' }).click();
  await follow.getByText("The session's spend cap is $3 now.").waitFor();
  await follow.locator('dd', { hasText: 'of $3.00' }).waitFor();
  check(true, "the spend cap set on an agent session's page shows beside what it spent");
  await screen(follow, 'session-waiting');
  const a1 = row(page, 'acct-a1');
  await a1.getByLabel(/Reason/).fill('Confirmed with the account owner.');
  await a1.getByRole('button', { name: 'Approve', exact: true }).click();
  await a1.waitFor({ state: 'detached' });
  await page.getByText(/Approved the call of freeze_account in session acct-a1/).waitFor();
  check(true, 'approving removes the row with a notice');
  await follow.locator('.title-line .status', { hasText: 'OPEN' }).waitFor();
  await follow.locator('[data-turn="2"] .msg-answer', { hasText: 'Approved by admin' }).waitFor();
  await follow.locator('[data-turn="2"] .msg-tool', { hasText: 'frozen' }).waitFor();
  check(await follow.evaluate(() => window.__noReload === true), 'the session page went on live: OPEN, turn 2 shows the approval and the tool result');
  const indent = await follow.evaluate(() => ['.msg-tool', '.msg-model'].map((c) => getComputedStyle(document.querySelector(`[data-turn="2"] ${c}`)).marginLeft));
  check(indent[0] === indent[1], 'the tool call run after the approval sits at the level of the model message, not nested under nothing', indent.join(' vs '));
  const told = follow.locator('[data-turn="1"] .msg-approval .answered');
  await told.filter({ hasText: 'Approved by admin' }).waitFor();
  // The link to the turn that ran the call comes with a later live update
  // than the answer itself (that turn has to commit first): wait for it,
  // and let the check below say what the page showed if it never came.
  await told.getByRole('link', { name: 'turn 2' }).waitFor({ timeout: 15000 }).catch(() => {});
  const toldText = await told.innerText();
  check(toldText.includes('Confirmed with the account owner.') && toldText.includes('3 min ago') && (await told.getByRole('link', { name: 'turn 2' }).count()) === 1, 'turn 1 shows how its approval was answered: by whom, when, the reason and the turn that ran the call', toldText);
  await screen(follow, 'session');
  await follow.close();

  // Approve with a replacement input, checked against the tool's schema first.
  phase = 'replace';
  const a3 = row(page, 'acct-a3');
  await a3.getByRole('button', { name: 'Approve with changes…' }).click();
  const editor = a3.getByLabel('Replacement input (JSON)');
  await a3.getByText("Matches the tool's input schema.").waitFor();
  await editor.fill('{"account_id": ');
  await a3.getByText(/not JSON/).waitFor();
  check(await a3.getByRole('button', { name: 'Approve with this input' }).isDisabled(), 'text that is not JSON cannot be sent');
  await editor.fill('{"account": "3f0c9f8e"}');
  await a3.getByRole('list', { name: 'Problems with the replacement input' }).waitFor();
  const listed = await a3.getByRole('list', { name: 'Problems with the replacement input' }).innerText();
  check(/account_id/.test(listed) && /account/.test(listed), "an input against the tool's inputSchema is refused, naming what is wrong", listed);
  check(await a3.getByRole('button', { name: 'Approve with this input' }).isDisabled(), 'and cannot be sent');
  await screen(page, 'inbox-replacement');
  await editor.fill('{"account_id": "3f0c9f8e", "reason": "owner asked"}');
  await a3.getByText("Matches the tool's input schema.").waitFor();
  await a3.getByRole('button', { name: 'Approve with this input' }).click();
  await a3.waitFor({ state: 'detached' });
  const s3 = await until('acct-a3 to go on', () => session('acct-a3'), wentOn);
  check(s3.state?.frozen === true, 'the replacement input was approved and the session went on');

  // Retry a held turn with a note.
  phase = 'retry';
  const a2 = row(page, 'acct-a2');
  await a2.getByLabel(/Note/).fill('The transfer was reviewed by the fraud desk.');
  await a2.getByRole('button', { name: 'Retry the turn' }).click();
  await a2.waitFor({ state: 'detached' });
  const s2 = await until('acct-a2 to go on', () => session('acct-a2'), wentOn);
  check(s2.state?.reviewed === true, 'retrying the held turn with a note let the session go on');

  // A second browser (the responder carol) answers; the row leaves the first with a notice.
  phase = 'second browser';
  two = await launch('two');
  const other = watch(two.pages()[0] ?? (await two.newPage()), 'responder');
  await other.goto(`${base}/console/`);
  await other.getByLabel('Token').fill(carol);
  await other.getByRole('button', { name: 'Sign in' }).click();
  await row(other, 'acct-a5').waitFor();
  check((await other.getByRole('link', { name: 'Ledger' }).count()) === 0, 'the responder does not see the Ledger screen');
  await screen(other, 'inbox-responder');
  await row(other, 'acct-a5').getByLabel(/Reason/).fill('Not this one.');
  await row(other, 'acct-a5').getByRole('button', { name: 'Deny' }).click();
  await row(other, 'acct-a5').waitFor({ state: 'detached' });
  await row(page, 'acct-a5').waitFor({ state: 'detached' });
  await page.getByText(/carol answered the call of freeze_account in session acct-a5 elsewhere \(DENY\)/).waitFor();
  check(true, "the second browser's decision removed the row from the first, with a notice");
  await other.goto(`${base}/console/sessions/${agentId}/acct-a4`);
  await other.getByRole('heading', { name: /Session acct-a4/ }).waitFor();
  check((await other.getByRole('button', { name: /Close this session/ }).count()) === 0, 'the responder is not offered to close a session (no CLOSE)');
  check(await other.getByRole('button', { name: 'Approve', exact: true }).isVisible(), 'but may answer its approval there');
  check(
    (await other.getByRole('button', { name: /Approve with changes/ }).count()) === 0 &&
      (await other.getByText(/Approving with a replacement input needs CALL on the tool action/).isVisible()),
    'and is not offered a replacement input, saying why (issue 11: no CALL on the tool)',
  );

  // Keyboard only: reach acct-a6's reason field and Approve with Tab, answer with Enter.
  phase = 'keyboard';
  await page.goto(`${base}/console/`);
  await row(page, 'acct-a6').waitFor();
  await page.locator('body').focus();
  let reached = false;
  for (let i = 0; i < 80 && !reached; i++) {
    await page.keyboard.press('Tab');
    reached = await page.evaluate(() => {
      const el = document.activeElement;
      return el?.tagName === 'TEXTAREA' && !!el.closest('li[data-interrupt]')?.textContent?.includes('acct-a6');
    });
  }
  check(reached, "Tab reaches the reason field of acct-a6's row");
  const ring = await page.evaluate(() => {
    const lum = (c) => {
      const [r, g, b] = c.match(/[\d.]+/g).slice(0, 3).map((v) => {
        const x = Number(v) / 255;
        return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4;
      });
      return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const el = document.activeElement;
    const st = getComputedStyle(el);
    // The ring sits outside the field (outline-offset), on the first opaque background around it.
    let bg = 'rgb(255, 255, 255)';
    for (let p = el.parentElement; p; p = p.parentElement) {
      const c = getComputedStyle(p).backgroundColor;
      if (!/rgba\(.*, 0\)$|transparent/.test(c)) {
        bg = c;
        break;
      }
    }
    const [a, b] = [lum(st.outlineColor), lum(bg)];
    return { style: st.outlineStyle, width: st.outlineWidth, ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05), color: st.outlineColor, bg };
  });
  check(ring.style !== 'none' && ring.width === '3px' && ring.ratio >= 3, 'the focused field shows a 3 px focus ring with at least 3:1 contrast on what is around it', JSON.stringify(ring));
  await page.keyboard.type('Looks right.');
  await page.keyboard.press('Tab'); // Approve
  const focused = await page.evaluate(() => document.activeElement?.textContent);
  check(focused === 'Approve', 'the next Tab is Approve', String(focused));
  await page.keyboard.press('Enter');
  await row(page, 'acct-a6').waitFor({ state: 'detached' });
  const after = await page.evaluate(() => document.activeElement?.tagName ?? 'none');
  check(after !== 'BODY', 'the answer was sent with Enter, and focus stays on the page, not lost to <body>', after);
  await until('acct-a6 to go on', () => session('acct-a6'), wentOn);
  await page.getByText(/Approved the call of freeze_account in session acct-a6/).waitFor();
  check((await page.getByText(/in session acct-a6 elsewhere/).count()) === 0, "this tab's own answer is not reported as answered elsewhere");

  // A held turn that resumed from approval responses: Skip is disabled, with the reason.
  phase = 'skip refused';
  await raise('acct-a7', 'second-thoughts');
  await row(page, 'acct-a7').getByRole('button', { name: 'Approve', exact: true }).click();
  const a7 = page.locator('li.item-hold[data-interrupt]', { hasText: 'acct-a7' });
  await a7.waitFor();
  const skip = a7.getByRole('button', { name: 'Skip its inputs' });
  check(await skip.isDisabled(), 'Skip is disabled for a held turn that resumed from approval responses');
  const why = await a7.locator(`#${await skip.getAttribute('aria-describedby')}`).innerText();
  check(/resumed from approval responses/.test(why), 'and the reason is given beside it (aria-describedby)', why);
  await screen(page, 'inbox-skip-refused');
  // The held turn on its session page: why it is held, and that it waits, with a link to answer it.
  await page.goto(`${base}/console/sessions/${agentId}/acct-a7`);
  const heldNow = page.locator('[data-turn="2"] .held');
  await heldNow.waitFor();
  const heldNowText = await heldNow.innerText();
  check(
    /the model refused to go on \(category doubt\)/.test(heldNowText) && /Waiting for an answer/.test(heldNowText) && (await heldNow.getByRole('link', { name: 'Retry or skip it' }).count()) === 1,
    'a held turn that waits says so on its session page, with a link to retry or skip it',
    heldNowText,
  );
  const crumbs = await page.locator('.crumbs').innerText();
  check(/turn 2 is held: it waits for a retry or a skip/.test(crumbs), "and the session's reason says what it waits for in a person's words", crumbs);
  await screen(page, 'session-held');
  await page.goto(`${base}/console/`);
  await a7.waitFor();
  await gql(`mutation { actions { closeSession(actionId: "${agentId}", id: "acct-a7", reason: "test over") { status } } }`);
  await a7.waitFor({ state: 'detached' });
  await page.getByText(/the hold of turn 2 in session acct-a7 no longer waits/i).waitFor();
  check(true, 'a session closed elsewhere takes its row away with a notice');

  // Close a session with a reason.
  phase = 'close';
  await page.goto(`${base}/console/sessions/${agentId}/acct-a4`);
  await page.getByRole('button', { name: 'Close this session…' }).click();
  await page.getByRole('button', { name: 'Close session', exact: true }).click();
  await page.getByText('Give a reason').waitFor();
  check(true, 'closing without a reason is refused in the page');
  await page.getByLabel(/Reason for closing/).fill('Account closed by the owner.');
  await page.getByRole('button', { name: 'Close session', exact: true }).click();
  await page.locator('.title-line .status', { hasText: 'CANCELLED' }).waitFor();
  check((await session('acct-a4')).status === 'CANCELLED', 'the session is closed (CANCELLED), and the page shows it');
  await page.goto(`${base}/console/`);
  await page.waitForFunction(() => document.querySelector('[data-testid="inbox-badge"]')?.textContent === '0');
  await page.getByText('Nothing waits for an answer.').waitFor();
  check(true, 'the inbox is empty and the badge counts 0');
  await screen(page, 'inbox-empty');

  // Deep links.
  phase = 'deep links';
  await page.goto(`${base}/console/sessions/${agentId}/acct-a1/turns/1`);
  await page.locator('[data-turn="1"].highlight').waitFor();
  check(await page.locator('[data-turn="1"] .msg-approval').isVisible(), 'a turn link opens the turn, with its approval request inline');
  const interrupt = await page.locator('[data-turn="1"] .msg-approval').getByRole('link', { name: 'Link to this request' }).getAttribute('href');
  await page.goto(`${origin}${interrupt}`);
  await page.getByText(/approval request you followed a link to was answered: Approved by admin, 2026-03-02 09:00:00 UTC/).waitFor();
  check(true, 'an interrupt link says how it was answered');
  await page.goto(`${base}/console/sessions/${agentId}/acct-a2`);
  await page.locator('.msg-refusal', { hasText: 'I cannot judge this transfer' }).waitFor();
  check(true, 'a held turn shows its refusal in the conversation');
  const held = page.locator('[data-turn="1"]');
  check((await held.locator('.msg-model').count()) === 0 && (await held.locator('.problem').count()) === 0, 'with no empty model message and no error box');
  const heldText = await held.locator('.held').innerText();
  check(
    /the model refused to go on \(category fraud\)/.test(heldText) && /Retried by admin/.test(heldText) && heldText.includes('The transfer was reviewed by the fraud desk.') && (await held.locator('.held').getByRole('link', { name: 'turn 2' }).count()) === 1,
    'and says why it is held and how the hold was answered: RETRY by admin, the note, the turn its inputs ran again in',
    heldText,
  );
  const apiWords = await page.evaluate(() => /respondToSession|interruptId/.test(document.body.innerText));
  check(!apiWords, 'the page speaks of what a person does, not of API calls');
  await screen(page, 'session-held-retried');
  for (const [acct, words] of [
    ['acct-a3', ['Approved by admin', 'Run with this input instead', 'owner asked']],
    ['acct-a5', ['Denied by carol', 'Not this one.', 'The agent was told in']],
  ]) {
    await page.goto(`${base}/console/sessions/${agentId}/${acct}/turns/1`);
    const answered = page.locator('[data-turn="1"] .msg-approval .answered');
    await answered.filter({ hasText: words[0] }).waitFor();
    const text = await answered.innerText();
    check(words.every((w) => text.includes(w)), `${acct}'s turn 1 shows its answer: ${words.join(', ')}`, text);
  }
  await page.goto(`${base}/console/sessions/${agentId}/no-such-session`);
  await page.getByText('There is no such session').waitFor();
  check(true, 'an unknown session says so');

  // The other screens.
  phase = 'screens';
  await page.goto(`${base}/console/actions/${agentId}/sessions`);
  await page.getByRole('link', { name: 'acct-a6' }).waitFor();
  check((await page.locator('tbody tr').count()) === 7, 'the sessions of the agent are listed');
  const a1row = page.locator('tbody tr', { has: page.getByRole('link', { name: 'acct-a1', exact: true }) });
  check((await a1row.locator('.status').innerText()).startsWith('OPEN'), 'acct-a1 is OPEN in the list');
  await page.evaluate(() => (window.__noReload = true));
  const againAt = await entry('acct-a1-again', 'acct-a1');
  await a1row.locator('.status', { hasText: 'WAITING' }).waitFor();
  check(await page.evaluate(() => window.__noReload === true), "a row's status changes live (acct-a1 OPEN, then WAITING on a new approval)");
  await page.getByLabel('Status').selectOption('CANCELLED');
  await page.waitForFunction(() => document.querySelectorAll('tbody tr').length === 2);
  check(await page.getByRole('link', { name: 'acct-a4' }).isVisible(), 'filtering by status keeps the closed ones');
  await screen(page, 'sessions');
  await page.goto(`${base}/console/actions`);
  await page.getByRole('link', { name: 'agent-monitor', exact: true }).waitFor();
  check(await page.getByRole('link', { name: 'freeze-account', exact: true }).isVisible(), 'the actions are listed');
  await screen(page, 'actions');
  await gql(`mutation($id: UUID!, $in: ActionInput!) { actions { updateAction(id: $id, input: $in) { version } } }`, {
    id: toolId,
    in: {
      name: 'freeze-account',
      kind: 'starlark',
      source: 'def call(event):\n    return {"frozen": event["input"]["account_id"], "by": "v2"}\n',
      tool: { name: 'freeze_account', description: 'Freeze an account until reviewed.', inputSchema: toolSchema },
    },
  });
  await page.goto(`${base}/console/actions/${toolId}`);
  await page.getByRole('table', { name: 'Version 1 and version 2 side by side', exact: true }).waitFor();
  check(await page.locator('.diff-added', { hasText: 'until reviewed' }).isVisible(), 'the definition view shows versions 1 and 2 side by side, the change marked');
  check(await page.locator('.diff-added', { hasText: '"by": "v2"' }).isVisible(), "and the source's changed line");
  await screen(page, 'action');
  await page.setViewportSize({ width: 390, height: 844 });
  await page.getByRole('table', { name: 'Version 1 changed into version 2', exact: true }).waitFor();
  const kindLines = await page.locator('.diff-unified .diff-line', { hasText: '"inputSchema": {' }).count();
  check(kindLines === 1, 'at 390 px the versions are one column: an unchanged line shows once', String(kindLines));
  check(await page.getByRole('button', { name: /Show \d+ unchanged lines/ }).first().isVisible(), 'and runs of unchanged lines are folded behind a button');
  await page.setViewportSize({ width: 1280, height: 900 });

  // Trigger diagnostics and intake records of the agent.
  await gql(`mutation { ledger { appendEvent(type: "limit.changed", data: { account_id: "acct-a1" }) { position } } }`);
  const strayAt = await entry('acct-zz', 'acct-zz');
  await until(
    'a diagnostic and an intake record',
    () => gql(`query($a: UUID!) { actions { action(id: $a) { triggerDiagnostics { trigger } intakeRecords(first: 5) { nodes { reason } } } } }`, { a: agentId }),
    (d) => d.actions.action.triggerDiagnostics.length > 0 && d.actions.action.intakeRecords.nodes.length > 0,
  );
  await page.goto(`${base}/console/actions/${agentId}`);
  const diag = await page.getByRole('region', { name: 'Trigger diagnostics' }).locator('tbody tr').first().innerText();
  check(/limit/.test(diag) && /limit\.changed at position \d+/.test(diag) && /no such key/.test(diag), "the agent's page lists the failing predicate: trigger, message, last event", diag);
  const intake = page.getByRole('region', { name: 'Intake records' }).locator('tbody tr').first();
  const intakeText = await intake.innerText();
  check(/session_not_found/.test(intakeText) && /entry/.test(intakeText) && /entry\.inserted at position \d+/.test(intakeText) && /acct-zz \(none\)/.test(intakeText), 'and the entry that reached no session as an intake record, naming the id it looked for', intakeText);
  // A dry run (issue 15): the definition prefilled, invalid JSON refused
  // before anything is sent, then a changed definition (no limit trigger)
  // beside the current one, the differences marked.
  const proposal = page.getByLabel('Proposed definition (JSON, the ActionInput shape)');
  const prefilled = JSON.parse(await proposal.inputValue());
  check(prefilled.name === 'agent-monitor' && prefilled.triggers.length === 3 && !('tool' in prefilled) && !('source' in prefilled), 'the dry run is prefilled with the current definition, its null parts left out');
  let dryRuns = 0;
  const countDryRuns = (r) => r.url().endsWith('/graphql') && (r.postData() ?? '').includes('dryRun') && dryRuns++;
  page.on('request', countDryRuns);
  await proposal.fill('{"name": "agent-monitor",}');
  await page.getByRole('button', { name: 'Run', exact: true }).click();
  const jsonProblem = await page.locator('#dry-def-problem').innerText();
  check(/not valid JSON: at line 1, column 26/.test(jsonProblem) && (await proposal.getAttribute('aria-invalid')) === 'true' && dryRuns === 0, 'invalid JSON is shown where it breaks and nothing is sent', jsonProblem);
  await proposal.fill(JSON.stringify({ ...prefilled, triggers: prefilled.triggers.filter((t) => t.name !== 'limit') }, null, 2));
  await page.getByRole('button', { name: 'Run', exact: true }).click();
  const perTrigger = page.getByRole('table', { name: 'Per trigger', exact: true });
  await perTrigger.waitFor();
  const limitRow = await perTrigger.locator('tbody tr', { hasText: 'limit' }).innerText();
  const failuresRow = page.getByRole('table', { name: 'What was read' }).locator('tr', { hasText: 'Predicate failures' });
  check(
    dryRuns === 2 && /dropped/i.test(limitRow) && (await failuresRow.locator('td.differs').count()) === 2 && /\(−\d+\)/.test(await failuresRow.innerText()),
    'a dry run compares the changed definition with the current one: the dropped trigger and the predicate failures it no longer has are marked',
    `${dryRuns} requests; ${limitRow}`,
  );
  page.off('request', countDryRuns);
  await screen(page, 'action-agent');

  await page.goto(`${base}/console/ledger`);
  await page.locator('.events > li').first().waitFor();
  check(await page.locator(`.events > li[data-position="${againAt}"]`).getByRole('link', { name: 'agent-monitor / acct-a1' }).isVisible(), 'ledger events link to the sessions they reached');
  check(await page.locator(`.events > li[data-position="${strayAt}"]`).getByText('Reached no session.').isVisible(), 'and say when they reached none');
  await gql(`mutation { ledger { appendEvent(type: "console.page", data: { n: 1 }) { position } } }`);
  await page.locator('.events > li', { hasText: 'console.page' }).waitFor();
  check(true, 'a new event appears live at the top of the ledger');
  await page.getByRole('button', { name: 'Show only console.page events' }).click();
  await page.waitForFunction(() => document.querySelectorAll('.events > li').length === 1);
  check(true, 'filtering by type keeps that type');
  await page.goto(`${base}/console/ledger`);
  await page.locator('.events > li').first().waitFor();
  await screen(page, 'ledger');

  // A turn that fails only itself (G10): the session page says the session
  // waits, tags the turn, and resumes it.
  phase = 'resume';
  const notesId = crypto.randomUUID();
  await gql(`mutation($id: UUID!, $input: ActionInput!) { actions { createAction(id: $id, input: $input) { version } } }`, {
    id: notesId,
    input: {
      name: 'notes',
      kind: 'starlark',
      source: 'def turn(event):\n    return {"status": "FAILED", "scope": "TURN", "reason": "the notes service is closed"}\n',
      triggers: [
        { name: 'opened', event: 'event.type == "ticket.inserted"', session: { start: { input: { id: 'string(event.data.id)' } } } },
        { name: 'note', event: 'event.type == "note.inserted"', session: { resume: { id: 'string(event.data.id)' } } },
      ],
      session: { id: 'string(session.input.id)' },
    },
  });
  await gql(`mutation { ledger { putValue(namespace: "ticket", key: "t1", value: { id: "t1" }) { version } } }`);
  await gql(`mutation { ledger { putValue(namespace: "note", key: "n1", value: { id: "t1" }) { version } } }`);
  const waitingAfter = (n) =>
    until(`turn ${n} of t1 to fail`, () => gql(`query($a: UUID!) { actions { action(id: $a) { session(id: "t1") { status resumable turns { nodes { number status } } } } } }`, { a: notesId }), (d) => {
      const s = d.actions.action.session;
      return s?.resumable && s.turns.nodes[0]?.number === n && s.turns.nodes[0]?.status === 'FAILED';
    });
  await waitingAfter(1);
  await page.goto(`${base}/console/sessions/${notesId}/t1`);
  const resumable = page.locator('section[aria-labelledby="resumable"]');
  await resumable.waitFor();
  check(/Waiting after a failed turn/.test(await resumable.innerText()), 'a session waiting after a turn-scoped failure says so on its page');
  check(await page.locator('[data-turn="1"] .tag', { hasText: 'failed only this turn' }).isVisible(), 'and its turn is tagged as failing only itself');
  await screen(page, 'session-resumable');
  await resumable.getByRole('button', { name: 'Resume now' }).click();
  await page.getByText('Session t1 is resumed').waitFor();
  await waitingAfter(2);
  await page.locator('[data-turn="2"]').waitFor();
  check(true, 'Resume now runs the turn again (it fails again here, and the page shows turn 2 live)');
  // A message from the composer (G1): it wakes the session, and a turn takes it with the pending note.
  await page.getByLabel(/Message to the session/).fill('The notes service is back.');
  await page.getByRole('button', { name: 'Send message' }).click();
  await page.getByText('Message sent').waitFor();
  await waitingAfter(3);
  const sent = await gql(`query($a: UUID!) { actions { action(id: $a) { session(id: "t1") { inputs { nodes { command { kind sender { kind id } message } } } } } } }`, { a: notesId });
  const msg = sent.actions.action.session.inputs.nodes.find((n) => n.command?.kind === 'MESSAGE');
  check(msg?.command.message === 'The notes service is back.' && msg.command.sender.kind === 'OPERATOR' && msg.command.sender.id === 'admin', 'a message sent from the session page is a COMMAND input sent by the signed-in operator', JSON.stringify(msg));
  await page.getByRole('button', { name: 'Archive' }).click();
  await page.locator('.title-line .tag', { hasText: 'archived' }).waitFor();
  check(true, 'archiving the session from its page marks it archived');
  await screen(page, 'session-steer');
  // The failed turns left the message pending: edit it (G2).
  const pendingMsg = page.locator('section[aria-labelledby="pending"] li', { hasText: 'The notes service is back.' });
  await pendingMsg.getByRole('button', { name: 'Edit' }).click();
  await page.getByLabel(/New text of message/).fill('The notes service is back (edited).');
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByText('The message is changed').waitFor();
  const edited = await gql(`query($a: UUID!) { actions { action(id: $a) { session(id: "t1") { inputs(status: PENDING) { nodes { command { kind message } } } } } } }`, { a: notesId });
  check(edited.actions.action.session.inputs.nodes.some((n) => n.command?.message === 'The notes service is back (edited).'), 'a pending message edited on the session page has its new text');
  // A Starlark handler calls no model: its session's page offers no spend cap (G8).
  check((await page.getByLabel(/Spend cap in US dollars/).count()) === 0, "a Starlark session's page offers no spend cap");
  // Close with a handoff note and a successor (G5).
  await page.getByRole('button', { name: 'Close this session…' }).click();
  await page.getByLabel(/Reason for closing/).fill('moving to a new ticket flow');
  await page.getByLabel(/Handoff note/).fill('Check the notes service before anything else.');
  await page.getByLabel(/Start a successor session/).check();
  await screen(page, 'session-close-handoff');
  await page.getByRole('button', { name: 'Close session' }).click();
  await page.getByText('t1~2 continues it').waitFor();
  await page.getByRole('link', { name: 't1~2' }).waitFor();
  check(true, 'closing with a successor links the successor from the closed session');

  // Nothing from anywhere else.
  phase = 'origin';
  const foreign = requests.filter((u) => {
    const url = new URL(u);
    if (url.protocol === 'data:' || url.protocol === 'blob:') return false;
    return url.host !== host || !['http:', 'https:', 'ws:', 'wss:'].includes(url.protocol);
  });
  check(foreign.length === 0, `all ${requests.length} requests went to ${origin}`, foreign.slice(0, 5).join(' '));
  const foreignWS = sockets.filter((u) => new URL(u).host !== host);
  check(sockets.length > 0 && foreignWS.length === 0, `all ${sockets.length} WebSockets went to the server`, foreignWS.join(' '));
  check(problems.length === 0, 'no uncaught error or CSP violation', problems.slice(0, 5).join(' | '));
} catch (err) {
  console.error(`FAIL (${phase}) ${err.message}`);
  process.exitCode = 1;
  if (shots) {
    mkdirSync(shots, { recursive: true });
    const open = [...(one?.pages() ?? []), ...(two?.pages() ?? [])];
    for (const [i, p] of open.entries()) {
      const file = join(shots, `failed-${i}.png`);
      await p.screenshot({ path: file, fullPage: true }).then(
        () => console.error(`screenshot of the failure: ${file} (${p.url()})`),
        () => {},
      );
    }
  }
  if (problems.length) console.error(problems.join('\n'));
} finally {
  for (const c of [one, two]) {
    if (!c) continue;
    await c.close();
    rmSync(c.profile, { recursive: true, force: true });
  }
}
