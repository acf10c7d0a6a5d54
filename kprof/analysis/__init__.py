"""Analyses: functions from normalized tables to result tables (no GPU, no torch)."""
