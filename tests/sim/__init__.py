"""Seeded deterministic simulations (Raft, replication)."""
