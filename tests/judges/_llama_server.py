"""`python tests/judges/_llama_server.py --model GGUF --host H --port P [...]`: llama.cpp's own
OpenAI-compatible server (llama-server), from the prebuilt wheels of the PyPI package xllamacpp,
serving one model until SIGTERM.

xllamacpp rather than llama-cpp-python: the latter ships only an sdist on PyPI, and compiling it
took ~15 minutes of a fresh machine's two cores before the first test could run; xllamacpp's
manylinux wheel installs in seconds and serves the same llama.cpp with the same constrained output
(a JSON schema becomes a grammar). ggml's extra buffer types stay off: they repack weights for AMX
where the CPU advertises it, and on our virtual machines the first AMX instruction raises SIGILL.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

import xllamacpp


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n_ctx", type=int, default=2048)
    parser.add_argument("--n_threads", type=int, default=1)
    parser.add_argument("--n_threads_batch", type=int, default=1)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.n_ctx
    params.n_parallel = 1
    params.cpuparams.n_threads = args.n_threads
    params.cpuparams_batch.n_threads = args.n_threads_batch
    params.sampling.seed = args.seed
    params.no_extra_bufts = True
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server = xllamacpp.Server(params)  # listens on its own threads from here
    sys.stdout.write(f"listening on {server.listening_address}\n")
    sys.stdout.flush()
    stop.wait()


if __name__ == "__main__":
    main()
