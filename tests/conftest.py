"""Test-wide JAX settings, as equinox does: two CPU devices, strict promotion rules."""

import jax

jax.config.update("jax_num_cpu_devices", 2)
jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_numpy_dtype_promotion", "strict")
