"""Built-in operators; importing this package registers them."""

from . import (  # noqa: F401
    arithmetic,
    caffe_readers,
    cast,
    color_twist,
    crop,
    crop_mirror_normalize,
    decoders,
    flip,
    mxnet_reader,
    python_function,
    random,
    random_resized_crop,
    readers,
    resize,
    rotate,
    tfrecord_reader,
    transfer,
    transpose,
    webdataset_reader,
)
