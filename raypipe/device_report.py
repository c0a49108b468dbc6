"""Which path each part of a pipeline took on this machine, and why (``pipe.device_report()``).

Built once when the pipeline is built, from the device context, the staged graph and the
start-up checks of :mod:`raypipe.device_check`. A GPU component this pipeline would use that
failed its check warns here, once per process, so a slow or host path is never silent.
"""

from __future__ import annotations

from typing import Any

from . import device_check, nvimgcodec_c
from .backend import DeviceContext, gpu_unavailable_reason, simulated
from .gpu_decode import code_streams_in
from .graph import StagedGraph
from .operator import Operator
from .stage_threads import StageThreads


def device_report(
    device: DeviceContext, staged: StagedGraph, requested: int | None, cpu_threads: StageThreads
) -> dict[str, Any]:
    """``{"device_id", "gpu", "reason", "decoder", "kernels", "operators", "cpu_stage"}``: the GPU in
    use (None and ``reason`` when on the host), the decoder's and the kernels' path with their
    checks' detail, per GPU-stage operator label how it runs (``"kernels"``, ``"cupy per sample"``,
    ``"host"``, or ``"simulator"`` under ``RAYPIPE_DEVICE=simulator``), and the CPU stage's
    ``{"threads", "detail"}`` (``cpu_threads``). On the GPU the decoder's entry also names its backends,
    the stage that makes its code streams (``RAYPIPE_GPU_CODE_STREAMS``) and the nvImageCodec API it
    decodes through (``RAYPIPE_NVIMGCODEC_API``). ``requested`` is the
    pipeline's ``device_id``."""
    mixed_decoders = [n for n in staged.decode_plans if n.device == "mixed"]
    report: dict[str, Any] = {
        "device_id": device.device_id,
        "gpu": device.on_gpu,
        "reason": None if device.on_gpu else _host_reason(requested),
        "decoder": _decoder_path(device, staged, bool(mixed_decoders)),
        "kernels": _kernels_path(device, any(n.device != "cpu" for n in staged.gpu_nodes)),
        "operators": {},
        "cpu_stage": cpu_threads._asdict(),
    }
    batched = report["kernels"]["path"] == "gpu"
    for node in staged.gpu_nodes:
        has_kernels = _batched(node.op)
        if node.device == "cpu":  # a host batch step: numpy on the gathered batch, whatever the device
            how = "host"
        elif not device.on_gpu:
            how = "simulator" if device.batched and has_kernels else "host"
        elif has_kernels and batched:
            how = "kernels"
        else:
            how = "cupy per sample"
        report["operators"][node.label] = how
    return report


def _batched(op: Operator) -> bool:
    """Whether ``op`` takes a batch in its own call, and so do the device operators it runs inside
    (``inner_operators()``: a policy's augmentations)."""
    inner = getattr(op, "inner_operators", None)
    return type(op).run_batch is not Operator.run_batch and all(_batched(o) for o in (inner() if inner else ()))


def _host_reason(requested: int | None) -> str:
    if requested is not None and simulated():
        return "RAYPIPE_DEVICE=simulator: the GPU stage runs batched on numpy arrays in numba's CUDA simulator"
    if requested is None:
        return "no device_id: a CPU-only pipeline"
    return f"device_id={requested} but no usable GPU ({gpu_unavailable_reason()})"


def _decoder_path(device: DeviceContext, staged: StagedGraph, has_mixed: bool) -> dict[str, Any]:
    if not has_mixed:
        return {"path": None, "detail": "no mixed decoder"}
    if not device.on_gpu:
        if staged.deferred:
            return {
                "path": "simulator",
                "detail": "RAYPIPE_GPU_DECODE=host: nvImageCodec's CPU backend decodes in the Mixed stage",
                "code_streams": f"{code_streams_in()} stage",
                "api": _api(),
            }
        return {"path": "host", "detail": "no GPU: decoded on the host"}
    check = device_check.decoder(device.device_id)
    if not check.ok:
        device_check.warn_once(
            "decoder", f"GPU decoding is not used: {check.detail}; mixed decoders decode on the host (CPU stage)"
        )
        return {"path": "host", "detail": check.detail}
    return {
        "path": "gpu",
        "detail": check.detail,
        "backends": list(check.backends),
        "code_streams": f"{code_streams_in()} stage",
        "api": _api(),
    }


def _api() -> str:
    """Which nvImageCodec API decodes batches: ``"c"``, or ``"python"`` and why not the C API (the
    decoder checks the C API again when the Mixed stage first decodes, and warns if it fails)."""
    problem = nvimgcodec_c.problem()
    return "c" if problem is None else f"python ({problem})"


def _kernels_path(device: DeviceContext, has_gpu_nodes: bool) -> dict[str, Any]:
    if device.batched and not device.on_gpu:
        return {"path": "simulator", "detail": "numba's CUDA simulator runs the kernels on numpy arrays"}
    if not device.on_gpu:
        return {"path": "host", "detail": "no GPU: GPU operators run on the host"}
    check = device_check.kernels()
    if not check.ok and has_gpu_nodes:
        device_check.warn_once(
            "kernels",
            f"the batched GPU kernels are not used: {check.detail}; GPU operators run sample by sample with cupy "
            "(about one launch per sample and operator)",
        )
    return {"path": "gpu" if check.ok else "cupy per sample", "detail": check.detail}
