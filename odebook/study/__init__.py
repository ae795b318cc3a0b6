"""Experiments over seeds, statistics and verdicts, measurement, dynamics, FLOPs, retrieval scoring."""
