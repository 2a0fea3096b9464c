"""Client quotas, as Kafka's: the quota configs of user / client-id / ip entities, their
validation (AlterClientQuotas), their description (DescribeClientQuotas) and their enforcement
(Kafka's ClientQuotaManager: byte rates and request time over sampled windows, throttle times).

- :mod:`.configs` the entity types and quota keys, with their Kafka types;
- :mod:`.validation` AlterClientQuotas' checks of an entity and of a quota value (sans-IO; the
  controller's operation writes the ClientQuotaRecords);
- :mod:`.describe` DescribeClientQuotas' filter over the quotas of a metadata image;
- :mod:`.rate` Kafka's windowed rate (``Rate`` over a ``SampledStat``) and the throttle-time
  formula of ``QuotaUtils.throttleTime``;
- :mod:`.manager` :class:`~.manager.ClientQuotaManager` (one per quota type: the entity
  precedence, one rate per matched entity, the throttle time) and
  :class:`~.manager.QuotaManagers`, the broker's set of them.

Layer 2 (with config, security and net): it needs only the metadata records' types.
"""
