#!/usr/bin/env bash
# One device call that checks and times a tree for issue 28 work. Run from the repository root on
# the device machine, after `python3 -m pip install --no-deps --no-build-isolation -e .`:
#
#     bash benchmarks/device_round.sh [suite|table|decode|rows|profile|pdl|kinds|convs|compile|issue28 ...]   (default: the first five)
#
#   suite    the gpu-marked tests (about 2 min on an H200)                    -> $OUT/gpu_suite.txt
#   table    gpu_vs_torch.py --fp16 on the six transformer exports, torch.compile included (about 2.5 min)
#   decode   decode.py at P=127 (about 1 min)
#   rows     gpu_issue28_rows.py: bilstm, yolov10n, mlp (about 1 min)
#   profile  gpu_kernel_profile.py --fp16 on bert, gpt2, llama (about 1.5 min)
#            (table, decode, rows, profile: their log and files packed as $OUT/<step>.tar.gz)
#   pdl      dependent launch: gpu_kernel_profile.py (bert, gpt2, llama fp16) and decode.py at P=127
#            under MIGX_PDL=0, the default rule and MIGX_PDL=all, in one process each (about 4 min)
#   kinds    gpu_vs_torch.py --fp16 on the export kinds of gpu_export_kinds.py (swin, t5, vae), torch.compile
#            included                                                          -> $OUT/kinds.tar.gz
#   dynkinds gpu_dynamic_kinds.py: dynamic-batch CNN, KV decoder, ORT-BERT + MatMulNBits, QOperator CNN
#                                                                              -> $OUT/dynamic_kinds.md
#   convs    gemm_paths.py on resnet18, yolov10n, vae: im2col + GEMM against the implicit GEMM, graphs
#            timed with torch.compile, then per-kernel profiles under MIGX_PDL=0 (each kernel's own time) and
#            the kernels where the two differ side by side (about 3 min: session 51 ran the same commands)
#                                                                              -> $OUT/convs.tar.gz
#   compile  compile_time.py: cold and warm compile per model, eager and balanced, fp32 and fp16
#                                                                              -> $OUT/compile_time.md
#   issue28  issue28_table.py --isolate (a process per row): every row of issue 28's table, fp32 and fp16, ours against PyTorch
#            CUDA graph and torch.compile, re-timed interleaved (about 6-7 min; ISSUE28_ARGS adds
#            options, e.g. ISSUE28_ARGS="--rows bert,yolov10n")  -> $OUT/issue28.log, issue28_table.md/.json
#
# The device tool brings back at most 8 files, at most two folders down: every step writes one
# file under $OUT (issue28 three), each step's when it ends, so a call cut short by its time limit
# still returns what finished (a step cut short is packed by the TERM trap, as far as it got).
set -u
OUT="${OUT:-bench_out}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/device_round.XXXXXX")"
mkdir -p "$OUT"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(suite table decode rows profile)
pack() { [ -d "$WORK/$1" ] && tar -czf "$OUT/$1.tar.gz" -C "$WORK" "$1"; }
current=""
trap '[ -n "$current" ] && pack "$current"; exit 124' TERM INT
for step in "${steps[@]}"; do
  start=$(date +%s)
  current="$step"
  W="$WORK/$step"
  case "$step" in
    suite) current=""
           python3 -m pytest -m gpu tests -q -n 4 -p no:cacheprovider -o addopts="" -rfE --ignore=tests/browser \
             > "$OUT/gpu_suite.txt" 2>&1; tail -3 "$OUT/gpu_suite.txt" ;;
    table) mkdir -p "$W"
           python3 benchmarks/gpu_vs_torch.py --models none --transformers bert,gpt2,llama,vit,whisper,convnext \
             --compile bert,gpt2,llama,vit,whisper,convnext --fp16 --iters 100 --warmup 10 --skip-micro \
             --out "$W/vs" > "$W/table.log" 2>&1; grep -A9 "^| model | ours fp32" "$W/vs/gpu_vs_torch.md" ;;
    decode) mkdir -p "$W"
           python3 benchmarks/decode.py --pasts 127 --exact-pasts 127 --iters 100 --out "$W/decode" \
             > "$W/decode.log" 2>&1; grep -E "^\| (ours|torch)|ratio|launches" "$W"/decode/*.md ;;
    rows) mkdir -p "$W"
           python3 benchmarks/gpu_issue28_rows.py --models bilstm,yolov10n,mlp --iters 100 --out "$W/rows" \
             > "$W/rows.log" 2>&1; tail -12 "$W/rows.log" ;;
    profile) mkdir -p "$W"
           python3 benchmarks/gpu_kernel_profile.py --models bert,gpt2,llama --precision fp16 --out "$W/profile" \
             > "$W/profile.log" 2>&1; grep -E "^(##|ours|torch.compile)" "$W/profile/kernel_profile.md" ;;
    pdl) mkdir -p "$W"
           for mode in 0 auto all; do
             MIGX_PDL=$mode python3 benchmarks/gpu_kernel_profile.py --models bert,gpt2,llama --precision fp16 \
               --out "$W/profile_$mode" > "$W/profile_$mode.log" 2>&1
             MIGX_PDL=$mode python3 benchmarks/decode.py --pasts 127 --exact-pasts 127 --iters 100 \
               --out "$W/decode_$mode" > "$W/decode_$mode.log" 2>&1
             echo "MIGX_PDL=$mode"; grep -E "^(##|ours|torch.compile)" "$W/profile_$mode/kernel_profile.md"
             grep -E "^\| (ours graph|torch.compile)" "$W/decode_$mode"/*.md
           done ;;
    kinds) mkdir -p "$W"
           python3 benchmarks/gpu_vs_torch.py --models none --transformers swin,t5,vae --compile swin,t5,vae \
             --fp16 --iters 100 --warmup 10 --skip-micro --out "$W/vs" > "$W/kinds.log" 2>&1
           grep -A6 "^| model | ours fp32" "$W/vs/gpu_vs_torch.md" || tail -20 "$W/kinds.log" ;;
    convs) mkdir -p "$W"
           variants="MIGX_CONV_IGEMM=0,MIGX_CONV_IGEMM=auto"
           python3 benchmarks/gemm_paths.py --models resnet18,yolov10n,vae --variants "$variants" --no-profile \
             --out "$W/graphs" > "$W/graphs.log" 2>&1
           MIGX_PDL=0 python3 benchmarks/gemm_paths.py --models resnet18,yolov10n,vae --variants "$variants" \
             --no-torch --rounds 2 --out "$W/kernels" > "$W/kernels.log" 2>&1
           grep "^|" "$W/graphs/gemm_paths.md" | head -5; grep -E 'differ$|^\| \*\*' "$W/kernels/gemm_paths.md" ;;
    dynkinds) current=""
           python3 benchmarks/gpu_dynamic_kinds.py --out "$OUT/dynamic_kinds.md" > "$OUT/dynamic_kinds.log" 2>&1
           cat "$OUT/dynamic_kinds.md" 2>/dev/null || tail -20 "$OUT/dynamic_kinds.log" ;;
    compile) current=""
           python3 benchmarks/compile_time.py --out "$WORK/compile" > "$OUT/compile_time.log" 2>&1
           cp "$WORK/compile/compile_time.md" "$OUT/" 2>/dev/null; tail -30 "$OUT/compile_time.log" ;;
    issue28) current=""  # writes its two files straight into $OUT after every row and phase
           # shellcheck disable=SC2086  # ISSUE28_ARGS is a list of options
           python3 benchmarks/issue28_table.py --isolate --out "$OUT" ${ISSUE28_ARGS:-} > "$OUT/issue28.log" 2>&1
           grep -E "^\| |^- |^Run time" "$OUT/issue28_table.md" ;;
    *) echo "device_round.sh: unknown step $step (suite, table, decode, rows, profile, pdl, kinds, convs, dynkinds, compile, issue28)"; exit 2 ;;
  esac
  [ -n "$current" ] && pack "$step"
  current=""
  echo "[$step: $(( $(date +%s) - start )) s]"
done
rm -rf "$WORK"
