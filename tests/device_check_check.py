#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""scripts/device-check.sh's control flow without a GPU: the script itself, with stand-ins on PATH for nvidia-smi,
cmake and compute-sanitizer, and stand-in moebench / moebench_tests_cuda that the stand-in build puts in the build
folder (they write reports of the real schema's shape, or fail the way the device may).

- No bundle and a machine without the packages: it stops at once (exit 2), before any configure, with the exact line
  to run; a bundle that does not unpack: the same.
- A configure that fails, a build that fails: exit 1, the CMake / compiler error tail in build-error.txt beside the
  summary, no run.
- The whole flow on a (stand-in) GPU with a bundle whose graph runs all fail: the bundle unpacked and given to
  configure, OS / compiler / driver / card in machine.txt and the summary, each failed graph run rerun eagerly and said
  so (after 3 failures the eager runs do not share, the rest run eagerly at once; runs that fail eagerly too are each
  tried), their P4 lost, the DeepSeek-V3 MoE layer run alone, conformance
  and both sanitizers run, at most 8 files come back.
- No GPU: every GPU step is skipped with the reason; the summary is still written.
Usage: tests/device_check_check.py REPO_ROOT
"""
import io
import json
import os
import stat
import subprocess
import sys
import tarfile
import tempfile
import time

FAILS = []
CARD = "NVIDIA H100 80GB HBM3"
ALLOWED_BACK = {"summary.md", "steps.log", "machine.txt", "devices.json", "torch_peer.json", "sanitizer.txt",
                "build-error.txt", "runs.tar.gz"}


def expect(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL: " + what)


NVIDIA_SMI = r"""#!/bin/bash
if [ -n "${FAKE_NO_GPU:-}" ]; then
    echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."; exit 9
fi
case "$*" in
    -L) echo "GPU 0: %(card)s (UUID: GPU-fake)" ;;
    *query-gpu=name*) echo "%(card)s" ;;
    *query-gpu=driver_version*) echo "580.159.04" ;;
    *query-gpu=memory.total*) echo "81559 MiB" ;;
    *) echo "fake nvidia-smi $*" ;;
esac
""" % {"card": CARD}

CMAKE = r"""#!/bin/bash
echo "cmake $*" >>"$FAKE_LOG"
if [ "$1" = "--version" ]; then echo "cmake version 3.99.0 (stand-in)"; exit 0; fi
if [ "$1" = "--build" ]; then
    if [ -n "${FAKE_BUILD_FAIL:-}" ]; then
        echo "[1/9] Building CXX object src/x.cpp.o"; echo "FAILED: src/x.cpp.o"
        echo "../src/x.cpp:12:3: error: 'fake' was not declared in this scope"; echo "ninja: build stopped"; exit 1
    fi
    mkdir -p "$2/tests" && cp "$FAKE_DIR/moebench" "$2/moebench" && cp "$FAKE_DIR/moebench_tests_cuda" "$2/tests/"
    exit 0
fi
if [ -n "${FAKE_CONFIGURE_FAIL:-}" ]; then
    echo "-- The CXX compiler identification is GNU 12.2.0"
    echo "CMake Error at CMakeLists.txt:40 (find_package):"
    echo '  Could not find a package configuration file provided by "CLI11" with any'
    echo "-- Configuring incomplete, errors occurred!"; exit 1
fi
echo "-- moebench: CUDA backend ON (stand-in)"; exit 0
"""

SANITIZER = r"""#!/bin/bash
tool=memcheck
while [ "${1#-}" != "$1" ]; do
    [ "$1" = "--tool" ] && tool=$2
    case "$1" in --tool|--error-exitcode|--print-limit) shift ;; esac
    shift
done
echo "sanitizer $tool $*" >>"$FAKE_LOG"
echo "========= COMPUTE-SANITIZER"
"$@"
if [ "$tool" = racecheck ]; then echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
else echo "========= ERROR SUMMARY: 0 errors"; fi
"""

TESTS = r"""#!/bin/bash
echo "tests $*" >>"$FAKE_LOG"
if [ "$1" = "[conformance]" ]; then
    echo "conformance-check backend=cuda model=tiny-mixtral-8x7b variant=decode passed=1 rel_l2=2.0e-03 tolerance=1.0e-02 ids_mismatched=0 ids_near_tie=0"
    echo "conformance-step backend=cuda reference=cpu model=tiny-mixtral-8x7b variant=decode passed=1 moe_in_rel_l2=1.0e-03 moe_out_rel_l2=3.0e-03 tolerance=2.0e-02 tokens=16 excused=0 near_ties=0 ids_mismatched=0"
