#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Expert parallelism over processes, end to end through mpirun (cpu backend, tiny models).

- `mpirun -np 2` and `-np 4 --oversubscribe` reproduce the single-process run on the same seed: the first MoE
  layer's routing and output (--dump-tensors: every rank's token rows joined at rank 0), for both dispatch modes;
  equal to fp32 rounding with fp32 dispatch, within the format's error with bf16 and fp8 dispatch.
- The report's [src][dst] byte matrices equal the ones computed here from the dumped routing, by the placement
  rules written out independently (tokens split by sequence, experts in contiguous blocks or from a placement file).
- A rank with bad input, and a rank killed mid-run, end the whole job non-zero within 30 s; --ep without mpirun is
  exit 2 and names mpirun.
- Ranks that disagree on a setting (--layers, --batch, --context, --routing, --seed, --model, --dispatch-dtype,
  --a2a) end with exit 2 on every rank, each naming the first differing rank and field, before any step; the fields
  that may differ per rank (--out, --threads, --rank-timeout) do not stop a run, nor do two paths to the same model.
- A rank stopped with SIGSTOP mid-run: every other rank ends within --rank-timeout and a little (exit 1), naming the
  stopped rank and the phase it waited in; the stopped rank is ended too. --rank-timeout 0, -1, nan, inf, text:
  exit 2 naming the flag.
Usage: tests/mpi_check.py MOEBENCH REPO_ROOT MPIRUN. Exit 77 (skip) without numpy.
"""
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
except ImportError:
    print("mpi_check: skipped, numpy is not installed (Debian: python3-numpy)")
    sys.exit(77)

MOEBENCH, ROOT, MPIRUN = sys.argv[1], sys.argv[2], sys.argv[3]
MODELS = os.path.join(ROOT, "tests", "data", "conformance", "models")
# Open MPI refuses root without these; CI and the dev machine run as root. Shared-memory transport only.
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader",
           OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_rmaps_base_oversubscribe="1")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        dtype = {"F32": np.float32, "I32": np.int32}[t["dtype"]]
        out[name] = np.frombuffer(data[a:b], dtype=dtype).reshape(t["shape"])
    return out


def moebench(args, np_=0, extra_mpi=(), timeout=120):
    cmd = [MOEBENCH] + args
    if np_:
        cmd = [MPIRUN, "-np", str(np_), *extra_mpi] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=timeout)


def run_point(tmp, tag, model, np_=0, extra=()):
    out_dir = os.path.join(tmp, tag)
    os.makedirs(out_dir, exist_ok=True)
    args = ["run", "--backend", "cpu", "--model", os.path.join(MODELS, model), "--batch", "8", "--context", "16",
            "--threads", "1", "--warmup", "0", "--iters", "2", "--min-time", "0", "--seed", "7",
            "--dump-tensors", out_dir, "--out", os.path.join(out_dir, "report.json"), *extra]
    if np_:
        args += ["--ep", str(np_)]
    r = moebench(args, np_)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        return None, None
    with open(os.path.join(out_dir, "report.json")) as f:
        report = json.load(f)
    return read_safetensors(os.path.join(out_dir, "moe_layer.safetensors")), report["runs"][0]


def rel_err(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def expected_rows(ids, num_ranks, num_experts, dedup, experts_on_rank=None):
    """[src][dst] dispatch rows of a decode step, from the routing alone: token t lives on rank t N / T (its
    sequence), expert e on its contiguous block (or the one rank of a placement without replicas)."""
    T = ids.shape[0]
    owner = {}
    if experts_on_rank is None:
        per = num_experts // num_ranks
        experts_on_rank = [list(range(r * per, (r + 1) * per)) for r in range(num_ranks)]
    for r, held in enumerate(experts_on_rank):
        for e in held:
            owner[e] = r
    rows = np.zeros((num_ranks, num_ranks))
    for t in range(T):
        src = t * num_ranks // T
        dsts = [owner[int(e)] for e in ids[t] if e >= 0]
        for d in (set(dsts) if dedup else dsts):
            rows[src][d] += 1
    return rows


def roofline_matches_traffic(rec, what):
    """The roofline's counted all-to-all bytes are the bytes the ranks sent to other ranks (the traffic block)."""
    roof = rec.get("roofline", {}).get("phases", {})
    for phase, matrix in [("dispatch_a2a", "dispatch_payload_bytes"), ("combine_a2a", "combine_payload_bytes")]:
        m = np.array(rec["traffic"][matrix], dtype=float)
        remote = m.sum() - np.trace(m)
        got = roof.get(phase, {}).get("bytes")
        check(got is not None and abs(got - remote) <= 1e-6 * max(1.0, remote),
              f"{what}: roofline {phase} bytes {got} = the remote bytes of traffic.{matrix} ({remote:g})")


