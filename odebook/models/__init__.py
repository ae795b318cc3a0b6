"""The language model, cached generation, and the builders and arms the studies train."""
