"""Bundled workloads: one folder per kernel family (kernel, float64 reference, workload)."""
