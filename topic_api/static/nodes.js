/* The nodes table: one row per node (GET api/nodes), kept by node name so a focused link
 * survives the refetch every heartbeat brings.
 *
 * Called by app.js with each api/nodes document. Judges a level per node (ok / warn / bad)
 * for colour AND text; never decides anything the API did not say.
 */
import { badge, cells, fill, fmt, h, percent, sparkline, syncRows } from "./dom.js";

const LABELS = ["Node", "State", "Heartbeat", "CPU", "Memory", "Disk", "Sync", "Items", "Commit"];

// the state as a person reads it: offline split into disconnected (silent without a goodbye,
// within its environments' disconnect grace: presumably still running) and offline
export const presenceOf = (n) => n.presence || n.state;

export function nodeLevel(n) {
  if (presenceOf(n) === "offline" || (n.errors || []).length) return "bad";
  if (n.state !== "online" || n.converged === false || n.drift > 0) return "warn";
  return "ok";
}

export const stateLevel = (state) => (state === "online" ? "ok" : state === "offline" ? "bad" : "warn");

// the state badge: its level, its word, and a class a stylesheet (and a test) can tell apart
export function stateBadge(n) {
  const p = presenceOf(n);
  const b = badge(stateLevel(p), p);
  b.classList.add(`presence-${p}`);
  if (p === "disconnected") b.title = "silent without a goodbye: presumably still running its containers";
  return b;
}

export function heartbeat(age) {
  // data-age + data-at: app.js's ticker adds the time passed since this fetch
  return h("span", { class: "hb", "data-age": Number.isFinite(age) ? age : null, "data-at": performance.now() },
    fmt.age(age));
}

export function hostCells(n) {
  const host = n.host || {};
  const hist = n.history || [];
  // x: when the API received each heartbeat (its clock), not the node's own ts (maybe off)
  const series = (f) => hist.map((p) => [p.at ?? p.ts, f(p)]);
  const span = hist.length > 1 ? (hist[hist.length - 1].at ?? 0) - (hist[0].at ?? 0) : 0;
  const mins = hist.length > 1 ? Math.max(1, Math.round(span / 60)) : 0;
  const over = mins ? ` over the last ${mins} min` : "";
  const mem = percent(host.mem_used, host.mem_total);
  const disk = percent(host.disk_used, host.disk_total);
  return {
    cpu: [h("span", { class: "num", text: fmt.pct(host.cpu_percent) }),
      Number.isFinite(host.load1) ? h("span", { class: "muted", text: ` load ${host.load1.toFixed(2)}` }) : null,
      sparkline(series((p) => p.cpu_percent), `CPU${over}`)],
    memory: [h("span", { class: "num", text: fmt.pct(mem) }),
      h("span", { class: "muted", text: ` ${fmt.bytes(host.mem_used)} of ${fmt.bytes(host.mem_total)}` }),
      sparkline(series((p) => percent(p.mem_used, p.mem_total)), `Memory used${over}`)],
    disk: [h("span", { class: "num", text: fmt.pct(disk) }),
      h("span", { class: "muted", text: ` ${fmt.bytes(host.disk_used)} of ${fmt.bytes(host.disk_total)}` }),
      sparkline(series((p) => percent(p.disk_used, p.disk_total)), `Disk used${over}`)],
  };
}

export function syncText(n) {
  const gen = n.generation || {};
  const gens = gen.desired == null ? "" : ` (generation ${gen.applied ?? "–"} of ${gen.desired})`;
  if (n.state === "offline") {
    // what it said before it went quiet: no longer a fact about the node
    const last = n.converged === true ? "converged" : n.converged === false ? "converging" : "nothing";
    const still = presenceOf(n) === "disconnected" ? "presumably still running; " : "";
    return badge("none", `${still}last reported ${last}${gens}`);
  }
  if (n.drift > 0) return badge("warn", `${n.drift} item${n.drift === 1 ? "" : "s"} drifting${gens}`);
  if (n.converged === true) return badge("ok", `converged${gens}`);
  if (n.converged === false) return badge("warn", `converging${gens}`);
  return badge("none", "no desired state known");
}

