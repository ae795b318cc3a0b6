"""Corpora, tokenizers, batches, the offline mirror, one's own corpus files, and the synthetic tasks."""
