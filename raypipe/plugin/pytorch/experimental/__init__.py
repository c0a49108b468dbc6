"""DALI's ``nvidia.dali.plugin.pytorch.experimental``: the proxy that runs a pipeline on the
batches a PyTorch ``DataLoader`` collates (:mod:`.proxy`)."""
