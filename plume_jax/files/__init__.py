"""Files (layer 0): how the package writes a file whole or not at all
(:func:`atomic_write`; :func:`atomic_create` only where no file is),
recognises its temporary files (:func:`is_temporary`), makes a folder to
write one whole in (:func:`new_folder`) and makes a rename durable
(:func:`fsync_folder`).
The bounded readers are :mod:`plume_jax.files.safe_io`; the capture
folder's format and its streamed Parquet writer,
:mod:`plume_jax.files.capture_files`."""

from plume_jax.files.atomic import (atomic_create, atomic_write, fsync_folder, is_temporary,
                                    new_folder)

__all__ = ["atomic_create", "atomic_write", "fsync_folder", "is_temporary", "new_folder"]
