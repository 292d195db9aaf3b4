"""Registered plume datasets (layer 0, no JAX): facts, a cache, verified
resumable downloads (``plume-jax data``; docs/plumes.md, "Registered
datasets")."""

from plume_jax.datasets.cache import (cache_dir, dataset_path, download, effective_checksum,
                                      remembered_checksum, require_cached, status, verify_file)
from plume_jax.datasets.registry import BUILTIN, Dataset, get, load_catalog, registry

__all__ = ["BUILTIN", "Dataset", "cache_dir", "dataset_path", "download", "effective_checksum",
           "get", "load_catalog", "registry", "remembered_checksum", "require_cached", "status",
           "verify_file"]
