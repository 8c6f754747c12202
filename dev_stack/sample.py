"""The quickstart sample: the files of the first commit of the dev stack's config repo.

The supervisor calls :func:`files` once, on first start, with its settings; the templates
are package data (``dev_stack/sample``) with ``{{name}}`` placeholders for the node names,
the page's port, the image and the host process's workdir. It reads package data and
returns text; the only thing it writes is a node's age key when it has none yet
(``age_keys.ensure``), whose recipient the node's file names and the sample's one SOPS
secret (``secrets/page.sops.yaml``) is encrypted for.
"""

from __future__ import annotations

from importlib import resources

from dev_stack import age_keys
from dev_stack.settings import DevSettings

ENV_FILES = (
    "environment.yaml",
    "networks/backend.yaml",
    "services/web.yaml",
    "services/cache.yaml",
    "services/worker.yaml",
    "services/ticker.yaml",
)


def _template(name: str) -> str:
    return (resources.files("dev_stack") / "sample" / name).read_text("utf-8")


def _fill(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    if "{{" in text:
        raise ValueError(f"unfilled placeholder in the sample: {text[text.index('{{') :][:40]!r}")
    return text


def files(settings: DevSettings) -> dict[str, str]:
    """Repository path -> content of the quickstart sample for ``settings``."""
    web_node = settings.nodes[0]
    values = {
        "environment": settings.environment,
        "web_node": web_node,
        # previews run beside the page, on the second node when there is one
        "preview_node": settings.nodes[1] if len(settings.nodes) > 1 else web_node,
        "web_port": str(settings.web_port),
        "web_url": settings.web_url,
        "image": settings.image,
        "workdir": str(settings.workdir(web_node)),
    }
    recipients = age_keys.ensure(settings)
    out = {"README.md": _fill(_template("README.md"), values)}
    for node in settings.nodes:
        node_values = values | {"node": node, "age_recipient": recipients[node]}
        out[f"nodes/{node}.yaml"] = _fill(_template("node.yaml"), node_values)
    for name in ENV_FILES:
        out[f"environments/{settings.environment}/{name}"] = _fill(_template(name), values)
    out[f"environments/{settings.environment}/secrets/page.sops.yaml"] = age_keys.sample_secret(recipients)
    return out
