"""The scaling table of examples/dask: both pipelines on clusters of 1, 2 and 4 GPUs of one machine.

``python scaling.py --gpus 1,2,4 [--served BUILD] --out rows.jsonl`` runs, on each cluster size, the
elementwise + reduction pipeline (pipeline.py) and the stencil pipeline (stencil.py). Which kernels: under
``python -m kspec.cupy`` kspec's: the pipeline's spec kernels, the stencil's spec kernel, and cupyx.scipy.ndimage's
Laplacian served by kspec; without the switch, CuPy's: the pipeline's ``--cupy`` kernels and ndimage's
Laplacian as CuPy builds it. ``--served BUILD``: the workers load every kernel from the typed module's binaries
and BUILD (a ``kspec build`` of what ``kspec capture`` recorded of this script), compile nothing, and have no
NVRTC. ``python scaling.py --table rows.jsonl ...`` prints the markdown table of README.md from such files.
``scaling.sh`` does the whole sequence (capture, build, the kspec rows, the CuPy rows, the table).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_cluster  # noqa: E402
import pipeline  # noqa: E402
import stencil  # noqa: E402


def switched() -> bool:
    """Whether CuPy's kernel constructors are kspec's in this process and the workers it starts
    (``python -m kspec.cupy`` sets ``KSPEC_CUPY=1`` for both)."""
    return os.environ.get("KSPEC_CUPY") == "1"


def workloads(kspec_kernels: bool, pipeline_gib: float, stencil_gib: float, pipeline_chunk: int | None = None,
              stencil_chunk: int | None = None) -> list[tuple[str, Any]]:
    """(row name, function of a client) for the kernels this process runs; chunk sizes in MiB (see below)."""
    # chunks: 128 of x and 128 of the volume at 512 GiB (a chunk's GPU time then exceeds what Dask's scheduler
    # spends on its tasks even on four GPUs), the same counts at smaller sizes, at most pipeline.largest_chunk_mib
    # (at 1 TiB on an H200: 8 GiB chunks of x, 64; 128 of the volume), asked of the GPU when a row runs
    def pipeline_mib() -> int:
        return pipeline_chunk or int(min(pipeline.largest_chunk_mib(), max(1, pipeline_gib * 4)))

    def stencil_mib() -> int:
        return stencil_chunk or int(min(pipeline.largest_chunk_mib(), max(8, stencil_gib * 8)))

    def elementwise(use_cupy: bool) -> Any:
        return lambda client, repeats: pipeline.run_on(client, pipeline_gib, pipeline_mib(), use_cupy, repeats)

    def stencil_run(kernels: str, graph: str = "halo") -> Any:
        return lambda client, repeats: stencil.run_on(client, stencil_gib, stencil_mib(), kernels, repeats, graph=graph)

    if kspec_kernels:
        return [("pipeline, kspec spec kernels", elementwise(False)),
                ("stencil, kspec spec kernel", stencil_run("spec")),
                ("stencil as map_overlap, kspec spec kernel", stencil_run("spec", "overlap")),
                ("stencil, cupyx.scipy.ndimage under kspec", stencil_run("ndimage"))]
    return [("pipeline, CuPy kernels", elementwise(True)),
            ("stencil, cupyx.scipy.ndimage (CuPy)", stencil_run("ndimage"))]


def chosen(rows: list[tuple[str, Any]], wanted: str | None, skipped: str | None = None) -> list[tuple[str, Any]]:
    """The workloads whose row name holds one of ``wanted``'s comma-separated words (all where it is None),
    less those whose name holds one of ``skipped``'s."""

    def words(text: str | None) -> list[str]:
        return [w.strip() for w in (text or "").split(",") if w.strip()]

    kept = [(name, work) for name, work in rows if wanted is None or any(w in name for w in words(wanted))]
    kept = [(name, work) for name, work in kept if not any(w in name for w in words(skipped))]
    if not kept:
        raise SystemExit(f"--rows {wanted!r} --skip {skipped!r}: no row of {[name for name, _ in rows]} is left")
    return kept


