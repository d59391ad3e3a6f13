"""Retrieval evaluations (LoCoMo, synthetic coding sessions) and the learned ranker's training."""
