"""The two views of ``GET /status``: public (anyone) and full (the webhook secret's holders).

``ConfigSync.public_status``/``status`` call these; they only read the service's state.
The public view must never name the repository, paths, git command lines, errors or merge
requests: per environment ok or failing and a short commit, and ready.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from config_sync.service import ConfigSync

SHORT_SHA = 12


def public_view(service: ConfigSync) -> dict[str, Any]:
    environments = {}
    for envs in service.syncer.envs_by_ref.values():
        for env in envs:
            state = service.publisher.sync_state(env) or {}
            ok, commit = state.get("ok"), state.get("commit")
            environments[env] = {
                "ok": ok if isinstance(ok, bool) else None,  # None: not synced yet
                "commit": commit[:SHORT_SHA] if isinstance(commit, str) else None,
            }
    return {
        "environments": dict(sorted(environments.items())),
        "ready": service.is_ready(),
        "role": service.role,
    }


def full_view(service: ConfigSync) -> dict[str, Any]:
    environments = {}
    for ref, envs in sorted(service.syncer.envs_by_ref.items()):
        for env in sorted(envs):
            environments[env] = {"ref": ref, "sync": service.publisher.sync_state(env)}
    last = {
        ref: {
            "commit": o.commit,
            "ok": o.ok,
            "errors": o.errors,
            "messages": len(o.messages),
            "changed_nodes": o.changed_nodes,
        }
        for ref, o in sorted(service.syncer.last.items())
    }
    workers = {
        name: {
            "runs": w.runs,
            "failures": w.failures,
            "last_error": w.last_error,
            "queued": w.queued,
            "retrying": w.retrying(),  # key -> transient failures in a row (a retry waits)
        }
        for name, w in sorted(service.queue.workers.items())
    }
    return {
        "git_host": service.settings.git_host,
        "tracked_refs": sorted(service.syncer.tracked),
        "environments": environments,
        "last_sync": last,
        "previews": dict(sorted(service.previews.records.items())),  # merge-request previews' records
        "workers": workers,
        "deploys": {ref: d.commit for ref, d in service.deployer.active.items()},
        # each staged rollout's last state ("<env>/<service>" -> the retained document)
        "rollouts": {f"{env}/{svc}": doc for (env, svc), doc in sorted(service.rollouts.last.items())},
        # each environment holding a commit (approvals, a freeze): commit, ref, reason, until
        "held": service.approvals.snapshot(),
        "reports": service.reporter.snapshot(),
        "ready": service.is_ready(),
        "role": service.role,
        # active + standby: this instance, the holder, the term (None: a single config-sync)
        "lease": service.lease.view() if service.lease is not None else None,
    }
