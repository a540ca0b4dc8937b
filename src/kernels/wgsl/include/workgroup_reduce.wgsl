// Tree reductions over one workgroup of WORKGROUP_SIZE threads (a power of two the including kernel
// declares), through the workgroup array `partial`, which the kernel may also use between reductions.
var<workgroup> partial: array<f32, WORKGROUP_SIZE>;

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
