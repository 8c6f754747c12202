/* The environments (GET api/environments): per environment its last sync (commit, valid or
 * the errors with file:line), placement's state, its staged rollouts and the recent deployments.
 *
 * Called by app.js with each api/environments document. An article is rebuilt only when its
 * data changed. Its two controls (Promote on a rollout waiting for promotion, Roll back on an
 * earlier converged deployment) carry data-action and are handled by deploy_actions.js through
 * one listener on the list, so a rebuilt article needs no wiring.
 */
import { badge, cells, fill, fmt, h } from "./dom.js";

const DEPLOY_LABELS = ["Commit", "Message", "Author", "State", "Published", "Took", "Nodes", "Action"];
const DEPLOY_LEVEL = { converged: "ok", failed: "bad", degraded: "bad", pending: "warn", superseded: "none" };

function errorList(errors) {
  return h("ul", { class: "errors" }, errors.map((e) => {
    const where = [e.file, e.line, e.column].filter((x) => x !== undefined && x !== null && x !== "").join(":");
    return h("li", {}, where ? h("code", { text: where }) : null, where ? ": " : null,
      e.rule ? h("span", { class: "rule", text: `${e.rule}: ` }) : null, e.message || "");
  }));
}

function syncFacts(env) {
  const s = env.sync || {};
  const rows = [];
  const row = (term, ...desc) => rows.push(h("dt", { text: term }), h("dd", {}, ...desc));
  if (env.ok === true) row("Last sync", badge("ok", "valid"));
  else if (env.ok === false) row("Last sync", badge("bad", `invalid: ${(env.errors || []).length} error(s)`));
  else row("Last sync", badge("none", "no sync reported yet"));
  if (s.ref) row("Tracks", h("code", { text: s.ref }));
  if (env.commit) row("Commit", h("code", { class: "sha", title: env.commit, text: fmt.sha(env.commit) }), " ", fmt.when(s.ts));
  const applied = s.last_applied && s.last_applied.commit;
  if (applied && applied !== env.commit) {
    row("Running", h("code", { class: "sha", title: applied, text: fmt.sha(applied) }), " (the last valid commit) ",
      fmt.when(s.last_applied.ts));
  }
  return rows;
}

function placementFacts(p) {
  if (!p) return [];
  const out = [];
  const row = (term, ...desc) => out.push(h("dt", { text: term }), h("dd", {}, ...desc));
  const unassigned = p.unassigned || [];
  const pending = p.pending || [];
  let text = p.mode ? `${p.mode}` : "reported";
  if (p.last_commit) text += `, last commit ${fmt.sha(p.last_commit)}`;
  row("Placement", p.held || p.error || unassigned.length ? badge(p.error ? "bad" : "warn", text) : badge("ok", text));
  if (p.held) row("Held", p.held);
  if (p.error) row("Placement error", h("span", { class: "error-text", text: p.error }));
  if (unassigned.length) {
    row("Unassigned", h("ul", { class: "errors" },
      unassigned.map((u) => h("li", {}, h("code", { text: u.replica }), `: ${u.reason}`))));
  }
  if (pending.length) {
    row("Moving", h("ul", {}, pending.map((m) => h("li", {}, h("code", { text: m.replica }),
      ` from ${m.node}` + (Number.isFinite(m.moves_in_s) ? ` in ${Math.ceil(m.moves_in_s)} s` : "")))));
  }
  return out;
}

const ROLLOUT_LEVEL = {
  progressing: "warn", "waiting-promotion": "warn", paused: "bad", "rolled-back": "bad", complete: "ok",
};

function rolloutList(env) {
  const rollouts = Object.values(env.rollouts || {});
  if (!rollouts.length) return null;
  return [h("h4", { text: "Rollouts" }), h("ul", { class: "rollouts" }, rollouts.map((r) =>
    h("li", { "data-service": r.service },
      badge(ROLLOUT_LEVEL[r.state] || "none", r.state || "unknown"), " ",
      h("code", { text: r.service }), ` wave ${r.wave}/${r.waves}, ${r.done}/${r.total} healthy, commit `,
      h("code", { class: "sha", title: r.commit, text: fmt.sha(r.commit) }),
      r.state === "waiting-promotion" ? [" ", h("button", {
        type: "button", class: "action", "data-action": "promote", "data-env": env.environment,
        "data-service": r.service, "data-commit": r.commit,
        "aria-label": `Promote ${r.service} of ${env.environment} at ${fmt.sha(r.commit)}`, text: "Promote",
      })] : null,
      (r.reasons || []).length ? h("ul", { class: "errors" }, r.reasons.map((x) =>
        h("li", {}, h("code", { text: `${x.node} ${x.replica}` }), `: ${x.reason}`))) : null)))];
}

function reasonText(r) {
  const where = [r.node, r.replica].filter(Boolean).join(" ");
  return where ? `${where}: ${r.reason}` : r.reason;
}

