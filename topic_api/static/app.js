/* Phrame dashboard: wiring. Fetches the views, follows api/events (server-sent events) and
 * refetches only what a change touched, opens a node's detail from the URL (#node/<name>),
 * and sends a container restart, or asks for a container's log tail, with the token the
 * person typed (kept in sessionStorage); Promote and Roll back are deploy_actions.js's.
 *
 * Loaded by index.html as a module. Holds no broker connection and never polls the broker:
 * the topic API's mirrors do that once for every browser.
 */
import { API, ApiError, Refresher, TOKEN_KEY, fmt, getJSON, h } from "./dom.js";
import { wireDeployActions } from "./deploy_actions.js";
import { renderDetail, renderGone } from "./detail.js";
import { renderEnvironments } from "./environments.js";
import { renderNodes } from "./nodes.js";

const STALE_MS = 5000; // refetch nodes after this long without one: a node timing out publishes nothing
const BACKOFF_MAX_S = 30;
const NODE_TOPIC = /(?:^|\/)(?:desired|actual)\/nodes\/([^/]+)(?:\/|$)/;
const ENV_TOPIC = /(?:^|\/)desired\/environments\/([^/]+)(?:\/|$)/;

const $ = (id) => document.getElementById(id);
const view = { openNode: null, lastNodesAt: 0, generated: { desired: null, actual: null }, readsNeedToken: false };

/** A read answered 401: this API guards reads too (PHRAME_API_READ_TOKEN_REQUIRED); ask once.
 * A 401 to a read that left before the person gave a token (or another one) says nothing
 * of the token now held: no asking; the refresh the token started reads again. */
let askingForReads = null;
function guarded(run) {
  return async () => {
    const sentWith = sessionStorage.getItem(TOKEN_KEY);
    try {
      await run();
    } catch (e) {
      const stale = sessionStorage.getItem(TOKEN_KEY) !== sentWith;
      if (e instanceof ApiError && e.status === 401 && !askingForReads && !stale) {
        view.readsNeedToken = true;
        askingForReads = askToken("This API needs the token for reading too.").then((token) => {
          askingForReads = null;
          if (!token) return;
          sessionStorage.setItem(TOKEN_KEY, token);
          reconnect();
          refreshAll();
        });
      }
      throw e;
    }
  };
}

// ---------------------------------------------------------------- the three views
const nodes = new Refresher("api/nodes", guarded(async () => {
  const doc = await getJSON("nodes");
  view.lastNodesAt = performance.now();
  view.generated = { ...view.generated, ...(doc.generated_at || {}) };
  renderNodes(doc);
  renderSnapshots();
}), 500);
const environments = new Refresher("api/environments", guarded(async () => {
  renderEnvironments(await getJSON("environments"));
}), 500);
const detail = new Refresher("the node detail", guarded(async () => {
  const name = view.openNode;
  if (!name) return;
  let doc;
  try {
    doc = await getJSON(`nodes/${encodeURIComponent(name)}`);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404 && name === view.openNode) {
      renderGone($("node-detail"), name, `No node named ${name} is known: ${e.message}`);
      return;
    }
    throw e;
  }
  if (name === view.openNode) renderDetail($("node-detail"), doc, { restart, logs });
}), 250);

function refreshAll() {
  nodes.request();
  environments.request();
  detail.request();
}

function renderSnapshots() {
  const parts = [];
  for (const plane of ["desired", "actual"]) {
    const when = fmt.when(view.generated[plane]);
    parts.push(h("span", {}, `${plane} plane: `, when || h("strong", { text: "no snapshot yet" })));
  }
  $("snapshots").replaceChildren(...parts.flatMap((p, i) => (i ? [" · ", p] : [p])));
}

// ---------------------------------------------------------------- live updates
let source = null;
let backoff = 1;
let attempt = 0;
let retryTimer = null;
let connecting = 0; // which connect() is the current one: a reconnect while one awaits its ticket wins

function setLive(state, text) {
  $("live").className = `live live-${state}`;
  $("live-text").textContent = text;
}

/** When reads need the token: a stream ticket for one EventSource (which cannot send headers).
 * The token itself never goes in a URL: access logs and proxies keep URLs. */
