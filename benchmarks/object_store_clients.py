"""Which object-store client raypipe reads buckets with: whole small objects (about 110 KB, like
JPEGs) and byte ranges of one large object, many requests in flight, against a local moto S3
server (optionally behind a proxy adding a per-request delay, as a real store's latency).

    python benchmarks/object_store_clients.py [--objects 256] [--in-flight 32] [--delay-ms 20]

Prints one row per client: objects/s and MB/s for whole-object GETs and for ranged GETs.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import boto3
from delay_proxy import DelayProxy
from moto.server import ThreadedMotoServer

BUCKET = "bench"
SIZE = 110 * 1024


def _upload(endpoint: str, count: int) -> None:
    s3 = boto3.client("s3", endpoint_url=endpoint)
    s3.create_bucket(Bucket=BUCKET)
    payload = os.urandom(SIZE)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: s3.put_object(Bucket=BUCKET, Key=f"small/{i:06d}.jpg", Body=payload), range(count)))
    s3.put_object(Bucket=BUCKET, Key="big.bin", Body=os.urandom(SIZE * count))


def _timed(fn: Callable[[int], int], count: int, in_flight: int) -> tuple[float, float]:
    """(objects/s, MB/s) of ``fn(i)`` for ``i < count`` with ``in_flight`` threads."""
    began = time.perf_counter()
    with ThreadPoolExecutor(in_flight) as pool:
        total = sum(pool.map(fn, range(count)))
    took = time.perf_counter() - began
    return count / took, total / took / 1e6


def _clients(endpoint: str) -> dict[str, tuple[Callable[[int], int], Callable[[int], int]]]:
    """Per client: (whole object i, range i of the big object), each returning the bytes read."""
    import obstore
    import s3fs
    from obstore.store import S3Store
    from pyarrow import fs as pafs

    store = S3Store(BUCKET, endpoint=endpoint, client_options={"allow_http": True}, region="us-east-1")
    arrow = pafs.S3FileSystem(endpoint_override=endpoint, scheme="http", region="us-east-1")
    big = arrow.open_input_file(f"{BUCKET}/big.bin")
    sfs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint})
    boto = boto3.client("s3", endpoint_url=endpoint, config=boto3.session.Config(max_pool_connections=64))

    def key(i: int) -> str:
        return f"small/{i:06d}.jpg"

    def boto_range(i: int) -> int:
        r = f"bytes={i * SIZE}-{(i + 1) * SIZE - 1}"
        return len(boto.get_object(Bucket=BUCKET, Key="big.bin", Range=r)["Body"].read())

    def s3fs_range(i: int) -> int:
        with sfs.open(f"{BUCKET}/big.bin", "rb", block_size=SIZE) as f:
            f.seek(i * SIZE)
            return len(f.read(SIZE))

    return {
        "obstore": (
            lambda i: len(obstore.get(store, key(i)).bytes()),
            lambda i: len(obstore.get_range(store, "big.bin", start=i * SIZE, length=SIZE)),
        ),
        "pyarrow.fs.S3FileSystem": (
            lambda i: len(arrow.open_input_file(f"{BUCKET}/{key(i)}").read()),
            lambda i: len(big.read_at(SIZE, i * SIZE)),
        ),
        "s3fs 0.4.2 (fsspec)": (lambda i: len(sfs.cat(f"{BUCKET}/{key(i)}")), s3fs_range),
        "boto3": (lambda i: len(boto.get_object(Bucket=BUCKET, Key=key(i))["Body"].read()), boto_range),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=256)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--delay-ms", type=float, default=0.0, help="added to every request by a proxy")
    args = parser.parse_args()
    for name, value in (("AWS_ACCESS_KEY_ID", "bench"), ("AWS_SECRET_ACCESS_KEY", "bench")):
        os.environ.setdefault(name, value)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    _upload(endpoint, args.objects)
    proxy = DelayProxy(host, port, args.delay_ms / 1e3) if args.delay_ms else None
    if proxy is not None:
        proxy.start()
        endpoint = proxy.url
    print(f"{args.objects} objects of {SIZE // 1024} KB, {args.in_flight} in flight, +{args.delay_ms:g} ms/request")
    print(f"{'client':26} {'GET obj/s':>10} {'GET MB/s':>9} {'range/s':>9} {'range MB/s':>10}")
    for name, (whole, ranged) in _clients(endpoint).items():
        whole(0), ranged(0)  # connections and credentials first
        g = _timed(whole, args.objects, args.in_flight)
        r = _timed(ranged, args.objects, args.in_flight)
        print(f"{name:26} {g[0]:10.0f} {g[1]:9.1f} {r[0]:9.0f} {r[1]:10.1f}")
    if proxy is not None:
        proxy.stop()
    server.stop()


if __name__ == "__main__":
    main()
