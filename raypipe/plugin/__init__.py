"""Framework iterators with DALI's names and behaviour: ``raypipe.plugin.pytorch`` (torch tensors)
and ``raypipe.plugin.numpy`` (numpy arrays), over one or several raypipe pipelines.

A DALI training script keeps its iterator code after renaming ``nvidia.dali`` to ``raypipe``.
The modules import their framework, so this package imports neither.
"""
