"""Reading data where clusters keep it: object-store URLs (``s3://bucket/key``, ``gs://bucket/key``)
beside local paths, for every reader.

:mod:`.urls` tells URLs from paths and joins them, :mod:`.store` reads, ranges and lists objects
through one client per bucket (retrying what retrying can help), :mod:`.failures` names what went
wrong, :mod:`.files` opens an object as a seekable file (for indexes), :mod:`.folders` lists a
class folder tree on a bucket, :mod:`.prefetch` keeps many requests in flight ahead of the reads
the executor announced, and :mod:`.listings` lets a service list a bucket once and hand the
listing to its actors."""
