#!/usr/bin/env python3
"""Build benchmark: our `build` against `kubectl kustomize` on generated workloads.

Generates the presets of bench/workload.py, builds each with our binary and,
when kubectl is on PATH, with `kubectl kustomize`, and prints CPU time (user+sys), wall
time and peak RSS of each, their ratios, and whether the outputs are byte-identical.
Measurements come from wait4() of each child, started from a minimal interpreter (whose
~5 MiB is the floor of any peak RSS reported), so nothing else on the machine is counted.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GENERATOR = os.path.join(HERE, "workload.py")


# Runs the measured command from a minimal interpreter (`python3 -S -I`, about 5 MiB) and
# reports its child's CPU, wall time and peak RSS on the descriptor it is given. Linux counts
# a process's RSS before exec in its peak, so a command started from this script directly
# would report at least this script's own size (tens of MiB once a large preset is generated).
SPAWNER = """
import os, sys, time
fd = int(sys.argv[1])
start = time.monotonic()
pid = os.fork()
if pid == 0:
    os.close(fd)
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
wall = time.monotonic() - start
os.write(fd, f"{usage.ru_utime + usage.ru_stime} {wall} {usage.ru_maxrss}".encode())
sys.exit(os.waitstatus_to_exitcode(status))
"""


def measure(argv):
    """Runs argv; returns (exit code, stdout bytes, stderr text, cpu s, wall s, peak RSS MiB)."""
    read_end, write_end = os.pipe()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-S", "-I", "-c", SPAWNER, str(write_end), *argv],
            stdout=out, stderr=err, pass_fds=(write_end,))
        os.close(write_end)
        code = proc.wait()
        with os.fdopen(read_end, "rb") as report:
            cpu, wall, maxrss = report.read().decode().split()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read().decode(errors="replace")
    return code, stdout, stderr, float(cpu), float(wall), int(maxrss) / 1024.0


KUBECTL_MAX_TINY = 10000


def write_tiny_config_maps(tree, count, per_file=10000):
    """`count` ConfigMaps of one key each (~76 bytes of YAML), `per_file` to a file, all listed
    by one kustomization."""
    os.makedirs(tree)
    files = []
    for start in range(0, count, per_file):
        files.append(f"config-maps-{start // per_file:04d}.yaml")
        with open(os.path.join(tree, files[-1]), "w") as f:
            for i in range(start, min(count, start + per_file)):
                f.write(f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i:07d}\ndata:\n  k: v\n---\n")
    with open(os.path.join(tree, "kustomization.yaml"), "w") as f:
        f.write("resources:\n" + "".join(f"- {name}\n" for name in files))


def write_diamond(root, levels):
    """Bases that each include the next twice under two prefixes: 2^levels objects."""
    for level in range(levels):
        for side in "ab":
            os.makedirs(os.path.join(root, f"d{level}", side))
            with open(os.path.join(root, f"d{level}", side, "kustomization.yaml"), "w") as f:
                f.write(f"namePrefix: {side}-\nresources:\n- ../../d{level + 1}\n")
        with open(os.path.join(root, f"d{level}", "kustomization.yaml"), "w") as f:
            f.write("resources:\n- a\n- b\n")
    os.makedirs(os.path.join(root, f"d{levels}"))
    with open(os.path.join(root, f"d{levels}", "kustomization.yaml"), "w") as f:
        f.write("resources:\n- cm.yaml\n")
    with open(os.path.join(root, f"d{levels}", "cm.yaml"), "w") as f:
        f.write("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leaf\n")
    return os.path.join(root, "d0")


def diamond_until_the_limit(binary, levels=24):
    """Peak RSS of a build that stops at the default object limit (a diamond of bases)."""
    with tempfile.TemporaryDirectory() as root:
        top = write_diamond(root, levels)
        code, _, stderr, cpu, _, rss = measure([binary, "build", top])
        outcome = "stopped at the object limit" if code != 0 and "limit" in stderr else f"exit {code}"
        print(f"diamond-{levels:<5} ours     peak RSS {rss:8.1f} MiB  {outcome}  cpu {cpu:7.2f}s")
        return code == 0


def memory_per_object(binary, kubectl, counts, runs):
    """Peak RSS above a one-object build, divided by the object count, for tiny ConfigMaps."""
    failed = False
    with tempfile.TemporaryDirectory() as root:
        tools = [("ours", lambda tree: [binary, "build", tree, "--max-objects", str(max(counts) + 1)])]
        if kubectl:
            tools.append(("kubectl", lambda tree: [kubectl, "kustomize", tree]))
        trees = {}
        for count in [1] + counts:
            trees[count] = os.path.join(root, str(count))
            write_tiny_config_maps(trees[count], count)
        for name, argv in tools:
            base = min(measure(argv(trees[1]))[5] for _ in range(runs))
            for count in counts:
                if name == "kubectl" and count > KUBECTL_MAX_TINY:
                    print(f"tiny-{count:<8} kubectl  not run: its time grows faster than linearly "
                          f"(over 15 minutes for 100,000)")
                    continue
                results = [measure(argv(trees[count])) for _ in range(runs)]
                if results[0][0] != 0:
                    print(f"tiny-{count}: {name} failed (exit {results[0][0]}): {results[0][2].strip()[:300]}")
                    failed = True
                    continue
                rss = min(r[5] for r in results)
                per_object = (rss - base) * 1024 * 1024 / count
                print(f"tiny-{count:<8} {name:8} peak RSS {rss:8.1f} MiB  (one object: {base:6.1f} MiB)  "
                      f"{per_object:7.0f} bytes per object  cpu {min(r[3] for r in results):7.2f}s")
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--binary", default="target/release/kustomize-controller")
    ap.add_argument("--presets", default="medium,wide")
    ap.add_argument("--runs", type=int, default=3, help="best of N runs for each tool")
    ap.add_argument("--per-object", default="",
                    help="comma-separated counts of tiny ConfigMaps to measure memory per object with "
                         "(e.g. 100000,1000000) instead of the presets")
    args = ap.parse_args()
    # The oracle make setup installs (kubectl v1.37, Kustomize v5.8.1) before any on PATH.
    venv_kubectl = os.path.join(HERE, "..", "target", "venv", "bin", "kubectl")
    kubectl = venv_kubectl if os.access(venv_kubectl, os.X_OK) else shutil.which("kubectl")
    if args.per_object:
        counts = [int(c) for c in args.per_object.split(",")]
        failed = memory_per_object(args.binary, kubectl, counts, args.runs)
        failed |= diamond_until_the_limit(args.binary)
        sys.exit(1 if failed else 0)
    failed = False
    with tempfile.TemporaryDirectory() as root:
        for preset in args.presets.split(","):
            tree = os.path.join(root, preset)
            subprocess.run([sys.executable, GENERATOR, "--preset", preset, tree], check=True, stdout=subprocess.DEVNULL)
            tools = [("ours", [args.binary, "build", tree])]
            if kubectl:
                tools.append(("kubectl", [kubectl, "kustomize", tree]))
            results = {}
            for name, argv in tools:
                runs = [measure(argv) for _ in range(args.runs)]
                code, stdout, stderr = runs[0][:3]
                if code != 0:
                    print(f"{preset}: {name} failed (exit {code}): {stderr.strip()[:500]}")
                    failed = True
                    continue
                results[name] = (stdout, min(r[3] for r in runs), min(r[4] for r in runs), min(r[5] for r in runs))
            for name, (stdout, cpu, wall, rss) in results.items():
                objects = stdout.count(b"\n---\n") + 1 if stdout else 0
                print(f"{preset:8} {name:8} cpu {cpu:8.3f}s  wall {wall:8.3f}s  peak RSS {rss:8.1f} MiB  objects {objects}")
            if "ours" in results and "kubectl" in results:
                ours, ref = results["ours"], results["kubectl"]
                print(
                    f"{preset:8} ratio    cpu {ref[1] / max(ours[1], 1e-6):7.1f}x less  "
                    f"wall {ref[2] / max(ours[2], 1e-6):7.1f}x less  RSS {ours[3] / ref[3]:5.2f} of kubectl's  "
                    f"output {'identical' if ours[0] == ref[0] else 'DIFFERENT'}"
                )
            elif not kubectl:
                print(f"{preset:8} kubectl not on PATH: no reference measurement")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
