"""``raypipe bench``: the ResNet-50 training pipeline through raypipe (in one process and as a
service), NVIDIA DALI, a torch DataLoader and Ray Data on the same JPEG files in one run.

Modules: :mod:`.command` (options, checks, the run), :mod:`.dataset` (the JPEG files),
:mod:`.contenders` (one function per contender), :mod:`.service` (the raypipe service with
ranks in Ray actors), :mod:`.dali_recipe` (DALI's CPU pipeline), :mod:`.reference` (the recipe
in Pillow + numpy), :mod:`.memory` (peak memory), :mod:`.suite` (alternating rounds, medians,
ratios, JSON) and :mod:`.report` (the table).
"""
