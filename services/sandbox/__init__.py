"""Sandbox service: runs untrusted code in bubblewrap namespaces under resource limits."""
