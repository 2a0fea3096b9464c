"""The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat, ConsumerGroupDescribe)."""
