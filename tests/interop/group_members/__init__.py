"""Group member child processes (one per client library) and the harness that runs them."""
