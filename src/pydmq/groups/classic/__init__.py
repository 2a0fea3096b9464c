"""Classic groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup): the group state machine
(:mod:`.group`) and the protocol's flows over it (:mod:`.manager`)."""
