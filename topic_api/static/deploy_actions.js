/* Phrame dashboard: Promote and Roll back, the environments' two writes.
 *
 * One click listener on the environments list (its articles are rebuilt as data changes)
 * finds the button's data-action and POSTs api/rollouts/<env>/<service>/promote or
 * api/environments/<env>/rollback with the token the person typed (asked for when none is
 * held; a refused one is forgotten and asked for again, once, saying which token it takes). The topic API forwards both to config-sync, which
 * checks the deploy scope and acts; its answer is said in #env-message.
 */
import { API, TOKEN_KEY, fmt } from "./dom.js";

const $ = (id) => document.getElementById(id);

function say(text, level) {
  const el = $("env-message");
  el.className = `message${level ? ` message-${level}` : ""}`;
  el.textContent = text;
}

const REFUSED_WHY = "config-sync refused that token: promote and roll back take a deploy token of its tokens file "
  + "(without one, its webhook secret: the dev stack's is in .phrame-dev/webhook-secret).";

/** POST ``path`` with ``body``: the parsed answer, or null when it did not succeed (said).
 * A token config-sync refuses (401, 403) is forgotten and asked for again, once. */
async function post(path, body, button, { what, why, asking }, askToken) {
  if (button.getAttribute("aria-disabled") === "true") return null;
  let token = sessionStorage.getItem(TOKEN_KEY);
  for (let attempt = 0; attempt < 2; attempt += 1) {
    if (!token) {
      token = await askToken(attempt ? REFUSED_WHY : why);
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
        token = null;
        say(`config-sync refused the token (${reason}).`, "bad");
        continue;
      }
      if (!r.ok) {
        say(`${what} failed: ${reason}`, "bad");
        return null;
      }
      return answer || {};
    } catch (e) {
      say(`${what} failed: ${e.message}`, "bad");
      return null;
    } finally {
      button.removeAttribute("aria-disabled");
    }
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
  if (answer) say(answer.message ? `${answer.message}.` : `Promotion of ${service} in ${env} queued.`, "ok");
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