fi
echo "All tests passed (42 assertions in 3 test cases)"
"""

MOEBENCH = r"""#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
open(os.environ["FAKE_LOG"], "a").write("moebench " + " ".join(args) + "\n")
def opt(name):
    return args[args.index(name) + 1] if name in args else None
if args[0] == "devices":
    json.dump({"gpus": {"devices": [{"name": "%(card)s", "measured": {"copy_bw_bytes_per_s": 3.0e12,
                                                                      "bf16_gemm_flops": 7.9e14}}]}},
              open(opt("--out"), "w"))
    sys.exit(0)
cfg = json.load(open(opt("--config")))
if os.environ.get("FAKE_RUN_FAIL"):
    print("moebench: error: cuda: an illegal memory access was encountered", file=sys.stderr)
    sys.exit(1)
if cfg.get("cuda_graph") and os.environ.get("FAKE_GRAPH_FAIL"):
    print("moebench: error: --cuda-graph: capturing the step failed (cudaErrorStreamCaptureUnsupported: operation "
          "not permitted when stream is capturing); run without cuda_graph", file=sys.stderr)
    sys.exit(4)
first, n = cfg.get("first_layer", 0), cfg.get("layers", 1)
kinds = ["dense" if cfg["model"] == "deepseek-v3" and l < 3 else "moe" for l in range(first, first + n)]
phases = {"attention": 10.0, "expert_up": 60.0, "expert_down": 30.0, "router_gemm": 1.0, "topk": 1.0, "permute": 1.0,
          "unpermute_reduce": 1.0}
run = {"status": "ok", "mode": cfg["mode"], "batch": cfg["batch"], "model": cfg["model"], "axes": {"first_layer": first},
       "layers": {"run": list(range(first, first + n)), "kinds": kinds}, "iterations": {"measured": cfg["iters"]},
       "latency": {"step": {"p50_us": 120.0}, "phases": {p: {"p50_us": t} for p, t in phases.items()}},
       "roofline": {"phases": {"expert_up": {"bytes": 2.2e8, "weight_bytes": 2e8, "flops": 1e9},
                               "expert_down": {"bytes": 1.1e8, "weight_bytes": 1e8, "flops": 5e8}}},
       "backend_info": {"device": {"name": "%(card)s"}, "kernel_variant": {"expert_gemm": cfg.get("expert_gemm", "gemv")}}}
if "--check" in args:
    run["check"] = {"passed": True, "rel_l2_error": 2e-3, "ids_mismatched": 0, "ids_near_tie": 0}
