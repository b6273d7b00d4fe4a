/**
 * The console's page: plain HTML, CSS and a script, kept as strings so they ship inside dist/ with the
 * rest of the command line and load with no network (no framework, no CDN, no web font). The script is
 * served as a file of its own, so the Content-Security-Policy needs no inline script. Everything the store
 * holds reaches the page through `textContent`, never as markup: keys and errors come from callers, often
 * models.
 */
import { consoleScript } from "./console-script.js";

const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>idempotool console</title>
<link rel="stylesheet" href="/app.css">
<script type="module" src="/app.js"></script>
</head>
<body>
<a class="skip" href="#main">Skip to the queue</a>
<header class="top">
  <div class="brand">
    <h1>idempotool console</h1>
    <span id="store" class="store" title="The store this console reads"></span>
  </div>
  <nav aria-label="Views">
    <a href="#queue" id="nav-queue">Review queue</a>
    <a href="#counts" id="nav-counts">Counts</a>
  </nav>
  <button id="refresh" type="button">Refresh</button>
</header>
<div id="notice" class="notice" role="status" hidden></div>
<main id="main" tabindex="-1">
  <div id="locked" class="locked" hidden>
    <h2>This console needs a session</h2>
    <p id="locked-reason"></p>
    <p>Open the link <code>idempotool console</code> printed in your terminal. Each link works once, in one
    browser; start the console again for a new one.</p>
  </div>
  <section id="view-queue" class="view-queue" aria-labelledby="queue-title" hidden>
    <div class="queue-pane">
      <h2 id="queue-title">Needs review</h2>
      <p class="lead">Records nobody will finish: the outcome is unknown, or the worker stopped while it held
      the lease. Callers with these keys are refused until someone resolves them.</p>
      <form id="filters" class="filters" aria-label="Filter the queue">
        <label>Tool <input name="tool" id="filter-tool" autocomplete="off"></label>
        <label>Scope <input name="scope" id="filter-scope" autocomplete="off"></label>
        <label>Key prefix <input name="keyPrefix" id="filter-key" autocomplete="off"></label>
        <label>Older than
          <select name="olderThan" id="filter-age">
            <option value="">any age</option>
            <option value="10m">10 minutes</option>
            <option value="1h">1 hour</option>
            <option value="24h">1 day</option>
            <option value="7d">7 days</option>
          </select>
        </label>
        <div class="filter-actions">
          <button type="submit" class="primary">Filter</button>
          <button type="reset">Clear</button>
        </div>
      </form>
      <p id="queue-summary" class="summary" aria-live="polite"></p>
      <ul id="by-tool" class="chips" aria-label="Records by tool"></ul>
      <div class="table-wrap">
        <table id="queue-table">
          <caption class="visually-hidden">Records that need review, oldest first</caption>
          <thead><tr><th scope="col">Key</th><th scope="col">Tool</th><th scope="col">Why</th>
          <th scope="col" class="num">Age</th><th scope="col" class="num">Attempts</th></tr></thead>
          <tbody id="queue-rows"></tbody>
        </table>
      </div>
      <p id="queue-empty" class="empty" hidden>Nothing needs review.</p>
    </div>
    <section id="record" class="record-pane" aria-labelledby="record-title" aria-live="polite">
      <h2 id="record-title" class="placeholder">No record open</h2>
      <p class="muted">Choose a key in the queue to read its whole story and resolve it.</p>
    </section>
  </section>
  <section id="view-counts" class="view-counts" aria-labelledby="counts-title" hidden>
    <h2 id="counts-title">Counts</h2>
    <p class="lead">What the store itself knows, counted when this page loaded. Replays and conflicts leave
    nothing in the store: they are counted by the OpenTelemetry integration (<code>idempotool/otel</code>),
    not here.</p>
    <div class="cards">
      <section class="card" aria-labelledby="age-title">
        <h3 id="age-title">Needing review, by age</h3>
        <table class="bars" id="age-table"><tbody></tbody></table>
      </section>
      <section class="card" aria-labelledby="kind-title">
        <h3 id="kind-title">Unknown and stale</h3>
        <dl class="figures" id="kind-figures"></dl>
        <p class="muted small">Unknown: nobody knows whether the effect happened. Stale: the worker stopped
        while it held the lease.</p>
      </section>
      <section class="card" aria-labelledby="takeover-title">
        <h3 id="takeover-title">Takeovers</h3>
        <dl class="figures" id="takeover-figures"></dl>
        <p class="muted small">Live records whose key was claimed more than once: a later attempt, or an
        operator's resolution, took over from an owner that stopped.</p>
      </section>
    </div>
    <section class="card wide" aria-labelledby="days-title">
      <h3 id="days-title">Resolutions per day (UTC)</h3>
      <div class="table-wrap">
        <table id="days-table">
          <thead><tr><th scope="col">Day</th><th scope="col" class="num">Completed</th><th scope="col" class="num">Failed</th>
          <th scope="col" class="num">Not executed</th><th scope="col" class="num">Interrupted</th>
          <th scope="col" class="num">Total</th></tr></thead>
          <tbody></tbody>
        </table>
      </div>
      <p id="days-empty" class="empty" hidden>No resolutions in the trail yet.</p>
    </section>
  </section>
