/* The node detail (GET api/nodes/<node>): its host, then its containers, networks and
 * processes, desired against actual, one row per item kept by kind/id so a focused Restart
 * or Logs button survives the refetch.
 *
 * Called by app.js inside the node dialog. The item's level (ok / warn / bad) is shown as
 * colour, icon and words; a container that should run and does not is an error whatever
 * the API's status word says. A container that died and runs again stays green (it runs as
 * desired) with an amber note of its recent exit beside the status.
 */
import { badge, cells, fill, fmt, h, syncRows } from "./dom.js";
import { commitText, heartbeat, hostCells, stateBadge, syncText } from "./nodes.js";

const KINDS = [
  ["containers", "Containers"],
  ["networks", "Networks"],
  ["processes", "Processes"],
];
const LABELS = ["Item", "Service", "Status", "Actual", "Desired", "Commit", "Differences"];
const STATUS_WORDS = {
  "in-sync": "in sync", drift: "drift", missing: "missing", extra: "extra (not desired)",
  failed: "failed", pending: "pending",
};

export function itemLevel(it) {
  const a = it.actual || {};
  const health = it.health || a.health;
  if (it.status === "failed" || it.status === "missing" || a.error || health === "unhealthy") return "bad";
  if (it.kind !== "networks" && it.desired && it.actual && a.state !== "running") return "bad";
  if (it.status !== "in-sync" || health === "starting") return "warn";
  return "ok";
}

function statusText(it, level) {
  const a = it.actual || {};
  const words = [STATUS_WORDS[it.status] || it.status || "unknown"];
  if (it.kind !== "networks" && it.desired && it.actual && a.state !== "running") {
    const code = a.exit_code == null ? "" : `, exit code ${a.exit_code}`;
    words.unshift(`not running (${a.state || "unknown"}${code})`);
  }
  const health = it.health || a.health;
  if (health) words.push(health);
  return badge(level, words.join(" · "));
}

export function recentExitNote(it) {
  const r = it.recent_exit;
  if (!r) return null;
  // data-ts: app.js's ticker keeps "… ago" current, counted from the API's age (its clock)
  const at = Date.now() / 1000 - (Number.isFinite(r.age_s) ? r.age_s : 0);
  const code = r.exit_code == null ? "exit code unknown" : `exit code ${r.exit_code}`;
  const who = r.restarted_by === "agent" ? "the node agent started it again" : "it runs again";
  return h("span", { class: "recent-exit", "data-finished-at": r.finished_at,
    title: `exited at ${r.finished_at}; ${who}` },
  badge("warn", ["restarted ", h("time", { "data-ts": at, datetime: r.finished_at, text: fmt.age(r.age_s) }),
    ` (${code})`]));
}

// a failing container's last lines, as its report carries them (open stays open across refetches)
function logLines(a, open) {
  const lines = (a.logs && Array.isArray(a.logs.lines)) ? a.logs.lines : [];
  if (!lines.length) return null;
  const more = a.logs.truncated ? " (older lines left out)" : "";
  return h("details", { class: "logs", open: Boolean(open) },
    h("summary", { text: `Last ${lines.length} line${lines.length === 1 ? "" : "s"} of its output${more}` }),
    h("pre", { text: lines.join("\n") }));
}

function actualText(it, logsOpen) {
  const a = it.actual;
  if (!a) return h("span", { class: "muted", text: "not on the node" });
  const bits = [a.state];
  if (a.image && (!it.desired || a.image !== it.desired.image)) bits.push(a.image);
  if (a.pid) bits.push(`pid ${a.pid}`);
  if (a.restart_count) bits.push(`restarted ${a.restart_count}×`);
  const since = a.state === "running" ? fmt.when(a.started_at) : null;
  return [bits.filter(Boolean).join(" · "), since ? [", started ", since] : null,
    a.error ? h("p", { class: "error-text", text: a.error }) : null, logLines(a, logsOpen)];
}

function desiredText(it) {
  const d = it.desired;
  if (!d) return h("span", { class: "muted", text: "not desired" });
  if (it.kind === "containers") return h("code", { text: d.image || "–" });
  if (it.kind === "networks") return `${d.driver || "bridge"} network`;
  return h("code", { text: fmt.value(Array.isArray(d.command) ? d.command.join(" ") : d.command) });
}

function differences(it) {
  // the error itself is already in the Actual column
  const diffs = (it.differences || []).filter((d) => d.field !== "error");
  if (!diffs.length) return h("span", { class: "muted", text: "none" });
  return h("ul", { class: "diffs" }, diffs.map((d) => h("li", {},
    h("code", { text: d.field }), ": ", fmt.value(d.desired), " → ", fmt.value(d.actual))));
}

