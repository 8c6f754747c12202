"""A large publication in overlapping batches: each node's manifest one batch after its items.

At 10,000 nodes the two steps (every item, then every manifest) put 20 s between a node's
item and its manifest, and an agent passed in between; in batches of a few hundred nodes a
manifest follows its items by one batch, and is still never sent before them.
"""

from __future__ import annotations

from config_sync.models import PublicationOrder
from schemas import Topics

T = Topics()


def order_for(nodes: int) -> PublicationOrder:
    names = [f"n{i:03d}" for i in range(nodes)]
    return PublicationOrder(
        items=(
            (T.env_service("prod", "web"), b"svc"),
            *((T.desired_item(n, "containers", "prod.web.0"), b"item") for n in names),
        ),
        clears=tuple(T.desired_item(n, "containers", "prod.old.0") for n in names[::2]),
        manifests=tuple((T.manifest(n), b"manifest") for n in names),
        sync=((T.env_sync("prod"), b"sync"),),
    )


def test_a_small_publication_is_the_two_steps() -> None:
    order = order_for(10)
    assert order.batches(T, nodes_per_batch=10) == list(order.steps())


def test_each_manifest_goes_one_batch_after_its_nodes_items() -> None:
    order = order_for(25)
    batches = order.batches(T, nodes_per_batch=10)
    assert len(batches) == 4  # items of 10, manifests of 10 + items of 10, ..., the last manifests
    where = {topic: i for i, batch in enumerate(batches) for topic, _ in batch}
    for topic, _ in order.manifests:
        node = T.node_of(topic)
        own = [t for t, _ in order.steps()[0] if T.node_of(t) == node]
        assert own and all(where[t] + 1 == where[topic] for t in own), node
    assert where[T.env_service("prod", "web")] == 0  # no node's: with the first items
    assert batches[-1][-1] == (T.env_sync("prod"), b"sync")  # the sync topic last of all
    # nothing lost, nothing twice, and each step's order kept within a batch
    sent = [m for batch in batches for m in batch]
    assert sorted(sent) == sorted(order.publication_messages())
    for batch in batches:
        assert [m for m in order.publication_messages() if m in batch] == batch