json.dump({"runs": [run]}, open(opt("--out"), "w"))
""" % {"card": CARD}


def make_exec(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def ar_member(name, data):
    head = "%-16s%-12d%-6d%-6d%-8s%-10d`\n" % (name, 0, 0, 0, "100644", len(data))
    return head.encode() + data + (b"\n" if len(data) % 2 else b"")


def tar_gz(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def make_bundle(folder):
    """A one-package bundle as scripts/device-bundle.sh leaves it: a .deb (ar: debian-binary, control, data) with the
    headers, and a MANIFEST line (package, version, sha256, file)."""
    import hashlib
    os.makedirs(folder)
    data = tar_gz({"./usr/include/CLI/CLI.hpp": b"// stand-in\n", "./usr/include/fmt/format.h": b"// stand-in\n"})
    deb = b"!<arch>\n" + ar_member("debian-binary", b"2.0\n") + \
        ar_member("control.tar.gz", tar_gz({"./control": b"Package: fake\n"})) + ar_member("data.tar.gz", data)
    with open(os.path.join(folder, "fake_1.0_amd64.deb"), "wb") as f:
        f.write(deb)
    with open(os.path.join(folder, "MANIFEST"), "w") as f:
        f.write("fake 1.0 %s fake_1.0_amd64.deb\n" % hashlib.sha256(deb).hexdigest())


class Scenario:
    def __init__(self, tmp, name, repo):
        self.dir = os.path.join(tmp, name)
        self.out = os.path.join(self.dir, "out")
        self.build = os.path.join(self.dir, "build")
        self.fake = os.path.join(self.dir, "fake")
        self.bin = os.path.join(self.dir, "bin")
        self.log = os.path.join(self.dir, "calls.log")
        self.repo = repo
        for d in (self.fake, self.bin):
            os.makedirs(d)
        open(self.log, "w").close()
        make_exec(os.path.join(self.bin, "nvidia-smi"), NVIDIA_SMI)
        make_exec(os.path.join(self.bin, "cmake"), CMAKE)
        make_exec(os.path.join(self.bin, "compute-sanitizer"), SANITIZER)
        make_exec(os.path.join(self.fake, "moebench"), MOEBENCH)
        make_exec(os.path.join(self.fake, "moebench_tests_cuda"), TESTS)
        # The packages of a machine that has them (headers only: what the script looks for).
        self.system = os.path.join(self.dir, "system")
        for rel in ("include/CLI/CLI.hpp", "include/nlohmann/json.hpp", "include/fmt/format.h",
                    "include/catch2/catch.hpp", "include/x86_64-linux-gnu/cblas.h"):
            os.makedirs(os.path.dirname(os.path.join(self.system, rel)), exist_ok=True)
            open(os.path.join(self.system, rel), "w").close()

    def run(self, env_extra, timeout=240):
        env = dict(os.environ, PATH=self.bin + os.pathsep + os.environ.get("PATH", ""), FAKE_LOG=self.log,
                   FAKE_DIR=self.fake, BUILD_DIR=self.build, DEVICE_DEPS=os.path.join(self.dir, "no-bundle"),
                   DEVICE_CHECK_SYSTEM_PREFIXES=self.system, JOBS="2")
        env.pop("OUT", None)
        env.update(env_extra)
        t0 = time.time()
        r = subprocess.run(["bash", os.path.join(self.repo, "scripts", "device-check.sh"), self.out],
                           capture_output=True, text=True, timeout=timeout, env=env)
        self.seconds = time.time() - t0
        self.rc, self.stdout = r.returncode, r.stdout + r.stderr
        return self

    def text(self, name):
        try:
            return open(os.path.join(self.out, name)).read()
        except OSError:
            return ""

    def calls(self):
        return open(self.log).read().splitlines()

    def back(self):
        return set(os.listdir(self.out)) if os.path.isdir(self.out) else set()

    def tarball(self):
        path = os.path.join(self.out, "runs.tar.gz")
        if not os.path.exists(path):
            return {}
        with tarfile.open(path) as t:
            return {m.name: (t.extractfile(m).read().decode(errors="replace") if m.isfile() else "") for m in t.getmembers()}


def no_bundle(tmp, repo):
    s = Scenario(tmp, "no-bundle", repo).run({"DEVICE_CHECK_SYSTEM_PREFIXES": os.path.join(tmp, "nowhere")})
    summary = s.text("summary.md")
    expect(s.rc == 2, "no bundle, no packages: exit 2 (got %d: %s)" % (s.rc, s.stdout[-600:]))
    expect(s.seconds < 30, "it stops at once (%.1f s)" % s.seconds)
    expect("lacks CLI11 nlohmann-json fmt Catch2 OpenBLAS: configure would stop at CLI11" in summary,
           "the summary says what is missing: %s" % summary[:400])
    expect("scripts/device-bundle.sh" in summary and 'carry [".device-deps"]' in summary and
           "command scripts/device-check.sh" in summary, "the exact line to run")
    expect("STOP" in s.text("steps.log") and "scripts/device-bundle.sh" in s.stdout, "said on the terminal too")
    expect(not [c for c in s.calls() if c.startswith("cmake -S")], "no configure was tried")


def bad_bundle(tmp, repo):
    s = Scenario(tmp, "bad-bundle", repo)
    deps = os.path.join(s.dir, "deps")
    make_bundle(deps)
    with open(os.path.join(deps, "fake_1.0_amd64.deb"), "ab") as f:
        f.write(b"corrupt")
    s.run({"DEVICE_DEPS": deps})
    summary = s.text("summary.md")
    expect(s.rc == 2, "a bundle that does not unpack: exit 2 (got %d)" % s.rc)
    expect("does not unpack" in summary and "sha256" in summary and "scripts/device-bundle.sh" in summary,
           "it says why and the line to run: %s" % summary[:500])
    expect(not [c for c in s.calls() if c.startswith("cmake -S")], "no configure was tried")


def configure_fails(tmp, repo):
    s = Scenario(tmp, "configure-fails", repo).run({"FAKE_CONFIGURE_FAIL": "1"})
    err = s.text("build-error.txt")
    expect(s.rc == 1, "a failed configure: exit 1 (got %d: %s)" % (s.rc, s.stdout[-600:]))
    expect("configure failed (exit 1)" in err and "CMake Error at CMakeLists.txt:40 (find_package)" in err and
           'provided by "CLI11"' in err, "build-error.txt holds CMake's error: %s" % err[:600])
    expect("## Build FAILED" in s.text("summary.md") and 'provided by "CLI11"' in s.text("summary.md"),
           "the summary shows the error tail")
    expect(not [c for c in s.calls() if c.startswith("moebench ") or c.startswith("cmake --build")],
           "nothing builds or runs after a failed configure")
    expect(s.back() <= ALLOWED_BACK and "runs.tar.gz" in s.back(), "what comes back: %s" % sorted(s.back()))


def build_fails(tmp, repo):
    s = Scenario(tmp, "build-fails", repo).run({"FAKE_BUILD_FAIL": "1"})
    err = s.text("build-error.txt")
    expect(s.rc == 1, "a failed build: exit 1 (got %d)" % s.rc)
    expect("build failed (exit 1)" in err and "FAILED: src/x.cpp.o" in err and "error: 'fake' was not declared" in err,
           "build-error.txt holds the compiler's error: %s" % err[:600])
    expect(not [c for c in s.calls() if c.startswith("moebench ")], "nothing runs without moebench")


def graph_fails(tmp, repo):
    s = Scenario(tmp, "graph-fails", repo)
    deps = os.path.join(s.dir, "deps")
    make_bundle(deps)
    s.run({"DEVICE_DEPS": deps, "FAKE_GRAPH_FAIL": "1"})
    steps, summary, machine = s.text("steps.log"), s.text("summary.md"), s.text("machine.txt")
    calls = s.calls()
    expect(s.rc == 0, "the whole flow: exit 0 (got %d: %s)" % (s.rc, s.stdout[-800:]))
    configure = [c for c in calls if c.startswith("cmake -S")]
    expect(len(configure) == 1 and "-DMOEBENCH_DEPS_PREFIX=%s/deps/usr" % s.build in configure[0],
           "configure gets the unpacked bundle: %s" % configure)
    expect(os.path.exists(os.path.join(s.build, "deps", "usr", "include", "CLI", "CLI.hpp")), "the bundle is unpacked")
    for line in ("os: ", "compiler: ", "driver: 580.159.04", "card: " + CARD):
        expect(line in machine, "machine.txt has '%s': %s" % (line, machine))
    expect("driver: 580.159.04" in summary and "compiler: " in summary and "os: " in summary,
           "the summary heads with OS, compiler and driver")
    expect("Card: %s (devices.json)" % CARD in summary and "copy bandwidth 3000 GB/s" in summary,
           "the summary names the card and its measured copy bandwidth")
    tar = s.tarball()
    configs = {n: json.loads(t) for n, t in tar.items() if n.startswith("configs/") and n.endswith(".json")}
    graph_named = sorted(n[len("configs/"):-len(".json")] for n, c in configs.items() if c.get("cuda_graph"))
    # decode 1/8/64 x 3 variants x 2 models, 256 x 2, DeepSeek-V3's whole step x 3, the split attention's decode run
    expect(len(graph_named) == 24, "24 graph configurations: %d" % len(graph_named))
    tried = [c for c in calls if c.startswith("moebench run") and "-eager-rerun.json" not in c and
             any("configs/%s.json " % n in c + " " for n in graph_named)]
    expect(len(tried) == 3, "3 graph runs are tried, then the rest go eagerly at once (tried %d)" % len(tried))
    expect(steps.count("RERUN ") == len(graph_named), "every graph configuration is rerun eagerly and said so (%d)" %
           steps.count("RERUN "))
    expect("RERUN decode-mixtral-8x7b-b1-gemv eagerly: the graph run failed (exit 4: moebench: error: --cuda-graph: "
           "capturing the step failed" in steps, "the rerun names the failure")
    expect("RERUN decode-deepseek-v3-moe-b1-grouped eagerly at once: 3 graph runs failed before it" in steps,
           "after 3 failures the graph runs go eagerly at once")
    reruns = sorted(n for n in tar if n.startswith("reports/") and n.endswith("-eager-rerun.json"))
    expect(len(reruns) == len(graph_named), "an eager report for every graph configuration (%d)" % len(reruns))
    eager_cfg = configs.get("configs/decode-mixtral-8x7b-b8-gemv-eager-rerun.json", {})
    expect(eager_cfg.get("cuda_graph") is False and eager_cfg.get("expert_gemm") == "gemv" and eager_cfg.get("iters") == 30,
           "the rerun is the same configuration without the graph: %s" % eager_cfg)
    moe = configs.get("configs/decode-deepseek-v3-moe-b8-gemv.json", {})
    expect(moe.get("first_layer") == 3 and moe.get("layers") == 1, "DeepSeek-V3's MoE layer alone: %s" % moe)
    expect(configs.get("configs/decode-deepseek-v3-step-b8-auto.json", {}).get("layers") == 4, "the whole step beside")
    expect(all(c.get("iters", 0) >= 30 for n, c in configs.items() if not n.startswith("configs/check-")),
           "every timed run measures >= 30 iterations")
    expect(summary.count("| LOST |") == len(graph_named), "every failed graph run's P4 is lost in the summary (%d)" %
           summary.count("| LOST |"))
    expect("(eager rerun: the graph run failed)" in summary, "the reruns' targets are labelled")
    expect("P1 decode: (attention + MoE block) / (weight bytes / copy bandwidth)" in summary, "P1 is judged")
    for step in ("gpu-tests", "conformance", "sanitize-memcheck", "sanitize-racecheck", "devices"):
        expect("ok    %s" % step in steps, "step %s ran" % step)
    expect([c for c in calls if c.startswith("sanitizer memcheck") and "[sanitize]" in c] and
           [c for c in calls if c.startswith("sanitizer racecheck") and "[sanitize]" in c],
           "memcheck and racecheck over the [sanitize] tests")
    expect("--check against the fp32 reference: 1 cases, 1 passed, 0 failed" in summary, "conformance in the summary")
    expect("memcheck: ERROR SUMMARY: 0 errors" in summary and "RACECHECK SUMMARY: 0 hazards" in summary,
           "the sanitizers' summaries in the summary")
    expect(s.back() <= ALLOWED_BACK and {"summary.md", "steps.log", "machine.txt", "devices.json", "sanitizer.txt",
                                         "runs.tar.gz"} <= s.back(), "what comes back: %s" % sorted(s.back()))
    expect("logs/conformance.log" in tar and "logs/sanitize-racecheck.log" in tar, "the logs are packed")


def every_run_fails(tmp, repo):
    """Runs that fail eagerly too: each graph run is still tried (the failure is not the graph's), none is lost to
    the 'eagerly at once' rule."""
    s = Scenario(tmp, "runs-fail", repo).run({"FAKE_RUN_FAIL": "1"})
    steps = s.text("steps.log")
    expect(s.rc == 0, "failing runs: exit 0 (got %d)" % s.rc)
    expect(steps.count("eagerly: the graph run failed") == 24 and "eagerly at once" not in steps,
           "every graph run is tried when the eager runs fail too")
    expect("FAIL  run-check-mixtral: exit 1" in steps, "a failed run is logged with its exit status")


def no_gpu(tmp, repo):
    s = Scenario(tmp, "no-gpu", repo).run({"FAKE_NO_GPU": "1"})
    steps = s.text("steps.log")
    expect(s.rc == 0, "no GPU: exit 0 (got %d: %s)" % (s.rc, s.stdout[-600:]))
    expect("SKIP  every GPU step: no GPU here (nvidia-smi -L: NVIDIA-SMI has failed" in steps, "it says why")
    for step in ("devices", "gpu-tests", "conformance", "sanitize-memcheck", "run-check-mixtral",
                 "run-decode-deepseek-v3-moe-b8-gemv", "torch-peer"):
        expect("SKIP  %s: no GPU here" % step in steps, "%s is skipped with the reason" % step)
    expect(not [c for c in s.calls() if c.startswith("moebench ") or c.startswith("tests ")], "no GPU step runs")
    expect("card: none" in s.text("machine.txt"), "machine.txt says there is no card")
    expect(os.path.exists(os.path.join(s.out, "summary.md")), "the summary is written")


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    repo = os.path.abspath(argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        for scenario in (no_bundle, bad_bundle, configure_fails, build_fails, graph_fails, every_run_fails, no_gpu):
            scenario(tmp, repo)
    print("device_check_check: %s" % ("%d failure(s)" % len(FAILS) if FAILS else "all passed"))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
