"""SASL authentication (SaslHandshake, SaslAuthenticate) with Kafka's mechanisms and names.

Sans-IO: ``jaas`` parses Kafka's JAAS syntax, one module per mechanism (``plain``,
``scram``, ``oauthbearer``) turns client tokens into answers, ``authenticator`` is one
connection's state machine (what it may send, when its session expires), ``listener`` reads
a listener's SASL settings and makes its connections' authenticators.
"""
