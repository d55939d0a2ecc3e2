#!/usr/bin/env bash
# The one source of llama-cpp-python's CMake flags, read by the Makefile and docker/Dockerfile.
# x86-64: a fixed x86-64-v3 baseline (AVX2, FMA, F16C, BMI2), with AVX-512, AVX-VNNI and AMX
# off, so a library built on one host runs on every x86-64 host we deploy to: a native build
# (llama.cpp's default) carried AMX tile instructions and died with SIGILL elsewhere (issue
# #19). scripts/check_engine_isa.py checks the built library against this baseline.
# Other architectures: no native tuning either.
# LLAVA_BUILD=OFF: the multimodal library (libmtmd: clip, audio, image helpers) is never loaded
# here (llama_cpp imports it only for vision chat handlers), and its sources are about 9% of the
# lines the build compiles (23k of 252k in llama-cpp-python 0.3.36).
set -euo pipefail
case "$(uname -m)" in
  x86_64|amd64)
    echo "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF" ;;
  *)
    echo "-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" ;;
esac