export function commitText(commit) {
  const c = commit || {};
  if (c.desired && c.applied && c.desired !== c.applied) {
    return [h("code", { class: "sha", text: fmt.sha(c.applied) }), " ", badge("warn", `desired ${fmt.sha(c.desired)}`)];
  }
  return h("code", { class: "sha", title: c.applied || c.desired || "", text: fmt.sha(c.applied || c.desired) });
}

function itemsText(counts) {
  const c = counts || {};
  const part = (n, one, many) => `${n ?? 0} ${n === 1 ? one : many}`;
  return [part(c.containers, "container", "containers"), part(c.networks, "network", "networks"),
    part(c.processes, "process", "processes")].join(", ");
}

function exitsNote(n) {
  const k = n.recent_exits || 0;
  if (!k) return null;
  return h("span", { class: "recent-exits", title: "containers that died recently and run again: open the node" },
    badge("warn", `${k} recent exit${k === 1 ? "" : "s"}`));
}

function createRow(n) {
  const tr = cells(h("tr"), LABELS, true);
  // the one focusable thing in the row; kept across updates so Tab position survives
  tr._link = h("a", { class: "node-link", href: `#node/${encodeURIComponent(n.node)}` });
  tr.cells[0].append(tr._link);
  return tr;
}

function updateRow(tr, n) {
  const level = nodeLevel(n);
  const host = hostCells(n);
  tr.className = `level-${level}`;
  tr.dataset.node = n.node;
  tr.dataset.state = n.state;
  tr.dataset.presence = presenceOf(n);
  tr._link.textContent = n.node;
  tr._link.setAttribute("aria-label", `${n.node}: open its containers, networks and processes`);
  const errs = n.errors || [];
  fill(tr.cells[1], stateBadge(n),
    errs.length ? h("ul", { class: "errors" }, errs.slice(0, 3).map((e) => h("li", { text: e })),
      errs.length > 3 ? h("li", { text: `… ${errs.length - 3} more in the node detail` }) : null) : null);
  fill(tr.cells[2], heartbeat(n.heartbeat_age_s));
  fill(tr.cells[3], host.cpu);
  fill(tr.cells[4], host.memory);
  fill(tr.cells[5], host.disk);
  fill(tr.cells[6], syncText(n));
  fill(tr.cells[7], itemsText(n.counts), exitsNote(n));
  fill(tr.cells[8], commitText(n.commit));
}

export function renderNodes(doc) {
  const list = (doc.nodes || []).slice().sort((a, b) => a.node.localeCompare(b.node));
  syncRows(document.getElementById("nodes-body"), list, (n) => n.node, createRow, updateRow,
    "No node has reported yet (no desired manifest, no heartbeat).", LABELS.length);
  const online = list.filter((n) => n.state === "online").length;
  const offline = list.filter((n) => n.state === "offline").length;
  const disconnected = list.filter((n) => presenceOf(n) === "disconnected").length;
  const drifting = list.filter((n) => n.drift > 0 || n.converged === false).length;
  const failing = list.filter((n) => (n.errors || []).length).length;
  const parts = [`${list.length} node${list.length === 1 ? "" : "s"}: ${online} online`];
  if (disconnected) parts.push(`${disconnected} disconnected`);
  if (offline - disconnected) parts.push(`${offline - disconnected} offline`);
  if (list.length - online - offline) parts.push(`${list.length - online - offline} unknown`);
  if (drifting) parts.push(`${drifting} not converged`);
  if (failing) parts.push(`${failing} with errors`);
  const exits = list.reduce((sum, n) => sum + (n.recent_exits || 0), 0);
  if (exits) parts.push(`${exits} recent container exit${exits === 1 ? "" : "s"}`);
  const worst = offline - disconnected || failing ? "bad" : drifting || list.length !== online ? "warn" : "ok";
  fill(document.getElementById("nodes-summary"), badge(worst, parts.join(", ")));
  document.title = `${worst === "ok" ? "" : worst === "bad" ? "✖ " : "▲ "}Phrame: ${online}/${list.length} online`;
  return list;
}
