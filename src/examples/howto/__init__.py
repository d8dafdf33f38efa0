"""The code of the how-to guides: one module per guide, in the order of the How-to section.

- :mod:`examples.howto.scan_transformer`: remat a transformer trained with scan over layers;
- :mod:`examples.howto.linen_training` and :mod:`examples.howto.nnx_training`: the same in Flax
  linen and Flax NNX, with :mod:`examples.howto.flax_steps` (sizes and the table they share);
- :mod:`examples.howto.choose_policy`: choose a policy for a transformer block;
- :mod:`examples.howto.measure_memory`: measure memory on your own hardware;
- :mod:`examples.howto.diagnose` and :mod:`examples.howto.symptoms`: when remat goes wrong, a
  diagnostic for the reader's own function and the symptoms it tells apart;
- :mod:`examples.howto.elsewhere`: the same ideas in PyTorch, MaxText and Haliax;
- :mod:`examples.howto.sharding`, with :mod:`examples.howto.collectives` (the collectives of a
  compiled program) and :mod:`examples.howto.offload` (host offload, and its recorder): remat on a
  sharded step.
"""
