#!/usr/bin/env bash
# Written in the fortieth session, which was lent no GPU; for the next call (its log in $OUT/session40_teams.log):
# linear_rows.wgsl with teams (a workgroup's columns split between TEAMS teams, each with its own slices of k, so
# that one fetch of x from L2 serves TEAMS times the columns; at 16 rows a workgroup's x is twice the bytes of its
# 16 columns of f16 weights). TEAMS against float64 on a real GPU (`selftest --kernel linear`, `linear_fused`),
# then `bench kernels` at 16 and 8 rows over blockings COLUMNS,LANES,UNROLL,TEAMS, f16 and Q4_0, to choose the
# dispatcher's rule (it takes 1 team until measured). Carry .device/{s40,lib,bin,debs,gpu-env.sh}.
#   bench/device/session40_teams.sh GERBIL
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session40_teams.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
section "teams against float64"
timeout 120 "$1" selftest --kernel linear 2>&1 | tail -2
timeout 120 "$1" selftest --kernel linear_fused 2>&1 | tail -2
for rows in 16 8; do
  section "linear_rows at $rows rows: blockings COLUMNS,LANES,UNROLL,TEAMS"
  blockings=()
  for b in 2,8,2,1 2,8,2,2 2,8,2,4 2,8,2,8 2,8,1,4 2,8,4,4 4,8,1,1 4,8,1,2 4,8,1,4 1,8,4,8 2,16,2,2; do
    blockings+=(--blocking "$b")
  done
  timeout 240 "$1" bench kernels --kernel linear --shape "M=$rows " "${blockings[@]}" | grep -E "M=$rows " | cut -c1-110
done
section done
