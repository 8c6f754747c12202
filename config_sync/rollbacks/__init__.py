"""Rollback as a revert commit (``POST /environments/{env}/rollback``, ``phrame rollback``)."""