</main>
<dialog id="resolve-dialog" aria-labelledby="resolve-title">
  <form id="resolve-form" novalidate>
    <h2 id="resolve-title">Resolve</h2>
    <p id="resolve-target" class="mono small"></p>
    <p id="resolve-warning" class="warning"></p>
    <div id="field-result" class="field">
      <label for="resolve-result">The result repeats will get (JSON)</label>
      <textarea id="resolve-result" rows="6" spellcheck="false" aria-describedby="result-error"></textarea>
      <p id="result-error" class="field-error" hidden></p>
    </div>
    <div id="field-message" class="field">
      <label for="resolve-message">The failure message repeats will get</label>
      <input id="resolve-message" autocomplete="off">
    </div>
    <div class="field">
      <label for="resolve-evidence">Evidence: what you checked, and what it showed</label>
      <textarea id="resolve-evidence" rows="3" required></textarea>
    </div>
    <div class="field">
      <label for="resolve-by">Your name</label>
      <input id="resolve-by" required autocomplete="name">
    </div>
    <p id="resolve-error" class="field-error" role="alert" hidden></p>
    <div class="actions">
      <button type="button" id="resolve-cancel">Cancel</button>
      <button type="submit" id="resolve-submit" class="primary">Record it</button>
    </div>
  </form>
</dialog>
</body>
</html>
`;

const css = `
:root {
  --text: #1f2328; --muted: #59636e; --line: #d1d9e0; --bg: #f6f8fa; --surface: #ffffff;
  --accent: #0b5cad; --accent-text: #ffffff; --warn-bg: #fff8e1; --warn-line: #c99a2e;
  --bad: #b42318; --good: #1a7f37; --radius: 6px;
  color-scheme: light;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  font-size: 15px; line-height: 1.45; color: var(--text); background: var(--bg);
}
* { box-sizing: border-box; }
[hidden] { display: none !important; }
body { margin: 0; }
code, .mono { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 0.92em; }
h1 { font-size: 1.1rem; margin: 0; font-weight: 600; }
h2 { font-size: 1.15rem; margin: 0 0 0.5rem; font-weight: 600; }
h3 { font-size: 0.95rem; margin: 0 0 0.5rem; font-weight: 600; }
a { color: var(--accent); }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.skip { position: absolute; left: -999px; top: 0; background: var(--surface); padding: 0.5rem; }
.skip:focus { left: 0.5rem; z-index: 10; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); }
.top { display: flex; flex-wrap: wrap; align-items: center; gap: 0.75rem 1.5rem; padding: 0.75rem 1.25rem;
  background: var(--surface); border-bottom: 1px solid var(--line); }
.brand { display: flex; flex-wrap: wrap; align-items: baseline; gap: 0.25rem 0.75rem; margin-right: auto; min-width: 0; }
.store { color: var(--muted); font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.85rem;
  overflow-wrap: anywhere; }
nav { display: flex; gap: 0.25rem; }
nav a { padding: 0.35rem 0.7rem; border-radius: var(--radius); text-decoration: none; color: var(--text); }
nav a[aria-current="page"] { background: var(--bg); box-shadow: inset 0 -2px 0 var(--accent); font-weight: 600; }
button { font: inherit; padding: 0.4rem 0.85rem; border: 1px solid var(--line); border-radius: var(--radius);
  background: var(--surface); color: var(--text); cursor: pointer; }
button:hover { background: var(--bg); }
button.primary { background: var(--accent); border-color: var(--accent); color: var(--accent-text); }
button.primary:hover { filter: brightness(0.95); }
button.danger { border-color: var(--bad); color: var(--bad); }
button:disabled { opacity: 0.6; cursor: default; }
input, select, textarea { font: inherit; padding: 0.35rem 0.5rem; border: 1px solid var(--line);
  border-radius: var(--radius); background: var(--surface); color: var(--text); width: 100%; }
