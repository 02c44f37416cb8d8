#!/usr/bin/env bash
# Prints the ggml CMake flags for the SIMD this CPU really executes, one level at a time:
#   probe_cpu.sh best      every instruction set that ran in a probe
#   probe_cpu.sh safe      x86-64: AVX2/FMA/F16C at most; aarch64: plain ARMv8-A
#   probe_cpu.sh generic   no SIMD beyond the architecture's baseline
#
# Why probe instead of -march=native: /proc/cpuinfo (and CPUID, which -march=native reads)
# can advertise instructions a virtual machine does not enable. AMX is the known case: the
# flags say amx_tile, the first `tilezero` traps. Each probe here is a tiny C program that
# executes the instruction; a feature is used only if its program exits cleanly.
# AMX is never enabled: it also needs a per-process permission request and gains little
# for a 1.5B model on a few cores.
set -uo pipefail

level=${1:-best}
cc=${CC:-cc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# probe NAME "COMPILER FLAGS" "C BODY using intrinsics; volatile inputs/outputs keep it alive"
probe() {
  local name=$1 flags=$2 body=$3 src="$work/$1.c"
  cat >"$src" <<C
#include <stdint.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif
volatile float vf[16] = {1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16};
volatile int32_t vi[16] = {1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16};
volatile int64_t sink;
int main(void) { $body return 0; }
C
  "$cc" -O1 $flags "$src" -o "$work/$name" 2>/dev/null || return 1
  # The function's stderr is discarded too, so the shell's own "Illegal instruction" report is silenced.
  { "$work/$name"; } >/dev/null 2>&1
} 2>/dev/null

x86_flags() {
  local mode=$1 on=()
  probe avx "-mavx" '__m256 a = _mm256_loadu_ps((float*)vf); a = _mm256_add_ps(a, a); sink = (int64_t)_mm256_cvtss_f32(a);' && on+=(AVX)
  probe avx2 "-mavx2" '__m256i a = _mm256_loadu_si256((__m256i*)vi); a = _mm256_add_epi32(a, a); sink = _mm256_extract_epi32(a, 1);' && on+=(AVX2)
  probe fma "-mfma" '__m256 a = _mm256_loadu_ps((float*)vf); a = _mm256_fmadd_ps(a, a, a); sink = (int64_t)_mm256_cvtss_f32(a);' && on+=(FMA)
  probe f16c "-mf16c" '__m128i h = _mm_cvtps_ph(_mm_loadu_ps((float*)vf), 0); sink = (int64_t)_mm_cvtss_f32(_mm_cvtph_ps(h));' && on+=(F16C)
  if [ "$mode" = best ]; then
    probe bmi2 "-mbmi2" 'sink = _pdep_u32((uint32_t)vi[3], 0xF0F0u);' && on+=(BMI2)
    if probe avx512 "-mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512cd" \
      '__m512i a = _mm512_loadu_si512((void*)vi); a = _mm512_add_epi16(a, a); __m512 f = _mm512_and_ps(_mm512_loadu_ps((float*)vf), _mm512_loadu_ps((float*)vf)); sink = _mm512_reduce_add_epi32(a) + (int64_t)_mm512_reduce_add_ps(f);'; then
      on+=(AVX512)
      probe avx512_vbmi "-mavx512f -mavx512vbmi" '__m512i a = _mm512_loadu_si512((void*)vi); a = _mm512_permutexvar_epi8(a, a); sink = _mm512_reduce_add_epi32(a);' && on+=(AVX512_VBMI)
      probe avx512_vnni "-mavx512f -mavx512vnni" '__m512i a = _mm512_loadu_si512((void*)vi); a = _mm512_dpbusd_epi32(a, a, a); sink = _mm512_reduce_add_epi32(a);' && on+=(AVX512_VNNI)
      probe avx512_bf16 "-mavx512f -mavx512bf16" '__m512 a = _mm512_loadu_ps((float*)vf); __m512bh b = _mm512_cvtne2ps_pbh(a, a); sink = (int64_t)_mm512_reduce_add_ps(_mm512_dpbf16_ps(a, b, b));' && on+=(AVX512_BF16)
    fi
    probe avx_vnni "-mavxvnni" '__m256i a = _mm256_loadu_si256((__m256i*)vi); a = _mm256_dpbusd_avx_epi32(a, a, a); sink = _mm256_extract_epi32(a, 0);' && on+=(AVX_VNNI)
  fi
  # x86-64 needs all four of AVX2/FMA/F16C/AVX for ggml's AVX2 kernels; drop a partial set.
  local flags="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
  local all=(SSE42 AVX AVX2 FMA F16C BMI2 AVX512 AVX512_VBMI AVX512_VNNI AVX512_BF16 AVX_VNNI)
  for f in "${all[@]}"; do
    local v=OFF
    if [ "$mode" != generic ]; then
      for g in "${on[@]}"; do [ "$f" = "$g" ] && v=ON; done
      [ "$f" = SSE42 ] && v=ON
    fi
    flags+=" -DGGML_$f=$v"
  done
  echo "$flags"
}

arm_flags() {
  local mode=$1 arch=armv8-a
  if [ "$mode" = best ]; then
    local ext=""
    probe fp16 "-march=armv8.2-a+fp16" 'float16x8_t a = vdupq_n_f16((float16_t)vf[1]); a = vaddq_f16(a, a); sink = (int64_t)vgetq_lane_f16(a, 0);' && ext+="+fp16"
    probe dotprod "-march=armv8.2-a+dotprod" 'int32x4_t s = vdupq_n_s32(0); int8x16_t a = vdupq_n_s8((int8_t)vi[2]); s = vdotq_s32(s, a, a); sink = vgetq_lane_s32(s, 0);' && ext+="+dotprod"
    probe i8mm "-march=armv8.2-a+i8mm" 'int32x4_t s = vdupq_n_s32(0); int8x16_t a = vdupq_n_s8((int8_t)vi[2]); s = vmmlaq_s32(s, a, a); sink = vgetq_lane_s32(s, 0);' && ext+="+i8mm"
    [ -n "$ext" ] && arch="armv8.2-a$ext"
  fi
  echo "-DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=$arch"
}

case "$(uname -m)" in
  x86_64 | amd64) x86_flags "$level" ;;
  aarch64 | arm64) arm_flags "$level" ;;
  *) echo "-DGGML_NATIVE=OFF" ;;
esac
