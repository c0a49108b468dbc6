"""DALI's ``nvidia.dali.data_node``: the class of the symbolic batches operators return, which
scripts import for type hints and ``isinstance`` (it lives in :mod:`raypipe.graph`)."""

from .graph import DataNode

__all__ = ["DataNode"]
