"""Plain-Python reference of the GPU-sharing model (docs/spec/GPU_SHARING.md), written from the
spec with no code shared with jaxsched.gpushare: one run, one pod at a time, float64 scores.

Fragmentation is kept as the integer numerator sum_j count_j frag_j (the spec's F_n times
the total count), and FGD's difference F_n - F_n' is that numerator's difference over
total x 1000, the same quantities the engine computes, so both give the same integers.
"""

import math

from reference_event import counter_bits

MILLI = 1000


def frag_numerator(left, cpu, model, typical):
    """sum_j count_j frag_j of a node: left per existing GPU, cpu left, its model index."""
    idle = sum(left)
    total = 0
    for c_j, m_j, k_j, mask_j, count_j in typical:
        if m_j > 0 and (mask_j >> model) & 1 and sum(x >= m_j for x in left) >= k_j and cpu >= c_j:
            f = sum(x for x in left if x < m_j)
        else:
            f = idle
        total += count_j * f
    return total


def fgd_score(left, cpu, model, typical, c, k, m):
    """(score, GPU for a share pod) of FGD for a pod (c, k, m) on a node that can take it."""
    total = sum(t[4] for t in typical)
    before = frag_numerator(left, cpu, model, typical)

    def s(after_left):
        z = (before - frag_numerator(after_left, cpu - c, model, typical)) / (total * 1000.0)
        return math.floor(100.0 * (1.0 / (1.0 + math.exp(-z))))

    if k == 1 and m < MILLI:
        best, gpu = -1, None
        for i, x in enumerate(left):
            if x >= m:
                v = s(left[:i] + [x - m] + left[i + 1:])
                if v > best:
                    best, gpu = v, i
        return best, gpu
    after = list(left)
    for i in [i for i, x in enumerate(left) if x == MILLI][:k]:
        after[i] = 0
    return s(after), None


def fgd_gpu_scores(left, cpu, model, typical, c, m):
    """FGD's score of a share pod (c, m) on each GPU of a node: {GPU: score} over the GPUs with room."""
    total = sum(t[4] for t in typical)
    before = frag_numerator(left, cpu, model, typical)
    out = {}
    for i, x in enumerate(left):
        if x >= m:
            z = (before - frag_numerator(left[:i] + [x - m] + left[i + 1:], cpu - c, model, typical)) / (total * 1000.0)
            out[i] = math.floor(100.0 * (1.0 / (1.0 + math.exp(-z))))
    return out


FAMILY_TERMS = ("fgd", "best_fit", "dot_prod", "gpu_packing", "gpu_clustering", "idle_whole", "cpu_after",
                "gpu_after", "mem_after", "model_share")


