/* Phrame dashboard, the small parts: building DOM safely, formatting, fetching, keyed rows.
 *
 * Imported by views.js and app.js. Every text from the API goes in through text nodes (h()),
 * never innerHTML: topic names and payloads are user-controlled.
 */

export const API = "api/";
export const TOKEN_KEY = "phrame.api-token"; // sessionStorage: this tab only, gone when it closes
const SVG_NS = "http://www.w3.org/2000/svg";
export const ICON = { ok: "✔", warn: "▲", bad: "✖", none: "•" };
export const LEVEL_WORD = { ok: "OK", warn: "warning", bad: "error", none: "" };

// ---------------------------------------------------------------- DOM helpers
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = String(v);
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c)); // a string becomes a text node, never markup
  }
  return el;
}

export function badge(level, text) {
  return h("span", { class: `badge badge-${level}` },
    h("span", { "aria-hidden": "true", text: ICON[level] + " " }),
    h("span", { class: "visually-hidden", text: LEVEL_WORD[level] ? LEVEL_WORD[level] + ": " : "" }),
    text);
}

export function sparkline(points, label) {
  // points: [[ts, value 0..100]], oldest first; x follows time so a gap in heartbeats shows
  const w = 96, ht = 22;
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.setAttribute("viewBox", `0 0 ${w} ${ht}`);
  svg.setAttribute("class", "spark");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", label);
  const title = document.createElementNS(SVG_NS, "title");
  title.textContent = label;
  svg.append(title);
  const pts = points.filter(([t, v]) => Number.isFinite(t) && Number.isFinite(v));
  if (pts.length < 2) return svg;
  const t0 = pts[0][0], t1 = pts[pts.length - 1][0], span = Math.max(t1 - t0, 1e-6);
  const xy = pts.map(([t, v]) => {
    const x = 1 + ((t - t0) / span) * (w - 2);
    const y = ht - 1 - (Math.min(Math.max(v, 0), 100) / 100) * (ht - 2);
    return `${x.toFixed(1)},${y.toFixed(1)}`;
  });
  const area = document.createElementNS(SVG_NS, "polygon");
  area.setAttribute("points", `1,${ht - 1} ${xy.join(" ")} ${w - 1},${ht - 1}`);
  area.setAttribute("class", "spark-area");
  const line = document.createElementNS(SVG_NS, "polyline");
  line.setAttribute("points", xy.join(" "));
  line.setAttribute("class", "spark-line");
  svg.append(area, line);
  return svg;
}

// ---------------------------------------------------------------- formatting
export const fmt = {
  pct: (v) => (Number.isFinite(v) ? `${Math.round(v)} %` : "–"),
  bytes(n) {
    if (!Number.isFinite(n)) return "–";
    const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
    return `${n >= 10 || i === 0 ? Math.round(n) : n.toFixed(1)} ${units[i]}`;
  },
  age(s) {
    if (!Number.isFinite(s)) return "never";
    s = Math.max(0, s);
    if (s < 60) return `${Math.floor(s)} s ago`;
    if (s < 3600) return `${Math.floor(s / 60)} min ago`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
    return `${Math.floor(s / 86400)} d ago`;
  },
  duration(s) {
    if (!Number.isFinite(s)) return "–";
    if (s < 60) return `${s.toFixed(1)} s`;
    return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  },
  sha: (s) => (s ? String(s).slice(0, 12) : "–"),
  when(value) {
    const ts = toTs(value);
    if (!Number.isFinite(ts)) return null;
    const d = new Date(ts * 1000);
    // data-ts: app.js's ticker keeps the "… ago" text current
    return h("time", { datetime: d.toISOString(), title: d.toLocaleString(), "data-ts": ts },
      fmt.age(Date.now() / 1000 - ts));
  },
  value(v) {
    const s = typeof v === "string" ? v : JSON.stringify(v);
    return s === undefined ? "–" : s.length > 120 ? s.slice(0, 117) + "…" : s;
  },
};
/** Unix seconds from a number or an ISO 8601 string (the mirrors write the latter); NaN if neither. */
export function toTs(v) {
  if (typeof v === "number") return v;
  if (typeof v === "string" && v) return Date.parse(v) / 1000;
  return NaN;
}
export const percent = (used, total) => (Number.isFinite(used) && total > 0 ? (100 * used) / total : NaN);

// ---------------------------------------------------------------- fetching
export class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

export async function getJSON(path) {
  const headers = { Accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`; // needed when the API guards reads too
  const r = await fetch(API + path, { headers, cache: "no-store" });
  let body = null;
  try { body = await r.json(); } catch { body = null; }
  if (!r.ok) throw new ApiError(r.status, (body && body.error) || `${r.status} ${r.statusText}`);
  return body;
}

const problems = new Map(); // source -> message, shown in #problems (role=alert)
export function setProblem(source, message) {
  if (message) problems.set(source, message); else problems.delete(source);
  const box = document.getElementById("problems");
  box.replaceChildren(...[...problems.values()].map((m) => h("p", { text: m })));
  box.hidden = problems.size === 0;
}

/** One refetch in flight per view; a request during it runs once more afterwards, and two
 * runs start at least `gapMs` apart (every heartbeat of a big fleet is a change: the page
 * refetches at most a few times a second, not once per event). */
export class Refresher {
  constructor(name, run, gapMs = 0) {
    this.name = name; this.run = run; this.gapMs = gapMs;
    this.busy = false; this.again = false; this.timer = null; this.startedAt = -Infinity;
  }
  request() {
    if (this.busy) { this.again = true; return; }
    if (this.timer !== null) return; // already due
    const wait = this.startedAt + this.gapMs - performance.now();
    if (wait > 0) {
      this.timer = setTimeout(() => { this.timer = null; this.request(); }, wait);
      return;
    }
    this.busy = true;
    this.startedAt = performance.now();
    this.run()
      .then(() => setProblem(this.name, null))
      .catch((e) => setProblem(this.name, `Could not read ${this.name}: ${e.message}`))
      .finally(() => {
        this.busy = false;
        if (this.again) { this.again = false; this.request(); }
      });
  }
}

// ---------------------------------------------------------------- keyed rows
/** Update tbody to one row per item, keeping rows (and the focus inside them) by key. */
export function syncRows(tbody, items, key, create, update, emptyText, columns) {
  const old = new Map();
  for (const tr of [...tbody.rows]) {
    if (tr.dataset.key === undefined) tr.remove(); else old.set(tr.dataset.key, tr);
  }
  let prev = null;
  for (const item of items) {
    const k = key(item);
    let tr = old.get(k);
    if (tr) old.delete(k); else { tr = create(item); tr.dataset.key = k; }
    const sig = JSON.stringify(item);
    if (tr._sig !== sig) { update(tr, item); tr._sig = sig; }
    const want = prev ? prev.nextSibling : tbody.firstChild;
    if (want !== tr) tbody.insertBefore(tr, want);
    prev = tr;
  }
  for (const tr of old.values()) tr.remove();
  if (!items.length) tbody.append(h("tr", { class: "placeholder" }, h("td", { colspan: columns, text: emptyText })));
}

export function cells(tr, labels, firstIsHeader) {
  labels.forEach((label, i) => tr.append(h(i === 0 && firstIsHeader ? "th" : "td",
    { "data-label": label, scope: i === 0 && firstIsHeader ? "row" : null })));
  return tr;
}
export const fill = (cell, ...children) => cell.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined));
