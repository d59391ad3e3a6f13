"""Retrieval policy: search, calibration, locators, recall (thin Python over SQL)."""
