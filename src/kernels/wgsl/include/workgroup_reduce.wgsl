// Reductions over one workgroup of WORKGROUP_SIZE threads (a square power of two the including kernel
// declares: 64 or 256), through the workgroup array `partial`, which the kernel may also use between
// reductions: trees (the seed kernels'), and a sum in two levels with two barriers, not a tree's eight.
var<workgroup> partial: array<f32, WORKGROUP_SIZE>;
const LANES: u32 = u32(sqrt(f32(WORKGROUP_SIZE)));  // workgroup_sum_two_level's threads in its first level
const_assert LANES * LANES == WORKGROUP_SIZE;
var<workgroup> partial_lanes: array<f32, LANES>;

// The max of `value` over the workgroup, returned to every thread. Call from uniform control flow only.
fn workgroup_max(lid: u32, value: f32) -> f32 {
  partial[lid] = value;
  workgroupBarrier();
  for (var stride: u32 = WORKGROUP_SIZE / 2u; stride > 0u; stride /= 2u) {
    if (lid < stride) {
      partial[lid] = max(partial[lid], partial[lid + stride]);
    }
    workgroupBarrier();
  }
  let result = partial[0];
  workgroupBarrier();  // all threads have read the result before `partial` can be reused
  return result;
}

// The sum of `value` over the workgroup, returned to every thread. Call from uniform control flow only.
fn workgroup_sum(lid: u32, value: f32) -> f32 {
  partial[lid] = value;
  workgroupBarrier();
  for (var stride: u32 = WORKGROUP_SIZE / 2u; stride > 0u; stride /= 2u) {
    if (lid < stride) {
      partial[lid] += partial[lid + stride];
    }
    workgroupBarrier();
  }
  let result = partial[0];
  workgroupBarrier();
  return result;
}

// The sum of `value` over the workgroup, returned to every thread: LANES threads add LANES partial sums each,
// then every thread adds those LANES. Call from uniform control flow.
// Calls may follow each other: a call's reads of `partial` end before its second barrier and its reads of
// `partial_lanes` before the next call's first, which is before that call writes either.
fn workgroup_sum_two_level(lid: u32, value: f32) -> f32 {
  partial[lid] = value;
  workgroupBarrier();
  if (lid < LANES) {
    var sum: f32 = 0.0;
    for (var k: u32 = 0u; k < LANES; k++) {
      sum += partial[lid + k * LANES];  // consecutive threads read consecutive banks
    }
    partial_lanes[lid] = sum;
  }
  workgroupBarrier();
  var total: f32 = 0.0;
  for (var k: u32 = 0u; k < LANES; k++) {
    total += partial_lanes[k];  // the same address for every thread: a broadcast
  }
  return total;
}
