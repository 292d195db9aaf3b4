"""Layer 0, the core: the state and params types, pytree helpers, the error
types, observation/action spaces, seeding, vector helpers, autoreset, the
check of the ``agents`` package. Imports only
jax, chex and numpy (see ``docs/architecture.md``)."""
