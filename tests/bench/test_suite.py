"""``raypipe bench`` end to end on a tiny data set (``--quick``), its report and JSON, and the
checks of its arguments. No timed assertions: only that every value is there and consistent."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

from raypipe import cli
from raypipe.bench.contenders import check_batch, contenders

IN_PROCESS = ["raypipe-cpu-f32", "raypipe-cpu-u8", "torch", "decode-pillow"]


def _bench(tmp_path, *argv: str) -> tuple[int, dict]:
    out = tmp_path / "bench.json"
    code = cli.main(["bench", "--quick", *argv, "--json", str(out)])
    return code, json.loads(out.read_text())


def _check_rows(summary: dict, names: list[str]) -> None:
    """Every contender there with positive values in every round, each round timed over whole
    epochs of full batches for at least the seconds asked, and ratios and MP/s that follow from
    the medians."""
    rows = {row["name"]: row for row in summary["contenders"]}
    settings = summary["settings"]
    epoch = settings["batches_per_epoch"] * settings["batch_size"]
    assert list(rows) == names
    reference = rows[summary["reference"]["name"]]["images_per_s"] if summary["reference"]["name"] else None
    for row in rows.values():
        assert len(row["rounds"]) == summary["settings"]["rounds"]
        assert [r["round"] for r in row["rounds"]] == list(range(1, summary["settings"]["rounds"] + 1))
        assert all(r["images"] >= epoch and r["images"] % epoch == 0 for r in row["rounds"]), (row["name"], epoch)
        assert all(r["images_per_s"] > 0 and r["first_batch_s"] > 0 for r in row["rounds"])
        assert all(r["images"] / r["images_per_s"] >= settings["timed_seconds"] for r in row["rounds"])
        assert row["images_per_s"] > 0
        assert row["ratio"] == (pytest.approx(row["images_per_s"] / reference) if reference else None)
        assert row["megapixels_per_s"] == pytest.approx(row["images_per_s"] * summary["dataset"]["mean_megapixels"])
        assert row["peak_memory_mib"] is None or row["peak_memory_mib"] >= 0
        assert 0 <= row["idle_pct"] <= 100 and 0 <= row["steal_pct"] <= 100 - row["idle_pct"]


def test_quick_run_without_dali_compares_to_the_best_other_loader(tmp_path, jpeg_root, capsys, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setitem(sys.modules, "nvidia.dali", None)  # as if DALI were not installed
    code, summary = _bench(
        tmp_path, "--data", jpeg_root, "--batch-size", "8", "--only", ",".join(["dali-cpu", *IN_PROCESS])
    )
    assert code == 0
    _check_rows(summary, IN_PROCESS)
    assert summary["reference"]["name"] == "torch", "the only other reference loader that ran"
    assert [s["name"] for s in summary["skipped"]] == ["dali-cpu"]
    assert "nvidia.dali" in summary["skipped"][0]["reason"]
    assert summary["failed"] == []
    assert summary["dataset"]["images"] == 24 and summary["settings"]["batches_per_epoch"] == 3
    assert summary["settings"]["warmup_batches"] == 1 and summary["settings"]["timed_seconds"] == 0  # --quick
    assert summary["machine"]["cpus"] == os.cpu_count()
    table = capsys.readouterr().out
    assert "note: skipping dali-cpu" in table
    assert "vs torch" in table and "reference: no DALI" in table
    for row in summary["contenders"]:
        line = next(line for line in table.splitlines() if line.startswith(row["label"]))
        assert f"{row['images_per_s']:.0f}" in line and f"{row['ratio']:.2f}x" in line
        assert line.endswith(f"{row['idle_pct']:.0f}  {row['steal_pct']:>7.1f}")


def test_dali_is_the_reference_when_installed(tmp_path, jpeg_root, capsys):
    pytest.importorskip("nvidia.dali")
    code, summary = _bench(
        tmp_path, "--data", jpeg_root, "--batch-size", "8", "--rounds", "1", "--only", "dali*,raypipe-cpu-u8"
    )
    assert code == 0
    _check_rows(summary, ["dali-cpu", "raypipe-cpu-u8"])
    assert summary["reference"]["name"] == "dali-cpu"
    assert summary["contenders"][0]["ratio"] == pytest.approx(1.0)
    assert "vs DALI" in capsys.readouterr().out


def test_service_with_one_rank(tmp_path, jpeg_root, capsys):
    import ray

    if ray.is_initialized():
        pytest.skip("raypipe bench starts its own Ray; this test process already has one")
    code, summary = _bench(
        tmp_path,
        *("--data", jpeg_root, "--batch-size", "8", "--rounds", "1", "--seconds", "0.5"),
        *("--only", "service-1rank,raypipe-cpu-f32"),
    )
    assert code == 0
    assert summary["settings"]["timed_seconds"] == 0.5
    _check_rows(summary, ["raypipe-cpu-f32", "service-1rank"])  # epochs timed for 0.5 s, the service's after a first
    assert all(r["images"] > 24 for row in summary["contenders"] for r in row["rounds"]), "more than one epoch"
    service = summary["contenders"][1]
    assert service["store_peak_mib"] is not None and summary["contenders"][0]["store_peak_mib"] is None
    # the batches (8 x 3 x 224 x 224 float32, 4.6 MiB) come through the pipeline actor's shared
    # memory (``actors.host_ring``): the object store never holds one, and spills nothing
    assert service["store_peak_mib"] < 4.5
    assert service["store_spilled_mib"] == 0 and summary["contenders"][0]["store_spilled_mib"] is None
    assert summary["reference"]["name"] is None and service["ratio"] is None
    assert "n/a" in capsys.readouterr().out
    assert not ray.is_initialized(), "the run's Ray is shut down"


def test_every_round_on_ray_gets_a_fresh_ray_with_the_contenders_gpus_and_the_others_none(tmp_path, jpeg_root):
    import ray

    from raypipe.bench.contenders import Contender, Timing
    from raypipe.bench.dataset import prepare
    from raypipe.bench.suite import run_rounds

    if ray.is_initialized():
        pytest.skip("raypipe bench starts its own Ray; this test process already has one")
    seen: list[tuple[str, object]] = []

    def on_ray(work):
        seen.append(("ray", (ray.get_runtime_context().get_node_id(), ray.cluster_resources().get("GPU"))))
        return Timing(0.1, 8, 80.0)

    def off_ray(work):
        seen.append(("plain", ray.is_initialized()))
        return Timing(0.1, 8, 80.0)

    records = run_rounds(
        [Contender("a", "a", on_ray, uses_ray=True, ranks=2), Contender("b", "b", off_ray)],
        prepare(jpeg_root, 16),
        batch_size=8,
        threads=2,
        rounds=2,
    )
    assert [r.failure for r in records] == [None, None] and [len(r.rounds) for r in records] == [2, 2]
    assert [kind for kind, _ in seen] == ["ray", "plain", "ray", "plain"]
    (first_node, first_gpus), (second_node, second_gpus) = seen[0][1], seen[2][1]
    assert first_node != second_node, "each round on Ray starts a Ray of its own"
    assert first_gpus == second_gpus == 2
    assert seen[1][1] is False and seen[3][1] is False, "no Ray runs during the other contenders' rounds"
    assert not ray.is_initialized()


def test_a_failing_contender_is_reported_and_the_others_go_on(tmp_path, jpeg_root, capsys, monkeypatch):
    import raypipe.bench.contenders as module

    def broken(*args, **kwargs):
        raise RuntimeError("boom")
        yield

    monkeypatch.setattr(module, "_decode", broken)
    code, summary = _bench(tmp_path, "--data", jpeg_root, "--batch-size", "8", "--only", "decode-pillow,raypipe-cpu-u8")
    assert code == 1
    assert [row["name"] for row in summary["contenders"]] == ["raypipe-cpu-u8"]
    assert summary["failed"] == [
        {
            "name": "decode-pillow",
            "label": summary["failed"][0]["label"],
            "reason": "round 1: RuntimeError: boom",
            "rounds": [],
        }
    ]
    printed = capsys.readouterr()
    assert "FAILED decode-pillow: round 1: RuntimeError: boom" in printed.out
    assert "decode-pillow failed in round 1: RuntimeError: boom" in printed.err


def test_check_batch_rejects_the_wrong_dtype_or_shape():
    import numpy as np

    check_batch("x", np.zeros((2, 3, 224, 224), np.float32), "float32", (2, 3, 224, 224))
    with pytest.raises(RuntimeError, match=r"expected float32 batches of shape \(2, 3, 224, 224\), got uint8"):
        check_batch("x", np.zeros((2, 3, 224, 224), np.uint8), "float32", (2, 3, 224, 224))
    with pytest.raises(RuntimeError, match=r"got float32 \(2, 224, 224, 3\)"):
        check_batch("x", np.zeros((2, 224, 224, 3), np.float32), "float32", (2, 3, 224, 224))


def test_time_batches_skips_the_warm_up_times_the_count_and_closes_the_stream():
    from raypipe.bench.contenders import time_batches

    seen, closed = [], []

    def stream():
        try:
            for k in range(1000):
                seen.append(k)
                yield 10 + k
        finally:
            closed.append(True)

    timing = time_batches(stream(), warmup=3, per_epoch=5)
    assert seen == list(range(9)), "the first batch, 3 warm-up batches, an epoch of 5 timed ones, nothing more"
    assert timing.images == sum(10 + k for k in range(4, 9)) and timing.images_per_s > 0
    assert closed == [True]


def test_time_batches_times_whole_epochs_until_the_seconds_have_passed():
    from raypipe.bench.contenders import time_batches

    asked: list[float] = []  # when each batch was asked for

    def stream():
        while True:
            asked.append(time.perf_counter())
            time.sleep(0.01)
            yield 4

    timing = time_batches(stream(), warmup=0, per_epoch=3, seconds=0.2)
    timed = asked[1:]  # after the first batch
    assert timing.images == 4 * len(timed) and len(timed) % 3 == 0, "whole epochs of 3 batches"
    assert timing.images / timing.images_per_s >= 0.2
    assert timed[-3] - timed[0] < 0.2, "no epoch begun after the seconds had passed"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--batch-size", "0"], "--batch-size must be at least 1, got 0"),
        (["--threads", "0"], "--threads must be at least 1"),
        (["--rounds", "-1"], "--rounds must be at least 1"),
        (["--warmup", "-1"], "--warmup must be a finite number at least 0"),
        (["--seconds", "-1"], "--seconds must be a finite number at least 0, got -1"),
        (["--seconds", "inf"], "--seconds must be a finite number at least 0, got inf"),
        (["--images", "abc"], "argument --images: invalid int value"),
        (["--only", "nosuch"], "--only: no contender matches 'nosuch'"),
        (["--only", ","], "--only needs contender names"),
        (["--only", "torch", "--skip", "tor*"], "leave no contender"),
        (["--images", "20", "--batch-size", "16", "--only", "torch"], "at least 32 images$"),
        (["--images", "48", "--batch-size", "16"], r"at least 64 images \(service-2ranks has 2 ranks\)"),
        (["--data", "MISSING"], "--data: readers.file: file_root .* does not exist"),
        (["--data", "DATA", "--images", "100"], "--images 100: .* holds only 24 images"),
        (["--data", "CONVERTED"], "--data: .* holds a conversion by raypipe convert; .* converted from"),
        (["--json", "NOWHERE"], "--json .*: not a writable file path"),
    ],
)
def test_bad_arguments_stop_before_anything_starts(tmp_path, jpeg_root, capsys, monkeypatch, argv, message):
    import re

    import ray

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    places = {"MISSING": str(tmp_path / "missing"), "DATA": jpeg_root, "NOWHERE": str(tmp_path / "no" / "b.json")}
    places["CONVERTED"] = str(tmp_path / "converted")
    (tmp_path / "converted" / ".raypipe-convert").mkdir(parents=True)
    (tmp_path / "converted" / ".raypipe-convert" / "manifest.json").write_text('{"format": "tfrecord"}')
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", *[places.get(a, a) for a in argv]])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: raypipe bench") and re.search(message, err), err
    assert not (tmp_path / "cache").exists(), "no data generated"
    assert not ray.is_initialized()


def test_cli_lists_subcommands_and_contenders(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0 and "bench" in capsys.readouterr().out
    assert cli.main(["bench", "--list"]) == 0
    listed = capsys.readouterr().out
    names = [c.name for c in contenders(2)]
    assert [line.split()[0] for line in listed.splitlines()] == names
    assert len(names) == len(set(names))