async function streamTicket() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (!view.readsNeedToken || !token) return null;
  const r = await fetch(`${API}stream-tickets`, {
    method: "POST", headers: { Authorization: `Bearer ${token}`, Accept: "application/json" }, cache: "no-store",
  });
  let body = null;
  try { body = await r.json(); } catch { body = null; }
  if (!r.ok) throw new ApiError(r.status, (body && body.error) || `${r.status} ${r.statusText}`);
  return body.ticket;
}

async function connect() {
  setLive("connecting", attempt ? `Reconnecting (attempt ${attempt + 1})…` : "Connecting…");
  const mine = ++connecting;
  let ticket = null;
  try {
    ticket = await streamTicket();
  } catch {
    if (mine === connecting) retry("no stream ticket"); // a refused token: the reads' 401 asks again
    return;
  }
  if (mine !== connecting) return;
  const es = new EventSource(`${API}events${ticket ? `?ticket=${encodeURIComponent(ticket)}` : ""}`);
  source = es;
  es.addEventListener("hello", (ev) => {
    backoff = 1;
    attempt = 0;
    setLive("live", "Live");
    try { Object.assign(view.generated, JSON.parse(ev.data).generated_at || {}); } catch { /* keep */ }
    refreshAll(); // whatever changed while we were away
  });
  es.addEventListener("change", (ev) => {
    let doc;
    try { doc = JSON.parse(ev.data); } catch { refreshAll(); return; }
    onChange(doc);
  });
  es.onerror = () => {
    // EventSource retries by itself at a fixed pace (and a ticket is good once): we close it
    // and back off instead, with a new ticket each time
    es.close();
    if (source !== es) return; // replaced meanwhile (reconnect)
    source = null;
    retry("the event stream dropped");
  };
}

function retry(why) {
  attempt += 1;
  const wait = backoff;
  backoff = Math.min(backoff * 2, BACKOFF_MAX_S);
  setLive("reconnecting", `Reconnecting in ${wait} s (${why})…`);
  retryTimer = setTimeout(connect, wait * 1000 * (0.8 + Math.random() * 0.4));
}

function reconnect() {
  clearTimeout(retryTimer);
  if (source) source.close();
  backoff = 1;
  attempt = 0;
  connect();
}

function onChange(doc) {
  if (doc.plane && doc.generated_at) view.generated[doc.plane] = doc.generated_at;
  renderSnapshots();
  if (doc.truncated) { refreshAll(); return; }
  let nodesTouched = false, openTouched = false, envsTouched = false;
  for (const topic of [...(doc.changed || []), ...(doc.removed || [])]) {
    const n = NODE_TOPIC.exec(topic);
    if (n) {
      nodesTouched = true;
      if (n[1] === view.openNode) openTouched = true;
    } else if (ENV_TOPIC.test(topic)) {
      envsTouched = true;
    }
  }
  if (nodesTouched) nodes.request();
  if (openTouched) detail.request();
  if (envsTouched) environments.request();
}

// ---------------------------------------------------------------- ticking "… ago"
function tick() {
  const now = performance.now();
  for (const el of document.querySelectorAll(".hb")) {
    const age = parseFloat(el.dataset.age);
    el.textContent = fmt.age(Number.isFinite(age) ? age + (now - parseFloat(el.dataset.at)) / 1000 : NaN);
  }
  for (const el of document.querySelectorAll("time[data-ts]")) { // data-ts: unix seconds
    el.textContent = fmt.age(Date.now() / 1000 - parseFloat(el.dataset.ts));
  }
  if (now - Math.max(view.lastNodesAt, nodes.startedAt) > STALE_MS) nodes.request(); // tried, not only got
}

// ---------------------------------------------------------------- node dialog
function route() {
  const m = /^#node\/(.+)$/.exec(location.hash);
  if (m) openNode(decodeURIComponent(m[1]));
  else if ($("node-dialog").open) $("node-dialog").close();
}

function openNode(name) {
  const dialog = $("node-dialog");
  if (view.openNode !== name) {
    $("node-detail").replaceChildren(h("p", { text: `Loading ${name}…` }));
    $("detail-message").textContent = "";
    $("log-tail").hidden = true;
  }
  view.openNode = name;
  $("node-dialog-h").textContent = `Node ${name}`;
  if (!dialog.open) dialog.showModal();
  detail.request();
}

