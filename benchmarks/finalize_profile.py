"""cProfile of the steps a "Compile & time" press takes after the trace, on a warm kernel cache:
finalize (compile_snapshot: loading kernels, planning BLAS calls, uploading literals) and the
timing loops, so the slowest calls show (issue 44 item 4).

    python3 benchmarks/finalize_profile.py [--model yolov10n] [--top 25]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="yolov10n")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    from migx_explore.gpu import timing
    from migx_explore.gpu_bridge import compile_session_kernels, compile_snapshot
    from migx_explore.session import Session

    session = Session.from_model(args.model, numeric=False)
    session.run()
    compile_session_kernels(session)
    compile_snapshot(session.final()).close()  # the first one loads the libraries: not what a toggle pays
    for what in ("finalize", "timing"):
        prof = cProfile.Profile()
        compiled = compile_snapshot(session.final()) if what == "timing" else None
        t = time.perf_counter()
        prof.enable()
        if what == "finalize":
            compiled = compile_snapshot(session.final())
        else:
            timing.time_program(compiled)
        prof.disable()
        print(f"## {what}: {time.perf_counter() - t:.3f} s")
        compiled.close()
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
