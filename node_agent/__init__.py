"""node_agent: one per host; converges the local Docker daemon and host processes to the
node's desired state from the desired plane, and reports actual state on the actual plane.

Entry point: ``phrame node-agent`` (see ``phrame/cli/cmd_node_agent.py``); the decision is
``node_agent.plan.compute_plan``; the Docker adapter is ``node_agent.docker_port`` (with its
network mixin ``docker_networks`` and the pure ``docker_refs``), host processes are
``node_agent.processes``.
"""