function onDialogClose() {
  const name = view.openNode;
  view.openNode = null;
  if (location.hash.startsWith("#node/")) history.replaceState(null, "", location.pathname + location.search);
  const link = [...document.querySelectorAll("#nodes-body a.node-link")].find((a) => a.textContent === name);
  if (link) link.focus(); // back where the person was
}

// ---------------------------------------------------------------- restart (a write: token)
function say(text, level) {
  const el = $("detail-message");
  el.className = `message${level ? ` message-${level}` : ""}`;
  el.textContent = text;
}

function askToken(why) {
  const dialog = $("token-dialog");
  const input = $("token-input");
  $("token-why").textContent = why || "";
  input.value = "";
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      const token = input.value.trim();
      resolve(dialog.returnValue === "ok" && token ? token : null);
    }, { once: true });
    dialog.showModal();
    input.focus();
  });
}

/** POST a container command with the token (asked for when none is held; a refused one is
 * forgotten): the parsed answer, or null when it did not succeed (said in the message area). */
async function containerCommand(node, id, button, { verb, what, why, asking }) {
  if (button.getAttribute("aria-disabled") === "true") return null;
  let token = sessionStorage.getItem(TOKEN_KEY);
  if (!token) {
    token = await askToken(why);
    if (!token) { say(`${what} of ${id} cancelled: no token given.`); return null; }
    sessionStorage.setItem(TOKEN_KEY, token);
  }
  // aria-disabled, not disabled: a disabled button drops the keyboard focus
  button.setAttribute("aria-disabled", "true");
  say(asking);
  try {
    const url = `${API}nodes/${encodeURIComponent(node)}/containers/${encodeURIComponent(id)}/${verb}`;
    const r = await fetch(url, { method: "POST", headers: { Authorization: `Bearer ${token}`, Accept: "application/json" } });
    let body = null;
    try { body = await r.json(); } catch { body = null; }
    const why = (body && body.error) || `${r.status} ${r.statusText}`;
    if (r.status === 401 || r.status === 403) {
      sessionStorage.removeItem(TOKEN_KEY);
      say(`The API refused the token (${why}); the next ${what.toLowerCase()} asks for it again.`, "bad");
    } else if (!r.ok) {
      say(`${what} of ${id} failed: ${why}`, "bad");
    } else {
      return body || {};
    }
  } catch (e) {
    say(`${what} of ${id} failed: ${e.message}`, "bad");
  } finally {
    button.removeAttribute("aria-disabled");
  }
  return null;
}

async function restart(node, id, button) {
  const body = await containerCommand(node, id, button, {
    verb: "restart", what: "Restart", why: "A restart is a write.", asking: `Asking ${node} to restart ${id}…`,
  });
  if (body) say(`Restart of ${id} sent to ${node}${body.topic ? ` (${body.topic})` : ""}.`, "ok");
}

async function logs(node, id, button) {
  const body = await containerCommand(node, id, button, {
    verb: "logs", what: "Log tail", why: "A container's log may hold what no view shows.",
    asking: `Asking ${node} for the log tail of ${id}…`,
  });
  if (!body) return;
  const lines = Array.isArray(body.lines) ? body.lines : [];
  const at = Number(body.at);
  const when = Number.isFinite(at) ? new Date(at * 1000).toLocaleString() : "an unknown time";
  $("log-tail-h").textContent = `Logs of ${id} on ${node}`;
  $("log-tail-when").textContent = `The last ${lines.length} line${lines.length === 1 ? "" : "s"}, read at ${when}`
    + (body.truncated ? " (truncated: older lines left out)." : ".");
  $("log-tail-text").textContent = lines.length ? lines.join("\n") : "(no output)";
  $("log-tail").hidden = false;
  say(`Log tail of ${id} read from ${node}.`, "ok");
}

// ---------------------------------------------------------------- start
$("node-dialog").addEventListener("close", onDialogClose);
$("node-dialog").querySelector("[data-close]").addEventListener("click", () => $("node-dialog").close());
$("token-dialog").querySelector("[data-cancel]").addEventListener("click", () => $("token-dialog").close("cancel"));
wireDeployActions($("env-list"), askToken);
window.addEventListener("hashchange", route);
setInterval(tick, 1000);
refreshAll();
connect();
route();
