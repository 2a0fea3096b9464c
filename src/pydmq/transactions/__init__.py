"""The transaction coordinator (Kafka's TransactionCoordinator) on the coordinator runtime,
over the internal compacted topic ``__transaction_state``."""
