"""Where CPU helpers go and when "auto" adds or removes one: pure functions."""

from __future__ import annotations

from cluster.helper_policy import NodeInfo, choose_node, decide, room, stall_fraction

GPU_NODE = NodeInfo("gpu-a", cpus_free=24, gpus=8)  # a DGX-1V-like node: 3 CPUs per GPU
CPU_NODE = NodeInfo("cpu-b", cpus_free=4, gpus=0)


def test_cpu_only_nodes_first_then_gpu_nodes_without_the_reserve():
    placed: dict[str, int] = {}
    chosen = []
    for _ in range(30):
        node = choose_node([GPU_NODE, CPU_NODE], placed, cpus_per_helper=1, reserve_per_gpu=2)
        if node is None:
            break
        chosen.append(node)
        placed[node] = placed.get(node, 0) + 1
    assert chosen[:4] == ["cpu-b"] * 4, "the CPU-only node fills first"
    assert chosen[4:] == ["gpu-a"] * 8, "then the GPU node, leaving 2 CPUs per GPU (16 of 24) to the trainers"
    assert room(GPU_NODE, 8, 1, 2) == 0


def test_the_roomiest_node_of_a_kind_and_no_room_at_all():
    nodes = [NodeInfo("a", 2, 0), NodeInfo("b", 6, 0), NodeInfo("g", 8, 4)]
    assert choose_node(nodes, {}, 2, 1) == "b"
    assert choose_node(nodes, {"b": 2}, 2, 1) == "a"
    assert choose_node(nodes, {"a": 1, "b": 3}, 2, 1) == "g"
    assert choose_node(nodes, {"a": 1, "b": 3, "g": 2}, 2, 1) is None
    assert choose_node([], {}, 1, 1) is None


def test_stall_fraction():
    assert stall_fraction(1.0, 3.0) == 0.25
    assert stall_fraction(0.0, 0.0) == 0.0


def test_decisions_add_under_stall_and_remove_after_calm_rounds():
    assert decide({}, 0, True, 0).action == "keep"
    add = decide({0: 0.05, 1: 0.40}, 0, True, 0)
    assert add.action == "add" and "rank 1" in add.reason and "40%" in add.reason
    assert decide({0: 0.40}, 2, True, 0, max_helpers=2).action == "keep"
    full = decide({0: 0.40}, 1, False, 0)
    assert full.action == "keep" and "no node has a free CPU" in full.reason
    assert decide({0: 0.05}, 1, True, 5).action == "keep", "between the thresholds: hold"
    assert decide({0: 0.01}, 1, True, 2).action == "keep", "calm, but not for long enough"
    busy = decide({0: 0.01, 1: 0.0}, 1, True, 3, spare_helpers=0.4)
    assert busy.action == "keep" and "would bring the stall back" in busy.reason
    remove = decide({0: 0.01, 1: 0.0}, 1, True, 3, spare_helpers=1.3)
    assert remove.action == "remove" and "3 rounds" in remove.reason and "1.3 helpers" in remove.reason
    cooling = decide({0: 0.5}, 1, True, 0, cooling=2)
    assert cooling.action == "keep" and "2 more round" in cooling.reason
    assert decide({0: 0.0}, 0, True, 10, spare_helpers=5).action == "keep", "nothing to remove"
