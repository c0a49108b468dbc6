"""Automatic augmentations, as DALI's ``nvidia.dali.auto_aug``: AutoAugment (:mod:`.auto_augment`),
RandAugment (:mod:`.rand_augment`) and TrivialAugment (:mod:`.trivial_augment`) over the
augmentations of :mod:`.augmentations`; custom ones with :func:`.core.augmentation`.

``from nvidia.dali.auto_aug import rand_augment`` becomes ``from raypipe.auto_aug import
rand_augment``. DALI needs ``enable_conditionals=True`` for them; raypipe accepts it and does not
need it: one operator applies to each sample the augmentations drawn for it.
"""
