"""Validation of the plume models against long-run statistics and reference implementations."""
