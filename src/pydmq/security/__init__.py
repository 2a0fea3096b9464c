"""Who a connection is and what it may do: principals, authentication (TLS, SASL) and
authorization (ACLs), with Kafka's configuration names."""