def equality_cases(tmp):
    for model in ["tiny-mixtral-8x7b.json", "tiny-deepseek-v3.json", "tiny-llama4-scout.json", "tiny-gpt-oss-20b.json"]:
        ref, _ = run_point(tmp, "single-" + model, model)
        check(ref is not None, f"{model}: single-process run")
        if ref is None:
            continue
        for n, mode in [(2, "dedup"), (2, "per-expert"), (4, "dedup"), (4, "per-expert")]:
            got, rec = run_point(tmp, f"ep{n}-{mode}-{model}", model, n, ["--a2a", mode])
            what = f"{model}: mpirun -np {n} --a2a {mode}"
            check(got is not None, what + ": runs")
            if got is None:
                continue
            check(np.array_equal(got["topk_ids"], ref["topk_ids"]), what + ": routing equals the single process")
            e_in, e_out = rel_err(got["moe_in"], ref["moe_in"]), rel_err(got["moe_out"], ref["moe_out"])
            check(e_in <= 1e-5 and e_out <= 1e-5, what + f": moe_in / moe_out equal (rel err {e_in:.1e} / {e_out:.1e})")
            check(rec["ranks"]["num_ranks"] == n and len(rec["ranks"]["per_rank"]) == n, what + ": per-rank block")
    # fp8 / bf16 dispatch: dequantised on arrival, within each format's error
    ref, _ = run_point(tmp, "single-mixtral", "tiny-mixtral-8x7b.json", 0, ["--layers", "1"])
    for dtype, tol in [("bf16", 1e-2), ("fp8", 8e-2)]:
        got, rec = run_point(tmp, "ep2-" + dtype, "tiny-mixtral-8x7b.json", 2,
                             ["--dispatch-dtype", dtype, "--layers", "1"])
        if got is None or ref is None:
            check(False, f"dispatch {dtype}: runs")
            continue
        e = rel_err(got["moe_out"], ref["moe_out"])
        check(0 < e <= tol, f"dispatch {dtype}: moe_out within {tol} of fp32 (rel err {e:.1e}) and not bit-equal")
        H = ref["moe_in"].shape[1]
        row = {"bf16": 2 * H, "fp8": H + 4 * ((H + 127) // 128)}[dtype]
        rows = expected_rows(got["topk_ids"], 2, 8, True)
        check(np.allclose(np.array(rec["traffic"]["dispatch_payload_bytes"]), rows * row),
              f"dispatch {dtype}: payload bytes = rows x {row} bytes")
        roofline_matches_traffic(rec, f"dispatch {dtype}")


def traffic_cases(tmp):
    model = "tiny-mixtral-8x7b.json"
    for n, mode in [(2, "dedup"), (2, "per-expert"), (4, "dedup")]:
        got, rec = run_point(tmp, f"traffic-{n}-{mode}", model, n, ["--a2a", mode, "--layers", "1"])
        if got is None:
            check(False, f"traffic {n} {mode}: runs")
            continue
        H, k = got["moe_in"].shape[1], got["topk_ids"].shape[1]
        rows = expected_rows(got["topk_ids"], n, 8, mode == "dedup")
        tr = rec["traffic"]
        check(np.allclose(np.array(tr["dispatch_payload_bytes"]), rows * 4 * H),
              f"traffic np {n} {mode}: dispatch payload matrix = hand-computed rows x {4 * H} bytes")
        meta = 8 * k if mode == "dedup" else 4
        check(np.allclose(np.array(tr["dispatch_meta_bytes"]), rows * meta),
              f"traffic np {n} {mode}: metadata matrix = rows x {meta} bytes")
        check(np.allclose(np.array(tr["combine_payload_bytes"]), rows.T * 4 * H),
              f"traffic np {n} {mode}: combine matrix = the dispatch rows transposed x {4 * H} bytes")
        remote = (rows.sum() - np.trace(rows)) * (4 * H + meta) * 2 - (rows.sum() - np.trace(rows)) * meta
        check(abs(tr["remote_bytes"] - remote) < 1e-6 * max(1, remote), f"traffic np {n} {mode}: remote bytes")
        roofline_matches_traffic(rec, f"traffic np {n} {mode}")
        if n == 4:
            views(tmp, os.path.join(tmp, f"traffic-{n}-{mode}", "report.json"), n)
    # A placement file moves experts: the matrix follows it.
    placement = {"schema": "moebench.placement/1", "num_experts": 8, "num_ranks": 2,
                 "experts_on_rank": [[0, 2, 4, 6], [1, 3, 5, 7]]}
    path = os.path.join(tmp, "placement.json")
    with open(path, "w") as f:
        json.dump(placement, f)
    got, rec = run_point(tmp, "placed", model, 2, ["--layers", "1", "--placement", path])
    single, _ = run_point(tmp, "placed-single", model, 0, ["--layers", "1"])
    if got is None or single is None:
        check(False, "placement file: runs")
        return
    rows = expected_rows(got["topk_ids"], 2, 8, True, placement["experts_on_rank"])
    check(np.allclose(np.array(rec["traffic"]["dispatch_payload_bytes"]), rows * 4 * got["moe_in"].shape[1]),
          "placement file: the byte matrix follows the placement")
    roofline_matches_traffic(rec, "placement file")
    check(rel_err(got["moe_out"], single["moe_out"]) <= 1e-5, "placement file: outputs still equal the single process")


def views(tmp, report, n):
    """The per-rank rows, tracks and charts of the report views."""
    csv_path, trace_path, html_path = (os.path.join(tmp, "view." + f) for f in ("csv", "trace", "html"))
    for fmt, path in (("csv", csv_path), ("trace", trace_path), ("html", html_path)):
        r = moebench(["report", report, "--format", fmt, "-o", path])
        check(r.returncode == 0, f"report --format {fmt} of a multi-process run")
    with open(csv_path) as f:
        rows = [line.rstrip("\n").split(",") for line in f]
    rank_col = rows[0].index("rank")
    ranks = sorted({row[rank_col] for row in rows[1:] if row[rank_col]})
    check(ranks == [str(r) for r in range(n)], f"csv: rows for ranks {ranks}")
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    tids = {e["tid"] for e in events if e["ph"] == "X"}
    comm = {e["tid"] for e in events if e["ph"] == "X" and e["name"] in ("dispatch_a2a", "combine_a2a")}
    check(tids == set(range(2 * n)) and comm == {2 * r + 1 for r in range(n)},
          "trace: a compute and an all-to-all track per rank from the recorded step")
    with open(html_path) as f:
        html = f.read()
    check("chart-rank-phases" in html and "chart-dispatch-bytes" in html, "html: per-rank chart and byte heatmap")


def find_a_rank(proc, marker, ready=lambda: True, tries=300):
    """Once `ready()` holds and both moebench ranks of `proc` (found by `marker` in their command line) run: the pid
    of one of them (wait_after_kill kills it); None, with the job killed, when they never showed."""
    victim = None
    for _ in range(tries):
        time.sleep(0.1)
        if not ready():
            continue
        ranks = []
        for p in subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split():
            try:
                if int(p) != proc.pid and os.path.basename(os.readlink(f"/proc/{p}/exe")) == "moebench":
                    ranks.append(int(p))
            except OSError:
                pass
        if len(ranks) >= 2:
            victim = max(ranks)
            break
    if victim is None:
        proc.kill()
        return None
    return victim


def wait_after_kill(proc, victim):
    """SIGKILL to `victim`; the seconds until the job ended."""
    t0 = time.time()
    os.kill(victim, signal.SIGKILL)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
    return time.time() - t0


def failure_cases(tmp):
    model = os.path.join(MODELS, "tiny-mixtral-8x7b.json")
    r = moebench(["run", "--backend", "cpu", "--model", model, "--ep", "2", "--out", os.path.join(tmp, "x.json")])
    check(r.returncode == 2 and "mpirun" in r.stderr, "--ep 2 in one process: exit 2 naming mpirun")
    r = moebench(["run", "--backend", "cpu", "--model", model, "--ep", "4", "--out", os.path.join(tmp, "y.json")], 2)
    check(r.returncode != 0 and "--ep" in r.stderr and "2 processes" in r.stderr, "--ep 4 under -np 2: refused")
    # Redundant experts differ by layer; a process holds one set of experts for every layer: refused, naming the fix.
    r = moebench(["run", "--backend", "cpu", "--model", model, "--ep", "2", "--routing", "hot:1:0.45",
                  "--redundant-experts", "2", "--out", os.path.join(tmp, "r.json")], 2)
    check(r.returncode == 2 and "redundant_experts (--redundant-experts)" in r.stderr and "--placement" in r.stderr,
          "--redundant-experts under mpirun: exit 2 naming the field and a placement file as the fix")
    # Bad input on rank 1 only (MPMD): every rank ends, the message names the rank.
    base = ["run", "--backend", "cpu", "--model", model, "--ep", "2", "--batch", "4", "--min-time", "20",
            "--iters", "1000000", "--out", os.path.join(tmp, "z.json")]
    t0 = time.time()
    r = subprocess.run([MPIRUN, "-np", "1", MOEBENCH, *base, ":", "-np", "1", MOEBENCH, *base[:-2], "--batch", "x"],
                       capture_output=True, text=True, env=ENV, timeout=90)
    check(r.returncode != 0 and time.time() - t0 < 30 and "rank 1 of 2" in r.stderr,
          f"bad input on rank 1: the job ends non-zero in {time.time() - t0:.1f} s, naming rank 1")
    # A rank killed mid-run.
    marker = os.path.join(tmp, "killed-run.json")
    args = base[:-1] + [marker]
    proc = subprocess.Popen([MPIRUN, "-np", "2", MOEBENCH, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=ENV, text=True)
    victim = find_a_rank(proc, marker, tries=100)
    check(victim is not None, "kill test: both ranks started")
    if victim is None:
        return
    time.sleep(1.0)  # mid-run: past start-up, inside the measured steps
    dt = wait_after_kill(proc, victim)
    check(proc.returncode != 0 and dt < 30, f"a rank killed mid-run: the job ends non-zero in {dt:.1f} s")
    check(not os.path.exists(marker), "a rank killed mid-run: no report written")


def mpmd(args0, args1, timeout=60):
    """Rank 0 runs moebench with args0, rank 1 with args1 (one MPMD job); the result and its seconds."""
    t0 = time.time()
    r = subprocess.run([MPIRUN, "-np", "1", MOEBENCH, *args0, ":", "-np", "1", MOEBENCH, *args1],
                       capture_output=True, text=True, env=ENV, timeout=timeout)
    return r, time.time() - t0


def agreement_cases(tmp):
    """Ranks compare their resolved settings before any work: a difference is exit 2 on every rank, naming it."""
    model = os.path.join(MODELS, "tiny-mixtral-8x7b.json")
    with open(model) as f:
        doc = json.load(f)
    same = os.path.join(tmp, "same-model.json")  # another path, the same content
    with open(same, "w") as f:
        json.dump(doc, f)
    wider = os.path.join(tmp, "wider-model.json")  # the same name, other shapes
    with open(wider, "w") as f:
        json.dump(dict(doc, hidden_size=2 * doc["hidden_size"]), f)

    def args(tag, model_path=model, **flags):
        """A small run of rank 0 or 1; flags (--name value) replace or add to the defaults."""
        given = {"--batch": "8", "--context": "16", "--seed": "7", "--threads": "1", "--rank-timeout": "20"}
        given.update({"--" + k.replace("_", "-"): v for k, v in flags.items()})
        out = ["run", "--backend", "cpu", "--model", model_path, "--ep", "2", "--warmup", "0", "--iters", "2",
               "--min-time", "0", "--out", os.path.join(tmp, f"agree-{tag}.json")]
        for k, v in given.items():
            out += [k, v]
        return out

    # (what, rank 0's flags, rank 1's, the difference every rank must name: rank 1's value vs rank 0's)
    cases = [
        ("layers", {"layers": "1"}, {"layers": "2"}, "in layers (--layers): 2 vs 1"),
        ("batch", {}, {"batch": "16"}, "in batch (--batch): 16 vs 8"),
        ("context", {}, {"context": "32"}, "in context (--context): 32 vs 16"),
        ("routing", {}, {"routing": "zipf:1.2"}, "in routing (--routing): zipf:1.2 vs router"),
        ("seed", {}, {"seed": "3"}, "in seed (--seed): 3 vs 7"),
        ("dispatch-dtype", {}, {"dispatch_dtype": "fp8"}, "in dispatch_dtype (--dispatch-dtype): fp8 vs auto"),
        ("a2a", {}, {"a2a": "per-expert"}, "in a2a (--a2a): per-expert vs dedup"),
    ]
    for what, flags0, flags1, diff in cases:
        r, dt = mpmd(args(what + "-0", **flags0), args(what + "-1", **flags1))
        named = r.stderr.count("rank 1 differs from rank 0 " + diff)
        check(r.returncode == 2 and named == 2 and "rank 0 of 2" in r.stderr and "rank 1 of 2" in r.stderr
              and dt < 20, f"rank 1 with another --{what}: exit {r.returncode} in {dt:.1f} s, every rank names "
              f"'{diff}' ({named} of 2)" + ("" if named == 2 else ": " + r.stderr[-600:]))
        check(not os.path.exists(os.path.join(tmp, f"agree-{what}-0.json")), f"rank 1 with another --{what}: no report")
    # The model is compared by its shapes, not by its path.
    r, dt = mpmd(args("model-0"), args("model-1", model_path=os.path.join(MODELS, "tiny-deepseek-v3.json")))
    diff = "in model (--model): name tiny-deepseek-v3 vs tiny-mixtral-8x7b"
    check(r.returncode == 2 and r.stderr.count(diff) == 2, f"rank 1 with another --model: exit {r.returncode}, "
          f"every rank names '{diff}'" + ("" if r.returncode == 2 else ": " + r.stderr[-600:]))
    r, dt = mpmd(args("wider-0"), args("wider-1", model_path=wider))
    diff = f"in model (--model): hidden_size {2 * doc['hidden_size']} vs {doc['hidden_size']}"
    check(r.returncode == 2 and r.stderr.count(diff) == 2,
          f"rank 1 with a model file of the same name and other shapes: exit {r.returncode}, '{diff}'"
          + ("" if r.returncode == 2 else ": " + r.stderr[-600:]))
    # What may differ per rank: the model's path (same content), --out, --threads, --rank-timeout.
    r, dt = mpmd(args("free-0"), args("free-1", model_path=same, threads="2", rank_timeout="auto"))
    check(r.returncode == 0 and os.path.exists(os.path.join(tmp, "agree-free-0.json")),
          "ranks that differ only in the model's path, --out, --threads and --rank-timeout run (exit "
          f"{r.returncode})" + ("" if r.returncode == 0 else ": " + r.stderr[-600:]))


def rank_of(pid):
    """The MPI rank of process `pid` (from the launcher's environment)."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        for var in f.read().split(b"\0"):
            if var.startswith(b"OMPI_COMM_WORLD_RANK="):
                return int(var.split(b"=", 1)[1])
    return -1


def timeout_cases(tmp):
    """A rank stopped mid-run: the others end within --rank-timeout (and the moment they take to name it)."""
    model = os.path.join(MODELS, "tiny-mixtral-8x7b.json")
    limit = 3
    for n in (2, 4):
        marker = os.path.join(tmp, f"stopped-{n}.json")
        args = ["run", "--backend", "cpu", "--model", model, "--ep", str(n), "--batch", "8", "--threads", "1",
                "--min-time", "60", "--iters", "1000000", "--rank-timeout", str(limit), "--out", marker]
        proc = subprocess.Popen([MPIRUN, "-np", str(n), MOEBENCH, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=ENV, text=True)
        victim = find_a_rank(proc, marker)
        check(victim is not None, f"stop test np {n}: the ranks started")
        if victim is None:
            continue
        time.sleep(1.5)  # mid-run: inside the measured steps
        stopped = rank_of(victim)
        t0 = time.time()
        os.kill(victim, signal.SIGSTOP)
        try:
            _, err = proc.communicate(timeout=limit + 30)
        except subprocess.TimeoutExpired:
            os.kill(victim, signal.SIGKILL)
            proc.kill()
            _, err = proc.communicate()
        dt = time.time() - t0
        check(proc.returncode == 1 and dt < limit + 8,
              f"np {n}: rank {stopped} stopped (SIGSTOP), the job ends with exit {proc.returncode} in {dt:.1f} s "
              f"(--rank-timeout {limit})")
        lines = [line for line in err.splitlines() if f"waiting for rank {stopped} in " in line]
        named = {int(line.split()[1]) for line in lines if line.startswith("rank ")}
        phases = ("dispatch_a2a", "combine_a2a", "the stop rule")
        check(named == set(range(n)) - {stopped} and all(any(p in line for p in phases) for line in lines),
              f"np {n}: every other rank ({sorted(named)}) names rank {stopped} and the phase it waited in"
              + ("" if named == set(range(n)) - {stopped} else ": " + err[-1500:]))
        check(any(f"timed out after {limit} s waiting for rank {stopped}" in line for line in lines),
              f"np {n}: a rank says it timed out after {limit} s")
        alive = True
        for _ in range(50):  # SIGKILL from the launcher may still be on its way
            try:
                with open(f"/proc/{victim}/stat") as f:
                    alive = f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
            except OSError:
                alive = False
            if not alive:
                break
            time.sleep(0.1)
        if alive:
            os.kill(victim, signal.SIGKILL)
        check(not alive, f"np {n}: the stopped rank was ended too")
        check(not os.path.exists(marker), f"np {n}: no report written")
    # --rank-timeout's values
    for bad in ["0", "-1", "nan", "inf", "3s"]:
        r = moebench(["run", "--backend", "cpu", "--model", model, "--rank-timeout", bad, "--out",
                      os.path.join(tmp, "rt.json")])
        check(r.returncode == 2 and "rank_timeout (--rank-timeout)" in r.stderr and bad in r.stderr,
              f"--rank-timeout {bad}: exit {r.returncode} naming the flag and the value")
    cfg = os.path.join(tmp, "rt-config.json")
    for value, rc in [(0, 2), (2.5, 0), ("auto", 0)]:
        with open(cfg, "w") as f:
            json.dump({"model": model, "backend": "cpu", "layers": 1, "warmup": 0, "iters": 1, "rank_timeout": value}, f)
        r = moebench(["run", "--config", cfg, "--out", os.path.join(tmp, "rt.json")])
        check(r.returncode == rc, f"run config rank_timeout {json.dumps(value)}: exit {r.returncode} (want {rc})")


def sweep_cases(tmp):
    """A sweep under mpirun: every rank runs every point, rank 0 writes; a rank killed mid-sweep ends the job, and
    --resume finishes it from the journal."""
    model = os.path.join(MODELS, "tiny-mixtral-8x7b.json")
    out, journal = os.path.join(tmp, "sweep.json"), os.path.join(tmp, "sweep.jsonl")
    args = ["sweep", "--backend", "cpu", "--model", model, "--ep", "2", "--batch", "2,4,8", "--context", "8",
            "--threads", "1", "--warmup", "0", "--iters", "2", "--set", "min_time_s=0", "--quiet", "--out", out,
            "--journal", journal]
    r = moebench(args, 2)
    ok = r.returncode == 0 and os.path.exists(out)
    check(ok, "sweep under mpirun -np 2: exit 0, one report" + ("" if ok else ": " + r.stderr[-400:]))
    if ok:
        with open(out) as f:
            runs = json.load(f)["runs"]
        check(len(runs) == 3 and all(x["status"] == "ok" and x["ranks"]["num_ranks"] == 2 for x in runs),
              "sweep under mpirun: 3 points, each with its ranks block")
        with open(journal) as f:
            check(len(f.read().splitlines()) == 3, "sweep under mpirun: the journal has one line per point (rank 0's)")
    # Killed mid-sweep: slow points (2 s each), a rank killed once the first point is in the journal.
    out2, journal2 = os.path.join(tmp, "sweep2.json"), os.path.join(tmp, "sweep2.jsonl")
    slow = ["sweep", "--backend", "cpu", "--model", model, "--ep", "2", "--batch", "2,4,8", "--context", "8",
            "--threads", "1", "--warmup", "0", "--iters", "2", "--set", "min_time_s=2", "--quiet", "--out", out2,
            "--journal", journal2]
    proc = subprocess.Popen([MPIRUN, "-np", "2", MOEBENCH, *slow], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=ENV, text=True)
    victim = find_a_rank(proc, journal2, ready=lambda: os.path.exists(journal2) and os.path.getsize(journal2) > 0)
    check(victim is not None, "sweep kill: the first point finished, both ranks running")
    if victim is None:
        return
    dt = wait_after_kill(proc, victim)
    check(proc.returncode != 0 and dt < 30, f"a rank killed mid-sweep: the job ends non-zero in {dt:.1f} s")
    r = moebench(slow + ["--resume"], 2)
    ok = r.returncode == 0 and os.path.exists(out2)
    check(ok, "--resume under mpirun finishes the sweep" + ("" if ok else ": " + r.stderr[-400:]))
    if ok:
        with open(out2) as f:
            sweep = json.load(f)["sweep"]
        check(sweep["resumed"] >= 1 and sweep["ok"] == 3, f"--resume: {sweep['resumed']} point(s) from the journal")


def bench_a2a_cases(tmp):
    """bench a2a: the document's figures follow from its own run's traffic and the bare calls' times, and the terminal
    view is printed at rank 0 only; in one process it is exit 2 naming mpirun."""
    out = os.path.join(tmp, "a2a.json")
    args = ["bench", "a2a", "--model", os.path.join(MODELS, "tiny-mixtral-8x7b.json"), "--batch", "8", "--context",
            "16", "--threads", "1", "--warmup", "0", "--iters", "2", "--baseline-iters", "3", "--out", out]
    r = moebench(args, 2)
    ok = r.returncode == 0 and os.path.exists(out)
    check(ok, "bench a2a under mpirun -np 2: exit 0, one document" + ("" if ok else ": " + r.stderr[-400:]))
    if ok:
        with open(out) as f:
            d = json.load(f)
        bw = d["traffic"]["bandwidth"]
        check(d["schema"] == "moebench.bench_a2a/1" and d["ranks"] == 2, "bench a2a: schema and ranks")
        check(d["bytes_per_rank_per_step"] == bw["dispatch"]["bytes_per_rank"] + bw["combine"]["bytes_per_rank"],
              "bench a2a: bytes per rank = the run's dispatch + combine bytes per rank")
        ours = d["moebench"]["dispatch_us"] + d["moebench"]["combine_us"]
        cold = d["bare_mpi_alltoallv"]["cold"]["dispatch_us"] + d["bare_mpi_alltoallv"]["cold"]["combine_us"]
        check(ours > 0 and abs(d["algbw_ratio"] - cold / ours) <= 1e-9 * max(1.0, cold / ours),
              "bench a2a: the ratio is the cold bare calls' time over moebench's")
        check(r.stdout.count("2 ranks (") == 1 and "result: " + out in r.stdout,
              "bench a2a: the terminal view once (rank 0), then where the document went")
    r = moebench(args)
    check(r.returncode == 2 and "mpirun -np N" in r.stderr, "bench a2a in one process: exit 2 naming mpirun")


def main():
    with tempfile.TemporaryDirectory(prefix="moebench-mpi-") as tmp:
        bench_a2a_cases(tmp)
        equality_cases(tmp)
        traffic_cases(tmp)
        failure_cases(tmp)
        agreement_cases(tmp)
        timeout_cases(tmp)
        sweep_cases(tmp)
    if failures:
        print(f"mpi_check: {len(failures)} failed")
        sys.exit(1)
    print("mpi_check: all passed")


if __name__ == "__main__":
    main()