def measure(gpu_counts: list[int], served: str | None, pipeline_gib: float, stencil_gib: float, repeats: int,
            out: Path | None, chunks: tuple[int | None, int | None] = (None, None), rows: str | None = None,
            skip: str | None = None) -> None:
    """Every workload (or those :func:`chosen` by ``rows`` and ``skip``) on a cluster of each size; a JSON line per row
    (printed, and appended to ``out``)."""
    import kspec
    from distributed import Client

    if served is not None and not switched():
        raise SystemExit("--served serves kspec's kernels: run this under python -m kspec.cupy")
    device = kspec.get_device()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = pipeline.prepare(tmp, archs=device.arch)
        os.environ["DASK_KERNELS_DIR"] = str(workdir)
        for gpus in gpu_counts:
            # one cluster a size, Dask's default scheduling: root tasks queued (a worker given every chunk of the
            # volume at once, as worker-saturation: inf does, made them all before consuming one: out of memory
            # on an H200); the graphs that place their chunks (scheduling.placed, stencil.slab_energy) make and
            # consume each chunk in one task, or chain them
            with gpu_cluster.cluster(gpus, workdir, served=served, modules=(stencil,)) as c, \
                    Client(c) as client:
                gpu_cluster.start_workers(client, gpus)
                for name, work in chosen(workloads(switched(), pipeline_gib, stencil_gib, *chunks), rows, skip):
                    row: dict[str, Any] = {"row": name, "gpus": gpus, "device": device.name, "served": served is not None}
                    try:
                        result = work(client, repeats)
                        row.update(seconds=result["seconds"], gbps=result["gbps"], tasks=result["tasks"],
                                   gib=result.get("gib", pipeline_gib))
                        if "ahead" in result:  # the halo graph's chunks made ahead (stencil.AHEAD)
                            row["ahead"] = result["ahead"]
                        gpu_cluster.print_workers(result["workers"])
                    except Exception as error:  # a row that fails is reported, and the others still run
                        row["error"] = f"{type(error).__name__}: {error}"[:500]
                        traceback.print_exc()
                    _emit(row, out)
                loads = client.run(gpu_cluster.kernel_loads)
                gpu_cluster.print_workers({}, loads)
                _emit({"gpus": gpus, "loads": loads}, out, show=False)


def _emit(row: dict[str, Any], out: Path | None, show: bool = True) -> None:
    if show:
        print(json.dumps(row), flush=True)
    if out is not None:
        with out.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


def table(files: list[Path]) -> str:
    """The markdown table of the rows in ``files``: seconds and GB/s per cluster size, and the speed-up of the
    largest cluster over one GPU."""
    rows: dict[str, dict[int, dict[str, Any]]] = {}
    for file in files:
        for line in file.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if "row" in row:
                rows.setdefault(row["row"], {})[row["gpus"]] = row
    counts = sorted({g for by in rows.values() for g in by})
    head = "| pipeline, kernels | " + " | ".join(f"{g} GPU{'s' if g > 1 else ''}" for g in counts)
    head += " | " + " | ".join(f"{g} / 1" for g in counts if g > 1) + " |"
    lines = [head, "|" + "---|" * (1 + 2 * len(counts) - 1)]
    for name, by in rows.items():
        cells = []
        for g in counts:
            r = by.get(g, {})
            cells.append(f"{r['seconds']:.3f} s, {r['gbps']:.0f} GB/s" if "seconds" in r else r.get("error", "")[:40])
        base = by.get(1, {}).get("seconds")
        ratios = [f"**{base / by[g]['seconds']:.2f}x**" if base and "seconds" in by.get(g, {}) else "" for g in counts if g > 1]
        lines.append(f"| {name} | " + " | ".join(cells + ratios) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", default="1,2,4", help="cluster sizes, comma-separated")
    parser.add_argument("--served", default=None, help="a kspec build output the workers load every kernel from")
    parser.add_argument("--pipeline-gib", type=float, default=1024.0)
    parser.add_argument("--stencil-gib", type=float, default=512.0)
    parser.add_argument("--pipeline-chunk-mib", type=int, default=None,
                        help="default: 1/128 of x, at most pipeline.largest_chunk_mib() (8192 on an H200, else 4096)")
    parser.add_argument("--stencil-chunk-mib", type=int, default=None,
                        help="default: 1/128 of it at 512 GiB, at most pipeline.largest_chunk_mib()")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--stencil-ahead", type=int, default=None, help="the halo graph's chunks made ahead "
                        f"(default: {stencil.AHEAD_GIB} GiB of them)")
    parser.add_argument("--rows", default=None, help="only the rows whose name holds one of these comma-separated "
                        "words (e.g. 'pipeline,spec kernel'): a rerun of some rows")
    parser.add_argument("--skip", default=None, help="leave out the rows whose name holds one of these comma-separated "
                        "words (e.g. 'map_overlap')")
    parser.add_argument("--out", type=Path, default=None, help="append each row as a JSON line here")
    parser.add_argument("--table", type=Path, nargs="+", default=None, help="print the table of these files instead")
    args = parser.parse_args()
    if args.stencil_ahead is not None:
        stencil.AHEAD = args.stencil_ahead
    if args.table:
        print(table(args.table))
        return
    measure([int(g) for g in args.gpus.split(",")], args.served, args.pipeline_gib, args.stencil_gib, args.repeats,
            args.out, (args.pipeline_chunk_mib, args.stencil_chunk_mib), args.rows, args.skip)


if __name__ == "__main__":
    main()
