#!/bin/bash
# The first answers on a fresh install (docs/benchmarks/first-answer.md): a new HOME (so the model caches, the
# embedder's ONNX export and the llm's GGUF conversion, are made again, as on a new machine), `foldermind start`
# with the demo folder (README.md and docs/*.md, as `make run`), three questions asked with `foldermind ask --json`
# as soon as the files are read (embedding still running), each timed from the command's start to its end.
#   tests/bench/first_answer.sh LABEL HOMES_DIR PORT [PYTHONPATH]
# PYTHONPATH (optional) runs another checkout's code with this venv (a `git archive` of main holding `foldermind/`):
# run main and the branch in turn, in the same window. Prints one line a question: seconds, load, floor, model, note.
set -u
label=$1; homes=$2; port=$3; pp=${4:-}
here=$(cd "$(dirname "$0")/../.." && pwd)
H=$homes/first-$label
rm -rf "$H"; mkdir -p "$H/xdg" "$H/demo" "$H/fm/config"; chmod 700 "$H/xdg"
export HOME=$H XDG_RUNTIME_DIR=$H/xdg HF_HUB_OFFLINE=1 FOLDERMIND_HOME=$H/fm
if [ -n "$pp" ]; then export PYTHONPATH=$pp; fi
FM=$here/.venv/bin/foldermind
cp -p "$here/README.md" "$here"/docs/*.md "$H/demo/"
printf '[console]\nport = %s\n' "$((port + 1))" > "$H/fm/config/supervisor.toml"
now() { date +%s.%N; }
load() { cut -d' ' -f1 /proc/loadavg; }
t0=$(now)
$FM start --port "$port" --demo-folder "$H/demo" > "$H/start.out" 2>&1
echo "$label start $(echo "$(now) - $t0" | bc) s load $(load) $(date -u +%FT%H:%M:%S)"
for _ in $(seq 600); do  # a person asks once the files are read (keyword search works)
  $FM folders list --json 2>/dev/null | python3 -c 'import json,sys; f=json.load(sys.stdin); f=[x for x in (f if isinstance(f,list) else f.get("folders",[])) if x.get("kind","path")=="path"]; sys.exit(0 if f and all(x.get("state")!="indexing" for x in f) else 1)' && break
  sleep 1
done
echo "$label files-read $(echo "$(now) - $t0" | bc) s load $(load)"
i=0
for q in "where are the logs kept?" "how do I restart a worker?" "which port does the MCP server listen on?"; do
  i=$((i + 1)); s=$(now)
  $FM ask "$q" --json > "$H/ask$i.json" 2> "$H/ask$i.err"
  took=$(echo "$(now) - $s" | bc)
  python3 - "$H/ask$i.json" "$label q$i $took s load $(load)" <<'PY'
import json, sys
try:
    out = json.load(open(sys.argv[1]))
except Exception as exc:
    print(sys.argv[2], "ERROR", exc)
    raise SystemExit
print(sys.argv[2], f"floor={out.get('floor')!r} model={out.get('model')!r} note={(out.get('note') or '')[-110:]!r}")
PY
done
grep -ho 'ready on [a-z-]* in [0-9.]* s' "$H/fm/logs/llm.log" | sed "s/^/$label llm model /"
$FM stop > "$H/stop.out" 2>&1
