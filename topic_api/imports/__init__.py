"""Compose imports proposed for review (``POST /api/import/compose``), never deployed.

``proposal`` names the branch, commit and merge request; ``check`` validates the result as
``phrame validate`` would; ``targets`` picks where it goes from ``settings``: a local bare
repository (``local_target``) or GitLab (``gitlab_target``). Never the tracked branch or a tag.
"""
