"""The package's version, written in one place: ``plume_jax.__version__``
re-exports it and ``pyproject.toml`` reads it (setuptools' dynamic version),
so ``importlib.metadata.version("plume-jax")`` agrees once installed. Modules
of the package take it from here, not from the package root."""

__version__ = "0.4.0"
