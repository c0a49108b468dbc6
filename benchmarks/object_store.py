"""The ResNet-50 pipeline (``presets.resnet50_train``, CPU decode) reading its JPEGs from a local
S3 server (moto, in its own process) behind a proxy adding 20 ms and 50 ms to every request, against
the same files read locally in the same run; and the time to list a ``file_root`` of many objects.

    python benchmarks/object_store.py                       # 2,000 generated JPEGs, 100,000 objects listed
    python benchmarks/object_store.py --images 512 --epochs 1 --list-objects 20000 --threads 2

Prints one row per source: images/s, the ratio to local files, the fetch-ahead's peak requests
in flight and peak bytes held (``readers.file`` ``io_stats``); then the listing time.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import boto3

from raypipe.bench.contenders import time_batches
from raypipe.bench.dataset import prepare
from raypipe.presets import resnet50_train
from raypipe.storage import store

HERE = os.path.dirname(os.path.abspath(__file__))
BUCKET = "bench"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_moto() -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, endpoint
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("moto's server did not start")


def _start_proxy(endpoints: list[str], delay_ms: float) -> tuple[subprocess.Popen, str]:
    ports = [e.rsplit(":", 1)[1] for e in endpoints]
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "delay_proxy.py"), str(delay_ms), *ports],
        stdout=subprocess.PIPE,
        text=True,
    )
    return proc, proc.stdout.readline().strip()


def _upload(s3, root: str, paths: list[str]) -> None:
    def put(path: str) -> None:
        s3.upload_file(path, BUCKET, "images/" + os.path.relpath(path, root))

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, paths))


def _use_endpoint(endpoint: str) -> None:
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    store._STORES.clear()  # a new client for the new endpoint


def _rate(file_root: str, args: argparse.Namespace, images: int) -> tuple[float, dict]:
    """images/s of the pipeline over ``file_root`` (after a warm-up epoch), and its reader's io_stats."""
    pipe = resnet50_train(file_root, batch_size=args.batch_size, num_threads=args.threads, seed=1)
    per_epoch = images // args.batch_size

    def batches():
        while True:
            images_, _ = pipe.run()
            yield len(images_)

    with pipe:
        timing = time_batches(batches(), warmup=per_epoch - 1, per_epoch=per_epoch * args.epochs)
        return timing.images_per_s, pipe.read_stats()


def _list_time(s3, endpoint: str, count: int) -> float:
    """Seconds to list a file_root of ``count`` (empty) objects in 100 class folders."""
    keys = [f"many/c{i % 100:03d}/{i:07d}.jpg" for i in range(count)]
    began = time.perf_counter()
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(lambda k: s3.put_object(Bucket=BUCKET, Key=k, Body=b""), keys))
    print(f"({count:,} empty objects uploaded in {time.perf_counter() - began:.0f} s)")
    _use_endpoint(endpoint)
    from raypipe.operators.readers import list_bucket_root

    began = time.perf_counter()
    paths, _, _ = list_bucket_root(f"s3://{BUCKET}/many")
    took = time.perf_counter() - began
    assert len(paths) == count
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs per source")
    parser.add_argument("--delays-ms", type=float, nargs="*", default=[20.0, 50.0])
    parser.add_argument("--list-objects", type=int, default=100_000, help="0: no listing")
    parser.add_argument("--servers", type=int, default=4, help="moto servers (each with all the data) behind the proxy")
    args = parser.parse_args()
    for name, value in (("AWS_ACCESS_KEY_ID", "bench"), ("AWS_SECRET_ACCESS_KEY", "bench")):
        os.environ.setdefault(name, value)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    data = prepare(None, args.images)
    procs, endpoints = [], []
    try:
        for _ in range(args.servers):
            proc, endpoint = _start_moto()
            procs.append(proc)
            endpoints.append(endpoint)
            s3 = boto3.client("s3", endpoint_url=endpoint)
            s3.create_bucket(Bucket=BUCKET)
            _upload(s3, data.root, data.paths)
        endpoint = endpoints[0]
        n = len(data.paths)
        print(
            f"{n} JPEGs ({data.mean_kib:.0f} KiB mean), batch {args.batch_size}, {args.threads} threads, CPU decode, "
            f"{args.servers} moto server(s) behind one delaying proxy"
        )
        local, _ = _rate(data.root, args, n)
        rows = [("local files", "-", local, {})]
        for delay in args.delays_ms:
            proxy, url = _start_proxy(endpoints, delay)
            procs.append(proxy)
            _use_endpoint(url)
            rate, stats = _rate(f"s3://{BUCKET}/images", args, n)
            rows.append((f"s3 (moto) +{delay:g} ms", f"{delay:g}", rate, stats))
            proxy.terminate()
        print(f"{'source':22} {'img/s':>8} {'x local':>8} {'in flight (peak)':>17} {'MB held (peak)':>15}")
        for label, _, rate, stats in rows:
            flight = stats.get("in_flight_peak", "-")
            held = f"{stats['bytes_held_peak'] / 2**20:.1f}" if stats else "-"
            print(f"{label:22} {rate:8.1f} {rate / local:8.2f} {flight!s:>17} {held:>15}")
        if args.list_objects:
            took = _list_time(boto3.client("s3", endpoint_url=endpoint), endpoint, args.list_objects)
            print(f"listing a file_root of {args.list_objects:,} objects (moto, no delay): {took:.1f} s")
    finally:
        for proc in procs:
            proc.terminate()


if __name__ == "__main__":
    main()
