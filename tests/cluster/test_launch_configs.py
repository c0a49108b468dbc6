"""The launch configurations of cluster/ (``ray up``, Slurm, KubeRay), checked without a cluster.

Each parses; Ray's own schema and config loader accept the ``ray up`` YAML; every entrypoint runs a
script of this repository with options that the script's own ``--help`` lists; and the GPUs each
configuration starts add up to the job's ``--workers``, one training rank per GPU.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import ray
import tomllib
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "cluster"
SBATCH = CLUSTER / "slurm" / "raypipe.sbatch"
TRAIN = "examples/train_ddp.py"


def _yaml(name: str) -> dict:
    return yaml.safe_load((CLUSTER / name).read_text())


def _extras() -> set[str]:
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])


@pytest.fixture(scope="module")
def train_args():
    """A parser with the options that ``examples/train_ddp.py --help`` lists (the script builds its
    parser inside ``main``), as strings: parsing a command line with it fails on any option the
    script does not have, or on an option missing its value."""
    usage = subprocess.run(
        [sys.executable, TRAIN, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    ).stdout.split("\n\n")[0]
    options = re.findall(r"\[(--[\w-]+)(?: ([A-Z_]+))?\]", usage)
    assert {"--data", "--workers", "--gpu"} <= {option for option, _ in options}
    parser = argparse.ArgumentParser(prog=TRAIN, add_help=False)
    for option, metavar in options:
        parser.add_argument(option, action="store" if metavar else "store_true")
    return parser


def _train_command(argv: list[str], parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The options of ``python examples/train_ddp.py ...`` in ``argv`` (after ``--`` when it is a
    ``ray job submit``), parsed with the script's own options."""
    if "--" in argv:
        argv = argv[argv.index("--") + 1 :]
    assert argv[:2] == ["python", TRAIN], argv
    assert (ROOT / argv[1]).is_file()
    return parser.parse_args(argv[2:])


def _readme_section(title: str) -> str:
    text = (CLUSTER / "README.md").read_text()
    return text.split(f"## {title}")[1].split("\n## ")[0]


# ---------------------------------------------------------------- ray up (local provider)


def test_ray_cluster_yaml_passes_rays_schema_and_config_loader():
    jsonschema = pytest.importorskip("jsonschema")
    from ray.autoscaler._private.commands import _bootstrap_config

    config = _yaml("ray-cluster.yaml")
    schema = json.loads((Path(ray.__file__).parent / "autoscaler" / "ray-schema.json").read_text())
    jsonschema.validate(config, schema)
    misspelt = copy.deepcopy(config)
    misspelt["worker_start_ray_command"] = misspelt.pop("worker_start_ray_commands")
    with pytest.raises(jsonschema.ValidationError, match="worker_start_ray_command"):
        jsonschema.validate(misspelt, schema)

    # what `ray up --no-config-cache` does before it opens any ssh connection
    resolved = _bootstrap_config(copy.deepcopy(config), no_config_cache=True)
    nodes = len(config["provider"]["worker_ips"])
    node_type = resolved["available_node_types"][resolved["head_node_type"]]
    assert node_type["min_workers"] == node_type["max_workers"] == resolved["max_workers"] == nodes
    assert resolved["head_start_ray_commands"] == config["head_start_ray_commands"]
    assert resolved["worker_start_ray_commands"] == config["worker_start_ray_commands"]


def _ray_start(commands: list[str]) -> tuple[dict[str, str], list[str]]:
    """The last of a node's start commands (the first stops any Ray on the node): its environment
    assignments and its words."""
    assert commands[0] == "ray stop"
    words = shlex.split(commands[-1])
    env = dict(w.split("=", 1) for w in words if re.fullmatch(r"[A-Z_]+=\S*", w))
    return env, words[len(env) :]


