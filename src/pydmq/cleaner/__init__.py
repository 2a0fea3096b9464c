"""Log compaction: the engine-agnostic log cleaner (Kafka's LogCleaner, Cleaner and
LogCleanerManager), above the storage port. ``cleaning`` and ``offset_map`` do no I/O."""