def simulate(nodes, pods, typical, order, rank, policy, words=(0, 0), genome=None):
    """Place pods[order[t]] one by one; nodes: list of dicts (cpu, mem, gpus, model), pods: list of
    dicts (cpu, mem, k, m, mask); typical: list of (c, m, k, mask, count). Returns, per pod,
    (node or -1, tuple of GPUs taken), and per pod the cluster's fragmentation numerator.
    policy "family" scores with `genome` (10 term weights, then the GPU blend; docs/gpushare.md)."""
    gpus_of_model = {}
    for n in nodes:
        gpus_of_model[n["model"]] = gpus_of_model.get(n["model"], 0) + n["gpus"]
    total_gpus = sum(n["gpus"] for n in nodes)
    mem_norm = max(n["mem"] for n in nodes)
    cpu = [n["cpu"] for n in nodes]
    mem = [n["mem"] for n in nodes]
    count = [0] * len(nodes)
    left = [[MILLI] * n["gpus"] for n in nodes]
    aff = [set() for _ in nodes]
    out, frag = [], []
    for t, q in enumerate(order):
        p = pods[q]
        c, k, m = p["cpu"], p["k"], p["m"]
        share = k == 1 and m < MILLI
        cls = None if k == 0 else ("share" if share else k)

        def fits(n):
            if cpu[n] < c or mem[n] < p["mem"] or count[n] + 1 > 1001:
                return False
            if k == 0:
                return True
            if not (p["mask"] >> nodes[n]["model"]) & 1:
                return False
            return any(x >= m for x in left[n]) if k == 1 else sum(x == MILLI for x in left[n]) >= k

        def best_gpu(n):
            room = [(x, i) for i, x in enumerate(left[n]) if x >= m]
            return min(room)[1]

        def score(n):
            L = sum(left[n])
            if policy == "DotProd":
                dot = (cpu[n] / 128000.0) * (c / 128000.0) + (L / 8000.0) * ((k * m) / 8000.0)
                return math.floor(100.0 * (1.0 - dot / 2.0))
            if policy == "BestFit":
                rest = 0.5 * (cpu[n] - c) / 128000.0 + 0.5 * (L - k * m) / 8000.0
                return math.floor(100.0 * (1.0 - rest))
            if policy == "GpuClustering":
                if k == 0:
                    return 0
                base = (25 * (8000 - L)) // 8000
                if aff[n] == {cls}:
                    return base + 75
                if cls in aff[n]:
                    return base + 50
                return base + (25 if not aff[n] else 0)
            if policy == "GpuPacking":
                if k == 0:
                    return 0
                G = nodes[n]["gpus"]
                if sum(x == MILLI for x in left[n]) == G:
                    return max(33 - G, G)
                taken = sorted((x, i) for i, x in enumerate(left[n]) if x >= m)[:k]
                u = sum(x == MILLI for x, _ in taken)
                if u > 0:
                    return max(50 - u, 33)
                return max(100 - sum((x * 100) // 1000 for x, _ in taken) // 10, 50)
            if policy == "FGD":
                return fgd_score(left[n], cpu[n], nodes[n]["model"], typical, c, k, m)[0]
            if policy == "family":
                return sum(w * t for w, t in zip(genome, family_terms(n)))
            raise ValueError(policy)

        def family_terms(n):
            """The family's terms of pod p on node n, in FAMILY_TERMS order."""
            L = sum(left[n])
            G = nodes[n]["gpus"]
            inner = {}
            for name in ("FGD", "BestFit", "DotProd", "GpuPacking", "GpuClustering"):
                inner[name] = score_as(name, n)
            return [inner["FGD"] / 100.0, inner["BestFit"] / 100.0, inner["DotProd"] / 100.0,
                    inner["GpuPacking"] / 100.0, inner["GpuClustering"] / 100.0,
                    sum(x == MILLI for x in left[n]) / max(G, 1), (cpu[n] - c) / 128000.0, (L - k * m) / 8000.0,
                    (mem[n] - p["mem"]) / mem_norm, gpus_of_model[nodes[n]["model"]] / total_gpus]

        def score_as(name, n):
            nonlocal policy
            saved, policy = policy, name
            try:
                return score(n)
            finally:
                policy = saved

        feasible = [n for n in range(len(nodes)) if fits(n)]
        if not feasible:
            out.append((-1, ()))
        else:
            draws = counter_bits(words, t, [0, 1])
            if policy == "Random":
                j = feasible[(int(draws[0]) * len(feasible)) >> 32]
            else:
                scores = {n: score(n) for n in feasible}
                top = max(scores.values())
                j = min((rank[n], n) for n in feasible if scores[n] == top)[1]
            if k == 0:
                gpus = ()
            elif share:
                if policy == "Random":
                    room = [i for i, x in enumerate(left[j]) if x >= m]
                    gpus = (room[(int(draws[1]) * len(room)) >> 32],)
                elif policy == "FGD":
                    gpus = (fgd_score(left[j], cpu[j], nodes[j]["model"], typical, c, k, m)[1],)
                elif policy == "family":
                    blend = genome[-1]
                    s_i = fgd_gpu_scores(left[j], cpu[j], nodes[j]["model"], typical, c, m)
                    value = {i: blend * (s_i[i] / 100.0) + (1.0 - blend) * (1.0 - left[j][i] / MILLI) for i in s_i}
                    top = max(value.values())
                    gpus = (min(i for i in value if value[i] == top),)
                else:
                    gpus = (best_gpu(j),)
            else:
                gpus = tuple([i for i, x in enumerate(left[j]) if x == MILLI][:k])
            cpu[j] -= c
            mem[j] -= p["mem"]
            count[j] += 1
            for i in gpus:
                left[j][i] -= m
            if cls is not None:
                aff[j].add(cls)
            out.append((j, gpus))
        frag.append(sum(frag_numerator(left[n], cpu[n], nodes[n]["model"], typical) for n in range(len(nodes))))
    return out, frag
