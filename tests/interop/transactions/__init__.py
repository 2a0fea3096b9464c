"""The proofs of issue 18 (transactions): each test runs against a reference Apache Kafka
4.4 and against pydmq; see conftest.py for the ``transactions`` marker."""
