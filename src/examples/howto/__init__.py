"""The code of the how-to guides: one module per guide, in the order of the How-to section.

- :mod:`examples.howto.scan_transformer`: remat a transformer trained with scan over layers;
- :mod:`examples.howto.choose_policy`: choose a policy for a transformer block;
- :mod:`examples.howto.measure_memory`: measure memory on your own hardware;
- :mod:`examples.howto.sharding` (with ``collectives`` and ``offload``): a sharded step and host
  offload.
"""
