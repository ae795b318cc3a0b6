"""odebook: helpers for the study book."""
