"""Offline, plain-Python MAPF code: the exact CBS solver (builds the held-out sets) and the
independent rules reference that the JAX environment and verifier are tested against."""
