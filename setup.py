"""The wheel carries the repository's ``configs/`` folder (example configs, the
presets' files, the evaluation scenarios, the zoo of trained agents) as
``plume_jax/data/configs``, where :mod:`plume_jax.files.shipped` finds it once
installed. Everything else about the build is in ``pyproject.toml``; the
sdist carries ``configs/`` through ``MANIFEST.in``."""

import pathlib
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

#: The repository folder the wheel carries, and where it lands in the wheel.
CONFIGS = "configs"
INSTALLED = ("plume_jax", "data", "configs")


class BuildPyWithConfigs(build_py):
    """``build_py`` that also copies ``configs/`` into the built package (not
    for an editable install: that one runs from the checkout, which has it)."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        source = pathlib.Path(CONFIGS)
        if not source.is_dir():
            raise SystemExit(f"setup.py: no {source.resolve()} to put into the wheel "
                             "(an sdist without configs/: MANIFEST.in grafts it)")
        target = pathlib.Path(self.build_lib, *INSTALLED)
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildPyWithConfigs})