function itemTable(kind, title, items, node, actions) {
  const labels = kind === "containers" ? [...LABELS, "Action"] : LABELS;
  const create = (it) => {
    const tr = cells(h("tr", { "data-kind": it.kind, "data-id": it.id }), labels, true);
    if (kind === "containers") {
      tr._restart = h("button", { type: "button", class: "restart", text: "Restart" });
      tr._restart.addEventListener("click", () => actions.restart(node, it.id, tr._restart));
      tr._logs = h("button", { type: "button", class: "logs", text: "Logs" });
      tr._logs.addEventListener("click", () => actions.logs(node, it.id, tr._logs));
      tr.cells[labels.length - 1].append(tr._restart, tr._logs);
    }
    return tr;
  };
  const update = (tr, it) => {
    const level = itemLevel(it);
    tr.className = `level-${level}`;
    tr.dataset.status = it.status;
    tr.dataset.level = level;
    fill(tr.cells[0], h("code", { text: it.id }));
    fill(tr.cells[1], it.service ? `${it.environment || "–"} / ${it.service}` : "–");
    tr.cells[2].className = `status status-${level}`;
    fill(tr.cells[2], statusText(it, level), recentExitNote(it));
    const logsOpen = tr.cells[3].querySelector("details.logs")?.open;
    fill(tr.cells[3], actualText(it, logsOpen));
    fill(tr.cells[4], desiredText(it));
    fill(tr.cells[5], h("code", { class: "sha", title: it.commit || "", text: fmt.sha(it.commit) }));
    fill(tr.cells[6], differences(it));
    if (tr._restart) tr._restart.setAttribute("aria-label", `Restart container ${it.id}`);
    if (tr._logs) tr._logs.setAttribute("aria-label", `Show the current log tail of container ${it.id}`);
  };
  return { labels, create, update, title, kind, items };
}

function summary(doc) {
  const host = hostCells(doc);
  const gen = doc.generation || {};
  const row = (term, ...desc) => [h("dt", { text: term }), h("dd", {}, ...desc)];
  const errs = doc.errors || [];
  return h("div", { class: "detail-summary" },
    h("dl", { class: "facts" },
      row("State", stateBadge(doc)),
      row("Heartbeat", heartbeat(doc.heartbeat_age_s)),
      row("Sync", syncText(doc)),
      row("Generation", `applied ${gen.applied ?? "–"}, desired ${gen.desired ?? "–"}`),
      row("Commit", commitText(doc.commit)),
      row("CPU", host.cpu), row("Memory", host.memory), row("Disk", host.disk)),
    errs.length ? h("div", { class: "errors-box" }, h("h3", { text: "Errors" }),
      h("ul", { class: "errors" }, errs.map((e) => h("li", { text: e })))) : null);
}

export function renderDetail(root, doc, actions) {
  document.getElementById("node-dialog-h").textContent = `Node ${doc.node}`;
  const items = doc.items || [];
  root.querySelectorAll(":scope > :not(section):not(.detail-summary)").forEach((el) => el.remove()); // "Loading…"
  let box = root.querySelector(".detail-summary");
  const fresh = summary(doc);
  if (box) box.replaceWith(fresh); else root.prepend(fresh);
  for (const [kind, title] of KINDS) {
    const mine = items.filter((it) => it.kind === kind).sort((a, b) => a.id.localeCompare(b.id));
    const t = itemTable(kind, title, mine, doc.node, actions);
    let section = root.querySelector(`section[data-kind="${kind}"]`);
    if (!section || section.dataset.node !== doc.node) {
      if (section) section.remove();
      section = h("section", { "data-kind": kind, "data-node": doc.node, "aria-labelledby": `detail-${kind}-h` },
        h("h3", { id: `detail-${kind}-h` }),
        h("div", { class: "table-box" }, h("table", { class: "stack items" },
          h("caption", { class: "visually-hidden", text: `${title} of node ${doc.node}: desired against actual` }),
          h("thead", {}, h("tr", {}, t.labels.map((l) => h("th", { scope: "col", text: l })))),
          h("tbody"))));
      root.append(section);
    }
    const bad = mine.filter((it) => itemLevel(it) !== "ok").length;
    section.querySelector("h3").textContent = `${title} (${mine.length}${bad ? `, ${bad} not OK` : ""})`;
    syncRows(section.querySelector("tbody"), mine, (it) => `${it.kind}/${it.id}`, t.create, t.update,
      `No ${kind} desired or found on this node.`, t.labels.length);
  }
}

export function renderGone(root, node, message) {
  document.getElementById("node-dialog-h").textContent = `Node ${node}`;
  root.replaceChildren(h("p", { class: "problems", text: message }));
}