textarea { resize: vertical; }
main { padding: 1rem 1.25rem 2rem; }
.notice { margin: 0.75rem 1.25rem 0; padding: 0.6rem 0.9rem; border-radius: var(--radius);
  background: #e8f3ec; border: 1px solid #9bd0ac; }
.notice.bad { background: #fdecea; border-color: #e8a29b; }
.lead { color: var(--muted); margin: 0 0 0.75rem; max-width: 60rem; }
.muted { color: var(--muted); }
.small { font-size: 0.85rem; }
.view-queue { display: grid; grid-template-columns: minmax(0, 1.25fr) minmax(0, 1fr); gap: 1.25rem; align-items: start; }
.queue-pane, .record-pane, .card, .locked { background: var(--surface); border: 1px solid var(--line);
  border-radius: var(--radius); padding: 1rem; }
.filters { display: grid; grid-template-columns: repeat(4, minmax(0, 1fr)); gap: 0.5rem 0.75rem; align-items: end;
  margin-bottom: 0.75rem; }
.filters label { display: flex; flex-direction: column; gap: 0.2rem; font-size: 0.85rem; color: var(--muted); }
.filter-actions { display: flex; gap: 0.5rem; grid-column: 1 / -1; }
.summary { margin: 0.25rem 0; font-weight: 600; }
.chips { list-style: none; display: flex; flex-wrap: wrap; gap: 0.4rem; padding: 0; margin: 0.25rem 0 0.75rem; }
.chips li { border: 1px solid var(--line); border-radius: 999px; padding: 0.1rem 0.6rem; font-size: 0.85rem;
  background: var(--bg); }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 0.45rem 0.5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 0.8rem; color: var(--muted); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tbody tr[aria-current="true"] { background: #eef4fb; }
.key-button { border: none; background: none; padding: 0; color: var(--accent); text-align: left;
  font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.9rem; overflow-wrap: break-word; }
#queue-table td:first-child { min-width: 9rem; }
.key-button:hover { background: none; text-decoration: underline; }
.badge { display: inline-block; border-radius: 999px; padding: 0.05rem 0.55rem; font-size: 0.8rem;
  border: 1px solid var(--line); background: var(--bg); white-space: nowrap; }
.badge.unknown { border-color: var(--warn-line); background: var(--warn-bg); }
.badge.in_progress { border-color: #8fb4dc; background: #eef4fb; }
.badge.completed { border-color: #9bd0ac; background: #e8f3ec; }
.badge.failed { border-color: #e8a29b; background: #fdecea; }
.empty { color: var(--muted); padding: 1rem 0; }
.record-pane h2 { overflow-wrap: anywhere; }
.record-sub { color: var(--muted); margin: -0.25rem 0 0.75rem; overflow-wrap: anywhere; }
.fields { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 0.3rem 1rem; margin: 0 0 1rem; }
.fields dt { color: var(--muted); font-size: 0.88rem; }
.fields dd { margin: 0; overflow-wrap: anywhere; }
.changed { border: 1px solid var(--warn-line); background: var(--warn-bg); border-radius: var(--radius);
  padding: 0.6rem 0.8rem; margin: 0 0 0.75rem; }
.operator { border-left: 3px solid var(--good); padding: 0.2rem 0 0.2rem 0.75rem; margin: 0 0 1rem; }
.resolve-actions { display: flex; flex-wrap: wrap; gap: 0.5rem; margin: 0.25rem 0 1rem; }
.trail { list-style: none; padding: 0; margin: 0; }
.trail li { border-top: 1px solid var(--line); padding: 0.5rem 0; }
.trail .what { font-weight: 600; }
.warning { border: 1px solid var(--warn-line); background: var(--warn-bg); border-radius: var(--radius);
  padding: 0.6rem 0.8rem; }
.field { display: flex; flex-direction: column; gap: 0.25rem; margin: 0 0 0.75rem; }
.field label { font-weight: 600; font-size: 0.9rem; }
.field-error { color: var(--bad); margin: 0.25rem 0 0.5rem; }
dialog { border: 1px solid var(--line); border-radius: var(--radius); padding: 1.25rem; width: min(40rem, 94vw);
  color: var(--text); background: var(--surface); }
dialog::backdrop { background: rgba(31, 35, 40, 0.45); }
.actions { display: flex; justify-content: flex-end; gap: 0.5rem; }
.cards { display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: 1rem; margin-bottom: 1rem; }
.figures { display: grid; grid-template-columns: max-content 1fr; gap: 0.25rem 1rem; margin: 0 0 0.5rem; }
.figures dt { color: var(--muted); }
.figures dd { margin: 0; font-size: 1.3rem; font-weight: 600; font-variant-numeric: tabular-nums; }
.bars th, .bars td { border: none; padding: 0.3rem 0.4rem; }
.bars th { white-space: nowrap; width: 1%; }
.bars td.meter { width: 100%; }
.bars meter { width: 100%; height: 0.9rem; }
meter::-webkit-meter-bar { background: var(--bg); border: 1px solid var(--line); border-radius: 3px; }
meter::-webkit-meter-optimum-value { background: #6f8fb3; border-radius: 2px; }
.locked { max-width: 40rem; }
@media (max-width: 1000px) {
  .view-queue { grid-template-columns: minmax(0, 1fr); }
  .cards { grid-template-columns: minmax(0, 1fr); }
}
@media (max-width: 640px) {
  .filters { grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); }
  main { padding: 0.75rem; }
  .fields { grid-template-columns: minmax(0, 1fr); }
  .fields dd { margin-bottom: 0.4rem; }
}
`;

/** The files the console serves, by path: the page itself needs no session (it holds no data). */
export const consoleAssets: Readonly<Record<string, { readonly type: string; readonly body: string }>> = {
  "/": { type: "text/html; charset=utf-8", body: html },
  "/app.css": { type: "text/css; charset=utf-8", body: css },
  "/app.js": { type: "text/javascript; charset=utf-8", body: consoleScript },
};
