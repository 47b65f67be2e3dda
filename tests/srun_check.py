#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Expert parallelism launched by Slurm: `srun -n 2 moebench run --backend cpu --ep 2` on a one-node Slurm
(scripts/slurm-one-node.sh starts munge, slurmctld and slurmd), against the same run under `mpirun -np 2`.

Every block the report labels `counted` (routing, expert load, roofline work, traffic bytes and rows) must be equal in
the two reports, and the srun report must say it ran 2 ranks over MPI. Times differ and are not compared.
Usage: tests/srun_check.py MOEBENCH REPO_ROOT MPIRUN. Exit 77 (skip, with the reason) where no Slurm controller answers.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

MOEBENCH, ROOT, MPIRUN = sys.argv[1], sys.argv[2], sys.argv[3]
MODEL = os.path.join(ROOT, "tests", "data", "conformance", "models")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader",
           OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_rmaps_base_oversubscribe="1")
# Fields of counted blocks that are measured or describe where the run happened, not what it counted.
NOT_COUNTED = {"bandwidth", "hosts", "ceiling_source", "mem_bw_bytes_per_s", "peak_flops_per_s", "floor_unavailable",
               "fraction_of_floor", "floor_us", "measured_us", "time_us", "mean_us", "fraction_of_peak", "achieved"}


def skip(why):
    print("srun_check: skipped: " + why)
    sys.exit(77)


def slurm_ready():
    if not shutil.which("srun") or not shutil.which("sinfo"):
        skip("srun is not installed (Debian: slurm-client, slurmd, slurmctld, munge; scripts/slurm-one-node.sh)")
    try:
        r = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        skip("sinfo did not answer in 20 s")
    states = r.stdout.split()
    if r.returncode != 0 or not any(s.startswith("idle") or s.startswith("mix") for s in states):
        skip("no idle Slurm node (start one with scripts/slurm-one-node.sh): " + (r.stderr.strip() or " ".join(states)))


def counted(j, path=""):
    """Every value under a block labelled source: counted, as {path: value}, measured fields left out."""
    out = {}

    def walk(v, p, inside):
        if isinstance(v, dict):
            inside = inside or v.get("source") == "counted"
            for k, x in v.items():
                if k in NOT_COUNTED or k.startswith("achieved") or k.endswith(("_us", "_gbps", "_tflops", "_per_s")):
                    continue
                walk(x, p + "." + k, inside)
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, "%s[%d]" % (p, i), inside)
        elif inside:
            out[p] = v

    walk(j, path, False)
    return out


def main():
    slurm_ready()
    failures = []
    with tempfile.TemporaryDirectory(prefix="moebench-srun-") as tmp:
        args = ["run", "--backend", "cpu", "--model", os.path.join(MODEL, "tiny-mixtral-8x7b.json"), "--batch", "8",
                "--context", "16", "--layers", "2", "--threads", "1", "--warmup", "0", "--iters", "2",
                "--min-time", "0", "--seed", "11", "--ep", "2"]
        runs = {}
        for tag, launch in (("srun", ["srun", "-n", "2", "--mpi=pmix", "--time=5"]), ("mpirun", [MPIRUN, "-np", "2"])):
            out = os.path.join(tmp, tag + ".json")
            cmd = launch + [MOEBENCH] + args + ["--out", out]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=240)
            except subprocess.TimeoutExpired:
                print("FAIL %s did not finish in 240 s: %s" % (tag, " ".join(cmd)))
                return 1
            if r.returncode != 0:
                # The exact failure, so that docs/expert-parallel.md can say why where Slurm cannot launch it.
                print("FAIL %s exit %d: %s\n%s\n%s" % (tag, r.returncode, " ".join(cmd), r.stdout[-3000:],
                                                       r.stderr[-3000:]))
                return 1
            with open(out) as f:
                runs[tag] = json.load(f)["runs"][0]
        ranks = runs["srun"].get("ranks", {})
        if ranks.get("num_ranks") != 2 or ranks.get("communicator") != "mpi":
            failures.append("srun report: ranks.num_ranks %r, communicator %r (want 2, mpi)" %
                            (ranks.get("num_ranks"), ranks.get("communicator")))
        a, b = counted(runs["srun"]), counted(runs["mpirun"])
        if len(a) < 50:
            failures.append("only %d counted values in the srun report: the comparison would prove little" % len(a))
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                failures.append("%s: srun %r, mpirun %r" % (key, a.get(key), b.get(key)))
        print("srun_check: %d counted values compared" % len(a))
    for f in failures[:40]:
        print("FAIL " + f)
    if not failures:
        print("ok   srun -n 2 and mpirun -np 2 count the same routing, load, work and traffic")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
