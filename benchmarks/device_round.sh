#!/usr/bin/env bash
# One device call that checks and times a tree for issue 28 work, every step's output under $OUT
# (so a call cut short by its time limit still returns what finished). Run from the repository
# root on the device machine, after `python3 -m pip install --no-deps --no-build-isolation -e .`:
#
#     bash benchmarks/device_round.sh [suite|table|decode|rows|profile ...]   (default: all five)
#
#   suite    the gpu-marked tests (about 2 min on an H200)
#   table    gpu_vs_torch.py --fp16 on the six transformer exports, torch.compile included (about 2.5 min)
#   decode   decode.py at P=127 (about 1 min)
#   rows     gpu_issue28_rows.py: bilstm, yolov10n, mlp (about 1 min)
#   profile  gpu_kernel_profile.py --fp16 on bert, gpt2, llama (about 1.5 min)
set -u
OUT="${OUT:-bench_out}"
mkdir -p "$OUT"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(suite table decode rows profile)
for step in "${steps[@]}"; do
  start=$(date +%s)
  case "$step" in
    suite) python3 -m pytest -m gpu tests -q -n 4 -p no:cacheprovider -o addopts="" -rfE --ignore=tests/browser \
             > "$OUT/gpu_suite.txt" 2>&1; tail -3 "$OUT/gpu_suite.txt" ;;
    table) python3 benchmarks/gpu_vs_torch.py --models none --transformers bert,gpt2,llama,vit,whisper,convnext \
             --compile bert,gpt2,llama,vit,whisper,convnext --fp16 --iters 100 --warmup 10 --skip-micro \
             --out "$OUT/vs" > "$OUT/table.log" 2>&1; grep -A9 "^| model | ours fp32" "$OUT/vs/gpu_vs_torch.md" ;;
    decode) python3 benchmarks/decode.py --pasts 127 --exact-pasts 127 --iters 100 --out "$OUT/decode" \
             > "$OUT/decode.log" 2>&1; grep -E "^\| (ours|torch)|ratio|launches" "$OUT"/decode/*.md ;;
    rows) python3 benchmarks/gpu_issue28_rows.py --models bilstm,yolov10n,mlp --iters 100 --out "$OUT/rows" \
             > "$OUT/rows.log" 2>&1; tail -12 "$OUT/rows.log" ;;
    profile) python3 benchmarks/gpu_kernel_profile.py --models bert,gpt2,llama --precision fp16 --out "$OUT/profile" \
             > "$OUT/profile.log" 2>&1; grep -E "^(##|ours|torch.compile)" "$OUT/profile/kernel_profile.md" ;;
    *) echo "device_round.sh: unknown step $step (suite, table, decode, rows, profile)"; exit 2 ;;
  esac
  echo "[$step: $(( $(date +%s) - start )) s]"
done