def test_ray_cluster_starts_ray_like_the_start_scripts_with_one_token():
    config = _yaml("ray-cluster.yaml")
    head_env, head = _ray_start(config["head_start_ray_commands"])
    worker_env, worker = _ray_start(config["worker_start_ray_commands"])
    default_port = re.search(r"RAY_PORT:-(\d+)", (CLUSTER / "start_head.sh").read_text())[1]

    assert head[:3] == ["ray", "start", "--head"]
    assert f"--port={default_port}" in head and "--dashboard-host=0.0.0.0" in head
    assert "--autoscaling-config=~/ray_bootstrap_config.yaml" in head
    # the workers join through cluster/start_worker.sh of the synced checkout, on the head's port
    assert worker[0] == "bash" and worker[1] == "~/raypipe/cluster/start_worker.sh"
    assert (CLUSTER / "start_worker.sh").is_file()
    assert worker[2:] == ["$RAY_HEAD_IP", default_port]
    gpus = re.fullmatch(r"--num-gpus=(\d+)", next(a for a in head if a.startswith("--num-gpus")))[1]
    assert worker_env["NUM_GPUS"] == gpus

    # the token: copied from this machine to every node, required by every `ray start`
    assert config["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"
    assert head_env["RAY_AUTH_MODE"] == worker_env["RAY_AUTH_MODE"] == "token"

    # the checkout goes to ~/raypipe and is installed there with extras that exist, next to the
    # Ray version that these tests run
    assert config["file_mounts"]["~/raypipe"] == "."
    (setup,) = config["setup_commands"]
    cd, install = setup.split(" && ")
    assert cd == "cd ~/raypipe"
    words = shlex.split(install)
    assert words[:5] == ["python3", "-m", "pip", "install", "-e"]
    extras = set(re.fullmatch(r"\.\[([\w,-]+)\]", words[5])[1].split(","))
    assert "torch" in extras and extras <= _extras()
    (pinned,) = [Requirement(w) for w in words[6:]]
    assert pinned.name == "ray" and str(pinned.specifier) == f"=={ray.__version__}"


def test_ray_cluster_job_uses_every_gpu(train_args):
    config = _yaml("ray-cluster.yaml")
    gpus = int(re.search(r"--num-gpus=(\d+)", config["head_start_ray_commands"][-1])[1])
    nodes = 1 + len(config["provider"]["worker_ips"])
    (line,) = [ln for ln in _readme_section("Your own machines").splitlines() if TRAIN in ln]
    exec_words = shlex.split(line)
    assert exec_words[:3] == ["ray", "exec", "cluster/ray-cluster.yaml"]
    cd, submit = exec_words[3].split(" && ")
    assert cd == "cd ~/raypipe"
    submit_words = shlex.split(submit)
    assert submit_words[:4] == ["RAY_AUTH_MODE=token", "ray", "job", "submit"]
    args = _train_command(submit_words, train_args)
    assert args.gpu and int(args.workers) == nodes * gpus == 32


# ---------------------------------------------------------------- Slurm


def test_slurm_script_passes_bash_n():
    result = subprocess.run(["bash", "-n", str(SBATCH)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_slurm_script_passes_shellcheck():
    result = subprocess.run(["shellcheck", str(SBATCH)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout


def test_slurm_script_refuses_to_run_outside_an_allocation(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    result = subprocess.run(["bash", str(SBATCH)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "SLURM_JOB_ID" in result.stderr and "run this script with sbatch" in result.stderr
    assert list(tmp_path.iterdir()) == []


def _sbatch_options(text: str) -> dict[str, str]:
    return dict(m.groups() for m in re.finditer(r"^#SBATCH --([\w-]+)(?:=(\S+))?$", text, re.MULTILINE))


def _logical_lines(text: str) -> list[str]:
    """The script's commands: continued lines joined, stripped, comments left out."""
    lines = (ln.strip() for ln in text.replace("\\\n", " ").splitlines())
    return [ln for ln in lines if ln and not ln.startswith("#")]


def test_slurm_job_uses_every_gpu_of_the_allocation(train_args):
    text = SBATCH.read_text()
    options = _sbatch_options(text)
    assert options["ntasks-per-node"] == "1"
    lines = _logical_lines(text)

    # every `ray start` (the head and one worker per other node) offers the node's allocated GPUs
    (gpus_line,) = [ln for ln in lines if ln.startswith("gpus_per_node=")]
    assert gpus_line.startswith('gpus_per_node="${SLURM_GPUS_ON_NODE:?')
    (start,) = [ln for ln in lines if ln.startswith("srun ") and "ray start --block" in ln]
    assert '--num-gpus="$gpus_per_node"' in start.split()
    assert re.search(r'srun --nodes=1 --ntasks=1 .*-w "\$node"', start)
    assert any(ln.startswith('ray_node "$head_node" --head ') for ln in lines)
    loop = lines.index('for node in "${nodes[@]:1}"; do')
    assert lines[loop + 1 : loop + 3] == ['ray_node "$node" --address="$ray_address"', "done"]

    # --workers: the script's own arithmetic on the allocation that its #SBATCH lines request
    (workers_line,) = [ln for ln in lines if ln.startswith("workers=")]
    nodes, gpus = options["nodes"], options["gpus-per-node"]
    shell = f"SLURM_JOB_NUM_NODES={nodes} gpus_per_node={gpus}; {workers_line}; echo $workers"
    workers = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, check=True).stdout.strip()
    assert int(workers) == int(nodes) * int(gpus) == 16

    (submit,) = [ln for ln in lines if ln.startswith("ray job submit")]
    args = _train_command(shlex.split(submit), train_args)
    assert args.gpu and args.workers == "$workers" and args.data == "$DATA"
    assert re.search(r'^DATA="\$\{DATA:-\S+\}"$', text, re.MULTILINE)


def test_slurm_script_shares_one_token_and_stops_ray_on_exit():
    text = SBATCH.read_text()
    lines = _logical_lines(text)
    assert "set -euo pipefail" in lines
    assert "export RAY_AUTH_MODE=token" in lines and "export RAY_AUTH_TOKEN" in lines
    # the token is made before the first srun, whose environment carries it to every node
    assert lines.index("export RAY_AUTH_TOKEN") < next(i for i, ln in enumerate(lines) if "srun " in ln)
    assert 'mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")' in lines
    assert "trap cleanup EXIT" in lines
    cleanup = text.split("cleanup() {")[1].split("\n}")[0]
    assert 'kill "${steps[@]}"' in cleanup


# ---------------------------------------------------------------- KubeRay


def test_kuberay_rayjob_matches_ray_version_and_crd_fields():
    job = _yaml("kuberay-rayjob.yaml")
    assert job["apiVersion"] == "ray.io/v1" and job["kind"] == "RayJob"
    spec = job["spec"]
    assert spec["shutdownAfterJobFinishes"] is True and isinstance(spec["ttlSecondsAfterFinished"], int)
    cluster = spec["rayClusterSpec"]
    assert cluster["rayVersion"] == ray.__version__
    pods = [cluster["headGroupSpec"]["template"]["spec"]] + [g["template"]["spec"] for g in cluster["workerGroupSpecs"]]
    images = {c["image"] for pod in pods for c in pod["containers"]}
    assert images == {f"rayproject/ray:{ray.__version__}-py311-gpu"}
    # the CRD's rayStartParams is a map of strings
    for params in [cluster["headGroupSpec"]["rayStartParams"]] + [
        g["rayStartParams"] for g in cluster["workerGroupSpecs"]
    ]:
        assert all(isinstance(v, str) for v in params.values()), params
    # every mounted volume is one of the pod's volumes
    for pod in pods:
        volumes = {v["name"] for v in pod["volumes"]}
        assert {m["name"] for c in pod["containers"] for m in c["volumeMounts"]} <= volumes


def test_kuberay_rayjob_runs_our_code_on_every_gpu(train_args):
    from ray.runtime_env import RuntimeEnv

    spec = _yaml("kuberay-rayjob.yaml")["spec"]
    cluster = spec["rayClusterSpec"]
    head = cluster["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in head["resources"]["limits"]
    gpus = 0
    for group in cluster["workerGroupSpecs"]:
        assert group["minReplicas"] == group["replicas"] == group["maxReplicas"]
        (container,) = group["template"]["spec"]["containers"]
        per_pod = container["resources"]["limits"]["nvidia.com/gpu"]
        assert container["resources"]["requests"]["nvidia.com/gpu"] == per_pod
        assert int(group["rayStartParams"]["num-gpus"]) == per_pod
        gpus += group["replicas"] * per_pod
    args = _train_command(shlex.split(spec["entrypoint"]), train_args)
    assert args.gpu and int(args.workers) == gpus == 16
    # the driver (on the head) and the pipeline actors (on the workers) all read --data
    mounts = [
        {m["mountPath"] for m in c["volumeMounts"]}
        for c in [head] + [g["template"]["spec"]["containers"][0] for g in cluster["workerGroupSpecs"]]
    ]
    assert all(any(args.data.startswith(p + "/") for p in paths) for paths in mounts)

    # our code: working_dir is one archive, and pip installs raypipe with existing extras from it
    env = yaml.safe_load(spec["runtimeEnvYAML"])
    validated = RuntimeEnv(**env)  # Ray's own checks of each field
    assert validated.working_dir() == env["working_dir"] and validated.pip_config()["packages"] == env["pip"]
    (requirement,) = [Requirement(r) for r in env["pip"]]
    assert requirement.name == "raypipe" and requirement.extras <= _extras()
    assert "torch" in requirement.extras and ({"gpu-cu12", "gpu-cu13"} & requirement.extras)
    assert requirement.url == env["working_dir"] and env["working_dir"].endswith(".zip")
