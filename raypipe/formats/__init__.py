"""Container formats: pure functions that lay out, index, parse and write records
(TFRecord, WebDataset tar, MXNet RecordIO, Caffe and Caffe2 LMDB), and read records out of
their files by offset (``record_files``). Readers and the conversion CLI are built on them."""
