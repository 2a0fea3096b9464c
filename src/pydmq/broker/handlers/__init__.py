"""One module per API key, each with its ``HANDLER`` spec: versions, behaviour, version notes."""
