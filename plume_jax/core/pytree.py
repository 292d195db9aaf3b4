"""``Pytree``: the base of plume_jax's frozen ``chex.dataclass`` pytrees, for type
checkers (layer 0).

``chex.dataclass`` builds its classes at run time, so a type checker (mypy,
pyright) sees neither their generated ``__init__`` nor ``replace``: every
``EnvParams(...)`` and ``params.replace(...)`` would be an error in a user's
checked code. A class that also derives from :class:`Pytree` is described to
the checker as what ``@chex.dataclass(frozen=True)`` makes of it (PEP 681
``dataclass_transform``): frozen, keyword-only fields, and a ``replace`` that
returns the same type. Nothing changes at run time: the decorator still makes
the class, and :class:`Pytree` adds no field, no method and no slot::

    @chex.dataclass(frozen=True)
    class MyParams(Pytree):
        rate: jax.Array

``tests/core/test_pytree.py`` checks that every ``Pytree`` subclass is a frozen
``chex.dataclass``, so the two descriptions cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # typing_extensions: the checker's own copy; nothing imported at run time
    from typing_extensions import Self, dataclass_transform
else:
    def dataclass_transform(**_kwargs: Any) -> Any:
        return lambda cls: cls


@dataclass_transform(frozen_default=True, kw_only_default=True,
                     field_specifiers=(dataclasses.field,))
class Pytree:
    """A frozen, keyword-only ``chex.dataclass`` to type checkers (see the module).

    Subclasses must be decorated with ``@chex.dataclass(frozen=True)``; the
    decorator supplies ``replace``, ``keys``, ``items`` and the JAX pytree
    registration at run time.
    """

    if TYPE_CHECKING:
        def replace(self, **changes: Any) -> Self:
            """A copy with ``changes`` (field name -> new value) applied."""
            ...
