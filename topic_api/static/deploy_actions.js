/* Phrame dashboard: Promote and Roll back, the environments' two writes.
 *
 * One click listener on the environments list (its articles are rebuilt as data changes)
 * finds the button's data-action and POSTs api/rollouts/<env>/<service>/promote or
 * api/environments/<env>/rollback with the token the person typed (asked for when none is
 * held; a refused one is forgotten). The topic API forwards both to config-sync, which
 * checks the deploy scope and acts; its answer is said in #env-message.
 */
import { API, TOKEN_KEY, fmt } from "./dom.js";

const $ = (id) => document.getElementById(id);

function say(text, level) {
  const el = $("env-message");
  el.className = `message${level ? ` message-${level}` : ""}`;
  el.textContent = text;
}

/** POST ``path`` with ``body``: the parsed answer, or null when it did not succeed (said). */
async function post(path, body, button, { what, why, asking }, askToken) {
  if (button.getAttribute("aria-disabled") === "true") return null;
  let token = sessionStorage.getItem(TOKEN_KEY);
  if (!token) {
    token = await askToken(why);
    if (!token) { say(`${what} cancelled: no token given.`); return null; }
    sessionStorage.setItem(TOKEN_KEY, token);
  }
  button.setAttribute("aria-disabled", "true"); // not disabled: that would drop the focus
  say(asking);
  try {
    const r = await fetch(`${API}${path}`, {
      method: "POST",
      headers: { Authorization: `Bearer ${token}`, Accept: "application/json", "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    let answer = null;
    try { answer = await r.json(); } catch { answer = null; }
    const reason = (answer && answer.error) || `${r.status} ${r.statusText}`;
    if (r.status === 401 || r.status === 403) {
      sessionStorage.removeItem(TOKEN_KEY);
      say(`config-sync refused the token (${reason}); the next ${what.toLowerCase()} asks for it again.`, "bad");
    } else if (!r.ok) {
      say(`${what} failed: ${reason}`, "bad");
    } else {
      return answer || {};
    }
  } catch (e) {
    say(`${what} failed: ${e.message}`, "bad");
  } finally {
    button.removeAttribute("aria-disabled");
  }
  return null;
}

async function promote(button, askToken) {
  const { env, service, commit } = button.dataset;
  const path = `rollouts/${encodeURIComponent(env)}/${encodeURIComponent(service)}/promote`;
  const answer = await post(path, { commit }, button, {
    what: "Promote", why: "A promotion is a write (deploy scope).",
    asking: `Promoting ${service} of ${env} at ${fmt.sha(commit)}…`,
  }, askToken);
  if (answer) say(`Promotion of ${service} in ${env} queued: ${answer.message || fmt.sha(answer.commit || commit)}.`, "ok");
}

async function rollback(button, askToken) {
  const { env, commit } = button.dataset;
  if (!window.confirm(`Roll ${env} back to ${fmt.sha(commit)}? A new commit on its branch restores environments/${env}/ as it was then.`)) {
    say(`Rollback of ${env} cancelled.`);
    return;
  }
  const answer = await post(`environments/${encodeURIComponent(env)}/rollback`, { to: commit, merge: false }, button, {
    what: "Rollback", why: "A rollback is a write (deploy scope).", asking: `Rolling ${env} back to ${fmt.sha(commit)}…`,
  }, askToken);
  if (!answer) return;
  if (answer.status === "pushed") {
    say(`${env} rolled back to ${fmt.sha(answer.to)}: commit ${fmt.sha(answer.commit)} pushed to ${answer.ref}; it deploys like any commit.`, "ok");
  } else {
    say(`${env}: merge request !${answer.mr} (${answer.mr_url}) rolls back to ${fmt.sha(answer.to)}.`, "ok");
  }
}

export function wireDeployActions(root, askToken) {
  root.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (!button || !root.contains(button)) return;
    if (button.dataset.action === "promote") promote(button, askToken);
    else if (button.dataset.action === "rollback") rollback(button, askToken);
  });
}
