"""Deploys: from a published commit to its verdict.

``watcher`` follows the agents after a publish and sets GitLab's ``phrame/deploy`` status,
``verdict`` is the pure judgement, ``records`` the pure history of one environment and
``history`` keeps it retained. What the nodes report comes from the one actual view
(:mod:`phrame.actual`).
"""
