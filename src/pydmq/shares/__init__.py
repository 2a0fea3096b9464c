"""Share groups (KIP-932): share-partition state, share sessions, the share group coordinator."""
