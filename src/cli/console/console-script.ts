/**
 * The console page's script, served as /app.js. Plain browser JavaScript with no build step: it trades the
 * link's one-time token for a session, then reads the queue, a record's story and the counts from the
 * JSON API, and posts resolutions with the version the operator saw. Data from the store is only ever set
 * as text.
 */
export const consoleScript = String.raw`"use strict";
const byKey = "idempotool.console.by";
const state = { filters: {}, open: undefined, story: undefined, resolving: undefined };

const warnings = {
  completed:
    "Later repeats get exactly this result, and the tool does not run again for this key. Record it only if " +
    "you have seen that the effect happened.",
  failed:
    "Later repeats get this failure back, and the tool does not run again for this key. Record it only if " +
    "you know the effect did not happen and must not be tried again.",
  not_executed:
    "The key is freed: the next call runs the tool again. If the effect did happen, the next call runs it " +
    "again, and it happens twice.",
};
const titles = {
  completed: "It happened: record its result",
  failed: "It failed: record the failure",
  not_executed: "It never ran: free the key",
};
const asWords = { completed: "completed", failed: "failed", not_executed: "not executed" };
const reasonWords = {
  unknown: "outcome unknown",
  lease_passed: "worker stopped (lease passed)",
};

function $(id) {
  return document.getElementById(id);
}

/** An element with attributes and children (strings become text, never markup). */
function h(tag, attributes, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "text") element.textContent = value;
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    element.append(typeof child === "string" || typeof child === "number" ? String(child) : child);
  }
  return element;
}

function age(ms) {
  if (ms === undefined || ms === null) return "";
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + " s";
  const m = Math.floor(s / 60);
  if (m < 60) return m + " min";
  const hours = Math.floor(m / 60);
  if (hours < 48) return hours + " h";
  return Math.floor(hours / 24) + " d";
}

function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return iso.replace("T", " ").replace(/\.\d+Z$/, " UTC").replace(/Z$/, " UTC");
}

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(path, body) {
  const init = body === undefined
    ? { headers: { Accept: "application/json" } }
    : { method: "POST", headers: { "Content-Type": "application/json", Accept: "application/json" }, body: JSON.stringify(body) };
  const response = await fetch(path, { ...init, credentials: "same-origin", cache: "no-store" });
  let value;
  try {
    value = await response.json();
  } catch {
    value = undefined;
  }
  if (!response.ok) {
    const error = (value && value.error) || {};
    if (response.status === 401) lock(error.message || "No session.");
    throw new ApiError(response.status, error.code || "http_" + response.status, error.message || response.statusText);
  }
  return value;
}

function notice(text, bad) {
  const box = $("notice");
  box.textContent = text;
  box.classList.toggle("bad", Boolean(bad));
  box.hidden = !text;
}

function lock(reason) {
  $("locked-reason").textContent = reason;
  $("locked").hidden = false;
  $("view-queue").hidden = true;
  $("view-counts").hidden = true;
  $("refresh").disabled = true;
  document.body.dataset.state = "locked";
}

function showView() {
  if (!$("locked").hidden) return;
  const counts = location.hash === "#counts";
  $("view-queue").hidden = counts;
  $("view-counts").hidden = !counts;
  $("nav-queue").toggleAttribute("aria-current", false);
  $("nav-counts").toggleAttribute("aria-current", false);
  (counts ? $("nav-counts") : $("nav-queue")).setAttribute("aria-current", "page");
  if (counts) void loadCounts();
}

// The queue.

async function loadQueue() {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(state.filters)) if (value) query.set(name, value);
  let queue;
  try {
    queue = await api("/api/queue?" + query.toString());
  } catch (error) {
    if (error.status !== 401) notice("Could not read the queue: " + error.message, true);
    return;
  }
  const rows = $("queue-rows");
  rows.replaceChildren();
  const filtered = Object.values(state.filters).some(Boolean);
  $("queue-summary").textContent =
    queue.total === 0
      ? filtered ? "No record matches these filters." : "Nothing needs review."
      : queue.total + (queue.total === 1 ? " record needs" : " records need") + " a person" +
        (filtered ? " (filtered)" : "") + " · oldest " + age(queue.oldestAgeMs) +
        (queue.items.length < queue.total ? " · showing the oldest " + queue.items.length : "");
  const chips = $("by-tool");
  chips.replaceChildren(
    ...Object.entries(queue.byTool)
      .sort((a, b) => b[1] - a[1])
      .map(([tool, n]) => h("li", {}, tool + ": " + n)),
  );
  for (const item of queue.items) {
    const current = state.open && state.open.scope === item.scope && state.open.key === item.key;
    rows.append(
      h(
        "tr",
        { "data-key": item.key, "aria-current": current ? "true" : undefined },
        h(
          "td",
          {},
          h("button", {
            type: "button",
            class: "key-button",
            text: item.key,
            title: "scope " + item.scope,
            onclick: () => openRecord(item.scope, item.key),
          }),
          item.scope === "default" ? undefined : h("div", { class: "muted small", text: "scope " + item.scope }),
        ),
        h("td", { text: item.tool }),
        h("td", {}, h("span", { class: "badge " + item.status, text: reasonWords[item.reason] || item.reason })),
        h("td", { class: "num", text: age(item.ageMs) }),
        h("td", { class: "num", text: String(item.attempts) }),
      ),
    );
  }
  $("queue-empty").hidden = queue.total !== 0;
  $("queue-table").hidden = queue.total === 0;
  document.body.dataset.queue = "loaded";
}

// One record's story.

async function openRecord(scope, key, changedMessage) {
  state.open = { scope, key };
  for (const row of $("queue-rows").children) {
    row.toggleAttribute("aria-current", false);
    if (row.dataset.key === key) row.setAttribute("aria-current", "true");
  }
  let story;
  try {
    story = await api("/api/record?" + new URLSearchParams({ scope, key }).toString());
  } catch (error) {
    if (error.status !== 401) notice("Could not read the record: " + error.message, true);
    return;
  }
  state.story = story;
  renderRecord(scope, key, story, changedMessage);
}

function field(list, name, value) {
  if (value === undefined || value === null || value === "") return;
  list.append(h("dt", { text: name }), h("dd", {}, value));
}

function renderRecord(scope, key, story, changedMessage) {
  const pane = $("record");
  const record = story.record;
  const parts = [
    h("h2", { id: "record-title", text: key }),
    h("p", { class: "record-sub", text: "scope " + scope + (record ? " · tool " + record.tool : "") }),
  ];
  if (changedMessage) {
    parts.push(
      h(
        "div",
        { class: "changed", role: "alert", id: "record-changed", tabindex: "-1" },
        h("strong", { text: "This record changed since you opened it. Nothing was written. " }),
        changedMessage + " Read it again below before you decide.",
      ),
    );
  }
  if (!record) {
    parts.push(
      h("p", {
        class: "muted",
        text: "The store keeps no record under this key now: never written, freed by a resolution, or expired.",
      }),
    );
  } else {
    const list = h("dl", { class: "fields" });
    field(list, "Status", h("span", { class: "badge " + record.status, text: record.status.replace("_", " ") }));
    if (record.reason) field(list, "Needs review", reasonWords[record.reason] || record.reason);
    field(list, "Attempts", String(record.attempts));
    field(list, "First attempt", when(record.firstAttemptAt) + " (" + age(record.ageMs) + " ago)");
    field(list, "Last attempt", when(record.lastAttemptAt));
    const leasePassed = Date.parse(record.leaseExpiresAt) <= Date.now();
    field(
      list,
      "Lease",
      "holder " + record.leaseHolder + "…, " + (leasePassed ? "passed " : "until ") + when(record.leaseExpiresAt),
    );
    field(list, "Expires", when(record.expiresAt));
    if (record.failure) {
      const code = record.failure.code !== undefined ? " (" + record.failure.code + ")" : "";
      field(
        list,
        record.status === "failed" ? "Failure" : "Why unknown",
        record.failure.name + ": " + record.failure.message + code,
      );
    }
    if (record.verify) {
      field(
        list,
        "Verify answer",
        record.verify.status + (record.verify.reason ? ": " + record.verify.reason : "") + " (" + when(record.verify.at) + ")",
      );
    }
    if (record.preview !== undefined) field(list, "Arguments", h("code", { text: record.preview }));
    field(list, "Sealed", record.sealed ? "yes: its notes are encrypted and this console was not given the keys" : "no");
    field(list, "Version", h("code", { text: record.version }));
    parts.push(list);
    if (record.resolvedByOperator) {
      const r = record.resolvedByOperator;
      parts.push(
        h(
          "div",
          { class: "operator", id: "resolved-by-operator" },
          h("h3", { text: "Resolved by an operator" }),
          h("p", {}, "by " + r.by + " at " + when(r.at)),
          h("p", {}, "Evidence: " + r.evidence),
          h("p", { class: "muted small", text: "Repeats report this as resolved_by_operator." }),
        ),
      );
    }
    if (record.needsReview) {
      parts.push(
        h("h3", { text: "Resolve" }),
        h(
          "div",
          { class: "resolve-actions" },
          h("button", { type: "button", id: "resolve-completed", onclick: () => startResolve("completed") }, "It happened…"),
          h("button", { type: "button", id: "resolve-failed", onclick: () => startResolve("failed") }, "It failed…"),
          h(
            "button",
            { type: "button", id: "resolve-not-executed", class: "danger", onclick: () => startResolve("not_executed") },
            "It never ran…",
          ),
        ),
      );
    } else if (record.status === "in_progress") {
      parts.push(h("p", { class: "muted", text: "Its worker holds a live lease: wait for it to settle or for the lease to pass." }));
    }
  }
  parts.push(h("h3", { text: "Trail" }));
  if (story.trail.length === 0) {
    parts.push(h("p", { class: "muted", id: "trail-empty", text: "No one has resolved this key." }));
  } else {
    parts.push(
      h(
        "ol",
        { class: "trail", id: "trail" },
        story.trail.map((entry) =>
          h(
            "li",
            {},
            h("div", { class: "what", text: asWords[entry.as] + " by " + entry.by + " via " + entry.via }),
            h("div", { class: "muted small", text: when(entry.at) + (entry.state === "interrupted" ? " · interrupted: look at the record" : "") }),
            h("div", { text: "Evidence: " + entry.evidence }),
            h("div", {
              class: "muted small",
              text: "It was " + String(entry.before.status).replace("_", " ") + ", attempt " + entry.before.attempts + ".",
            }),
          ),
        ),
      ),
    );
  }
  pane.replaceChildren(...parts);
  $("record-title").setAttribute("tabindex", "-1");
  pane.dataset.key = key;
  pane.dataset.status = record ? record.status : "none";
}

// Resolving.

function startResolve(as) {
  const record = state.story && state.story.record;
  if (!record) return;
  state.resolving = { as, scope: record.scope, key: record.key, version: record.version };
  $("resolve-title").textContent = titles[as];
  $("resolve-target").textContent = record.tool + " · scope " + record.scope + " · key " + record.key;
  $("resolve-warning").textContent = warnings[as];
  $("field-result").hidden = as !== "completed";
  $("field-message").hidden = as !== "failed";
  $("resolve-result").value = "";
  $("resolve-message").value = "";
  $("resolve-evidence").value = "";
  $("resolve-by").value = localStorage.getItem(byKey) || "";
  $("result-error").hidden = true;
  $("resolve-error").hidden = true;
  $("resolve-submit").textContent = as === "not_executed" ? "Free the key" : "Record it";
  $("resolve-submit").disabled = false;
  $("resolve-dialog").showModal();
  (as === "completed" ? $("resolve-result") : as === "failed" ? $("resolve-message") : $("resolve-evidence")).focus();
}

function formError(text) {
  $("resolve-error").textContent = text;
  $("resolve-error").hidden = false;
}

async function submitResolve(event) {
  event.preventDefault();
  const target = state.resolving;
  if (!target) return;
  $("resolve-error").hidden = true;
  $("result-error").hidden = true;
  const body = {
    scope: target.scope,
    key: target.key,
    as: target.as,
    expectVersion: target.version,
    evidence: $("resolve-evidence").value.trim(),
    by: $("resolve-by").value.trim(),
  };
  if (target.as === "completed") {
    const text = $("resolve-result").value.trim();
    try {
      if (text === "") throw new Error("give the result, as JSON (for example {\"messageId\": \"m-81\"})");
      body.result = JSON.parse(text);
    } catch (error) {
      $("result-error").textContent = "Not valid JSON: " + error.message;
      $("result-error").hidden = false;
      $("resolve-result").focus();
      return;
    }
  }
  if (target.as === "failed") {
    const message = $("resolve-message").value.trim();
    if (!message) return formError("Give the failure message repeats will get.");
    body.error = message;
  }
  if (!body.evidence) return formError("Say what you checked: evidence is required, it is the point of the trail.");
  if (!body.by) return formError("Give your name: the trail keeps who resolved it.");
  localStorage.setItem(byKey, body.by);
  $("resolve-submit").disabled = true;
  try {
    await api("/api/resolve", body);
  } catch (error) {
    $("resolve-submit").disabled = false;
    if (error.code === "record_changed") {
      $("resolve-dialog").close();
      state.resolving = undefined;
      await openRecord(target.scope, target.key, error.message);
      await loadQueue();
      $("record-changed").focus();
      return;
    }
    if (error.status === 401) {
      $("resolve-dialog").close();
      return;
    }
    return formError(error.message);
  }
  $("resolve-dialog").close();
  state.resolving = undefined;
  notice(
    "Resolved " + target.key + " as " + asWords[target.as] + "." +
      (target.as === "completed" ? " Later repeats get exactly this result." : "") +
      (target.as === "not_executed" ? " The next call runs the tool." : ""),
  );
  await Promise.all([openRecord(target.scope, target.key), loadQueue()]);
  // The button that opened the dialog is gone with the old rendering: keep the keyboard in the record.
  $("record-title").focus();
}

// Counts.

async function loadCounts() {
  let counts;
  try {
    counts = await api("/api/counts");
  } catch (error) {
    if (error.status !== 401) notice("Could not read the counts: " + error.message, true);
    return;
  }
  const buckets = [
    ["under_1h", "under 1 hour"],
    ["1h_to_24h", "1 to 24 hours"],
    ["1d_to_7d", "1 to 7 days"],
    ["over_7d", "over 7 days"],
  ];
  const most = Math.max(1, ...buckets.map(([name]) => counts.needingReviewByAge[name]));
  $("age-table").tBodies[0].replaceChildren(
    ...buckets.map(([name, label]) =>
      h(
        "tr",
        { "data-bucket": name },
        h("th", { scope: "row", text: label }),
        h("td", { class: "meter" }, h("meter", { min: 0, max: most, value: counts.needingReviewByAge[name], "aria-label": label })),
        h("td", { class: "num", text: String(counts.needingReviewByAge[name]) }),
      ),
    ),
  );
  $("kind-figures").replaceChildren(
    h("dt", { text: "Unknown" }),
    h("dd", { id: "count-unknown", text: String(counts.unknown) }),
    h("dt", { text: "Stale" }),
    h("dd", { id: "count-stale", text: String(counts.stale) }),
  );
  $("takeover-figures").replaceChildren(
    h("dt", { text: "Attempts > 1" }),
    h("dd", { id: "count-takeovers", text: String(counts.takeovers) }),
  );
  const days = counts.resolutionsPerDay.slice().reverse();
  $("days-table").tBodies[0].replaceChildren(
    ...days.map((day) =>
      h(
        "tr",
        { "data-day": day.day },
        h("th", { scope: "row", text: day.day }),
        h("td", { class: "num", text: String(day.byAs.completed) }),
        h("td", { class: "num", text: String(day.byAs.failed) }),
        h("td", { class: "num", text: String(day.byAs.not_executed) }),
        h("td", { class: "num", text: String(day.interrupted) }),
        h("td", { class: "num", text: String(day.total) }),
      ),
    ),
  );
  $("days-empty").hidden = days.length !== 0;
  $("days-table").hidden = days.length === 0;
  document.body.dataset.counts = "loaded";
}

// Start.

async function refresh() {
  notice("");
  await loadQueue();
  if (state.open) await openRecord(state.open.scope, state.open.key);
  if (location.hash === "#counts") await loadCounts();
}

async function start() {
  const params = new URLSearchParams(location.search);
  const token = params.get("token");
  if (token !== null) {
    // The token works once: take it out of the address bar and the history before anything else.
    history.replaceState(null, "", location.pathname + location.hash);
    try {
      await api("/api/session", { token });
    } catch (error) {
      lock(error.message);
      return;
    }
  }
  let info;
  try {
    info = await api("/api/info");
  } catch (error) {
    if (error.status !== 401) lock(error.message);
    return;
  }
  $("store").textContent = info.store;
  document.body.dataset.state = "ready";
  $("filters").addEventListener("submit", (event) => {
    event.preventDefault();
    const form = new FormData($("filters"));
    state.filters = Object.fromEntries([...form.entries()].map(([k, v]) => [k, String(v).trim()]));
    void loadQueue();
  });
  $("filters").addEventListener("reset", () => {
    state.filters = {};
    queueMicrotask(() => void loadQueue());
  });
  $("refresh").addEventListener("click", () => void refresh());
  $("resolve-form").addEventListener("submit", (event) => void submitResolve(event));
  $("resolve-cancel").addEventListener("click", () => $("resolve-dialog").close());
  $("resolve-result").addEventListener("input", () => {
    $("result-error").hidden = true;
  });
  window.addEventListener("hashchange", showView);
  showView();
  await loadQueue();
}

void start();
`;
