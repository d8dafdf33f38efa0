"""The code of the how-to guides: one module per guide, in the order of the How-to section.

- :mod:`examples.howto.scan_transformer`: remat a transformer trained with scan over layers, with
  :mod:`examples.howto.deep_stacks` (very deep stacks: a scan of checkpointed scans);
- :mod:`examples.howto.linen_training` and :mod:`examples.howto.nnx_training`: the same in Flax
  linen and Flax NNX, with :mod:`examples.howto.flax_steps` (sizes and the table they share),
  :mod:`examples.howto.linen_stacks` (linen's scans of a small block: ``nn.remat_scan`` by depth,
  the scan unrolled) and :mod:`examples.howto.nnx_scan_outputs` (what NNX's forward loop over
  layers returns);
- :mod:`examples.howto.choose_policy`: choose a policy for a transformer block, with
  :mod:`examples.howto.fused_attention` (what a policy sees of a fused attention kernel) and
  :mod:`examples.howto.offload_check` (the named values kept in host memory, stage by stage);
- :mod:`examples.howto.measure_memory`: measure memory on your own hardware;
- :mod:`examples.howto.fit`: will it fit? A 1B/8B decoder's training step compiled for GPUs and
  TPUs (its records and the page's tables), with :mod:`examples.howto.fit_record` (the recorder),
  :mod:`examples.howto.fit_estimate` (a time estimate), :mod:`examples.howto.fit_model` (the
  model, its FSDP specs and policies) and :mod:`examples.howto.fit_own` (a reader's own step,
  plain JAX and Flax NNX, through one call);
- :mod:`examples.howto.diagnose` and :mod:`examples.howto.symptoms`: when remat goes wrong, a
  diagnostic for the reader's own function and the symptoms it tells apart, with
  :mod:`examples.howto.answers` (the behaviours behind the questions readers bring);
- :mod:`examples.howto.elsewhere`: the same ideas in PyTorch, MaxText and Haliax, with
  :mod:`examples.howto.equinox_remat` (Equinox's checkpoint and what ``jax.checkpoint`` refuses);
- :mod:`examples.howto.sharding`, with :mod:`examples.howto.fsdp_step` (the mesh, the FSDP step
  under ``jax.jit`` and ``shard_map``, and what its compiled program does on each device),
  :mod:`examples.howto.collectives` (the collectives of a compiled program),
  :mod:`examples.howto.offload` (host offload, and its recorder; what a recorded run says is
  :mod:`examples.howto.offload_findings`) and
  :mod:`examples.howto.explicit_axes` (the same step on a mesh with ``Explicit`` axes): remat on
  a sharded step.
"""
