"""Container formats: pure functions that lay out, index, parse and write records
(TFRecord, WebDataset tar, MXNet RecordIO, Caffe and Caffe2 LMDB). Readers and the
conversion CLI are built on them."""