// The record's own word and reasons (config-sync judged them): the page never judges again.
// Roll back to an earlier deployment that converged (never to what runs now).
function rollbackButton(env, d, i) {
  if (i === 0 || d.state !== "converged") return "–";
  return h("button", {
    type: "button", class: "action", "data-action": "rollback", "data-env": env, "data-commit": d.commit,
    "aria-label": `Roll ${env} back to ${fmt.sha(d.commit)}`, text: "Roll back to this",
  });
}

function planChanged(d) {
  const p = d.plan_changed;
  if (!p) return null;
  return [" ", badge("warn", `plan changed since review (!${p.mr})`)];
}

function deployRow(env, d, i) {
  const level = DEPLOY_LEVEL[d.state] || "none";
  const tr = cells(h("tr", { class: `level-${level}`, "data-commit": d.commit }), DEPLOY_LABELS, true);
  fill(tr.cells[0], h("code", { class: "sha", title: d.commit, text: fmt.sha(d.commit) }));
  fill(tr.cells[1], d.message || "–");
  fill(tr.cells[2], d.author || "–");
  const said = d.state === "pending" && d.health && d.health !== "progressing" ? ` (${d.health})` : "";
  fill(tr.cells[3], badge(level, d.state || "unknown"), said, planChanged(d));
  fill(tr.cells[4], fmt.when(d.published_at) || "–");
  const waited = d.suspended_s ? ` (and ${fmt.duration(d.suspended_s)} waiting for promotion)` : "";
  fill(tr.cells[5], (d.state === "pending" ? "running…" : fmt.duration(d.duration_s)) + waited);
  const nodes = Object.entries(d.nodes || {}).map(([n, g]) => `${n} (generation ${g})`).join(", ");
  const unassigned = Object.entries(d.replicas || {}).filter(([, n]) => n === null).map(([r]) => r);
  const placed = [nodes, unassigned.length ? `unassigned: ${unassigned.join(", ")}` : ""].filter(Boolean).join("; ");
  const pendingReasons = d.state === "pending" && said ? d.reasons || [] : [];
  if (d.failed) {
    const on = d.failed.node ? ` on ${d.failed.node}` : "";
    fill(tr.cells[6], h("span", { class: "error-text", text: `${d.state}${on}: ${d.failed.reason}` }));
  } else if (pendingReasons.length) {
    fill(tr.cells[6], placed || "–", h("ul", { class: "errors" },
      pendingReasons.map((r) => h("li", { text: `${d.health}: ${reasonText(r)}` }))));
  } else {
    fill(tr.cells[6], placed || "–");
  }
  fill(tr.cells[7], rollbackButton(env, d, i));
  return tr;
}

function deployTable(env) {
  const deploys = env.deploys || [];
  if (!deploys.length) return h("p", { class: "muted", text: "No deployment recorded yet." });
  return h("div", { class: "table-box" }, h("table", { class: "stack deploys" },
    h("caption", { class: "visually-hidden", text: `Recent deployments of ${env.environment}, newest first` }),
    h("thead", {}, h("tr", {}, DEPLOY_LABELS.map((l) => h("th", { scope: "col", text: l })))),
    h("tbody", {}, deploys.map((d, i) => deployRow(env.environment, d, i)))));
}

function envLevel(env) {
  const p = env.placement || {};
  const last = (env.deploys || [])[0];
  const states = Object.values(env.rollouts || {}).map((r) => r.state);
  if (env.ok === false || p.error || (last && (last.state === "failed" || last.state === "degraded"))) return "bad";
  if (states.includes("paused") || states.includes("rolled-back")) return "bad";
  if ((p.unassigned || []).length || p.held || (last && last.state === "pending")) return "warn";
  if (states.includes("progressing") || states.includes("waiting-promotion")) return "warn";
  return env.ok === true ? "ok" : "none";
}

function article(env) {
  const id = `env-${env.environment}`;
  const errors = env.errors || [];
  return h("article", { class: `env level-${envLevel(env)}`, "data-env": env.environment, "aria-labelledby": `${id}-h` },
    h("h3", { id: `${id}-h`, text: env.environment }),
    h("dl", { class: "facts" }, syncFacts(env), placementFacts(env.placement)),
    errors.length ? [h("h4", { text: "Errors of the last sync" }), errorList(errors)] : null,
    rolloutList(env),
    h("h4", { text: "Recent deployments" }),
    deployTable(env));
}

export function renderEnvironments(doc) {
  const list = (doc.environments || []).slice().sort((a, b) => a.environment.localeCompare(b.environment));
  const root = document.getElementById("env-list");
  if (!list.length) {
    root.replaceChildren(h("p", { text: "No environment has been synced yet." }));
    return;
  }
  const old = new Map([...root.querySelectorAll(":scope > article")].map((a) => [a.dataset.env, a]));
  root.querySelectorAll(":scope > :not(article)").forEach((el) => el.remove());
  for (const env of list) {
    const sig = JSON.stringify(env);
    let art = old.get(env.environment);
    old.delete(env.environment);
    if (!art || art._sig !== sig) {
      const fresh = article(env);
      fresh._sig = sig;
      if (art) art.replaceWith(fresh);
      art = fresh;
    }
    root.append(art); // append moves it: the order follows the sorted list
  }
  for (const a of old.values()) a.remove();
}
